/*
 * skip.c: find where one JSON value ends without building it.
 *
 * A check of the grammar (RFC 8259) that allocates nothing and never
 * recurses: nesting is tracked in a bit stack bounded by the depth limit.
 * Strings are checked the way json_parse checks them (no raw control
 * bytes, valid escapes and surrogate pairs, valid UTF-8). What it does not
 * check is what needs the values themselves: duplicate keys in an object
 * and numbers too large for a double. So every text json_parse accepts,
 * json_skip accepts, and json_skip may accept a few that json_parse refuses.
 * json_check is the same walk that also checks those two, conservatively:
 * what it accepts, json_parse accepts.
 */
#include "json/json.h"

#include <stdint.h>
#include <string.h>

#include "base/utf8.h"
#include "json/json_int.h"

static const unsigned char skip_ws_tab[256] = { [' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1 };

static size_t ws(const unsigned char *s, size_t len, size_t i)
{
	while (i < len && skip_ws_tab[s[i]])
		i++;
	return i;
}

static int hexval(unsigned c, uint32_t *v)
{
	unsigned lc = c | 0x20;

	if (c - '0' < 10)
		*v = (*v << 4) | (c - '0');
	else if (lc - 'a' < 6)
		*v = (*v << 4) | (lc - 'a' + 10);
	else
		return -1;
	return 0;
}

/* \uXXXX at s[i] (the backslash); the code unit in *cp, i past it. */
static int u_escape(const unsigned char *s, size_t len, size_t *i, uint32_t *cp)
{
	size_t k = *i;

	if (len - k < 6 || s[k] != '\\' || s[k + 1] != 'u')
		return -1;
	*cp = 0;
	for (int j = 0; j < 4; j++)
		if (hexval(s[k + 2 + j], cp) < 0)
			return -1;
	*i = k + 6;
	return 0;
}

/* s[i] is the opening quote: i past the closing one, or -1. */
static int skip_string(const unsigned char *s, size_t len, size_t *i)
{
	size_t k = *i + 1;

	for (;;) {
		while (k < len && json_str_class[s[k]] == JSON_SC_PLAIN)
			k++;
		if (k >= len)
			return -1;
		switch (json_str_class[s[k]]) {
		case JSON_SC_QUOTE:
			*i = k + 1;
			return 0;
		case JSON_SC_CTRL:
			return -1;
		case JSON_SC_HIGH: {
			size_t n = utf8_seq_len(s + k, len - k);
			if (!n)
				return -1;
			k += n;
			continue;
		}
		default:
			break;
		}
		/* backslash */
		if (k + 1 >= len)
			return -1;
		switch (s[k + 1]) {
		case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
			k += 2;
			continue;
		case 'u': {
			uint32_t cp, lo;
			if (u_escape(s, len, &k, &cp) < 0)
				return -1;
			if (cp >= 0xDC00 && cp <= 0xDFFF)
				return -1;
			if (cp >= 0xD800 && cp <= 0xDBFF) {
				if (u_escape(s, len, &k, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
					return -1;
			}
			continue;
		}
		default:
			return -1;
		}
	}
}

static int skip_number(const unsigned char *s, size_t len, size_t *i)
{
	size_t k = *i;

	if (s[k] == '-')
		k++;
	if (k >= len || s[k] < '0' || s[k] > '9')
		return -1;
	if (s[k] == '0') {
		k++;
		if (k < len && s[k] >= '0' && s[k] <= '9')
			return -1;
	} else {
		while (k < len && s[k] >= '0' && s[k] <= '9')
			k++;
	}
	if (k < len && s[k] == '.') {
		k++;
		if (k >= len || s[k] < '0' || s[k] > '9')
			return -1;
		while (k < len && s[k] >= '0' && s[k] <= '9')
			k++;
	}
	if (k < len && (s[k] == 'e' || s[k] == 'E')) {
		k++;
		if (k < len && (s[k] == '+' || s[k] == '-'))
			k++;
		if (k >= len || s[k] < '0' || s[k] > '9')
			return -1;
		while (k < len && s[k] >= '0' && s[k] <= '9')
			k++;
	}
	*i = k;
	return 0;
}

static int skip_word(const unsigned char *s, size_t len, size_t *i, const char *w)
{
	size_t n = strlen(w);

	if (len - *i < n || memcmp(s + *i, w, n) != 0)
		return -1;
	*i += n;
	return 0;
}

/* A member's key and its colon, with the blanks after each: *i is then at
 * the value; the key's quoted text is s[*ks..*ke). */
static int skip_key(const unsigned char *s, size_t len, size_t *i, size_t *ks, size_t *ke)
{
	*ks = *i;
	if (*i >= len || s[*i] != '"' || skip_string(s, len, i) < 0)
		return -1;
	*ke = *i;
	*i = ws(s, len, *i);
	if (*i >= len || s[*i] != ':')
		return -1;
	*i = ws(s, len, *i + 1);
	return 0;
}

/*
 * json_check's extra state: the keys of the objects open around the value
 * being read, as a stack (each object's keys from start[its depth] up), so
 * that a new key is compared with its object's earlier ones. Past its
 * bounds json_check refuses rather than guesses (see json.h).
 */
struct strict {
	struct { size_t off, len; } key[JSON_CHECK_KEYS_MAX];
	size_t nkeys;
	size_t start[JSON_SKIP_DEPTH_MAX];
};

/* The key whose quoted text is s[ks..ke) joins the object at depth d: -1 if
 * it has an escape or is there already (or the stack is full). */
static int strict_key(struct strict *st, const unsigned char *s, size_t ks, size_t ke, unsigned d)
{
	size_t off = ks + 1, n = ke - ks - 2;

	if (memchr(s + off, '\\', n) || st->nkeys == JSON_CHECK_KEYS_MAX)
		return -1;
	for (size_t k = st->start[d]; k < st->nkeys; k++)
		if (st->key[k].len == n && memcmp(s + st->key[k].off, s + off, n) == 0)
			return -1;
	st->key[st->nkeys].off = off;
	st->key[st->nkeys].len = n;
	st->nkeys++;
	return 0;
}

/* The number s[a..b) surely fits a double (json_parse refuses infinities):
 * its decimal exponent, integer digits plus the exponent part, is under
 * DBL_MAX's 308. Anything at or above is -1, even where it would fit. */
static int strict_number(const unsigned char *s, size_t a, size_t b)
{
	long digits = 0, exp = 0, sign = 1;
	size_t k = a;

	if (s[k] == '-')
		k++;
	while (k < b && s[k] == '0')
		k++;
	for (; k < b && s[k] >= '0' && s[k] <= '9'; k++)
		if (digits < 100000)
			digits++;
	while (k < b && s[k] != 'e' && s[k] != 'E')
		k++;
	if (k < b) {
		k++;
		if (s[k] == '+' || s[k] == '-')
			sign = s[k++] == '-' ? -1 : 1;
		for (; k < b; k++)
			if (exp < 100000)
				exp = exp * 10 + (s[k] - '0');
	}
	return (digits ? digits - 1 : -1) + sign * exp < 308 ? 0 : -1;
}

/* A member's key (skip_key), and with st, its check against its object's others. */
static int member_key(const unsigned char *s, size_t len, size_t *i, struct strict *st, unsigned d)
{
	size_t ks, ke;

	if (skip_key(s, len, i, &ks, &ke) < 0)
		return -1;
	return st ? strict_key(st, s, ks, ke, d) : 0;
}

static int skip_value(const char *text, size_t len, unsigned max_depth, size_t *end, struct strict *st)
{
	const unsigned char *s = (const unsigned char *)text;
	/* One bit per open container: 1 = object. */
	uint64_t stack[(JSON_SKIP_DEPTH_MAX + 63) / 64];
	unsigned depth = 0;
	size_t i;

	if (max_depth == 0 || max_depth > JSON_SKIP_DEPTH_MAX)
		max_depth = JSON_SKIP_DEPTH_MAX;
	i = ws(s, len, 0);
	for (;;) {
		/* A value is expected at i. */
		if (i >= len)
			return -1;
		switch (s[i]) {
		case '{':
		case '[': {
			bool obj = s[i] == '{';
			if (depth >= max_depth)
				return -1;
			if (obj)
				stack[depth / 64] |= (uint64_t)1 << (depth % 64);
			else
				stack[depth / 64] &= ~((uint64_t)1 << (depth % 64));
			if (st)
				st->start[depth] = st->nkeys;
			depth++;
			i = ws(s, len, i + 1);
			if (i < len && s[i] == (obj ? '}' : ']')) {
				i++;
				depth--;
				break;	/* an empty container is a complete value */
			}
			if (obj && member_key(s, len, &i, st, depth - 1) < 0)
				return -1;
			continue;	/* the first member's value */
		}
		case '"':
			if (skip_string(s, len, &i) < 0)
				return -1;
			break;
		case 't': case 'f': case 'n':
			if (skip_word(s, len, &i, s[i] == 't' ? "true" : s[i] == 'f' ? "false" : "null") < 0)
				return -1;
			break;
		default:
			if (s[i] != '-' && (s[i] < '0' || s[i] > '9'))
				return -1;
			{
				size_t a = i;
				if (skip_number(s, len, &i) < 0 || (st && strict_number(s, a, i) < 0))
					return -1;
			}
			break;
		}
		/* A value ended at i: close containers, or go to the next member. */
		for (;;) {
			bool obj;
			if (depth == 0) {
				*end = i;
				return 0;
			}
			obj = (stack[(depth - 1) / 64] >> ((depth - 1) % 64)) & 1;
			i = ws(s, len, i);
			if (i >= len)
				return -1;
			if (s[i] == (obj ? '}' : ']')) {
				i++;
				depth--;
				if (st && obj)
					st->nkeys = st->start[depth];
				continue;
			}
			if (s[i] != ',')
				return -1;
			i = ws(s, len, i + 1);
			if (obj && member_key(s, len, &i, st, depth - 1) < 0)
				return -1;
			break;
		}
	}
}

int json_skip(const char *text, size_t len, unsigned max_depth, size_t *end)
{
	return skip_value(text, len, max_depth, end, NULL);
}

int json_check(const char *text, size_t len, unsigned max_depth, size_t *end)
{
	struct strict st;

	st.nkeys = 0;
	return skip_value(text, len, max_depth, end, &st);
}
