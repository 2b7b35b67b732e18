/*
 * Unit tests: a table of small YAML texts and the JSON each must give, one
 * or more per feature and per typing rule of yaml.h. Comparison keeps number
 * types apart (1 is an integer, 1.0 a double).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"
#include "tap.h"
#include "yaml/yaml.h"
#include "yaml-util.h"

struct tcase {
	const char *name;
	const char *yaml;
	const char *json;
};

static const struct tcase cases[] = {
	/* block mappings and sequences */
	{ "mapping", "a: 1\nb: two\n", "{\"a\":1,\"b\":\"two\"}" },
	{ "nested mappings", "a:\n  b:\n    c:\n      d: 1\n", "{\"a\":{\"b\":{\"c\":{\"d\":1}}}}" },
	{ "sequence", "- a\n- b\n", "[\"a\",\"b\"]" },
	{ "indented sequence under a key", "a:\n  - x\n  - y\nb: 1\n", "{\"a\":[\"x\",\"y\"],\"b\":1}" },
	{ "sequence at its key's indentation", "a:\n- x\n- y\nb: 1\n", "{\"a\":[\"x\",\"y\"],\"b\":1}" },
	{ "nested, same-indentation sequence", "s:\n  a:\n  - 1\n  b:\n  - 2\nt: 3\n",
	  "{\"s\":{\"a\":[1],\"b\":[2]},\"t\":3}" },
	{ "compact sequence of mappings", "- a: 1\n  b: 2\n- c: 3\n", "[{\"a\":1,\"b\":2},{\"c\":3}]" },
	{ "compact mapping with a same-indent sequence", "- a:\n  - x\n  b: 1\n", "[{\"a\":[\"x\"],\"b\":1}]" },
	{ "compact nested sequences", "- - a\n  - b\n- - c\n", "[[\"a\",\"b\"],[\"c\"]]" },
	{ "entry on the next line", "-\n  a: 1\n-\n  - x\n", "[{\"a\":1},[\"x\"]]" },
	{ "wide compact mapping", "-   a: 1\n    b: 2\n", "[{\"a\":1,\"b\":2}]" },
	{ "empty values", "a:\nb: ~\nc:\n", "{\"a\":null,\"b\":null,\"c\":null}" },
	{ "empty sequence entries", "-\n- x\n-\n", "[null,\"x\",null]" },
	{ "indented top-level mapping", "  a: 1\n  b: 2\n", "{\"a\":1,\"b\":2}" },
	{ "key with spaces before the colon", "a   : 1\n", "{\"a\":1}" },
	{ "tab after the colon", "a:\tb\n", "{\"a\":\"b\"}" },
	{ "blank lines with tabs", "a: 1\n\t\n  \t \nb: 2\n", "{\"a\":1,\"b\":2}" },
	/* comments */
	{ "comments everywhere", "# head\na: 1 # c\n# mid\nb:   # c\n  # inner\n  - x # c\n  - 'y' # c\n# tail",
	  "{\"a\":1,\"b\":[\"x\",\"y\"]}" },
	{ "# without a space is content", "a#b: c#d #e\n", "{\"a#b\":\"c#d\"}" },
	{ "comment-only document", "# nothing\n\n", "null" },
	{ "empty document", "", "null" },
	/* documents */
	{ "--- and ...", "---\na: 1\n...\n", "{\"a\":1}" },
	{ "--- with a comment", "--- # c\n- x\n", "[\"x\"]" },
	{ "--- with a scalar", "--- text\n", "\"text\"" },
	{ "--- with a block scalar", "--- |\n  text\n", "\"text\\n\"" },
	{ "--- alone", "---\n", "null" },
	{ "... then comments", "a\n... # end\n# more\n", "\"a\"" },
	{ "%YAML directive", "%YAML 1.2\n---\nx\n", "\"x\"" },
	{ "BOM at the start", "\xef\xbb\xbf" "a: 1\n", "{\"a\":1}" },
	{ "CRLF line breaks", "a: 1\r\nb: |\r\n  x\r\n  y\r\nc: \"p\r\n  q\"\r\n",
	  "{\"a\":1,\"b\":\"x\\ny\\n\",\"c\":\"p q\"}" },
	{ "no final newline", "a: 1", "{\"a\":1}" },
	/* flow collections */
	{ "flow mapping and sequence", "{ a: 1, b: [x, y], c: {d: e} }", "{\"a\":1,\"b\":[\"x\",\"y\"],\"c\":{\"d\":\"e\"}}" },
	{ "multi-line flow with comments", "a: { b: 1,  # c\n     c: [x,\n   y] }\n", "{\"a\":{\"b\":1,\"c\":[\"x\",\"y\"]}}" },
	{ "closing bracket at the key's column", "a:\n  b: [\n    1,\n  ]\n", "{\"a\":{\"b\":[1]}}" },
	{ "empty flow collections", "a: []\nb: {}\n", "{\"a\":[],\"b\":{}}" },
	{ "trailing commas", "[a, b, ]", "[\"a\",\"b\"]" },
	{ "flow keys without values", "{a, b: 1, c}", "{\"a\":null,\"b\":1,\"c\":null}" },
	{ "flow values left empty", "{a: , b:}", "{\"a\":null,\"b\":null}" },
	{ "single-pair mappings in a sequence", "[a: 1, \"b\":2, c]", "[{\"a\":1},{\"b\":2},\"c\"]" },
	{ "JSON is YAML", "{\"a\":1,\"b\":[true,null,\"x\"],\"c\":{\"d\":-1.5}}",
	  "{\"a\":1,\"b\":[true,null,\"x\"],\"c\":{\"d\":-1.5}}" },
	{ "multi-line plain in flow", "[a b, c\n  d]", "[\"a b\",\"c d\"]" },
	{ "colons and urls in flow", "[a:b, http://x/y, {k: v:w}]", "[\"a:b\",\"http://x/y\",{\"k\":\"v:w\"}]" },
	{ "nested flow", "[[1, [2, {a: [3]}]]]", "[[1,[2,{\"a\":[3]}]]]" },
	{ "tabs in flow", "[1,\t2 ,\t3]", "[1,2,3]" },
	/* plain scalars */
	{ "plain with colons and hashes", "image: redis:7-alpine\nurl: http://x.y/z#frag\n",
	  "{\"image\":\"redis:7-alpine\",\"url\":\"http://x.y/z#frag\"}" },
	{ "multi-line plain folds", "p: this is\n  folded\n\n  text\n", "{\"p\":\"this is folded\\ntext\"}" },
	{ "multi-line plain at the top", "a\nb\n\n\nc", "\"a b\\n\\nc\"" },
	{ "plain continuation with a dash", "a: b\n  - c\n", "{\"a\":\"b - c\"}" },
	{ "plain starting with - ? :", "a: [-a, ?b, :c]\nx: -f\ny: ?z\n", "{\"a\":[\"-a\",\"?b\",\":c\"],\"x\":\"-f\",\"y\":\"?z\"}" },
	{ "plain with inner spaces and trailing blanks", "a: x  y   \n", "{\"a\":\"x  y\"}" },
	{ "unicode", "ключ: значение\nemoji: 😀\n", "{\"ключ\":\"значение\",\"emoji\":\"😀\"}" },
	/* single-quoted */
	{ "single quotes", "a: 'it''s'\n", "{\"a\":\"it's\"}" },
	{ "single-quoted folding", "a: 'x\n  y\n\n  z  '\n", "{\"a\":\"x y\\nz  \"}" },
	{ "single quotes keep backslashes", "a: 'c:\\dir\\n'\n", "{\"a\":\"c:\\\\dir\\\\n\"}" },
	/* double-quoted */
	{ "every escape",
	  "\"\\0\\a\\b\\t\\\t\\n\\v\\f\\r\\e\\ \\\"\\/\\\\\\N\\_\\L\\P\\x41\\u00e9\\U0001F600\"",
	  "\"\\u0000\\u0007\\b\\t\\t\\n\\u000b\\f\\r\\u001b \\\"/\\\\\\u0085\\u00a0\\u2028\\u2029A\\u00e9\\ud83d\\ude00\"" },
	{ "surrogate pair escapes", "\"\\ud83d\\ude00\"", "\"😀\"" },
	{ "\\x is a code point", "\"\\xe9\"", "\"é\"" },
	{ "double-quoted folding", "a: \"x\n   y\n\n   z\"\n", "{\"a\":\"x y\\nz\"}" },
	{ "escaped line break", "a: \"x \\\n   y\"\n", "{\"a\":\"x y\"}" },
	{ "escaped line break joins", "a: \"x\\\n   y\"\n", "{\"a\":\"xy\"}" },
	{ "blanks before a break are dropped", "a: \"x   \n  y\"\n", "{\"a\":\"x y\"}" },
	{ "escaped blank before a break is kept", "a: \"x\\ \n  y\"\n", "{\"a\":\"x  y\"}" },
	{ "# inside quotes", "a: \"#x\" # c\n", "{\"a\":\"#x\"}" },
	/* block scalars */
	{ "literal", "s: |\n  line1\n   line2\n\n  line3\n\nk: 1\n", "{\"s\":\"line1\\n line2\\n\\nline3\\n\",\"k\":1}" },
	{ "literal strip", "s: |-\n  x\n\n", "{\"s\":\"x\"}" },
	{ "literal keep", "s: |+\n  x\n\n\nk: 1", "{\"s\":\"x\\n\\n\\n\",\"k\":1}" },
	{ "literal at end of input", "s: |\n  x", "{\"s\":\"x\"}" },
	{ "literal keeps tabs and #", "s: |\n  \tx # not a comment\n", "{\"s\":\"\\tx # not a comment\\n\"}" },
	{ "literal with leading blank lines", "s: |\n\n  \n  x\n", "{\"s\":\"\\n\\nx\\n\"}" },
	{ "space-only lines of an empty folded scalar", "a: >\n   \n\n  \nb: |\n \nc: 1\n", "{\"a\":\"\",\"b\":\"\",\"c\":1}" },
	{ "empty literal", "a: |\nb: 1\n", "{\"a\":\"\",\"b\":1}" },
	{ "empty literal keep", "a: |+\n\nb: 1\n", "{\"a\":\"\\n\",\"b\":1}" },
	{ "literal in a sequence", "- |\n  a\n  b\n- c\n", "[\"a\\nb\\n\",\"c\"]" },
	{ "literal with a comment on the header", "s: | # c\n  x\n", "{\"s\":\"x\\n\"}" },
	{ "folded", "s: >\n  a\n  b\n\n  c\n   d\n  e\n", "{\"s\":\"a b\\nc\\n d\\ne\\n\"}" },
	{ "folded strip", "s: >-\n  python -m app\n  --port 80\n", "{\"s\":\"python -m app --port 80\"}" },
	{ "folded keep", "s: >+\n  a\n  b\n\n", "{\"s\":\"a b\\n\\n\"}" },
	{ "folded more-indented with blank lines", "s: >\n  a\n\n    b\n\n  c\n",
	  "{\"s\":\"a\\n\\n  b\\n\\nc\\n\"}" },
	{ "explicit indentation", "s: |2\n   x\n  y\n", "{\"s\":\" x\\ny\\n\"}" },
	{ "indicators in either order", "a: |2-\n   x\nb: |-2\n   y\nc: >+1\n x\n\n",
	  "{\"a\":\" x\",\"b\":\" y\",\"c\":\"x\\n\\n\"}" },
	{ "top-level literal at column 0", "--- |\nfoo\nbar\n", "\"foo\\nbar\\n\"" },
	{ "block scalar ends at a less-indented comment", "a: |\n  x\n# c\nb: 1\n", "{\"a\":\"x\\n\",\"b\":1}" },
	/* anchors, aliases, merges */
	{ "scalar alias", "a: &x 1\nb: *x\n", "{\"a\":1,\"b\":1}" },
	{ "collection aliases", "a: &a [1, 2]\nb: *a\nc: &m {k: v}\nd: *m\n",
	  "{\"a\":[1,2],\"b\":[1,2],\"c\":{\"k\":\"v\"},\"d\":{\"k\":\"v\"}}" },
	{ "anchor before a block mapping", "a: &x\n  b: 1\nc: *x\n", "{\"a\":{\"b\":1},\"c\":{\"b\":1}}" },
	{ "anchor and tag on their own line", "a: &x !!map\n  b: 1\nc: *x\n", "{\"a\":{\"b\":1},\"c\":{\"b\":1}}" },
	{ "anchored sequence entry", "- &e a\n- *e\n", "[\"a\",\"a\"]" },
	{ "anchor redefined: latest wins", "a: &x 1\nb: *x\nc: &x 2\nd: *x\n", "{\"a\":1,\"b\":1,\"c\":2,\"d\":2}" },
	{ "anchored key, alias as key and value", "&k a: 1\nb:\n  *k : 2\nv: *k\n", "{\"a\":1,\"b\":{\"a\":2},\"v\":\"a\"}" },
	{ "alias key uses the scalar's text", "a: &k 80\nb:\n  *k : x\nc: *k\n", "{\"a\":80,\"b\":{\"80\":\"x\"},\"c\":80}" },
	{ "merge", "b: &b {x: 1, y: 2}\nc:\n  <<: *b\n  y: 3\n", "{\"b\":{\"x\":1,\"y\":2},\"c\":{\"x\":1,\"y\":3}}" },
	{ "explicit key before << wins", "b: &b {x: 1}\nc:\n  x: 0\n  <<: *b\n", "{\"b\":{\"x\":1},\"c\":{\"x\":0}}" },
	{ "merge list: earlier wins", "a: &a {k: a, p: 1}\nb: &b {k: b, q: 2}\nc:\n  <<: [*a, *b]\n",
	  "{\"a\":{\"k\":\"a\",\"p\":1},\"b\":{\"k\":\"b\",\"q\":2},\"c\":{\"k\":\"a\",\"p\":1,\"q\":2}}" },
	{ "merge in a flow mapping", "a: &a {x: 1}\nb: {<<: *a, y: 2}\n", "{\"a\":{\"x\":1},\"b\":{\"x\":1,\"y\":2}}" },
	{ "merge of an inline mapping", "a:\n  <<: {x: 1}\n", "{\"a\":{\"x\":1}}" },
	{ "anchor inside a merge value", "a:\n  <<: &m {x: 1}\nb: *m\n", "{\"a\":{\"x\":1},\"b\":{\"x\":1}}" },
	{ "nested merges", "a: &a {x: 1}\nb: &b\n  <<: *a\n  y: 2\nc:\n  <<: *b\n  z: 3\n",
	  "{\"a\":{\"x\":1},\"b\":{\"x\":1,\"y\":2},\"c\":{\"x\":1,\"y\":2,\"z\":3}}" },
	{ "quoted << is an ordinary key", "\"<<\": 1\n", "{\"<<\":1}" },
	{ "anchor on a flow key re-read as a pair", "[&a x: 1, *a]", "[{\"x\":1},\"x\"]" },
	{ "alias as a flow pair key", "- &k 1\n- [*k : 2]\n", "[1,[{\"1\":2}]]" },
	{ "*a: is an alias key", "a: &a k\nb:\n  *a: x\n", "{\"a\":\"k\",\"b\":{\"k\":\"x\"}}" },
	{ "alias in flow", "a: &a x\nb: [*a, {k: *a}]\n", "{\"a\":\"x\",\"b\":[\"x\",{\"k\":\"x\"}]}" },
	/* core schema */
	{ "null forms", "[~, null, Null, NULL, nULL]", "[null,null,null,null,\"nULL\"]" },
	{ "bool forms", "[true, True, TRUE, false, False, FALSE, tRUE]", "[true,true,true,false,false,false,\"tRUE\"]" },
	{ "YAML 1.1 booleans stay strings", "[yes, no, on, off, y, n]", "[\"yes\",\"no\",\"on\",\"off\",\"y\",\"n\"]" },
	{ "integers", "[0, -12, +3, 007, -0, 0o17, 0x1f, 0xFF, 9223372036854775807, -9223372036854775808]",
	  "[0,-12,3,7,0,15,31,255,9223372036854775807,-9223372036854775808]" },
	{ "integers beyond int64 become doubles", "[9223372036854775808, -9223372036854775809, 0xffffffffffffffffff]",
	  "[9223372036854775808.0,-9223372036854775809.0,4.722366482869645e21]" },
	{ "floats", "[1.5, -2e3, .5, 1., 2E-2, +0.25, 1e3]", "[1.5,-2000.0,0.5,1.0,0.02,0.25,1000.0]" },
	{ "not numbers", "[.inf, -.inf, .nan, .NaN, 1e999, 0x, 0o, 0o8, 1_000, 12:30, 1.2.3, 3.12-slim, 2g, +0x1, e3, .]",
	  "[\".inf\",\"-.inf\",\".nan\",\".NaN\",\"1e999\",\"0x\",\"0o\",\"0o8\",\"1_000\",\"12:30\",\"1.2.3\","
	  "\"3.12-slim\",\"2g\",\"+0x1\",\"e3\",\".\"]" },
	{ "quoted and block scalars are strings", "a: \"1\"\nb: '2'\nc: |-\n  3\nd: \"true\"\ne: ''\n",
	  "{\"a\":\"1\",\"b\":\"2\",\"c\":\"3\",\"d\":\"true\",\"e\":\"\"}" },
	/* keys */
	{ "keys keep their text", "80: a\ntrue: b\nnull: c\n~: d\n1.0: e\n0x10: f\n",
	  "{\"80\":\"a\",\"true\":\"b\",\"null\":\"c\",\"~\":\"d\",\"1.0\":\"e\",\"0x10\":\"f\"}" },
	{ "quoted keys", "'a b': 1\n\"c\\td\": 2\n\"\": 3\n", "{\"a b\":1,\"c\\td\":2,\"\":3}" },
	{ "compact quoted key", "- \"k\": v\n", "[{\"k\":\"v\"}]" },
	/* tags */
	{ "!!str", "[!!str 123, !!str true, !!str , !!str ~]", "[\"123\",\"true\",\"\",\"~\"]" },
	{ "!!int !!float !!bool !!null", "[!!int \"42\", !!float 1, !!float '2.5', !!bool \"false\", !!null '', !!null ~]",
	  "[42,1.0,2.5,false,null,null]" },
	{ "!!map and !!seq", "a: !!map {k: v}\nb: !!seq [1]\nc: !!map\nd: !!seq\n",
	  "{\"a\":{\"k\":\"v\"},\"b\":[1],\"c\":{},\"d\":[]}" },
	{ "non-specific and verbatim tags", "[! 12, !<tag:yaml.org,2002:str> 5, !<tag:yaml.org,2002:int> '6']",
	  "[\"12\",\"5\",6]" },
	{ "tag and anchor in either order", "a: !!str &x 1\nb: &y !!str 2\nc: [*x, *y]\n",
	  "{\"a\":\"1\",\"b\":\"2\",\"c\":[\"1\",\"2\"]}" },
	{ "tag on a block mapping's key", "!!str 1: x\n", "{\"1\":\"x\"}" },
};

/* Built in main: a mapping with many keys (the hashed duplicate check). */
static void test_many_keys(void)
{
	struct buf b = BUF_INIT;
	struct json *v = NULL;
	struct err e;
	bool good = true;

	for (int i = 0; i < 3000; i++)
		buf_addf(&b, "k%d: %d\n", i, i);
	if (!ok(yaml_parse(b.data, b.len, NULL, &v, &e) == 0, "3000 keys parse"))
		tap_diag("%s", e.msg);
	ok(json_len(v) == 3000, "3000 members");
	for (int i = 0; i < 3000 && v; i += 7) {
		char k[16];
		snprintf(k, sizeof(k), "k%d", i);
		good = good && json_get_int(v, k, -1) == i;
	}
	ok(good, "members hold their values");
	json_free(v);
	buf_addf(&b, "k1234: again\n");
	ok(yaml_parse(b.data, b.len, NULL, &v, &e) == -1 && strcmp(e.msg, "3001:1: duplicate key \"k1234\"") == 0,
	   "duplicate found among 3000 keys");
	buf_release(&b);
}

/* Many anchors, some redefined: each alias finds the latest definition. */
static void test_many_anchors(void)
{
	struct buf b = BUF_INIT;
	struct json *v = NULL;
	struct err e;
	bool good = true;

	for (int i = 0; i < 2000; i++)
		buf_addf(&b, "- &a%d %d\n", i % 1500, i);
	for (int i = 0; i < 1500; i++)
		buf_addf(&b, "- *a%d\n", i);
	if (!ok(yaml_parse(b.data, b.len, NULL, &v, &e) == 0, "3500 anchors and aliases parse"))
		tap_diag("%s", e.msg);
	for (int i = 0; i < 1500 && v; i++) {
		int64_t want = i < 500 ? i + 1500 : i;
		const struct json *x = json_at(v, 2000 + (size_t)i);
		good = good && x && x->type == JSON_INT && x->u.i == want;
	}
	ok(good, "every alias names the latest anchor of its name");
	json_free(v);
	buf_release(&b);
}

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct tcase *c = &cases[i];
		struct json *got = NULL, *want = NULL;
		struct err e;

		if (json_parse(c->json, strlen(c->json), NULL, &want, &e) < 0) {
			ok(0, "%s: expected JSON is valid: %s", c->name, e.msg);
			continue;
		}
		if (!ok(yaml_parse(c->yaml, strlen(c->yaml), NULL, &got, &e) == 0, "%s: parses", c->name)) {
			tap_diag("%s", e.msg);
		} else if (!ok(same_typed(got, want), "%s: gives %s", c->name, c->json)) {
			char *s = json_to_string(got, JSON_COMPACT);
			tap_diag("got %s", s);
			free(s);
		}
		json_free(got);
		json_free(want);
	}
	test_many_keys();
	test_many_anchors();
	return tap_done();
}
