/*
 * str.h: string helpers, and checked number parsing (we never use atoi or
 * strtok; see STYLE.md).
 */
#ifndef DENV_STR_H
#define DENV_STR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

bool str_eq(const char *a, const char *b);		/* NULL-safe */
bool str_has_prefix(const char *s, const char *prefix);
bool str_has_suffix(const char *s, const char *suffix);
/* Every byte of s an ASCII letter, a digit or one of extra (true for ""). */
bool str_only(const char *s, const char *extra);

/* Copy src into dst of size n, always NUL-terminated. Returns -1 if truncated. */
int str_copy(char *dst, size_t n, const char *src);

/* snprintf that never cuts quietly: 0 when the whole result fits in dst (of
 * size n), -1 when it does not or the format fails. On -1 dst holds "", so a
 * cut name or path cannot be used by mistake. */
int str_fmt(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int str_vfmt(char *dst, size_t n, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));

/* Whole-string parses: no leading space, no trailing junk, range-checked. 0 / -1. */
int str_to_i64(const char *s, int64_t *out);
int str_to_u64(const char *s, uint64_t *out);
int str_to_int(const char *s, int *out);
int str_to_double(const char *s, double *out);

/* Trim ASCII whitespace in place; returns s. */
char *str_trim(char *s);

/* Split s on any byte of seps, skipping empty fields. Returns a malloc'd
 * NULL-terminated array of malloc'd strings (free with str_list_free), and the
 * count in *n if n is not NULL. */
char **str_split(const char *s, const char *seps, size_t *n);
void str_list_free(char **list);

#endif
