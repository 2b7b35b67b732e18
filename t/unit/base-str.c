/* Unit tests: the checked formatter str_fmt, str_copy's cut report, and str_only. */
#include <string.h>

#include "base/str.h"
#include "tap.h"

/* One case: the room the caller gives, what it formats, and the verdict. */
struct fmt_case {
	size_t room;
	const char *arg;
	int want_rc;
	const char *want;
	const char *name;
};

static const struct fmt_case fmt_cases[] = {
	{ 16, "abc", 0, "<abc>", "a short result fits" },
	{ 6, "abc", 0, "<abc>", "a result of exactly n-1 bytes fits" },
	{ 5, "abc", -1, "", "one byte short is a failure and leaves \"\"" },
	{ 2, "abc", -1, "", "far too short is a failure and leaves \"\"" },
	{ 3, "", 0, "<>", "an empty argument" },
};

static void test_fmt_table(void)
{
	for (size_t i = 0; i < sizeof(fmt_cases) / sizeof(fmt_cases[0]); i++) {
		const struct fmt_case *c = &fmt_cases[i];
		char out[32];

		memset(out, 'x', sizeof(out));
		is_int(str_fmt(out, c->room, "<%s>", c->arg), c->want_rc, c->name);
		is_str(out, c->want, c->name);
		ok(out[c->room] == 'x', "%s: nothing written past the room given", c->name);
	}
}

static void test_fmt_edges(void)
{
	char out[8] = "keep";
	char big[300];

	is_int(str_fmt(out, 0, "%s", "a"), -1, "no room at all is a failure");
	is_str(out, "keep", "and writes nothing");
	is_int(str_fmt(out, sizeof(out), "%d-%d", 12, 345), 0, "numbers");
	is_str(out, "12-345", "numbers formatted");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	is_int(str_fmt(out, sizeof(out), "%s", big), -1, "a long argument fails");
	is_str(out, "", "and leaves no prefix behind");
}

static void test_copy(void)
{
	char out[4];

	is_int(str_copy(out, sizeof(out), "abc"), 0, "str_copy: fits");
	is_int(str_copy(out, sizeof(out), "abcd"), -1, "str_copy: cut reports -1");
	is_str(out, "abc", "str_copy: cut keeps the prefix, NUL-terminated");
}

static void test_only(void)
{
	ok(str_only("Abc09", ""), "str_only: letters and digits");
	ok(str_only("", ""), "str_only: the empty string");
	ok(str_only("a-b_c", "-_"), "str_only: and the extra ones");
	ok(!str_only("a b", "-_"), "str_only: a byte outside refused");
	ok(!str_only("caf\xc3\xa9", ""), "str_only: a byte past ASCII refused");
	ok(!str_only("a'b", "-._~:/?#[]@!$&()*+,;=%"), "str_only: a quote never passes a URL's set");
}

int main(void)
{
	test_fmt_table();
	test_fmt_edges();
	test_copy();
	test_only();
	return tap_done();
}
