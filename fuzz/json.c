/*
 * fuzz/json.c: the JSON parser and writers. For any input: parse it; when it
 * parses, write it compact and pretty, parse each text again and require the
 * same tree (and a json_dup equal to it). Also: any bytes written with
 * json_write_string must parse back as one string, identical to the input
 * when the input was valid UTF-8 (every byte, NUL included, survives).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "json/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();	/* the fuzzer's way to report a finding */
}

static void roundtrip(const struct json *v, int flags)
{
	struct buf b = BUF_INIT;
	struct json *w = NULL;
	struct err e;

	must(json_write(&b, v, flags) == 0);
	must(utf8_valid(b.data, b.len));
	must(json_parse(b.data, b.len, NULL, &w, &e) == 0);
	must(json_equal(v, w));
	json_free(w);
	buf_release(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json *v = NULL, *d, *s = NULL, *t = NULL;
	struct err e, e2;
	struct buf b = BUF_INIT;
	struct json_limits tight = { 4, 256 };
	int rc = json_parse((const char *)data, size, NULL, &v, &e);

	/* Tighter limits may only refuse more, never accept something else. */
	if (json_parse((const char *)data, size, &tight, &t, &e2) == 0)
		must(rc == 0 && json_equal(v, t));
	json_free(t);

	if (rc == 0) {
		roundtrip(v, JSON_COMPACT);
		roundtrip(v, JSON_PRETTY);
		d = json_dup(v);
		must(json_equal(v, d));
		json_free(d);
		json_free(v);
	} else {
		must(v == NULL && e.msg[0] >= '1' && e.msg[0] <= '9');
	}

	/* The input as a string value: always valid JSON; exact when it was UTF-8. */
	must(json_write_string(&b, (const char *)data, size) == 0);
	must(json_parse(b.data, b.len, NULL, &s, &e) == 0 && s->type == JSON_STRING);
	if (utf8_valid(data, size))
		must(s->u.str.len == size && memcmp(s->u.str.s, data, size) == 0);
	json_free(s);
	buf_release(&b);
	return 0;
}
