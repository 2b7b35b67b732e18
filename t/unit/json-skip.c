/* Unit tests: json_skip finds where one value ends, strictly, without building it;
 * json_check also refuses what only json_parse would (duplicate keys, huge numbers). */
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/err.h"
#include "json/json.h"
#include "tap.h"

static const struct {
	const char *text;
	long end;	/* -1: refused */
	unsigned depth;
} cases[] = {
	{ "1", 1, 0 },
	{ "  -0.5e+3 ", 9, 0 },
	{ "\"a\\\"b\" tail", 6, 0 },
	{ "true,", 4, 0 },
	{ "null]", 4, 0 },
	{ "{}", 2, 0 },
	{ "[ ]", 3, 0 },
	{ "{\"a\":[1,{\"b\":\"}\"}],\"c\":{}} x", 26, 0 },
	{ "[[[1]]]", 7, 3 },
	{ "[[[1]]]", -1, 2 },
	{ "\"\\ud83d\\ude00\"", 14, 0 },
	{ "\"\xc3\xa9\"", 4, 0 },
	/* json_skip leaves these two to json_parse (it needs the values) */
	{ "{\"a\":1,\"a\":2}", 13, 0 },
	{ "1e999", 5, 0 },
	/* refused */
	{ "", -1, 0 },
	{ "   ", -1, 0 },
	{ "01", -1, 0 },
	{ "-", -1, 0 },
	{ "1.", -1, 0 },
	{ "1e", -1, 0 },
	{ ".5", -1, 0 },
	{ "tru", -1, 0 },
	{ "nul", -1, 0 },
	{ "[1,]", -1, 0 },
	{ "[1 2]", -1, 0 },
	{ "{\"a\"}", -1, 0 },
	{ "{\"a\":1,}", -1, 0 },
	{ "{1:2}", -1, 0 },
	{ "{\"a\":1", -1, 0 },
	{ "[", -1, 0 },
	{ "\"abc", -1, 0 },
	{ "\"a\x01\"", -1, 0 },
	{ "\"\\x\"", -1, 0 },
	{ "\"\\u12\"", -1, 0 },
	{ "\"\\udc00\"", -1, 0 },
	{ "\"\\ud800\"", -1, 0 },
	{ "\"\\ud800\\u0041\"", -1, 0 },
	{ "\"\xff\"", -1, 0 },
	{ "\"\xc3\"", -1, 0 },
	{ "\xef\xbb\xbf{}", -1, 0 },
	{ "[}", -1, 0 },
	{ "{]", -1, 0 },
};

static void test_cases(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t end = 0;
		int rc = json_skip(cases[i].text, strlen(cases[i].text), cases[i].depth, &end);
		if (cases[i].end < 0)
			ok(rc < 0, "refused: %s", cases[i].text);
		else
			ok(rc == 0 && end == (size_t)cases[i].end, "%s: ends at %ld (got %d, %zu)", cases[i].text,
			   cases[i].end, rc, end);
	}
}

/* Every prefix of a document is refused (no read past the length). */
static void test_prefixes(void)
{
	const char *doc = "{\"ops\":[{\"put\":\"t\",\"id\":\"\\u00e9\",\"row\":{\"a\":[1,2.5,true,null,\"x\"]}}]}";
	size_t n = strlen(doc), end = 0;
	int bad = 0;

	for (size_t k = 0; k < n; k++) {
		char buf[256];
		memcpy(buf, doc, k);
		if (json_skip(buf, k, 0, &end) == 0)
			bad++;
	}
	is_int(bad, 0, "no proper prefix of a document is a value");
	ok(json_skip(doc, n, 0, &end) == 0 && end == n, "the whole document is");
}

/* Deep nesting is bounded by the limit, not by the C stack. */
static void test_depth(void)
{
	char buf[2 * JSON_SKIP_DEPTH_MAX + 8];
	size_t end = 0, d = JSON_SKIP_DEPTH_MAX;

	memset(buf, '[', d);
	memset(buf + d, ']', d);
	ok(json_skip(buf, 2 * d, 0, &end) == 0 && end == 2 * d, "%zu levels: the most it follows", d);
	memset(buf, '[', d + 1);
	memset(buf + d + 1, ']', d + 1);
	ok(json_skip(buf, 2 * d + 2, 0, &end) < 0, "one more is refused");
}

/* json_check: what it accepts json_parse accepts; what it cannot vouch for it refuses. */
static const struct {
	const char *text;
	int ok;
} checks[] = {
	{ "{\"a\":1,\"b\":{\"a\":2},\"c\":[{\"a\":3},{\"a\":4}]}", 1 },	/* one key in several objects */
	{ "{\"a\":1,\"a\":2}", 0 },
	{ "{\"a\":{\"x\":1,\"y\":2,\"x\":3}}", 0 },
	{ "[{\"a\":1},{\"b\":1,\"b\":2}]", 0 },
	{ "{\"a\":{\"b\":1},\"b\":2}", 1 },	/* b inside a, then b beside a */
	{ "{\"a\":{},\"a\":1}", 0 },		/* an empty object's key still counts */
	{ "{\"\\u0061\":1}", 0 },		/* escaped key: not vouched for */
	{ "1e307", 1 },
	{ "-9.99e307", 1 },
	{ "1e308", 0 },				/* fits, but at the bound */
	{ "1e999", 0 },
	{ "0.0000001e310", 0 },
	{ "123e-400", 1 },			/* underflow is fine for json_parse */
	{ "[1,2.5,true,null,\"\\n\"]", 1 },
	{ "01", 0 },
};

static void test_check(void)
{
	struct buf big = BUF_INIT;
	size_t end = 0;

	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		size_t n = strlen(checks[i].text);
		struct json *v = NULL;
		struct err e;
		int rc = json_check(checks[i].text, n, 0, &end);
		ok((rc == 0) == checks[i].ok && (rc < 0 || end == n), "json_check %s: %s", checks[i].ok ? "accepts" : "refuses",
		   checks[i].text);
		if (rc == 0)
			ok(json_parse(checks[i].text, n, NULL, &v, &e) == 0, "and json_parse agrees");
		json_free(v);
	}
	buf_addch(&big, '{');
	for (int k = 0; k <= JSON_CHECK_KEYS_MAX; k++)
		buf_addf(&big, "%s\"k%d\":%d", k ? "," : "", k, k);
	buf_addch(&big, '}');
	ok(json_check(big.data, big.len, 0, &end) < 0 && json_skip(big.data, big.len, 0, &end) == 0,
	   "more keys than it keeps: refused by json_check, not by json_skip");
	buf_release(&big);
}

int main(void)
{
	test_cases();
	test_prefixes();
	test_depth();
	test_check();
	return tap_done();
}
