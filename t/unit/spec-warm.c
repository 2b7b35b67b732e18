/* Unit tests: x-denv.warm and the API's warm into the argv that runs
 * (spec_warm, warm.c): a string and the blog's one-string list run under
 * sh -c, other lists stay argv, and what is neither is refused. */
#include <stdlib.h>
#include <string.h>

#include "json/json.h"
#include "spec/spec.h"
#include "tap.h"

struct warm_case {
	const char *yaml;	/* the x-denv.warm value */
	const char *argv;	/* the Spec's warm, as JSON; NULL: refused */
	const char *name;
};

static const struct warm_case cases[] = {
	{ "\"psql -h db -U postgres -f /seed/orders.sql\"",
	  "[\"sh\",\"-c\",\"psql -h db -U postgres -f /seed/orders.sql\"]", "a string runs under sh -c" },
	{ "[\"psql -h db -U postgres -f /seed/orders.sql\"]",
	  "[\"sh\",\"-c\",\"psql -h db -U postgres -f /seed/orders.sql\"]", "the blog's one-string list runs under sh -c" },
	{ "|\n    psql -c 'create table t (x int)'\n    psql -c 'insert into t values (1)'\n",
	  "[\"sh\",\"-c\",\"psql -c 'create table t (x int)'\\npsql -c 'insert into t values (1)'\\n\"]",
	  "a block string is a multi-line script" },
	{ "[psql, -f, /seed/orders.sql]", "[\"psql\",\"-f\",\"/seed/orders.sql\"]", "a list of words stays argv" },
	{ "[psql, -c, \"select 1\"]", "[\"psql\",\"-c\",\"select 1\"]",
	  "a longer list stays argv even with spaces inside an element" },
	{ "[/seed.sh]", "[\"/seed.sh\"]", "a one-word list stays argv" },
	{ "[sleep, 1]", "[\"sleep\",\"1\"]", "numbers in the list become strings" },
	{ "\"\"", "[]", "an empty string is no warm command" },
	{ "\"   \"", "[]", "a blank string is no warm command" },
	{ "[]", "[]", "an empty list is no warm command" },
	{ "null", "[]", "null is no warm command" },
	{ "5", NULL, "a number is refused" },
	{ "{a: b}", NULL, "a map is refused" },
	{ "[[a]]", NULL, "a nested list is refused" },
};

static struct json *parse_json(const char *s)
{
	struct json *v = NULL;
	struct err e = { "", 0 };

	if (json_parse(s, strlen(s), NULL, &v, &e) < 0)
		tap_diag("bad JSON in a case: %s", e.msg);
	return v;
}

static void test_compose(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct warm_case *c = &cases[i];
		struct buf y = BUF_INIT;
		struct json *spec = NULL, *want;
		struct err e = { "", 0 };
		int rc;

		buf_addf(&y, "x-denv:\n  warm: %s\nservices:\n  app: {image: a}\n", c->yaml);
		rc = spec_parse_compose(y.data, y.len, &spec, &e);
		if (!c->argv) {
			ok(rc == -1, "%s", c->name);
			is_str(e.msg, "compose: x-denv.warm must be a string or a list of strings", "  with the message");
		} else if (ok(rc == 0, "%s", c->name)) {
			want = parse_json(c->argv);
			if (!ok(json_equal(json_get(spec, "warm"), want), "  to %s", c->argv)) {
				char *got = json_to_string(json_get(spec, "warm"), 0);

				tap_diag("got %s", got);
				free(got);
			}
			json_free(want);
		} else {
			tap_diag("%s", e.msg);
		}
		json_free(spec);
		buf_release(&y);
	}
}

/* The API hands spec_warm its JSON body's value directly. */
static void test_api_value(void)
{
	struct json *v = json_new_str("echo warm up"), *argv;
	struct err e = { "", 0 };

	argv = spec_warm(v, "warm", &e);
	ok(argv && json_len(argv) == 3 && !strcmp(json_at(argv, 2)->u.str.s, "echo warm up"),
	   "an API string is sh -c STRING");
	json_free(argv);
	json_free(v);
	v = json_new_bool(true);
	ok(spec_warm(v, "warm", &e) == NULL, "an API boolean is refused");
	is_str(e.msg, "warm must be a string or a list of strings", "  naming the field");
	json_free(v);
	ok((argv = spec_warm(NULL, "warm", &e)) && json_len(argv) == 0, "absent is no warm command");
	json_free(argv);
}

int main(void)
{
	test_compose();
	test_api_value();
	return tap_done();
}
