/* id.c: see id.h. */
#include "base/id.h"

#include <string.h>

#include "base/clock.h"
#include "base/crypto.h"

static const char crockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/* Last id's timestamp and random part, for monotonic ids within one ms. */
static int64_t id_last_ms = -1;
static uint8_t id_last_rand[10];

static bool prefix_ok(const char *p, size_t n)
{
	if (n == 0 || n > ID_PREFIX_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (p[i] < 'a' || p[i] > 'z')
			return false;
	return true;
}

/* Add one to the 80-bit big-endian number; false if it wrapped to zero. */
static bool rand_inc(uint8_t r[10])
{
	for (int i = 9; i >= 0; i--)
		if (++r[i] != 0)
			return true;
	return false;
}

int id_new(const char *prefix, char out[ID_MAX])
{
	size_t plen = strlen(prefix);
	int64_t now = clock_now_ms();
	uint8_t bin[16];
	char *p;

	out[0] = '\0';
	if (!prefix_ok(prefix, plen))
		return -1;
	if (now < 0)
		now = 0;
	if (id_last_ms >= 0 && now <= id_last_ms) {
		now = id_last_ms;
		if (!rand_inc(id_last_rand)) {
			/* 2^80 ids in one ms cannot happen; moving on to the
			 * next ms keeps the order if it somehow does */
			now++;
			if (crypto_random(id_last_rand, sizeof(id_last_rand), NULL) < 0)
				return -1;
		}
	} else if (crypto_random(id_last_rand, sizeof(id_last_rand), NULL) < 0) {
		return -1;
	}
	if (now >= (int64_t)1 << 48)
		return -1;
	id_last_ms = now;

	/* 128 bits, big-endian, encoded 5 bits at a time from the top: the
	 * first character carries only 3 bits (26 * 5 = 130). */
	for (int i = 0; i < 6; i++)
		bin[i] = (uint8_t)(now >> (40 - 8 * i));
	memcpy(bin + 6, id_last_rand, 10);
	memcpy(out, prefix, plen);
	out[plen] = '_';
	p = out + plen + 1;
	for (int i = 0; i < ID_ULID_LEN; i++) {
		int bit = 130 - 5 * (i + 1);	/* lowest bit of this character */
		unsigned v = 0;
		for (int b = 4; b >= 0; b--) {
			int k = bit + b;	/* bit index from the least significant end */
			v <<= 1;
			if (k < 128)
				v |= (bin[15 - k / 8] >> (k % 8)) & 1;
		}
		p[i] = crockford[v];
	}
	p[ID_ULID_LEN] = '\0';
	return 0;
}

static int crockford_val(char c)
{
	const char *p = c ? strchr(crockford, c) : NULL;
	return p ? (int)(p - crockford) : -1;
}

/* Split id at its '_' and check both halves; the ULID part in *ulid. */
static bool parse(const char *id, const char *prefix, const char **ulid)
{
	const char *us;
	size_t plen;

	if (!id)
		return false;
	us = strchr(id, '_');
	if (!us)
		return false;
	plen = (size_t)(us - id);
	if (!prefix_ok(id, plen))
		return false;
	if (prefix && (strlen(prefix) != plen || memcmp(prefix, id, plen) != 0))
		return false;
	us++;
	if (strlen(us) != ID_ULID_LEN || us[0] > '7')
		return false;
	for (int i = 0; i < ID_ULID_LEN; i++)
		if (crockford_val(us[i]) < 0)
			return false;
	*ulid = us;
	return true;
}

bool id_valid(const char *id, const char *prefix)
{
	const char *u;
	return parse(id, prefix, &u);
}

int64_t id_time_ms(const char *id)
{
	const char *u;
	int64_t t = 0;

	if (!parse(id, NULL, &u))
		return -1;
	/* the first 10 characters hold 50 bits: 2 zero bits and the 48-bit time */
	for (int i = 0; i < 10; i++)
		t = t << 5 | crockford_val(u[i]);
	return t;
}
