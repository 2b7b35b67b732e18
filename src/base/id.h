/*
 * id.h: object ids, "<prefix>_<ULID>" ("env_01JD3W5ZQ9X4M8B2Y7C6V0T1RS").
 *
 * A ULID is a 48-bit Unix millisecond timestamp followed by 80 random bits,
 * written as 26 Crockford base32 characters (uppercase, no I L O U), so ids
 * sort by creation time as plain strings. Within one process ids are strictly
 * increasing: an id made in the same millisecond as the previous one (or
 * after the clock stepped back) reuses its timestamp and adds one to its
 * random part. That ordering is the one piece of state this module keeps.
 */
#ifndef DENV_ID_H
#define DENV_ID_H

#include <stdbool.h>
#include <stdint.h>

#define ID_MAX 64		/* bytes for any id, with its NUL */
#define ID_PREFIX_MAX 16	/* prefix: 1..16 lowercase ASCII letters */
#define ID_ULID_LEN 26

/* Make a new id. 0, or -1 if the prefix is invalid or the kernel gave no
 * random bytes (out is then the empty string). */
int id_new(const char *prefix, char out[ID_MAX]);

/* True if id is "<prefix>_" and a canonical ULID (prefix NULL: any valid prefix). */
bool id_valid(const char *id, const char *prefix);

/* The id's timestamp in Unix ms, or -1 if id is not valid. */
int64_t id_time_ms(const char *id);

#endif
