/*
 * write.c: JSON text from a tree, compact or indented, and string escaping.
 *
 * The tree walk keeps its own stack (like the parser), so a tree as deep as
 * a caller's parse limit allowed is written without deep C recursion.
 */
#include "json/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "json/json_int.h"

static const char hex[] = "0123456789abcdef";

int json_write_string(struct buf *out, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len, *run;
	size_t start = out->len;
	int rc = 0;

	/* Output is never shorter than the input plus quotes: reserve it once. */
	if (len > (size_t)-1 - 2 || buf_grow(out, len + 2) < 0)
		return -1;
	rc |= buf_addch(out, '"');
	while (p < end) {
		char esc[6];
		size_t n;

		run = p;
		while (p < end && json_str_class[*p] == JSON_SC_PLAIN)
			p++;
		if (p > run)
			rc |= buf_add(out, run, (size_t)(p - run));
		if (p == end)
			break;
		switch (*p) {
		case '"': rc |= buf_add(out, "\\\"", 2); p++; continue;
		case '\\': rc |= buf_add(out, "\\\\", 2); p++; continue;
		case '\n': rc |= buf_add(out, "\\n", 2); p++; continue;
		case '\r': rc |= buf_add(out, "\\r", 2); p++; continue;
		case '\t': rc |= buf_add(out, "\\t", 2); p++; continue;
		case '\b': rc |= buf_add(out, "\\b", 2); p++; continue;
		case '\f': rc |= buf_add(out, "\\f", 2); p++; continue;
		default: break;
		}
		if (*p < 0x20) {
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[*p >> 4];
			esc[5] = hex[*p & 15];
			rc |= buf_add(out, esc, 6);
			p++;
			continue;
		}
		/* Non-ASCII: valid sequences pass through; a byte that starts no
		 * valid sequence becomes U+FFFD so the output is always UTF-8. */
		n = utf8_seq_len(p, (size_t)(end - p));
		if (n) {
			rc |= buf_add(out, p, n);
			p += n;
		} else {
			rc |= buf_add(out, "\\ufffd", 6);
			p++;
		}
	}
	rc |= buf_addch(out, '"');
	if (rc) {
		buf_truncate(out, start);
		return -1;
	}
	return 0;
}

size_t json_fmt_double(double d, char out[JSON_DOUBLE_MAX])
{
	size_t n = 0, w = 0;

	/* The shortest of 15, 16, 17 significant digits that reads back exactly;
	 * 17 always does. strtod and snprintf share the locale, so the check
	 * holds even where the decimal point is not '.'. */
	for (int prec = 15; prec <= 17; prec++) {
		int r = snprintf(out, JSON_DOUBLE_MAX, "%.*g", prec, d);
		n = r < 0 ? 0 : (size_t)r < JSON_DOUBLE_MAX ? (size_t)r : JSON_DOUBLE_MAX - 1;
		if (strtod(out, NULL) == d)
			break;
	}
	/* The locale's decimal point (any bytes other than digits, sign and
	 * exponent mark) becomes '.'. */
	for (size_t r = 0; r < n;) {
		char c = out[r];
		if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == 'e') {
			out[w++] = c;
			r++;
			continue;
		}
		out[w++] = '.';
		while (r < n && !((out[r] >= '0' && out[r] <= '9') || out[r] == 'e'))
			r++;
	}
	out[w] = '\0';
	return w;
}

static int write_scalar(struct buf *out, const struct json *v)
{
	char num[JSON_DOUBLE_MAX];
	int n;

	if (!v)
		return buf_add(out, "null", 4);
	switch (v->type) {
	case JSON_NULL:
		return buf_add(out, "null", 4);
	case JSON_BOOL:
		return v->u.b ? buf_add(out, "true", 4) : buf_add(out, "false", 5);
	case JSON_INT:
		n = snprintf(num, sizeof(num), "%lld", (long long)v->u.i);
		return buf_add(out, num, (size_t)n);
	case JSON_DOUBLE:
		if (!isfinite(v->u.d))
			return buf_add(out, "null", 4);
		return buf_add(out, num, json_fmt_double(v->u.d, num));
	case JSON_STRING:
		return json_write_string(out, v->u.str.s, v->u.str.len);
	default:
		return -1;
	}
}

static int indent(struct buf *out, size_t depth)
{
	static const char spaces[] = "\n                                                                ";
	size_t n = depth * 2 + 1;	/* the newline, then two spaces a level */
	int rc = 0;

	if (n <= sizeof(spaces) - 1)
		return buf_add(out, spaces, n);
	rc |= buf_add(out, spaces, sizeof(spaces) - 1);
	for (n -= sizeof(spaces) - 1; n > 0 && !rc;) {
		size_t k = n < sizeof(spaces) - 2 ? n : sizeof(spaces) - 2;
		rc |= buf_add(out, spaces + 1, k);
		n -= k;
	}
	return rc;
}

struct wframe {
	const struct json *v;
	size_t next;	/* index of the next item or member to write */
};

int json_write(struct buf *out, const struct json *v, int flags)
{
	bool pretty = flags & JSON_PRETTY;
	struct wframe small[32], *stack = small;
	size_t depth = 0, cap = sizeof(small) / sizeof(small[0]), start = out->len;
	int rc = 0;

write_value:
	if (v && (v->type == JSON_ARRAY || v->type == JSON_OBJECT)) {
		bool arr = v->type == JSON_ARRAY;
		if (json_len(v) == 0) {
			rc |= buf_add(out, arr ? "[]" : "{}", 2);
		} else {
			rc |= buf_addch(out, arr ? '[' : '{');
			if (depth == cap) {
				struct wframe *ns = xmalloc(cap * 2 * sizeof(*ns));
				memcpy(ns, stack, depth * sizeof(*ns));
				if (stack != small)
					free(stack);
				stack = ns;
				cap *= 2;
			}
			stack[depth].v = v;
			stack[depth].next = 0;
			depth++;
		}
	} else {
		rc |= write_scalar(out, v);
	}
	/* Find the next value to write, closing containers that are done. */
	while (depth > 0 && !rc) {
		struct wframe *f = &stack[depth - 1];
		const struct json *c = f->v;

		if (f->next < json_len(c)) {
			if (f->next > 0)
				rc |= buf_addch(out, ',');
			if (pretty)
				rc |= indent(out, depth);
			if (c->type == JSON_ARRAY) {
				v = c->u.arr.items[f->next++];
			} else {
				const struct json_member *m = &c->u.obj.m[f->next++];
				rc |= json_write_string(out, m->key, m->key_len);
				rc |= pretty ? buf_add(out, ": ", 2) : buf_addch(out, ':');
				v = m->val;
			}
			goto write_value;
		}
		depth--;
		if (pretty)
			rc |= indent(out, depth);
		rc |= buf_addch(out, c->type == JSON_ARRAY ? ']' : '}');
	}
	if (pretty)
		rc |= buf_addch(out, '\n');
	if (stack != small)
		free(stack);
	if (rc) {
		buf_truncate(out, start);
		return -1;
	}
	return 0;
}

char *json_to_string(const struct json *v, int flags)
{
	struct buf b = BUF_INIT;

	if (json_write(&b, v, flags) < 0) {
		buf_release(&b);
		return NULL;
	}
	return buf_detach(&b, NULL);
}
