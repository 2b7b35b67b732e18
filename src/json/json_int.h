/*
 * json_int.h: what the files of the json module share with each other and
 * nobody else.
 */
#ifndef DENV_JSON_INT_H
#define DENV_JSON_INT_H

#include <stddef.h>

/* Byte classes inside a string (parse.c): JSON_SC_PLAIN bytes need no care. */
enum { JSON_SC_PLAIN = 0, JSON_SC_QUOTE, JSON_SC_BACKSLASH, JSON_SC_CTRL, JSON_SC_HIGH };
extern const unsigned char json_str_class[256];

/* Longest text json_fmt_double writes, with its NUL. */
#define JSON_DOUBLE_MAX 32

/* Format a finite double in the shortest %g form that reads back to the same
 * value, with '.' as the decimal point whatever the locale. Returns the length. */
size_t json_fmt_double(double d, char out[JSON_DOUBLE_MAX]);

#endif
