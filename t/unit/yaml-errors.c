/*
 * Unit tests: malformed YAML and documents past the limits, each refused
 * with the exact "line:col: reason" a user will read, and nothing returned.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "json/json.h"
#include "tap.h"
#include "yaml/yaml.h"

struct ecase {
	const char *name;
	const char *yaml;
	const char *msg;
};

static const struct ecase cases[] = {
	/* indentation */
	{ "mapping value in a plain scalar's continuation", "a: 1\n  b: 2\n", "2:4: mapping values are not allowed here" },
	{ "mapping value after a value", "services:\n  db:\n    image: a: b\n", "3:13: mapping values are not allowed here" },
	{ "key: key: value", "a: b: c\n", "1:5: mapping values are not allowed here" },
	{ "less indented than the mapping, more than its parent", "a:\n  b: 1\n c: 2\n",
	  "3:2: bad indentation of a mapping entry" },
	{ "more indented after a quoted value", "a: \"x\"\n  b\n", "2:3: bad indentation of a mapping entry" },
	{ "mapping entry after a sequence at the same column", "a:\n  - b\n  c: 1\n", "3:3: bad indentation of a mapping entry" },
	{ "sequence entry indented under a flow entry", "- [a]\n  - b\n", "2:3: bad indentation of a sequence entry" },
	{ "sequence entry in a mapping", "a: 1\n- b\n", "2:1: block sequence entries are not allowed here" },
	{ "sequence after key: on the same line", "key: - x\n", "1:6: block sequence entries are not allowed here" },
	{ "line without a colon in a mapping", "a: 1\nb\n", "2:1: could not find expected ':'" },
	{ "mapping after a top-level sequence", "- a\nb: 1\n",
	  "2:1: unexpected content after the document's top-level node (check the indentation)" },
	{ "tab indentation", "a:\n\tb: 1\n", "2:1: tab characters must not be used for indentation" },
	{ "tab indentation on line 7", "a: 1\nb: 2\nc: 3\nd: 4\ne: 5\nf:\n\tg: 1\n",
	  "7:1: tab characters must not be used for indentation" },
	{ "tab after spaces", "a:\n  b: 1\n  \tc: 2\n", "3:3: tab characters must not be used for indentation" },
	{ "tab indenting a block scalar line", "x: |\n  a\n \tb\n", "3:2: tab characters must not be used for indentation" },
	/* flow */
	{ "unclosed flow sequence", "a: [1, 2\n", "1:4: unclosed flow sequence" },
	{ "unclosed flow sequence before the next key", "a: [1,\n  2\nb: 3\n", "1:4: unclosed flow sequence" },
	{ "unclosed flow mapping", "a: {b: 1\nc: 2\n", "1:4: unclosed flow mapping" },
	{ "unclosed flow at the end of input", "[a, [b]", "1:1: unclosed flow sequence" },
	{ "flow sequence cut by a document marker", "[a,\n---\n]", "1:1: unclosed flow sequence" },
	{ "extra closing bracket", "a: [1, ]]\n", "1:9: unexpected text after a value" },
	{ "empty flow entry", "a: [,]\n", "1:5: unexpected ',' in a flow sequence" },
	{ "missing comma in flow mapping", "{a: 1, b: 2 c: 3}", "1:14: expected ',' or '}' in a flow mapping" },
	{ "missing comma in flow sequence", "[\"a\" \"b\"]", "1:6: expected ',' or ']' in a flow sequence" },
	{ "text after a flow collection", "a: [1] x\n", "1:8: unexpected text after a value" },
	/* quoted scalars and escapes */
	{ "unterminated double-quoted string", "a: \"abc\nb: 1\n", "1:4: unterminated double-quoted string" },
	{ "unterminated single-quoted string", "a: 'abc\n", "1:4: unterminated single-quoted string" },
	{ "quoted string cut by a document marker", "a: \"x\n---\n\"\n", "1:4: unterminated double-quoted string" },
	{ "text after a quoted scalar", "a: \"x\"y\n", "1:7: unexpected text after a value" },
	{ "unknown escape", "a: \"\\q\"\n", "1:5: invalid escape sequence \"\\q\"" },
	{ "short \\x escape", "a: \"\\x4\"\n", "1:5: escape \"\\x\" needs 2 hexadecimal digits" },
	{ "lone surrogate", "a: \"\\ud800\"\n", "1:5: invalid Unicode escape (U+D800)" },
	{ "escape past U+10FFFF", "a: \"\\U00110000\"\n", "1:5: invalid Unicode escape (U+110000)" },
	/* plain scalars */
	{ "reserved @", "a: @x\n", "1:4: '@' is reserved and cannot start a plain scalar; quote the value" },
	{ "reserved backquote", "a: `x`\n", "1:4: '`' is reserved and cannot start a plain scalar; quote the value" },
	{ "comment without a space in flow", "[a,#b\n]", "1:4: a comment must be separated from what precedes it by a space" },
	{ "'- ' in a flow sequence", "[- a]", "1:2: '-' followed by a space cannot start a value here; quote the value" },
	/* block scalars */
	{ "indentation indicator 0", "a: |0\n  x\n", "1:5: block scalar indentation indicator must be 1 to 9" },
	{ "leading space-only line longer than the first content line", "s: |\n    \n  x\n",
	  "3:3: bad indentation of a mapping entry" },
	{ "junk after a block scalar indicator", "a: |x\n", "1:5: unexpected text after a block scalar indicator" },
	/* keys */
	{ "duplicate key", "a: 1\na: 2\n", "2:1: duplicate key \"a\"" },
	{ "duplicate key in flow", "{a: 1, a: 2}", "1:8: duplicate key \"a\"" },
	{ "duplicate nested key", "s:\n  x: 1\n  y: 2\n  x: 3\n", "4:3: duplicate key \"x\"" },
	{ "duplicate of a quoted key", "\"a\": 1\na: 2\n", "2:1: duplicate key \"a\"" },
	{ "complex key ?", "? a\n: b\n", "1:1: complex mapping keys (\"? \") are not supported" },
	{ "collection as a key", "[a, b]: c\n", "1:1: complex mapping keys are not supported (a collection cannot be a key)" },
	{ "collection as a flow key", "{[a]: b}", "1:2: complex mapping keys are not supported (a collection cannot be a key)" },
	{ "alias to a collection as a key", "a: &a [1]\n*a : 2\n",
	  "2:1: complex mapping keys are not supported (this alias names a collection)" },
	{ "empty key", ": x\n", "1:1: empty mapping keys are not supported" },
	{ "empty flow key", "{: x}", "1:2: empty mapping keys are not supported" },
	/* anchors, aliases, merges */
	{ "undefined alias", "a: *nope\n", "1:4: undefined alias \"nope\"" },
	{ "alias used before its anchor", "a: *x\nb: &x 1\n", "1:4: undefined alias \"x\"" },
	{ "recursive alias", "a: &a [*a]\n", "1:8: undefined alias \"a\"" },
	{ "alias name missing", "x: *\n", "1:4: alias name is missing after '*'" },
	{ "anchor name missing", "x: & a\n", "1:4: anchor name is missing after '&'" },
	{ "two anchors", "&a &b x\n", "1:4: a node can have only one anchor" },
	{ "alias with an anchor", "a: &x 1\nb: &y *x\n", "2:7: an alias cannot have an anchor or a tag" },
	{ "merge of a scalar", "<<: 1\n", "1:5: the value of a merge key \"<<\" must be a mapping or a list of mappings" },
	{ "merge of a list with a scalar", "a: &a {x: 1}\nb:\n  <<: [*a, 2]\n",
	  "3:7: the value of a merge key \"<<\" must be a mapping or a list of mappings" },
	{ "two merge keys", "a: 1\n<<: {b: 2}\n<<: {c: 3}\n", "3:1: duplicate key \"<<\"" },
	/* tags and directives */
	{ "unsupported tag", "a: !foo x\n",
	  "1:4: unsupported tag \"!foo\" (supported: !!str !!int !!float !!bool !!null !!map !!seq)" },
	{ "unsupported core tag", "a: !!binary eA==\n",
	  "1:4: unsupported tag \"!!binary\" (supported: !!str !!int !!float !!bool !!null !!map !!seq)" },
	{ "!!int on text", "a: !!int abc\n", "1:10: \"abc\" is not a valid !!int value" },
	{ "!!float on .inf", "x: !!float .inf\n", "1:12: \".inf\" is not a valid !!float value" },
	{ "!!bool on yes", "x: !!bool yes\n", "1:11: \"yes\" is not a valid !!bool value" },
	{ "!!null on 0", "x: !!null 0\n", "1:11: \"0\" is not a valid !!null value" },
	{ "!!map on a scalar", "a: !!map x\n", "1:4: tag !!map needs a mapping, not a scalar" },
	{ "!!str on a mapping", "a: !!str\n  b: 1\n", "1:4: tag !!str cannot be applied to a mapping" },
	{ "!!seq on a mapping", "x: !!seq\n  a: 1\n", "1:4: tag !!seq cannot be applied to a mapping" },
	{ "%TAG directive", "%TAG ! x\n---\na\n", "1:1: directives other than one %YAML are not supported" },
	{ "%YAML without ---", "%YAML 1.2\nx\n", "2:1: expected \"---\" after the %YAML directive" },
	/* documents */
	{ "second document", "a: 1\n---\nb: 2\n", "2:1: multiple documents are not supported" },
	{ "second document after ...", "a\n...\nb\n", "3:1: multiple documents are not supported" },
	{ "second empty document", "---\na\n---\n", "3:1: multiple documents are not supported" },
	/* text */
	{ "invalid UTF-8", "a: \xff\n", "1:4: invalid UTF-8" },
	{ "overlong UTF-8", "a: b\nc: \xc0\xaf\n", "2:4: invalid UTF-8" },
	{ "control character", "a: \"x\x01\"\n", "1:6: control character U+0001 is not allowed (write it as an escape in a double-quoted string)" },
	{ "C1 control character", "a: \xc2\x9b\n", "1:4: control character U+009B is not allowed (write it as an escape in a double-quoted string)" },
	{ "BOM inside", "a: \xef\xbb\xbf" "1\n", "1:4: a byte-order mark is only allowed at the start of the text" },
	{ "CRLF counts one line", "a: 1\r\nb: 2\r\nb: 3\r\n", "3:1: duplicate key \"b\"" },
	{ "columns count characters", "é: \"\\q\"\n", "1:5: invalid escape sequence \"\\q\"" },
};

static void check(const char *name, const char *text, size_t len, const struct yaml_limits *lim, const char *want)
{
	struct json *v = (struct json *)1;
	struct err e;
	int rc;

	memset(&e, 0, sizeof(e));
	rc = yaml_parse(text, len, lim, &v, &e);
	ok(rc == -1 && v == NULL, "%s: refused", name);
	is_str(e.msg, want, name);
	if (rc == 0)
		json_free(v);
}

static void test_limits(void)
{
	struct yaml_limits lim = { 0 };
	struct buf b = BUF_INIT;
	struct json *v = NULL;
	struct err e;

	lim.max_size = 10;
	check("size limit", "a: 1234567", 11, &lim, "YAML document larger than 10 bytes");
	ok(yaml_parse("a: 123456", 9, &lim, &v, &e) == 0, "at the size limit is fine");
	json_free(v);

	memset(&lim, 0, sizeof(lim));
	lim.max_depth = 2;
	check("depth limit (flow)", "[[[1]]]", 7, &lim, "1:3: nesting deeper than 2 levels");
	check("depth limit (block)", "a:\n  b:\n    c: 1\n", 16, &lim, "3:5: nesting deeper than 2 levels");
	check("depth limit through an alias", "a: &a [1]\nb: [*a]\n", 18, &lim,
	      "2:5: nesting deeper than 2 levels (through an alias)");
	ok(yaml_parse("[[1]]", 5, &lim, &v, &e) == 0, "at the depth limit is fine");
	json_free(v);

	memset(&lim, 0, sizeof(lim));
	lim.max_nodes = 5;
	check("node limit", "[1, 2, 3, 4, 5]", 15, &lim,
	      "1:14: document has more than 5 nodes (alias expansions included)");
	ok(yaml_parse("[1, 2, 3, 4]", 12, &lim, &v, &e) == 0, "at the node limit is fine");
	json_free(v);

	memset(&lim, 0, sizeof(lim));
	lim.max_scalar = 8;
	check("scalar limit (plain)", "a: 123456789", 12, &lim, "1:13: scalar longer than 8 bytes");
	check("scalar limit (quoted)", "a: \"123456789\"", 14, &lim, "1:5: scalar longer than 8 bytes");
	ok(yaml_parse("a: 12345678", 11, &lim, &v, &e) == 0, "a scalar at the limit is fine");
	json_free(v);

	/* Billion laughs: 9^9 strings if expanded; refused at the default limit. */
	buf_adds(&b, "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
	for (char c = 'b'; c <= 'i'; c++)
		buf_addf(&b, "%c: &%c [*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c,*%c]\n", c, c, c - 1, c - 1, c - 1, c - 1, c - 1,
			 c - 1, c - 1, c - 1, c - 1);
	check("billion laughs", b.data, b.len, NULL, "6:8: document has more than 100000 nodes (alias expansions included)");
	/* Quadratic blow-up through merges is counted too. */
	buf_reset(&b);
	buf_adds(&b, "a: &a {k0: 0, k1: 1, k2: 2, k3: 3, k4: 4, k5: 5, k6: 6, k7: 7, k8: 8, k9: 9}\n");
	memset(&lim, 0, sizeof(lim));
	lim.max_nodes = 60;
	buf_adds(&b, "b: {<<: *a}\nc: {<<: *a}\nd: {<<: *a}\ne: {<<: *a}\n");
	check("merges count their copies", b.data, b.len, &lim,
	      "4:9: document has more than 60 nodes (alias expansions included)");
	buf_release(&b);
}

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check(cases[i].name, cases[i].yaml, strlen(cases[i].yaml), NULL, cases[i].msg);
	test_limits();
	return tap_done();
}
