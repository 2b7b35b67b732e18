/*
 * json.h: JSON (RFC 8259) documents for denv: a strict parser into a DOM, the
 * DOM itself with accessors, compact and indented writers, and a streaming
 * builder for responses that are written as they are produced.
 *
 * The DOM is a tree of malloc'd nodes; json_free releases a whole tree. A node
 * put into an array or object is owned by it from then on. Objects keep their
 * members in insertion order (the order the writer emits) and never hold two
 * members with the same key. Integers that fit in int64 are JSON_INT and stay
 * exact; other numbers are JSON_DOUBLE. Strings hold UTF-8 and may contain
 * NUL bytes (from \u0000), hence the explicit length.
 */
#ifndef DENV_JSON_H
#define DENV_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"

/* Defaults for the parser's limits; callers may pass tighter ones. */
#define JSON_MAX_DEPTH_DEFAULT 128
#define JSON_MAX_SIZE_DEFAULT ((size_t)64 << 20)

enum json_type { JSON_NULL, JSON_BOOL, JSON_INT, JSON_DOUBLE, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json;

struct json_member {
	char *key;		/* NUL-terminated; key_len counts bytes */
	size_t key_len;
	struct json *val;
};

struct json {
	enum json_type type;
	union {
		bool b;
		int64_t i;
		double d;
		struct { char *s; size_t len; } str;
		struct { struct json **items; size_t n, cap; } arr;
		struct { struct json_member *m; size_t n, cap; } obj;
	} u;
};

/* ---- parsing ---- */

struct json_limits {
	unsigned max_depth;	/* arrays+objects nested deeper fail; 0 = default */
	size_t max_size;	/* input longer fails; 0 = default */
};

/* Parse exactly one JSON text (surrounding whitespace allowed). On failure
 * returns -1 and e->msg reads "line:col: reason" (1-based). lim may be NULL. */
int json_parse(const char *text, size_t len, const struct json_limits *lim,
	       struct json **out, struct err *e);

/* Read the file at path (at most max bytes, else an error) and parse it.
 * e is fs_read_file's or json_parse's message; callers say which file. */
int json_parse_file(const char *path, size_t max, struct json **out, struct err *e);

/* Deepest nesting json_skip follows. */
#define JSON_SKIP_DEPTH_MAX 256

/*
 * Find the end of the one JSON value at the start of text (leading
 * whitespace allowed) without building it: 0 and *end = the offset just
 * past the value (trailing bytes are the caller's business), or -1 if no
 * complete, well-formed value starts there or it nests deeper than
 * max_depth (0 or above JSON_SKIP_DEPTH_MAX: JSON_SKIP_DEPTH_MAX).
 * Allocates nothing. Strings are checked as json_parse checks them; what
 * needs the values is not checked (duplicate keys, numbers beyond a
 * double). So it accepts every value json_parse accepts, and a few more:
 * use it to find spans in text that is, or will be, parsed anyway.
 */
int json_skip(const char *text, size_t len, unsigned max_depth, size_t *end);

/*
 * json_check: json_skip that also refuses duplicate keys and numbers out
 * of a double's range, so that every value it accepts json_parse accepts
 * too (at the same depth). It is conservative where checking exactly would
 * need memory or the values: it refuses (-1) an escaped key, more than
 * JSON_CHECK_KEYS_MAX keys in the objects open at once, and a number whose
 * magnitude reaches 1e308 even if it fits. Use it where a refusal can fall
 * back to json_parse. Allocates nothing (about 6 KiB of stack).
 */
#define JSON_CHECK_KEYS_MAX 256
int json_check(const char *text, size_t len, unsigned max_depth, size_t *end);

/* ---- construction ---- */

struct json *json_new_null(void);
struct json *json_new_bool(bool b);
struct json *json_new_int(int64_t i);
struct json *json_new_double(double d);
struct json *json_new_str(const char *s);
struct json *json_new_strn(const char *s, size_t len);
struct json *json_new_array(void);
struct json *json_new_object(void);

/* Append v (taking ownership). */
void json_array_push(struct json *arr, struct json *v);
/* Set key to v (taking ownership); an existing member of that key is replaced
 * in place and its old value freed. */
void json_object_set(struct json *obj, const char *key, struct json *v);
void json_object_setn(struct json *obj, const char *key, size_t key_len, struct json *v);
/* Convenience setters. */
void json_object_set_str(struct json *obj, const char *key, const char *s);	/* NULL -> null */
void json_object_set_int(struct json *obj, const char *key, int64_t i);
void json_object_set_bool(struct json *obj, const char *key, bool b);
/* Remove key; its value is freed. Returns true if it was there. */
bool json_object_del(struct json *obj, const char *key);

void json_free(struct json *v);
struct json *json_dup(const struct json *v);
/* Deep equality; an INT and a DOUBLE of the same value are equal; object member order is ignored. */
bool json_equal(const struct json *a, const struct json *b);

/* ---- access (all NULL-safe: a NULL or wrong-typed node gives the fallback) ---- */

struct json *json_get(const struct json *obj, const char *key);	/* NULL if absent or not an object */
const char *json_get_str(const struct json *obj, const char *key);	/* NULL unless a string */
int64_t json_get_int(const struct json *obj, const char *key, int64_t fallback);
double json_get_double(const struct json *obj, const char *key, double fallback);	/* INT or DOUBLE */
bool json_get_bool(const struct json *obj, const char *key, bool fallback);
size_t json_len(const struct json *v);				/* array items / object members, else 0 */
struct json *json_at(const struct json *arr, size_t i);		/* NULL if out of range */
const char *json_type_name(enum json_type t);			/* "null", "boolean", "integer"... */

/* ---- writing ---- */

enum { JSON_COMPACT = 0, JSON_PRETTY = 1 /* two-space indent, newline at the end */ };

/* Append v as JSON text to out. -1 only if out's cap is reached. Strings are
 * escaped so the output is valid UTF-8 JSON; non-finite doubles become null. */
int json_write(struct buf *out, const struct json *v, int flags);
/* The same, as a malloc'd string. */
char *json_to_string(const struct json *v, int flags);
/* Append s (len bytes) as a quoted, escaped JSON string. */
int json_write_string(struct buf *out, const char *s, size_t len);

/* ---- streaming builder ---- */

#define JSON_W_MAX_DEPTH 64

/* Writes JSON straight into a buf, placing commas and colons itself. Misuse
 * (a value where a key is needed, unbalanced ends, too deep) sets failed. */
struct json_w {
	struct buf *out;
	int depth;
	bool failed;
	bool in_object[JSON_W_MAX_DEPTH];
	bool need_comma[JSON_W_MAX_DEPTH];
	bool after_key;
};

void json_w_init(struct json_w *w, struct buf *out);
void json_w_object_begin(struct json_w *w);
void json_w_object_end(struct json_w *w);
void json_w_array_begin(struct json_w *w);
void json_w_array_end(struct json_w *w);
void json_w_key(struct json_w *w, const char *key);
void json_w_str(struct json_w *w, const char *s);	/* NULL writes null */
void json_w_strn(struct json_w *w, const char *s, size_t len);
void json_w_int(struct json_w *w, int64_t i);
void json_w_double(struct json_w *w, double d);
void json_w_bool(struct json_w *w, bool b);
void json_w_null(struct json_w *w);
void json_w_value(struct json_w *w, const struct json *v);
/* 0 if the document is complete and well formed, -1 otherwise. */
int json_w_finish(struct json_w *w);

#endif
