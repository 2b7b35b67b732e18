/*
 * builder.c: the streaming writer (json_w_*), for responses written as they
 * are produced rather than built as a tree first.
 *
 * State, per open container at level d (0-based; depth = how many are open):
 * in_object[d] says which kind, need_comma[d] that it already holds a value.
 * At depth 0, need_comma[0] means the one top-level value has been written,
 * so a second one is misuse. after_key: a key was written, its value is due.
 * The first misuse sets failed; every call after that does nothing, and
 * json_w_finish reports it.
 */
#include "json/json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "json/json_int.h"

void json_w_init(struct json_w *w, struct buf *out)
{
	memset(w, 0, sizeof(*w));
	w->out = out;
}

static void check(struct json_w *w, int rc)
{
	if (rc < 0)
		w->failed = true;
}

/* Before a value: is one allowed here? Writes the comma if one is due. */
static bool value_begin(struct json_w *w)
{
	if (w->failed)
		return false;
	if (w->depth == 0) {
		if (w->need_comma[0])
			w->failed = true;	/* a second top-level value */
		return !w->failed;
	}
	if (w->in_object[w->depth - 1]) {
		if (!w->after_key)
			w->failed = true;	/* a value where a key is needed */
		w->after_key = false;
		return !w->failed;
	}
	if (w->need_comma[w->depth - 1])
		check(w, buf_addch(w->out, ','));
	return !w->failed;
}

/* After a value (a scalar, or a container's end). */
static void value_end(struct json_w *w)
{
	w->need_comma[w->depth ? w->depth - 1 : 0] = true;
}

static void begin(struct json_w *w, bool object)
{
	if (!value_begin(w))
		return;
	if (w->depth >= JSON_W_MAX_DEPTH) {
		w->failed = true;
		return;
	}
	check(w, buf_addch(w->out, object ? '{' : '['));
	w->in_object[w->depth] = object;
	w->need_comma[w->depth] = false;
	w->depth++;
}

static void end(struct json_w *w, bool object)
{
	if (w->failed)
		return;
	if (w->depth == 0 || w->in_object[w->depth - 1] != object || w->after_key) {
		w->failed = true;	/* nothing open, the other kind open, or a key without value */
		return;
	}
	check(w, buf_addch(w->out, object ? '}' : ']'));
	w->depth--;
	value_end(w);
}

void json_w_object_begin(struct json_w *w) { begin(w, true); }
void json_w_object_end(struct json_w *w) { end(w, true); }
void json_w_array_begin(struct json_w *w) { begin(w, false); }
void json_w_array_end(struct json_w *w) { end(w, false); }

void json_w_key(struct json_w *w, const char *key)
{
	if (w->failed)
		return;
	if (!key || w->depth == 0 || !w->in_object[w->depth - 1] || w->after_key) {
		w->failed = true;
		return;
	}
	if (w->need_comma[w->depth - 1])
		check(w, buf_addch(w->out, ','));
	check(w, json_write_string(w->out, key, strlen(key)));
	check(w, buf_addch(w->out, ':'));
	w->after_key = true;
}

void json_w_strn(struct json_w *w, const char *s, size_t len)
{
	if (!value_begin(w))
		return;
	check(w, s ? json_write_string(w->out, s, len) : buf_add(w->out, "null", 4));
	value_end(w);
}

void json_w_str(struct json_w *w, const char *s)
{
	json_w_strn(w, s, s ? strlen(s) : 0);
}

void json_w_int(struct json_w *w, int64_t i)
{
	char num[24];
	int n;

	if (!value_begin(w))
		return;
	n = snprintf(num, sizeof(num), "%lld", (long long)i);
	check(w, buf_add(w->out, num, (size_t)n));
	value_end(w);
}

void json_w_double(struct json_w *w, double d)
{
	char num[JSON_DOUBLE_MAX];

	if (!value_begin(w))
		return;
	if (isfinite(d))
		check(w, buf_add(w->out, num, json_fmt_double(d, num)));
	else
		check(w, buf_add(w->out, "null", 4));	/* JSON has no NaN or Infinity */
	value_end(w);
}

void json_w_bool(struct json_w *w, bool b)
{
	if (!value_begin(w))
		return;
	check(w, b ? buf_add(w->out, "true", 4) : buf_add(w->out, "false", 5));
	value_end(w);
}

void json_w_null(struct json_w *w)
{
	if (!value_begin(w))
		return;
	check(w, buf_add(w->out, "null", 4));
	value_end(w);
}

void json_w_value(struct json_w *w, const struct json *v)
{
	if (!value_begin(w))
		return;
	check(w, json_write(w->out, v, JSON_COMPACT));
	value_end(w);
}

int json_w_finish(struct json_w *w)
{
	if (w->failed || w->depth != 0 || !w->need_comma[0] || w->after_key)
		return -1;
	return 0;
}
