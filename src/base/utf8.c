/* utf8.c: see utf8.h. */
#include "base/utf8.h"

/* A lead byte's sequence length (2 to 4) and its code point bits in *cp;
 * 0 for a byte no sequence starts with (ASCII is the callers' own case). */
static size_t lead(unsigned char c, uint32_t *cp)
{
	if (c >= 0xC2 && c <= 0xDF) {
		*cp = c & 0x1F;
		return 2;
	}
	if (c >= 0xE0 && c <= 0xEF) {
		*cp = c & 0x0F;
		return 3;
	}
	if (c >= 0xF0 && c <= 0xF4) {
		*cp = c & 0x07;
		return 4;
	}
	return 0;
}

size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	uint32_t cp;
	size_t len;

	if (n == 0)
		return 0;
	if (c < 0x80)
		return 1;
	if (!(len = lead(c, &cp)) || n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
		return 0;	/* overlong or out of range */
	if (cp >= 0xD800 && cp <= 0xDFFF)
		return 0;	/* surrogates are not characters */
	return len;
}

bool utf8_valid(const void *p, size_t n)
{
	const unsigned char *s = p;
	size_t i = 0;

	while (i < n) {
		size_t len;
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		len = utf8_seq_len(s + i, n - i);
		if (!len)
			return false;
		i += len;
	}
	return true;
}

/*
 * The incremental state packs: bits 0-2 bytes still expected, bits 3-5 the
 * sequence's total length, bits 8-31 the code point so far.
 */
bool utf8_feed(uint32_t *state, const void *p, size_t n)
{
	const unsigned char *s = p;
	uint32_t need = *state & 7, total = (*state >> 3) & 7, cp = *state >> 8;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];
		if (need == 0) {
			if (c < 0x80)
				continue;
			if (!(total = (uint32_t)lead(c, &cp)))
				return false;
			need = total - 1;
			continue;
		}
		if ((c & 0xC0) != 0x80)
			return false;
		cp = (cp << 6) | (c & 0x3F);
		need--;
		/* Check as early as the bits allow, so a bad prefix fails at once. */
		if (total == 3 && need == 1 && (cp < 0x20 || (cp >= 0x360 && cp <= 0x37F)))
			return false;	/* overlong (E0 80..9F) or surrogate (ED A0..BF) */
		if (total == 4 && need == 2 && (cp < 0x10 || cp > 0x10F))
			return false;	/* overlong (F0 80..8F) or past U+10FFFF (F4 90..) */
		if (need == 0)
			cp = total = 0;
	}
	*state = need | (total << 3) | (cp << 8);
	return true;
}

size_t utf8_encode(uint32_t cp, char out[4])
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp >= 0xD800 && cp <= 0xDFFF)
		return 0;
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	if (cp > 0x10FFFF)
		return 0;
	out[0] = (char)(0xF0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}
