/*
 * store-log.h: the store's log format (src/store/store.h) written by hand,
 * for the store's unit tests and fuzz targets (static inline so each file
 * takes what it uses), and its mark file read back. Written apart from
 * the store's own code so that a test does not trust what it tests.
 */
#ifndef DENV_T_STORE_LOG_H
#define DENV_T_STORE_LOG_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "store/store.h"

/* v as 4 bytes, little-endian, at p. */
static inline void stlog_put_u32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* A good file header: "denvstor", ST_FORMAT_VERSION, the CRC of the two. */
static inline void stlog_header(unsigned char h[ST_HEADER_BYTES])
{
	memcpy(h, "denvstor", 8);
	stlog_put_u32(h + 8, ST_FORMAT_VERSION);
	stlog_put_u32(h + 12, (uint32_t)crc32(0, h, 12));
}

/* A good record head for the n bytes at payload: their length and CRC. */
static inline void stlog_record_head(unsigned char rh[ST_RECORD_HEAD_BYTES], const void *payload, size_t n)
{
	stlog_put_u32(rh, (uint32_t)n);
	stlog_put_u32(rh + 4, (uint32_t)crc32(0, (const Bytef *)payload, (uInt)n));
}

/* v from 8 bytes, little-endian, at p. */
static inline uint64_t stlog_get_u64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The mark file's newest valid slot (store.h, "The mark"), read from the
 * ST_MARK_BYTES at buf: 0 and its seq, log bytes and records; -1 if the
 * header is wrong or no slot is valid. */
static inline int stlog_mark(const unsigned char *buf, uint64_t *seq, uint64_t *bytes, uint64_t *records)
{
	unsigned char h[ST_MARK_HEADER_BYTES];
	int best = -1;

	*seq = 0;

	memcpy(h, "denvmark", 8);
	stlog_put_u32(h + 8, ST_MARK_VERSION);
	stlog_put_u32(h + 12, (uint32_t)crc32(0, h, 12));
	if (memcmp(buf, h, sizeof(h)) != 0)
		return -1;
	for (int i = 0; i < 2; i++) {
		const unsigned char *s = buf + ST_MARK_HEADER_BYTES + i * ST_MARK_SLOT_BYTES;
		uint64_t sq = stlog_get_u64(s);
		uint32_t want = (uint32_t)s[36] | (uint32_t)s[37] << 8 | (uint32_t)s[38] << 16 | (uint32_t)s[39] << 24;

		if (want != (uint32_t)crc32(0, s, 36) || sq == 0 || (best >= 0 && sq < *seq))
			continue;
		best = i;
		*seq = sq;
		*bytes = stlog_get_u64(s + 8);
		*records = stlog_get_u64(s + 16);
	}
	return best < 0 ? -1 : 0;
}

#endif
