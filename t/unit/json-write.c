/* Unit tests: json_write (compact, pretty), json_write_string, doubles, caps. */
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"
#include "tap.h"

static struct json *sample(void)
{
	struct json *o = json_new_object(), *a = json_new_array(), *in = json_new_object();

	json_object_set_str(o, "name", "env-1");
	json_object_set_int(o, "n", -3);
	json_object_set(o, "pi", json_new_double(3.25));
	json_object_set_bool(o, "ok", true);
	json_object_set(o, "none", json_new_null());
	json_array_push(a, json_new_int(1));
	json_array_push(a, json_new_str("two"));
	json_array_push(a, json_new_array());
	json_array_push(a, json_new_object());
	json_object_set(o, "list", a);
	json_object_set_int(in, "k", 0);
	json_object_set(o, "inner", in);
	json_object_set(o, "empty", json_new_object());
	return o;
}

static void test_compact_pretty(void)
{
	struct json *o = sample();
	char *s;

	s = json_to_string(o, JSON_COMPACT);
	is_str(s, "{\"name\":\"env-1\",\"n\":-3,\"pi\":3.25,\"ok\":true,\"none\":null,"
	       "\"list\":[1,\"two\",[],{}],\"inner\":{\"k\":0},\"empty\":{}}", "compact, byte for byte");
	free(s);
	s = json_to_string(o, JSON_PRETTY);
	is_str(s,
	       "{\n"
	       "  \"name\": \"env-1\",\n"
	       "  \"n\": -3,\n"
	       "  \"pi\": 3.25,\n"
	       "  \"ok\": true,\n"
	       "  \"none\": null,\n"
	       "  \"list\": [\n"
	       "    1,\n"
	       "    \"two\",\n"
	       "    [],\n"
	       "    {}\n"
	       "  ],\n"
	       "  \"inner\": {\n"
	       "    \"k\": 0\n"
	       "  },\n"
	       "  \"empty\": {}\n"
	       "}\n", "pretty, byte for byte");
	free(s);
	json_free(o);

	s = json_to_string(NULL, JSON_COMPACT);
	is_str(s, "null", "NULL tree writes null");
	free(s);
	o = json_new_int(7);
	s = json_to_string(o, JSON_PRETTY);
	is_str(s, "7\n", "pretty scalar ends with a newline");
	free(s);
	json_free(o);
	o = json_new_array();
	s = json_to_string(o, JSON_PRETTY);
	is_str(s, "[]\n", "pretty empty array");
	free(s);
	json_free(o);
}

/* Deeper than the indentation string: spaces still right. */
static void test_deep_indent(void)
{
	struct json *root = json_new_array(), *a = root;
	struct buf want = BUF_INIT;
	char *s;
	int depth = 40;

	for (int i = 1; i < depth; i++) {
		struct json *b = json_new_array();
		json_array_push(a, b);
		a = b;
	}
	json_array_push(a, json_new_int(1));
	for (int i = 0; i < depth; i++) {
		buf_addch(&want, '[');
		buf_addch(&want, '\n');
		for (int k = 0; k < (i + 1) * 2; k++)
			buf_addch(&want, ' ');
	}
	buf_addch(&want, '1');
	for (int i = depth - 1; i >= 0; i--) {
		buf_addch(&want, '\n');
		for (int k = 0; k < i * 2; k++)
			buf_addch(&want, ' ');
		buf_addch(&want, ']');
	}
	buf_addch(&want, '\n');
	s = json_to_string(root, JSON_PRETTY);
	is_str(s, want.data, "pretty at depth 40 (80 spaces of indent)");
	free(s);
	buf_release(&want);
	json_free(root);
}

struct scase {
	const char *in;
	size_t len;
	const char *want;
	const char *name;
};

static const struct scase strings[] = {
	{ "plain", 5, "\"plain\"", "plain ASCII" },
	{ "", 0, "\"\"", "empty" },
	{ "a\"b\\c/d", 7, "\"a\\\"b\\\\c/d\"", "quote and backslash escaped, slash not" },
	{ "\n\r\t\b\f", 5, "\"\\n\\r\\t\\b\\f\"", "short escapes" },
	{ "\x01\x1f\x7f", 3, "\"\\u0001\\u001f\x7f\"", "other controls as \\u00XX, DEL passes" },
	{ "a\0b", 3, "\"a\\u0000b\"", "NUL byte" },
	{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14, "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"", "valid UTF-8 passes" },
	{ "a\xff" "b", 3, "\"a\\ufffdb\"", "invalid byte replaced" },
	{ "\xc3", 1, "\"\\ufffd\"", "truncated sequence replaced" },
	{ "\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"", "encoded surrogate: each byte replaced" },
	{ "\xc0\xaf", 2, "\"\\ufffd\\ufffd\"", "overlong replaced" },
	{ "\xe2\x80\xa8", 3, "\"\xe2\x80\xa8\"", "U+2028 passes" },
};

static void test_strings(void)
{
	for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
		struct buf b = BUF_INIT;
		ok(json_write_string(&b, strings[i].in, strings[i].len) == 0, "write_string: %s", strings[i].name);
		is_str(b.data, strings[i].want, "  output");
		buf_release(&b);
	}
}

struct dcase {
	double d;
	const char *want;
};

static void test_doubles(void)
{
	const struct dcase dc[] = {
		{ 0.1, "0.1" }, { 1.0 / 3, "0.3333333333333333" }, { 2.0 / 3, "0.6666666666666666" },
		{ 0.1 + 0.2, "0.30000000000000004" }, { 100.0, "100" }, { 1.5, "1.5" }, { -2.5e-8, "-2.5e-08" },
		{ 1e300, "1e+300" }, { 5e-324, "4.94065645841247e-324" }, { 1.7976931348623157e308, "1.7976931348623157e+308" },
		{ -0.0, "-0" }, { 123456789.125, "123456789.125" }, { 9007199254740993.0, "9007199254740992" },
	};

	for (size_t i = 0; i < sizeof(dc) / sizeof(dc[0]); i++) {
		struct json *v = json_new_double(dc[i].d), *back = NULL;
		struct err e;
		char *s = json_to_string(v, JSON_COMPACT);
		is_str(s, dc[i].want, "double");
		ok(json_parse(s, strlen(s), NULL, &back, &e) == 0 &&
		   (back->type == JSON_INT ? (double)back->u.i : back->u.d) == dc[i].d, "  reads back exactly");
		json_free(back);
		json_free(v);
		free(s);
	}

	struct json *a = json_new_array();
	json_array_push(a, json_new_double(NAN));
	json_array_push(a, json_new_double(INFINITY));
	json_array_push(a, json_new_double(-INFINITY));
	char *s = json_to_string(a, JSON_COMPACT);
	is_str(s, "[null,null,null]", "non-finite doubles become null");
	free(s);
	json_free(a);

	a = json_new_int(INT64_MIN);
	s = json_to_string(a, JSON_COMPACT);
	is_str(s, "-9223372036854775808", "INT64_MIN");
	free(s);
	json_free(a);
}

/* A locale with a decimal comma must not change the output or the parse. */
static void test_locale(void)
{
	const char *names[] = { "de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "de_DE" };
	const char *got = NULL;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !got; i++)
		got = setlocale(LC_NUMERIC, names[i]);
	if (!got) {
		ok(1, "# SKIP no locale with a decimal comma installed");
		return;
	}
	struct json *v = json_new_double(0.30000000000000004), *back = NULL;
	struct err e;
	char *s = json_to_string(v, JSON_COMPACT);
	is_str(s, "0.30000000000000004", "decimal comma locale: writer still uses '.'");
	ok(json_parse("[0.30000000000000004, 1.5]", 26, NULL, &back, &e) == 0 &&
	   json_at(back, 0)->u.d == 0.30000000000000004 && json_at(back, 1)->u.d == 1.5,
	   "decimal comma locale: parser still reads '.'");
	json_free(back);
	free(s);
	json_free(v);
	setlocale(LC_NUMERIC, "C");
}

static void test_cap(void)
{
	struct buf b;
	struct json *o = json_new_object();

	json_object_set_str(o, "k", "0123456789abcdef");
	buf_init(&b, 10);
	buf_adds(&b, "pre");
	ok(json_write(&b, o, JSON_COMPACT) == -1, "writing past the buffer's cap fails");
	is_str(b.data, "pre", "  and leaves the buffer as it was");
	ok(json_write_string(&b, "0123456789", 10) == -1, "write_string past the cap fails");
	is_str(b.data, "pre", "  and leaves the buffer as it was");
	buf_release(&b);
	json_free(o);
}

/* json_dup and json_equal on what the writers rely on. */
static void test_dom(void)
{
	struct json *a = sample(), *b = json_dup(a), *c;

	ok(json_equal(a, b), "dup equals the original");
	json_object_set_int(b, "n", -4);
	ok(!json_equal(a, b), "a changed member makes them differ");
	json_free(b);
	c = json_new_object();
	json_object_set_int(c, "y", 2);
	json_object_set_int(c, "x", 1);
	b = json_new_object();
	json_object_set_int(b, "x", 1);
	json_object_set(b, "y", json_new_double(2.0));
	ok(json_equal(b, c), "member order ignored; 2 equals 2.0");
	json_free(a);
	json_free(b);
	json_free(c);
}

int main(void)
{
	test_compact_pretty();
	test_deep_indent();
	test_strings();
	test_doubles();
	test_locale();
	test_cap();
	test_dom();
	return tap_done();
}
