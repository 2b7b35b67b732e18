/* Unit tests: x-denv.promote into the Spec's promote (spec_promote,
 * promote.c): defaults, durations, declared invariants, and every refusal
 * with its message. */
#include <stdlib.h>
#include <string.h>

#include "json/json.h"
#include "spec/spec.h"
#include "tap.h"

struct promote_case {
	const char *yaml;	/* the x-denv.promote value */
	const char *want;	/* the Spec's promote as JSON; NULL: refused with msg */
	const char *msg;
	const char *name;
};

static const struct promote_case cases[] = {
	{ "{}", "{\"replays\":3,\"soak_sec\":0,\"invariants\":[]}", NULL, "an empty map takes the defaults" },
	{ "{replays: 5, soak: 30s}", "{\"replays\":5,\"soak_sec\":30,\"invariants\":[]}", NULL,
	  "replays and a duration" },
	{ "{replays: 0, soak: 2}", "{\"replays\":0,\"soak_sec\":2,\"invariants\":[]}", NULL,
	  "zero replays, soak in seconds" },
	{ "{soak: 1500ms}", "{\"replays\":3,\"soak_sec\":2,\"invariants\":[]}", NULL, "a soak rounds up to seconds" },
	{ "{invariants: [{name: seed, service: app, command: \"test -s /seed\"}]}",
	  "{\"replays\":3,\"soak_sec\":0,\"invariants\":[{\"name\":\"seed\",\"service\":\"app\","
	  "\"command\":[\"sh\",\"-c\",\"test -s /seed\"]}]}", NULL, "an invariant's string runs under sh -c" },
	{ "{invariants: [{name: a, service: app, command: [test, -d, /x]}]}",
	  "{\"replays\":3,\"soak_sec\":0,\"invariants\":[{\"name\":\"a\",\"service\":\"app\","
	  "\"command\":[\"test\",\"-d\",\"/x\"]}]}", NULL, "an invariant's list stays argv" },
	{ "[]", NULL, "compose: x-denv.promote must be a map (replays, soak, invariants)", "a list is refused" },
	{ "{replays: 21}", NULL, "compose: x-denv.promote.replays must be between 0 and 20", "too many replays" },
	{ "{replays: -1}", NULL, "compose: x-denv.promote.replays must be between 0 and 20", "negative replays" },
	{ "{replays: two}", NULL, "compose: x-denv.promote.replays must be between 0 and 20", "replays as a word" },
	{ "{soak: forever}", NULL, "compose: x-denv.promote.soak must be a duration between 0s and 86400s (\"30s\")",
	  "a soak that is no duration" },
	{ "{soak: 25h}", NULL, "compose: x-denv.promote.soak must be a duration between 0s and 86400s (\"30s\")",
	  "a soak over a day" },
	{ "{invariants: {a: b}}", NULL, "compose: x-denv.promote.invariants must be a list of at most 64 checks",
	  "invariants as a map" },
	{ "{invariants: [x]}", NULL,
	  "compose: x-denv.promote.invariants[0] must be a map of name, service and command", "an invariant as a word" },
	{ "{invariants: [{service: app, command: x}]}", NULL,
	  "compose: x-denv.promote.invariants[0].name must be a name (letters, digits, ., - and _)",
	  "an invariant without a name" },
	{ "{invariants: [{name: a, service: db, command: x}]}", NULL,
	  "compose: x-denv.promote.invariants \"a\": service \"db\" is not a service", "an unknown service" },
	{ "{invariants: [{name: a, service: app}]}", NULL,
	  "compose: x-denv.promote.invariants \"a\": command is required", "an invariant without a command" },
	{ "{invariants: [{name: a, service: app, command: x}, {name: a, service: app, command: y}]}", NULL,
	  "compose: x-denv.promote.invariants: \"a\" is declared twice", "a name declared twice" },
};

static void test_cases(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct promote_case *c = &cases[i];
		struct buf y = BUF_INIT;
		struct json *spec = NULL, *want = NULL;
		struct err e = { "", 0 };
		int rc;

		buf_addf(&y, "x-denv:\n  promote: %s\nservices:\n  app: {image: a}\n", c->yaml);
		rc = spec_parse_compose(y.data, y.len, &spec, &e);
		if (!c->want) {
			ok(rc == -1, "%s", c->name);
			is_str(e.msg, c->msg, "  with the message");
		} else if (ok(rc == 0, "%s", c->name)) {
			json_parse(c->want, strlen(c->want), NULL, &want, &e);
			if (!ok(json_equal(json_get(spec, "promote"), want), "  to %s", c->want)) {
				char *got = json_to_string(json_get(spec, "promote"), 0);

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

static void test_absent_and_keys(void)
{
	static const char y[] = "x-denv:\n  promote: {replays: 1, soke: 3s}\nservices:\n  app: {image: a}\n";
	static const char none[] = "services:\n  app: {image: a}\n";
	struct json *spec = NULL;
	struct err e = { "", 0 };
	const struct json *w;

	ok(spec_parse_compose(none, strlen(none), &spec, &e) == 0 && !json_get(spec, "promote"),
	   "no x-denv.promote: no promote in the Spec");
	json_free(spec);
	spec = NULL;
	ok(spec_parse_compose(y, strlen(y), &spec, &e) == 0, "an unknown key inside promote is no refusal");
	w = json_get(spec, "warnings");
	ok(json_len(w) == 1 && strstr(json_at(w, 0)->u.str.s, "x-denv.promote.soke") &&
	   strstr(json_at(w, 0)->u.str.s, "soak"), "  but a warning that suggests soak");
	json_free(spec);
}

int main(void)
{
	test_cases();
	test_absent_and_keys();
	return tap_done();
}
