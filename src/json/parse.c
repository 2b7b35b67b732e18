/*
 * parse.c: the strict RFC 8259 parser.
 *
 * One pass over the input, no recursion: open arrays and objects live on an
 * explicit stack, so the depth limit is the only bound on nesting and a
 * hostile document cannot exhaust the C stack. Every node is attached to its
 * parent as soon as it exists, so on any error freeing the root (plus the
 * keys still pending on the stack) releases everything.
 *
 * Speed matters (the store replays its whole log through here at start-up):
 * the hot loops are table lookups over bytes with no function calls; string
 * contents without escapes are copied exactly once, straight from the input
 * into their node; plain ASCII runs in strings are skipped eight bytes at a
 * time. Line and column are computed only when an error is reported.
 */
#include "json/json.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fs.h"
#include "base/utf8.h"
#include "json/json_int.h"

/* Objects with more members than this get a hash index for the duplicate-key
 * check; below it a linear scan is faster than hashing. */
#define DUP_INDEX_MIN 16

/* Longest key quoted back in a "duplicate key" message. */
#define ERR_KEY_MAX 64

/* Byte classes inside a string (json_int.h); the writer uses them too. */
#define SC_PLAIN JSON_SC_PLAIN
#define SC_QUOTE JSON_SC_QUOTE
#define SC_BACKSLASH JSON_SC_BACKSLASH
#define SC_CTRL JSON_SC_CTRL
#define SC_HIGH JSON_SC_HIGH
#define str_class json_str_class

const unsigned char json_str_class[256] = {
	SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL,
	SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL,
	SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL,
	SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL, SC_CTRL,
	['"'] = SC_QUOTE, ['\\'] = SC_BACKSLASH,
	[0x80] = SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
	SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
	SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
	SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
	SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
	SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
	SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
	SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
	SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
	SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
	SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
	SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
	SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
	SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
	SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
	SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH, SC_HIGH,
};

/* The four whitespace bytes RFC 8259 allows; nothing else (no VT, FF, NBSP). */
static const unsigned char is_ws[256] = { [' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1 };

struct frame {
	struct json *node;	/* the open array or object */
	char *key;		/* object: key read, its value not yet attached */
	size_t key_len;
	uint32_t *index;	/* object: hash slots holding member index + 1; NULL below DUP_INDEX_MIN */
	size_t index_cap;	/* slots, a power of two */
	uint64_t key_hash;	/* hash of key, when index is in use */
};

struct parser {
	const unsigned char *start, *end;
	struct err *e;
	unsigned max_depth;
	struct frame *stack;
	size_t depth, stack_cap;
	char *scratch;		/* decoded escaped strings and slow-path numbers */
	size_t scratch_cap;
};

/* ---- errors ---- */

/* Fill e with "line:col: reason" for the byte at p (p may be the end). */
static int fail(struct parser *ps, const unsigned char *p, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct parser *ps, const unsigned char *p, const char *fmt, ...)
{
	const unsigned char *q = ps->start, *line_start = ps->start, *nl;
	size_t line = 1;
	char reason[ERR_MSG_MAX];
	va_list ap;

	while (q < p && (nl = memchr(q, '\n', (size_t)(p - q)))) {
		line++;
		q = line_start = nl + 1;
	}
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	return err_set(ps->e, "%zu:%zu: %s", line, (size_t)(p - line_start) + 1, reason);
}

/* Describe the byte at p for a message: 'x', U+00E9, byte 0xff, end of input. */
static void describe(const struct parser *ps, const unsigned char *p, char *out, size_t n)
{
	size_t len;

	if (p >= ps->end) {
		snprintf(out, n, "end of input");
	} else if (*p >= 0x20 && *p < 0x7F) {
		snprintf(out, n, "'%c'", *p);
	} else if (*p < 0x80) {
		snprintf(out, n, "byte 0x%02x", *p);
	} else if ((len = utf8_seq_len(p, (size_t)(ps->end - p)))) {
		uint32_t cp = *p & (0x7F >> len);
		for (size_t i = 1; i < len; i++)
			cp = (cp << 6) | (p[i] & 0x3F);
		snprintf(out, n, "character U+%04X", (unsigned)cp);
	} else {
		snprintf(out, n, "byte 0x%02x", *p);
	}
}

/* An unexpected byte where expected was wanted; a few common mistakes get a
 * message that says what to do instead. */
static int fail_unexpected(struct parser *ps, const unsigned char *p, const char *expected)
{
	char what[48];

	if (p < ps->end) {
		switch (*p) {
		case '/':
			return fail(ps, p, "comments are not allowed in JSON");
		case '\'':
			return fail(ps, p, "strings must be in double quotes, not single quotes");
		case '+':
			return fail(ps, p, "a number may not start with '+'");
		case '.':
			return fail(ps, p, "a number must have a digit before '.'");
		case 'N':
			if (ps->end - p >= 3 && memcmp(p, "NaN", 3) == 0)
				return fail(ps, p, "NaN is not a JSON value");
			break;
		case 'I':
			if (ps->end - p >= 8 && memcmp(p, "Infinity", 8) == 0)
				return fail(ps, p, "Infinity is not a JSON value");
			break;
		default:
			if (*p >= 0x80 && !utf8_seq_len(p, (size_t)(ps->end - p)))
				return fail(ps, p, "invalid UTF-8 byte 0x%02x", *p);
			break;
		}
	}
	describe(ps, p, what, sizeof(what));
	return fail(ps, p, "expected %s, found %s", expected, what);
}

/* ---- scratch space ---- */

static char *scratch(struct parser *ps, size_t n)
{
	if (n > ps->scratch_cap) {
		size_t cap = ps->scratch_cap ? ps->scratch_cap : 256;
		while (cap < n)
			cap *= 2;
		free(ps->scratch);
		ps->scratch = xmalloc(cap);
		ps->scratch_cap = cap;
	}
	return ps->scratch;
}

/* ---- strings ---- */

/* SWAR test: does any of the 8 bytes in w need a look (quote, backslash,
 * control byte, or non-ASCII)? False positives are harmless: the caller then
 * looks byte by byte. */
static inline int word_special(uint64_t w)
{
	const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
	uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
	uint64_t t = ((q - ones) & ~q) | ((b - ones) & ~b) | (w - ones * 0x20) | w;
	return (t & high) != 0;
}

static int hex4(const unsigned char *p, const unsigned char *end, uint32_t *out)
{
	uint32_t v = 0;

	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		unsigned c = p[i], lc = c | 0x20;	/* lc: ASCII letters folded to lower case */
		if (c - '0' < 10)
			v = (v << 4) | (c - '0');
		else if (lc - 'a' < 6)
			v = (v << 4) | (lc - 'a' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/*
 * Decode the rest of a string whose first escape is at p; s is just after the
 * opening quote. Text is decoded into the parser's scratch buffer (reused
 * across strings, grown as needed) and copied once into its own allocation
 * at the closing quote, so escaped strings cost two copies, plain ones one.
 */
static int parse_escaped(struct parser *ps, const unsigned char *s, const unsigned char *p,
			 const unsigned char **after, char **out, size_t *out_len)
{
	const unsigned char *end = ps->end;
	size_t n = (size_t)(p - s), cap = n + 64;
	char *d = scratch(ps, cap);

	memcpy(d, s, n);
	for (;;) {
		const unsigned char *run = p;
		size_t len;

		while (p < end && str_class[*p] == SC_PLAIN)
			p++;
		len = (size_t)(p - run);
		if (n + len + 4 > cap) {
			/* Grow keeping what is decoded so far. */
			size_t ncap = cap * 2 + len + 4;
			char *nd = xmalloc(ncap);
			memcpy(nd, d, n);
			free(ps->scratch);
			ps->scratch = d = nd;
			ps->scratch_cap = cap = ncap;
		}
		memcpy(d + n, run, len);
		n += len;
		if (p == end)
			return fail(ps, s - 1, "unterminated string");
		switch (str_class[*p]) {
		case SC_QUOTE:
			*out = xmalloc(n + 1);
			memcpy(*out, d, n);
			(*out)[n] = '\0';
			*out_len = n;
			*after = p + 1;
			return 0;
		case SC_CTRL:
			return fail(ps, p, "control character 0x%02x in a string must be escaped", *p);
		case SC_HIGH:
			len = utf8_seq_len(p, (size_t)(end - p));
			if (!len)
				return fail(ps, p, "invalid UTF-8 byte 0x%02x in string", *p);
			memcpy(d + n, p, len);
			n += len;
			p += len;
			continue;
		default:
			break;
		}
		/* A backslash escape. */
		if (p + 1 >= end)
			return fail(ps, s - 1, "unterminated string");
		switch (p[1]) {
		case '"': d[n++] = '"'; p += 2; continue;
		case '\\': d[n++] = '\\'; p += 2; continue;
		case '/': d[n++] = '/'; p += 2; continue;
		case 'b': d[n++] = '\b'; p += 2; continue;
		case 'f': d[n++] = '\f'; p += 2; continue;
		case 'n': d[n++] = '\n'; p += 2; continue;
		case 'r': d[n++] = '\r'; p += 2; continue;
		case 't': d[n++] = '\t'; p += 2; continue;
		case 'u': break;
		default: {
			char what[48];
			describe(ps, p + 1, what, sizeof(what));
			return fail(ps, p, "invalid escape: backslash followed by %s "
				    "(allowed: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)", what);
		}
		}
		uint32_t cp, lo;
		if (hex4(p + 2, end, &cp) < 0)
			return fail(ps, p, "invalid \\u escape: expected 4 hex digits");
		if (cp >= 0xDC00 && cp <= 0xDFFF)
			return fail(ps, p, "lone low surrogate \\u%04x (it must follow a high surrogate \\ud800-\\udbff)",
				    (unsigned)cp);
		if (cp >= 0xD800 && cp <= 0xDBFF) {
			if (end - p < 8 || p[6] != '\\' || p[7] != 'u')
				return fail(ps, p, "lone high surrogate \\u%04x (it must be followed by a "
					    "low surrogate escape \\udc00-\\udfff)", (unsigned)cp);
			if (hex4(p + 8, end, &lo) < 0)
				return fail(ps, p + 6, "invalid \\u escape: expected 4 hex digits");
			if (lo < 0xDC00 || lo > 0xDFFF)
				return fail(ps, p + 6, "high surrogate \\u%04x followed by \\u%04x, "
					    "which is not a low surrogate", (unsigned)cp, (unsigned)lo);
			cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			p += 6;
		}
		n += utf8_encode(cp, d + n);
		p += 6;
	}
}

/* Parse a string; p points at the opening quote. On success *out is a
 * malloc'd NUL-terminated copy and *after points past the closing quote. */
static int parse_string(struct parser *ps, const unsigned char *p, const unsigned char **after,
			char **out, size_t *out_len)
{
	const unsigned char *s = ++p, *end = ps->end;

	for (;;) {
		while (end - p >= 8) {
			uint64_t w;
			memcpy(&w, p, 8);
			if (word_special(w))
				break;
			p += 8;
		}
		while (p < end && str_class[*p] == SC_PLAIN)
			p++;
		if (p == end)
			return fail(ps, s - 1, "unterminated string");
		switch (str_class[*p]) {
		case SC_PLAIN:
			continue;	/* the word test's false positive: keep going */
		case SC_QUOTE: {
			size_t n = (size_t)(p - s);
			*out = xmalloc(n + 1);
			memcpy(*out, s, n);
			(*out)[n] = '\0';
			*out_len = n;
			*after = p + 1;
			return 0;
		}
		case SC_BACKSLASH:
			return parse_escaped(ps, s, p, after, out, out_len);
		case SC_CTRL:
			return fail(ps, p, "control character 0x%02x in a string must be escaped", *p);
		default: {
			size_t len = utf8_seq_len(p, (size_t)(end - p));
			if (!len)
				return fail(ps, p, "invalid UTF-8 byte 0x%02x in string", *p);
			p += len;
		}
		}
	}
}

/* ---- numbers ---- */

static const double pow10_exact[] = {
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

/*
 * Convert the number text [s, p) (already checked against the grammar) with
 * strtod, in whatever locale the program runs: the one byte that locales
 * change, the decimal point, is swapped for the locale's own first.
 */
static int slow_double(struct parser *ps, const unsigned char *s, const unsigned char *p, double *out)
{
	const unsigned char *at = s > ps->start && s[-1] == '-' ? s - 1 : s;	/* errors point at the sign */
	const char *dp = localeconv()->decimal_point;
	size_t dpl = dp && *dp ? strlen(dp) : 1, n = 0;
	char *buf = scratch(ps, (size_t)(p - s) + dpl + 1), *endp;

	for (const unsigned char *q = s; q < p; q++) {
		if (*q == '.' && dp && *dp) {
			memcpy(buf + n, dp, dpl);
			n += dpl;
		} else {
			buf[n++] = (char)*q;
		}
	}
	buf[n] = '\0';
	errno = 0;
	*out = strtod(buf, &endp);
	if (endp != buf + n)
		return fail(ps, at, "cannot convert number");
	if (isinf(*out))
		return fail(ps, at, "number out of range");
	return 0;	/* underflow (ERANGE with a tiny or zero result) is fine */
}

static int parse_number(struct parser *ps, const unsigned char *p, const unsigned char **after,
			struct json **out)
{
	const unsigned char *s = p, *end = ps->end;
	uint64_t mant = 0;
	int digits = 0;		/* significant digits in mant */
	bool neg = false, is_int = true, exact = true;
	long exp10 = 0, e = 0;
	struct json *v;
	double d;

	if (*p == '-') {
		neg = true;
		p++;
	}
	if (p == end || *p < '0' || *p > '9')
		return fail(ps, p, "expected a digit after '-'");
	if (*p == '0') {
		p++;
		if (p < end && *p >= '0' && *p <= '9')
			return fail(ps, p, "leading zeros are not allowed in numbers");
	} else {
		while (p < end && *p >= '0' && *p <= '9') {
			if (digits < 19) {
				mant = mant * 10 + (uint64_t)(*p - '0');
				digits++;
			} else {
				exact = false;
			}
			p++;
		}
	}
	if (p < end && *p == '.') {
		is_int = false;
		p++;
		if (p == end || *p < '0' || *p > '9')
			return fail(ps, p, "expected a digit after '.'");
		while (p < end && *p >= '0' && *p <= '9') {
			if (mant == 0 && *p == '0') {
				exp10--;	/* leading zeros of 0.000x: scale only */
			} else if (digits < 19) {
				mant = mant * 10 + (uint64_t)(*p - '0');
				digits++;
				exp10--;
			} else {
				exact = false;
			}
			p++;
		}
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		bool eneg = false;
		is_int = false;
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			eneg = *p++ == '-';
		if (p == end || *p < '0' || *p > '9')
			return fail(ps, p, "expected a digit in the exponent");
		while (p < end && *p >= '0' && *p <= '9') {
			if (e < 100000)	/* saturate: past this only the slow path can decide */
				e = e * 10 + (*p - '0');
			p++;
		}
		exp10 += eneg ? -e : e;
	}
	*after = p;
	if (is_int && exact) {
		/* At most 19 digits: mant is exact and below 2^64. */
		if (!neg && mant <= (uint64_t)INT64_MAX) {
			*out = v = xmalloc(sizeof(*v));
			v->type = JSON_INT;
			v->u.i = (int64_t)mant;
			return 0;
		}
		if (neg && mant <= (uint64_t)INT64_MAX + 1) {
			*out = v = xmalloc(sizeof(*v));
			v->type = JSON_INT;
			v->u.i = mant == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mant;
			return 0;
		}
	}
	/* Clinger's fast path: an integer mantissa below 2^53 times or divided by
	 * an exactly representable power of ten is one correctly rounded step. */
	if (exact && mant <= (1ULL << 53) && exp10 >= -22 && exp10 <= 22) {
		d = (double)mant;
		d = exp10 < 0 ? d / pow10_exact[-exp10] : d * pow10_exact[exp10];
	} else if (exact && mant == 0) {
		d = 0.0;	/* 0e999999 is zero, however large the exponent */
	} else if (slow_double(ps, s + neg, p, &d) < 0) {	/* unsigned: the sign comes below */
		return -1;
	}
	*out = v = xmalloc(sizeof(*v));
	v->type = JSON_DOUBLE;
	v->u.d = neg ? -d : d;
	return 0;
}

/* ---- objects: duplicate keys ---- */

static uint64_t key_hash(const char *k, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;	/* FNV-1a */

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)k[i]) * 0x100000001b3ULL;
	return h;
}

static void index_insert(struct frame *f, uint64_t h, size_t member)
{
	size_t mask = f->index_cap - 1, i = (size_t)h & mask;

	while (f->index[i])
		i = (i + 1) & mask;
	f->index[i] = (uint32_t)(member + 1);
}

/* Keep the index at most half full, rebuilding it when it grows. */
static void index_reserve(struct frame *f, size_t members)
{
	const struct json *o = f->node;
	size_t cap = f->index_cap ? f->index_cap : 64;

	while (cap < members * 2 + 2)
		cap *= 2;
	if (cap == f->index_cap)
		return;
	free(f->index);
	f->index = xcalloc(cap, sizeof(*f->index));
	f->index_cap = cap;
	for (size_t i = 0; i < o->u.obj.n; i++)
		index_insert(f, key_hash(o->u.obj.m[i].key, o->u.obj.m[i].key_len), i);
}

/* True if the open object f already has key k. */
static bool key_taken(struct frame *f, const char *k, size_t n)
{
	const struct json *o = f->node;

	if (o->u.obj.n < DUP_INDEX_MIN) {
		for (size_t i = 0; i < o->u.obj.n; i++)
			if (o->u.obj.m[i].key_len == n && memcmp(o->u.obj.m[i].key, k, n) == 0)
				return true;
		return false;
	}
	index_reserve(f, o->u.obj.n + 1);
	f->key_hash = key_hash(k, n);
	for (size_t mask = f->index_cap - 1, i = (size_t)f->key_hash & mask; f->index[i]; i = (i + 1) & mask) {
		const struct json_member *m = &o->u.obj.m[f->index[i] - 1];
		if (m->key_len == n && memcmp(m->key, k, n) == 0)
			return true;
	}
	return false;
}

/* Quote a key for an error message: escaped, shortened if long. */
static void quote_key(const char *k, size_t n, char *out, size_t cap)
{
	struct buf b = BUF_INIT;

	if (json_write_string(&b, k, n > ERR_KEY_MAX ? ERR_KEY_MAX : n) == 0) {
		if (n > ERR_KEY_MAX && b.len > 0)
			b.len--;	/* drop the closing quote, say it was cut */
		snprintf(out, cap, "%.*s%s", (int)b.len, b.data, n > ERR_KEY_MAX ? "...\"" : "");
	} else {
		snprintf(out, cap, "(key)");
	}
	buf_release(&b);
}

/* Read a key at p (a quote is required) and the colon after it. */
static int parse_key(struct parser *ps, struct frame *f, const unsigned char *p, const unsigned char **after)
{
	const unsigned char *end = ps->end, *quote = p;
	char *k;
	size_t n;

	if (p == end || *p != '"')
		return fail_unexpected(ps, p, "a string key in double quotes");
	if (parse_string(ps, p, &p, &k, &n) < 0)
		return -1;
	if (key_taken(f, k, n)) {
		char q[ERR_KEY_MAX * 6 + 16];
		quote_key(k, n, q, sizeof(q));
		free(k);
		return fail(ps, quote, "duplicate key %s", q);
	}
	f->key = k;
	f->key_len = n;
	while (p < end && is_ws[*p])
		p++;
	if (p == end || *p != ':') {
		return fail_unexpected(ps, p, "':' after the key");
	}
	*after = p + 1;
	return 0;
}

/* ---- the document ---- */

static struct json *new_container(enum json_type t)
{
	struct json *v = xcalloc(1, sizeof(*v));
	v->type = t;
	return v;
}

/* Hang v on the open container at the top of the stack (or make it the root). */
/* true, false or null at *p: the value, with *p moved past it; NULL when
 * the bytes there are none of the three. */
static struct json *parse_literal(const unsigned char **p, const unsigned char *end)
{
	static const struct {
		const char *word;
		enum json_type type;
		bool b;
	} literals[] = {
		{ "true", JSON_BOOL, true },
		{ "false", JSON_BOOL, false },
		{ "null", JSON_NULL, false },
	};

	for (size_t i = 0; i < sizeof(literals) / sizeof(literals[0]); i++) {
		size_t n = strlen(literals[i].word);
		struct json *v;

		if ((size_t)(end - *p) < n || memcmp(*p, literals[i].word, n) != 0)
			continue;
		v = xmalloc(sizeof(*v));
		v->type = literals[i].type;
		v->u.b = literals[i].b;
		*p += n;
		return v;
	}
	return NULL;
}

static void attach(struct parser *ps, struct json **root, struct json *v)
{
	struct frame *f;
	struct json *c;

	if (ps->depth == 0) {
		*root = v;
		return;
	}
	f = &ps->stack[ps->depth - 1];
	c = f->node;
	if (c->type == JSON_ARRAY) {
		json_array_push(c, v);
		return;
	}
	/* Appended directly: the duplicate check already ran when the key was read. */
	if (c->u.obj.n == c->u.obj.cap) {
		c->u.obj.cap = c->u.obj.cap ? c->u.obj.cap * 2 : 4;
		c->u.obj.m = xrealloc(c->u.obj.m, c->u.obj.cap * sizeof(*c->u.obj.m));
	}
	if (f->index)
		index_insert(f, f->key_hash, c->u.obj.n);
	c->u.obj.m[c->u.obj.n].key = f->key;
	c->u.obj.m[c->u.obj.n].key_len = f->key_len;
	c->u.obj.m[c->u.obj.n].val = v;
	c->u.obj.n++;
	f->key = NULL;
}

static int push(struct parser *ps, const unsigned char *p, struct json *node)
{
	struct frame *f;

	if (ps->depth >= ps->max_depth)
		return fail(ps, p, "nesting deeper than %u", ps->max_depth);
	if (ps->depth == ps->stack_cap) {
		ps->stack_cap = ps->stack_cap ? ps->stack_cap * 2 : 32;
		ps->stack = xrealloc(ps->stack, ps->stack_cap * sizeof(*ps->stack));
	}
	f = &ps->stack[ps->depth++];
	memset(f, 0, sizeof(*f));
	f->node = node;
	return 0;
}

static void pop(struct parser *ps)
{
	struct frame *f = &ps->stack[--ps->depth];

	free(f->index);
	free(f->key);
}

/* The size limit in force. */
static size_t limit_size(const struct json_limits *lim)
{
	return lim && lim->max_size ? lim->max_size : JSON_MAX_SIZE_DEFAULT;
}

/* An object or array opens at *p: attach and push it, then step past the
 * bracket and white space. 1 when a member follows; 0 when it closed at
 * once (popped again, *p past the closer); -1 when nested too deep. */
static int open_container(struct parser *ps, struct json **root, enum json_type type, const unsigned char **p)
{
	struct json *v = new_container(type);

	attach(ps, root, v);
	if (push(ps, *p, v) < 0)
		return -1;
	for ((*p)++; *p < ps->end && is_ws[**p]; (*p)++)
		;
	if (*p < ps->end && **p == (type == JSON_OBJECT ? '}' : ']')) {
		pop(ps);
		(*p)++;
		return 0;
	}
	return 1;
}

int json_parse(const char *text, size_t len, const struct json_limits *lim,
	       struct json **out, struct err *e)
{
	struct parser ps = { 0 };
	const unsigned char *p, *end;
	int opened;
	struct json *root = NULL, *v = NULL;
	size_t max_size = limit_size(lim);
	int rc = -1;

	*out = NULL;
	ps.start = p = (const unsigned char *)text;
	ps.end = end = p + len;
	ps.e = e;
	ps.max_depth = lim && lim->max_depth ? lim->max_depth : JSON_MAX_DEPTH_DEFAULT;

	if (len > max_size) {
		fail(&ps, p + max_size, "input is larger than the limit of %zu bytes", max_size);
		return -1;
	}
	if (len == 0) {
		fail(&ps, p, "empty input: expected a JSON value");
		return -1;
	}
	if (len >= 3 && p[0] == 0xEF && p[1] == 0xBB && p[2] == 0xBF) {
		fail(&ps, p, "byte order mark (U+FEFF) at the start: RFC 8259 forbids it "
		     "in JSON text; remove it");
		return -1;
	}

value:
	while (p < end && is_ws[*p])
		p++;
	if (p == end) {
		fail(&ps, p, "unexpected end of input: expected a value");
		goto out;
	}
	switch (*p) {
	case '{':
		if ((opened = open_container(&ps, &root, JSON_OBJECT, &p)) < 0)
			goto out;
		if (opened == 0)
			goto next;
		if (parse_key(&ps, &ps.stack[ps.depth - 1], p, &p) < 0)
			goto out;
		goto value;
	case '[':
		if ((opened = open_container(&ps, &root, JSON_ARRAY, &p)) < 0)
			goto out;
		if (opened == 0)
			goto next;
		goto value;
	case '"': {
		char *s;
		size_t n;
		if (parse_string(&ps, p, &p, &s, &n) < 0)
			goto out;
		v = xmalloc(sizeof(*v));
		v->type = JSON_STRING;
		v->u.str.s = s;
		v->u.str.len = n;
		attach(&ps, &root, v);
		goto next;
	}
	case '-': case '0': case '1': case '2': case '3': case '4':
	case '5': case '6': case '7': case '8': case '9':
		if (parse_number(&ps, p, &p, &v) < 0)
			goto out;
		attach(&ps, &root, v);
		goto next;
	case 't': case 'f': case 'n':
		if (!(v = parse_literal(&p, end)))
			break;
		attach(&ps, &root, v);
		goto next;
	default:
		break;
	}
	if (*p == 't' || *p == 'f' || *p == 'n')
		fail(&ps, p, "invalid literal (expected true, false or null)");
	else
		fail_unexpected(&ps, p, "a value");
	goto out;

next:
	/* A value is complete: what may follow depends on what holds it. */
	while (p < end && is_ws[*p])
		p++;
	if (ps.depth == 0) {
		if (p != end) {
			if (*p >= 0x80 && !utf8_seq_len(p, (size_t)(end - p)))
				fail(&ps, p, "invalid UTF-8 byte 0x%02x", *p);
			else
				fail(&ps, p, "unexpected data after the top-level value "
				     "(a JSON text holds exactly one value)");
			goto out;
		}
		rc = 0;
		goto out;
	}
	if (ps.stack[ps.depth - 1].node->type == JSON_ARRAY) {
		if (p < end && *p == ',') {
			p++;
			while (p < end && is_ws[*p])
				p++;
			if (p < end && *p == ']') {
				fail(&ps, p, "trailing comma before ']'");
				goto out;
			}
			goto value;
		}
		if (p < end && *p == ']') {
			pop(&ps);
			p++;
			goto next;
		}
		fail_unexpected(&ps, p, "',' or ']' in array");
		goto out;
	}
	if (p < end && *p == ',') {
		p++;
		while (p < end && is_ws[*p])
			p++;
		if (p < end && *p == '}') {
			fail(&ps, p, "trailing comma before '}'");
			goto out;
		}
		if (parse_key(&ps, &ps.stack[ps.depth - 1], p, &p) < 0)
			goto out;
		goto value;
	}
	if (p < end && *p == '}') {
		pop(&ps);
		p++;
		goto next;
	}
	fail_unexpected(&ps, p, "',' or '}' in object");

out:
	while (ps.depth)
		pop(&ps);
	free(ps.stack);
	free(ps.scratch);
	if (rc < 0) {
		json_free(root);
		return -1;
	}
	*out = root;
	return 0;
}

int json_parse_file(const char *path, size_t max, struct json **out, struct err *e)
{
	struct buf b = BUF_INIT;
	int rc;

	*out = NULL;
	if (fs_read_file(path, &b, max, e) < 0) {
		buf_release(&b);
		return -1;
	}
	rc = json_parse(b.data ? b.data : "", b.len, NULL, out, e);
	buf_release(&b);
	return rc;
}
