/* Unit tests: the streaming builder json_w_*, including misuse. */
#include <math.h>
#include <string.h>

#include "json/json.h"
#include "tap.h"

static void test_document(void)
{
	struct buf b = BUF_INIT;
	struct json_w w;
	struct json *v = json_new_object(), *back = NULL;
	struct err e;

	json_object_set_int(v, "x", 1);
	json_w_init(&w, &b);
	json_w_object_begin(&w);
	json_w_key(&w, "id");
	json_w_str(&w, "env_01");
	json_w_key(&w, "n");
	json_w_int(&w, -9223372036854775807LL - 1);
	json_w_key(&w, "d");
	json_w_double(&w, 0.5);
	json_w_key(&w, "nan");
	json_w_double(&w, NAN);
	json_w_key(&w, "t");
	json_w_bool(&w, true);
	json_w_key(&w, "f");
	json_w_bool(&w, false);
	json_w_key(&w, "z");
	json_w_null(&w);
	json_w_key(&w, "s");
	json_w_str(&w, NULL);
	json_w_key(&w, "raw");
	json_w_strn(&w, "a\0\"", 3);
	json_w_key(&w, "list");
	json_w_array_begin(&w);
	json_w_int(&w, 1);
	json_w_array_begin(&w);
	json_w_array_end(&w);
	json_w_object_begin(&w);
	json_w_object_end(&w);
	json_w_value(&w, v);
	json_w_value(&w, NULL);
	json_w_array_end(&w);
	json_w_key(&w, "k\"q");
	json_w_str(&w, "");
	json_w_object_end(&w);
	ok(json_w_finish(&w) == 0 && !w.failed, "a complete document finishes");
	is_str(b.data, "{\"id\":\"env_01\",\"n\":-9223372036854775808,\"d\":0.5,\"nan\":null,\"t\":true,"
	       "\"f\":false,\"z\":null,\"s\":null,\"raw\":\"a\\u0000\\\"\",\"list\":[1,[],{},{\"x\":1},null],"
	       "\"k\\\"q\":\"\"}", "  output, byte for byte");
	ok(json_parse(b.data, b.len, NULL, &back, &e) == 0, "  and parses");
	json_free(back);
	json_free(v);
	buf_release(&b);

	json_w_init(&w, &b);
	json_w_int(&w, 5);
	ok(json_w_finish(&w) == 0, "a lone scalar is a complete document");
	is_str(b.data, "5", "  output");
	buf_release(&b);
}

static void test_depth(void)
{
	struct buf b = BUF_INIT;
	struct json_w w;

	json_w_init(&w, &b);
	for (int i = 0; i < JSON_W_MAX_DEPTH; i++)
		json_w_array_begin(&w);
	for (int i = 0; i < JSON_W_MAX_DEPTH; i++)
		json_w_array_end(&w);
	ok(json_w_finish(&w) == 0, "JSON_W_MAX_DEPTH levels allowed");
	buf_release(&b);

	json_w_init(&w, &b);
	for (int i = 0; i <= JSON_W_MAX_DEPTH; i++)
		json_w_array_begin(&w);
	ok(w.failed, "one level more fails");
	for (int i = 0; i <= JSON_W_MAX_DEPTH; i++)
		json_w_array_end(&w);
	ok(json_w_finish(&w) == -1, "  and finish says so");
	buf_release(&b);
}

/* Each misuse is a short script: a for object_begin, o/O object begin/end,
 * [ ] array begin/end, k key, v int value. */
struct misuse {
	const char *script;
	const char *name;
};

static const struct misuse misuses[] = {
	{ "{v}", "value where a key is expected" },
	{ "{kk", "two keys in a row" },
	{ "k", "key at top level" },
	{ "[k", "key in an array" },
	{ "]", "array end with nothing open" },
	{ "}", "object end with nothing open" },
	{ "[}", "object end closing an array" },
	{ "{]", "array end closing an object" },
	{ "{k}", "object end after a key without its value" },
	{ "vv", "two top-level values" },
	{ "[]v", "a value after the top-level array" },
	{ "[][]", "two top-level arrays" },
};

static void run_script(struct json_w *w, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '{': json_w_object_begin(w); break;
		case '}': json_w_object_end(w); break;
		case '[': json_w_array_begin(w); break;
		case ']': json_w_array_end(w); break;
		case 'k': json_w_key(w, "k"); break;
		case 'v': json_w_int(w, 1); break;
		}
	}
}

static void test_misuse(void)
{
	for (size_t i = 0; i < sizeof(misuses) / sizeof(misuses[0]); i++) {
		struct buf b = BUF_INIT;
		struct json_w w;
		json_w_init(&w, &b);
		run_script(&w, misuses[i].script);
		ok(w.failed && json_w_finish(&w) == -1, "misuse fails: %s", misuses[i].name);
		buf_release(&b);
	}

	/* Incomplete documents are not misuse while writing, but do not finish. */
	const char *incomplete[] = { "", "[", "{", "{k", "[[]", "{k[]" };
	for (size_t i = 0; i < sizeof(incomplete) / sizeof(incomplete[0]); i++) {
		struct buf b = BUF_INIT;
		struct json_w w;
		json_w_init(&w, &b);
		run_script(&w, incomplete[i]);
		ok(!w.failed && json_w_finish(&w) == -1, "incomplete \"%s\" does not finish", incomplete[i]);
		buf_release(&b);
	}

	/* A failed builder stays failed and writes nothing more. */
	struct buf b = BUF_INIT;
	struct json_w w;
	json_w_init(&w, &b);
	run_script(&w, "{v");
	size_t len = b.len;
	run_script(&w, "kv}");
	ok(w.failed && b.len == len, "after a failure, calls do nothing");
	buf_release(&b);

	/* Running out of room in the buffer is a failure too. */
	buf_init(&b, 4);
	json_w_init(&w, &b);
	json_w_str(&w, "too long");
	ok(w.failed && json_w_finish(&w) == -1, "buffer cap reached: failed");
	buf_release(&b);
}

int main(void)
{
	test_document();
	test_depth();
	test_misuse();
	return tap_done();
}
