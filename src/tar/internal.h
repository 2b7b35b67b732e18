/*
 * internal.h: helpers shared by the tar module's files; not part of the API.
 */
#ifndef DENV_TAR_INTERNAL_H
#define DENV_TAR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Room for a quoted path in an error message: struct err holds 512 bytes,
 * and the message needs space for its own words too. */
#define TAR_QUOTE_MAX 200

/* Copy s into out (size TAR_QUOTE_MAX) for a message: bytes outside printable
 * ASCII and '"' '\\' are escaped as \xNN, and a long path is cut with "...".
 * Paths come from the archive, so they may hold newlines or terminal escapes. */
const char *tar_quote(const char *s, char *out);

/* Parse a numeric header field (octal, or GNU base-256). 0 / -1. */
int tar_parse_num(const unsigned char *p, size_t w, int64_t *sv, uint64_t *uv, int want_signed);

#endif
