/* Unit tests: json_parse, data-driven, plus limits, round trips and a speed figure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json/json.h"
#include "tap.h"

/*
 * One document and what parsing it must give: either the tree, shown as the
 * compact writer prints it (and, for numbers, the node type), or the exact
 * error message. len 0 means strlen(in) (inputs with NUL bytes give it).
 */
struct pcase {
	const char *in;
	size_t len;
	const char *out;	/* compact text of the tree, or NULL */
	int type;		/* root type to check, or -1 */
	const char *err;	/* exact error message, or NULL */
};

#define OK(in, out) { in, 0, out, -1, NULL }
#define OKT(in, out, t) { in, 0, out, t, NULL }
#define ERR(in, err) { in, 0, NULL, -1, err }

static const struct pcase cases[] = {
	/* scalars and containers */
	OKT("null", "null", JSON_NULL),
	OKT("true", "true", JSON_BOOL),
	OKT("false", "false", JSON_BOOL),
	OKT("0", "0", JSON_INT),
	OKT("-0", "0", JSON_INT),
	OKT("42", "42", JSON_INT),
	OKT("\"\"", "\"\"", JSON_STRING),
	OKT("[]", "[]", JSON_ARRAY),
	OKT("{}", "{}", JSON_OBJECT),
	OK("[1,[2,[3,{}]],{\"a\":[]}]", "[1,[2,[3,{}]],{\"a\":[]}]"),
	OK("{\"b\":1,\"a\":2,\"c\":{\"d\":null}}", "{\"b\":1,\"a\":2,\"c\":{\"d\":null}}"),
	OK("{\"\":1}", "{\"\":1}"),

	/* whitespace: exactly space, tab, CR, LF */
	OK(" \t\r\n[ 1 ,\t2\r\n]\n ", "[1,2]"),
	OK("{ \"a\" : 1 , \"b\"\n:\n2 }", "{\"a\":1,\"b\":2}"),
	ERR("\f1", "1:1: expected a value, found byte 0x0c"),
	ERR("[1,\v2]", "1:4: expected a value, found byte 0x0b"),
	ERR("\xc2\xa0" "1", "1:1: expected a value, found character U+00A0"),
	ERR("", "1:1: empty input: expected a JSON value"),
	ERR("  \n ", "2:2: unexpected end of input: expected a value"),

	/* numbers */
	OKT("9223372036854775807", "9223372036854775807", JSON_INT),
	OKT("-9223372036854775808", "-9223372036854775808", JSON_INT),
	OKT("9223372036854775808", "9.223372036854776e+18", JSON_DOUBLE),
	OKT("-9223372036854775809", "-9.223372036854776e+18", JSON_DOUBLE),
	OKT("12345678901234567890", "1.2345678901234567e+19", JSON_DOUBLE),
	OKT("1.5", "1.5", JSON_DOUBLE),
	OKT("-0.25", "-0.25", JSON_DOUBLE),
	OKT("1e3", "1000", JSON_DOUBLE),
	OKT("1E+2", "100", JSON_DOUBLE),
	OKT("25e-1", "2.5", JSON_DOUBLE),
	OKT("0.1", "0.1", JSON_DOUBLE),
	OKT("0.30000000000000004", "0.30000000000000004", JSON_DOUBLE),
	OKT("3.141592653589793", "3.141592653589793", JSON_DOUBLE),
	OKT("1.7976931348623157e308", "1.7976931348623157e+308", JSON_DOUBLE),
	OKT("5e-324", "4.94065645841247e-324", JSON_DOUBLE),
	OKT("1e-400", "0", JSON_DOUBLE),
	OKT("-1e-400", "-0", JSON_DOUBLE),
	OKT("0e99999999999", "0", JSON_DOUBLE),
	OKT("0.000001234", "1.234e-06", JSON_DOUBLE),
	OKT("123456789012345678901234567890e-20", "1234567890.1234567", JSON_DOUBLE),
	ERR("1e400", "1:1: number out of range"),
	ERR("[0, -1e400]", "1:5: number out of range"),
	ERR("1.8e308", "1:1: number out of range"),
	ERR("01", "1:2: leading zeros are not allowed in numbers"),
	ERR("-01", "1:3: leading zeros are not allowed in numbers"),
	ERR("00.5", "1:2: leading zeros are not allowed in numbers"),
	ERR("-", "1:2: expected a digit after '-'"),
	ERR("-a", "1:2: expected a digit after '-'"),
	ERR("1.", "1:3: expected a digit after '.'"),
	ERR("1.e5", "1:3: expected a digit after '.'"),
	ERR(".5", "1:1: a number must have a digit before '.'"),
	ERR("+1", "1:1: a number may not start with '+'"),
	ERR("1e", "1:3: expected a digit in the exponent"),
	ERR("1e+", "1:4: expected a digit in the exponent"),
	ERR("NaN", "1:1: NaN is not a JSON value"),
	ERR("[Infinity]", "1:2: Infinity is not a JSON value"),
	ERR("-Infinity", "1:2: expected a digit after '-'"),
	ERR("0x10", "1:2: unexpected data after the top-level value (a JSON text holds exactly one value)"),

	/* literals */
	ERR("tru", "1:1: invalid literal (expected true, false or null)"),
	ERR("nul", "1:1: invalid literal (expected true, false or null)"),
	ERR("True", "1:1: expected a value, found 'T'"),
	ERR("truex", "1:5: unexpected data after the top-level value (a JSON text holds exactly one value)"),

	/* structure */
	ERR("[1,]", "1:4: trailing comma before ']'"),
	ERR("[1,\n  ]", "2:3: trailing comma before ']'"),
	ERR("{\"a\":1,}", "1:8: trailing comma before '}'"),
	ERR("[,1]", "1:2: expected a value, found ','"),
	ERR("[1 2]", "1:4: expected ',' or ']' in array, found '2'"),
	ERR("{\"a\" 1}", "1:6: expected ':' after the key, found '1'"),
	ERR("{\"a\":1 \"b\":2}", "1:8: expected ',' or '}' in object, found '\"'"),
	ERR("{a:1}", "1:2: expected a string key in double quotes, found 'a'"),
	ERR("{1:1}", "1:2: expected a string key in double quotes, found '1'"),
	ERR("{'a':1}", "1:2: strings must be in double quotes, not single quotes"),
	ERR("'a'", "1:1: strings must be in double quotes, not single quotes"),
	ERR("[1", "1:3: expected ',' or ']' in array, found end of input"),
	ERR("{\"a\":1", "1:7: expected ',' or '}' in object, found end of input"),
	ERR("{\"a\":", "1:6: unexpected end of input: expected a value"),
	ERR("]", "1:1: expected a value, found ']'"),
	ERR("[1]]", "1:4: unexpected data after the top-level value (a JSON text holds exactly one value)"),
	ERR("1 2", "1:3: unexpected data after the top-level value (a JSON text holds exactly one value)"),
	ERR("{} {}", "1:4: unexpected data after the top-level value (a JSON text holds exactly one value)"),
	ERR("[1] // one", "1:5: unexpected data after the top-level value (a JSON text holds exactly one value)"),
	ERR("// c\n1", "1:1: comments are not allowed in JSON"),
	ERR("[1, /* c */ 2]", "1:5: comments are not allowed in JSON"),
	ERR("{\"a\":1,\"b\":2,\"a\":3}", "1:14: duplicate key \"a\""),
	ERR("{\"x\":{\"x\":1,\"x\":2}}", "1:13: duplicate key \"x\""),
	ERR("{\"a\\u0000\":1,\"a\\u0000\":2}", "1:14: duplicate key \"a\\u0000\""),
	OK("{\"a\":1,\"A\":2,\"a \":3,\"b\":{\"a\":4}}", "{\"a\":1,\"A\":2,\"a \":3,\"b\":{\"a\":4}}"),

	/* strings and escapes */
	OK("\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"", "\"\\\" \\\\ / \\b \\f \\n \\r \\t\""),
	OK("\"\\u0041\\u00e9\\u20AC\"", "\"A\xc3\xa9\xe2\x82\xac\""),
	OK("\"\\u0000\"", "\"\\u0000\""),
	OK("\"\\u001f\\u007f\"", "\"\\u001f\x7f\""),
	OK("\"\\ud83d\\ude00\"", "\"\xf0\x9f\x98\x80\""),
	OK("\"\\uD800\\uDC00\\uDBFF\\uDFFF\"", "\"\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\""),
	OK("\"a\\ud83d\\ude00b\"", "\"a\xf0\x9f\x98\x80" "b\""),
	OK("\"\xf0\x9f\x98\x80 caf\xc3\xa9\"", "\"\xf0\x9f\x98\x80 caf\xc3\xa9\""),
	OK("\"\xef\xbb\xbf\"", "\"\xef\xbb\xbf\""),
	OK("\"\\u2028\"", "\"\xe2\x80\xa8\""),
	ERR("\"\\ud800\"", "1:2: lone high surrogate \\ud800 (it must be followed by a low surrogate escape \\udc00-\\udfff)"),
	ERR("\"\\ud800x\\udc00\"", "1:2: lone high surrogate \\ud800 (it must be followed by a low surrogate escape \\udc00-\\udfff)"),
	ERR("\"\\udc00\"", "1:2: lone low surrogate \\udc00 (it must follow a high surrogate \\ud800-\\udbff)"),
	ERR("\"\\udc00\\ud800\"", "1:2: lone low surrogate \\udc00 (it must follow a high surrogate \\ud800-\\udbff)"),
	ERR("\"\\ud800\\u0041\"", "1:8: high surrogate \\ud800 followed by \\u0041, which is not a low surrogate"),
	ERR("\"\\ud800\\ud800\"", "1:8: high surrogate \\ud800 followed by \\ud800, which is not a low surrogate"),
	ERR("\"\\ud800\\u12\"", "1:8: invalid \\u escape: expected 4 hex digits"),
	ERR("\"\\x41\"", "1:2: invalid escape: backslash followed by 'x' (allowed: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)"),
	ERR("\"\\'\"", "1:2: invalid escape: backslash followed by ''' (allowed: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)"),
	ERR("\"ab\\u12\"", "1:4: invalid \\u escape: expected 4 hex digits"),
	ERR("\"\\u12", "1:2: invalid \\u escape: expected 4 hex digits"),
	ERR("\"\\uZZZZ\"", "1:2: invalid \\u escape: expected 4 hex digits"),
	ERR("\"\\", "1:1: unterminated string"),
	ERR("\"abc", "1:1: unterminated string"),
	ERR("[\"a\\n", "1:2: unterminated string"),
	ERR("\"a\nb\"", "1:3: control character 0x0a in a string must be escaped"),
	ERR("\"\\n\tb\"", "1:4: control character 0x09 in a string must be escaped"),
	ERR("\"\x01\"", "1:2: control character 0x01 in a string must be escaped"),

	/* UTF-8 */
	ERR("\"\xff\"", "1:2: invalid UTF-8 byte 0xff in string"),
	ERR("\"ab\xc3\"", "1:4: invalid UTF-8 byte 0xc3 in string"),
	ERR("\"\xc0\xaf\"", "1:2: invalid UTF-8 byte 0xc0 in string"),
	ERR("\"\xed\xa0\x80\"", "1:2: invalid UTF-8 byte 0xed in string"),
	ERR("\"\xf4\x90\x80\x80\"", "1:2: invalid UTF-8 byte 0xf4 in string"),
	ERR("\"\\n\x80\"", "1:4: invalid UTF-8 byte 0x80 in string"),
	ERR("{\"k\xff\":1}", "1:4: invalid UTF-8 byte 0xff in string"),
	ERR("\xff", "1:1: invalid UTF-8 byte 0xff"),
	ERR("[1,\xff]", "1:4: invalid UTF-8 byte 0xff"),
	ERR("1 \xe2\x82", "1:3: invalid UTF-8 byte 0xe2"),
	ERR("[1]\n\xc3\xa9", "2:1: unexpected data after the top-level value (a JSON text holds exactly one value)"),

	/* BOM */
	ERR("\xef\xbb\xbf{}", "1:1: byte order mark (U+FEFF) at the start: RFC 8259 forbids it in JSON text; remove it"),
	ERR("[\xef\xbb\xbf]", "1:2: expected a value, found character U+FEFF"),

	/* positions count lines from 1 and bytes within a line from 1 */
	ERR("{\n  \"a\": 1,\n  \"b\": tru\n}", "3:8: invalid literal (expected true, false or null)"),
	ERR("[\r\n1,\r\n2,]", "3:3: trailing comma before ']'"),
};

static void run_case(const struct pcase *c)
{
	struct json *v = NULL;
	struct err e;
	size_t len = c->len ? c->len : strlen(c->in);
	int rc;

	/* An exact-size heap copy, so that ASan catches any read past the end
	 * (a string literal would hand the parser a NUL byte to stumble on). */
	char *in = xmemdup(c->in, len);
	err_clear(&e);
	rc = json_parse(in, len, NULL, &v, &e);
	free(in);
	if (c->err) {
		if (!ok(rc == -1 && v == NULL, "refused: %s", c->err))
			return;
		is_str(e.msg, c->err, "  message");
		return;
	}
	if (!ok(rc == 0 && v, "parses: %s", c->out)) {
		tap_diag("error: %s", e.msg);
		return;
	}
	char *got = json_to_string(v, JSON_COMPACT);
	is_str(got, c->out, "  tree");
	if (c->type >= 0)
		is_str(json_type_name(v->type), json_type_name((enum json_type)c->type), "  type");

	/* Round trip, compact and pretty: parse(write(v)) equals v. */
	for (int flags = JSON_COMPACT; flags <= JSON_PRETTY; flags++) {
		char *txt = json_to_string(v, flags);
		struct json *w = NULL;
		ok(txt && json_parse(txt, strlen(txt), NULL, &w, &e) == 0 && json_equal(v, w),
		   "  round trip %s", flags ? "pretty" : "compact");
		json_free(w);
		free(txt);
	}
	free(got);
	json_free(v);
}

static void test_table(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i]);
}

/* A raw NUL inside a string is a control character; outside, an unexpected byte. */
static void test_nul(void)
{
	struct json *v = (struct json *)1;
	struct err e;

	ok(json_parse("\"a\0b\"", 5, NULL, &v, &e) == -1 && v == NULL, "raw NUL in a string refused");
	is_str(e.msg, "1:3: control character 0x00 in a string must be escaped", "  message");
	ok(json_parse("1\0", 2, NULL, &v, &e) == -1, "NUL after a value refused");
	is_str(e.msg, "1:2: unexpected data after the top-level value (a JSON text holds exactly one value)", "  message");
	ok(json_parse("\"\\u0000\"", 8, NULL, &v, &e) == 0 && v->u.str.len == 1 && v->u.str.s[0] == '\0',
	   "\\u0000 kept as a NUL byte with length 1");
	json_free(v);
}

static char *repeat(const char *a, size_t n, const char *mid, const char *b)
{
	struct buf x = BUF_INIT;

	for (size_t i = 0; i < n; i++)
		buf_adds(&x, a);
	buf_adds(&x, mid);
	for (size_t i = 0; i < n; i++)
		buf_adds(&x, b);
	return buf_detach(&x, NULL);
}

static void test_depth(void)
{
	struct json *v = NULL;
	struct err e;
	struct json_limits lim = { 0 };
	char *s;

	s = repeat("[", 128, "1", "]");
	ok(json_parse(s, strlen(s), NULL, &v, &e) == 0, "arrays nested 128 deep: accepted");
	json_free(v);
	free(s);
	s = repeat("[", 129, "1", "]");
	ok(json_parse(s, strlen(s), NULL, &v, &e) == -1, "arrays nested 129 deep: refused");
	is_str(e.msg, "1:129: nesting deeper than 128", "  message");
	free(s);
	s = repeat("{\"a\":", 128, "{}", "}");
	ok(json_parse(s, strlen(s), NULL, &v, &e) == -1, "objects nested 129 deep: refused");
	is_str(e.msg, "1:641: nesting deeper than 128", "  message");
	free(s);
	s = repeat("{\"a\":[", 64, "1", "]}");
	ok(json_parse(s, strlen(s), NULL, &v, &e) == 0, "mixed nesting 128 deep: accepted");
	json_free(v);
	free(s);

	/* Far past any limit: no crash, no recursion, a clean refusal. */
	s = repeat("[", 1000000, "", "");
	ok(json_parse(s, strlen(s), NULL, &v, &e) == -1, "a million open brackets: refused");
	is_str(e.msg, "1:129: nesting deeper than 128", "  message");
	free(s);

	lim.max_depth = 2;
	ok(json_parse("[[1]]", 5, &lim, &v, &e) == 0, "max_depth 2: depth 2 accepted");
	json_free(v);
	ok(json_parse("[[[1]]]", 7, &lim, &v, &e) == -1, "max_depth 2: depth 3 refused");
	is_str(e.msg, "1:3: nesting deeper than 2", "  message");

	/* A caller may allow far deeper trees; building, writing and freeing
	 * them must not recurse on the C stack either. */
	lim.max_depth = 200000;
	s = repeat("[", 200000, "", "]");
	if (ok(json_parse(s, strlen(s), &lim, &v, &e) == 0, "max_depth 200000: 200000 deep accepted")) {
		char *t = json_to_string(v, JSON_COMPACT);
		ok(t && strcmp(t, s) == 0, "  and written back the same");
		free(t);
	}
	json_free(v);
	free(s);
}

static void test_size(void)
{
	struct json *v = NULL;
	struct err e;
	struct json_limits lim = { 0, 5 };

	ok(json_parse("[1,2]", 5, &lim, &v, &e) == 0, "max_size 5: 5 bytes accepted");
	json_free(v);
	ok(json_parse("[1,22]", 6, &lim, &v, &e) == -1, "max_size 5: 6 bytes refused");
	is_str(e.msg, "1:6: input is larger than the limit of 5 bytes", "  message");
	ok(json_parse("[1,\n 2]", 7, &lim, &v, &e) == -1, "max_size 5: 7 bytes refused");
	is_str(e.msg, "2:2: input is larger than the limit of 5 bytes", "  message");
}

/* Objects large enough to use the hash index for the duplicate check. */
static void test_big_objects(void)
{
	struct buf b = BUF_INIT;
	struct json *v = NULL;
	struct err e;

	buf_addch(&b, '{');
	for (int i = 0; i < 5000; i++)
		buf_addf(&b, "%s\"k%d\":%d", i ? "," : "", i, i);
	buf_addch(&b, '}');
	ok(json_parse(b.data, b.len, NULL, &v, &e) == 0 && json_len(v) == 5000, "5000 distinct keys");
	ok(json_get_int(v, "k4321", -1) == 4321 && json_get_int(v, "k0", -1) == 0, "  members in place");
	ok(json_len(v) == 5000 && strcmp(v->u.obj.m[4999].key, "k4999") == 0, "  in input order");
	json_free(v);
	buf_truncate(&b, b.len - 1);
	buf_adds(&b, ",\"k2500\":0}");
	ok(json_parse(b.data, b.len, NULL, &v, &e) == -1, "5001st key repeating the 2501st: refused");
	ok(strstr(e.msg, ": duplicate key \"k2500\"") != NULL, "  message: %s", e.msg);
	buf_release(&b);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Parse speed on ~10 MB of records like the store's: a figure, not a test of time. */
static void test_speed(void)
{
	struct buf b = BUF_INIT;
	struct json *v = NULL;
	struct err e;
	double best = 1e9;
	size_t n = 0;

	buf_addch(&b, '[');
	while (b.len < (size_t)10 << 20) {
		buf_addf(&b, "%s{\"id\":%zu,\"name\":\"env-%zu\",\"team\":\"t%zu\",\"phase\":\"running\","
			 "\"ok\":true,\"cpu\":%zu,\"mem\":%zu,\"tags\":[\"a\",\"bc\"],\"parent\":null}",
			 n ? "," : "", n * 7919, n, n % 97, n % 16, n * 1024 % 65536);
		n++;
	}
	buf_addch(&b, ']');
	for (int round = 0; round < 3; round++) {
		double t0 = now(), dt;
		int rc = json_parse(b.data, b.len, NULL, &v, &e);
		dt = now() - t0;
		if (!ok(rc == 0 && json_len(v) == n, "speed document (%zu records, %zu bytes) parses", n, b.len))
			break;
		json_free(v);
		if (dt < best)
			best = dt;
	}
	tap_diag("parse speed: %.0f MB/s (%zu bytes in %.1f ms, best of 3)",
		 (double)b.len / best / 1e6, b.len, best * 1e3);
	buf_release(&b);
}

static void test_file(void)
{
	char path[600], missing[600];
	struct json *v = NULL;
	struct err e;
	FILE *f;

	snprintf(path, sizeof(path), "%s/doc.json", tap_tmpdir());
	snprintf(missing, sizeof(missing), "%s/none.json", tap_tmpdir());
	f = fopen(path, "w");
	fputs("{\"a\": [1, 2]}\n", f);
	fclose(f);
	ok(json_parse_file(path, 1024, &v, &e) == 0 && json_len(json_get(v, "a")) == 2, "a file parses");
	json_free(v);
	ok(json_parse_file(path, 4, &v, &e) < 0 && !v, "a file over the cap is refused: %s", e.msg);
	ok(json_parse_file(missing, 1024, &v, &e) < 0 && !v, "a missing file: %s", e.msg);
	f = fopen(path, "w");
	fputs("{\"a\":", f);
	fclose(f);
	ok(json_parse_file(path, 1024, &v, &e) < 0 && strstr(e.msg, "1:"), "bad JSON says where: %s", e.msg);
}

int main(void)
{
	test_file();
	test_table();
	test_nul();
	test_depth();
	test_size();
	test_big_objects();
	test_speed();
	return tap_done();
}
