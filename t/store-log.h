/*
 * store-log.h: the store's log format (src/store/store.h) written by hand,
 * for the store's unit tests and fuzz targets (static inline so each file
 * takes what it uses). Written apart from the store's own code so that a
 * test does not trust what it tests.
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

#endif
