/* cp-promote.c: gate.invariants' built-in checks (src/cp/promote.c): the
 * version promoted against the target's, one case per way a change can
 * delete, disable or silence something, and the detail each failure shows. */
#include <stdlib.h>
#include <string.h>

#include "cp/cp.h"
#include "tap.h"

#define BASE                                                                                                     \
	"{\"egress\":\"deny\",\"agent\":{\"service\":\"box\"},\"volumes\":[\"home\",\"pg\"],"                      \
	"\"verifier\":{\"image\":\"g\",\"collect\":[\"/home/a/x\",\"/home/a/y\"]},"                                \
	"\"promote\":{\"invariants\":[{\"name\":\"seed\"}]},"                                                      \
	"\"services\":[{\"name\":\"box\",\"resources\":{\"memory_mb\":512,\"pids\":64,\"cpus\":0}},"               \
	"{\"name\":\"db\",\"health\":{\"test\":[\"CMD\",\"true\"]},\"resources\":{\"memory_mb\":0}}]}"

static const struct {
	const char *new_spec;
	int failed;
	const char *check, *detail;	/* the failed check and its detail; NULL: none */
} cases[] = {
	{ BASE, 0, NULL, NULL },
	{ "{\"egress\":\"deny\",\"agent\":{\"service\":\"box\"},\"volumes\":[\"home\"],"
	  "\"verifier\":{\"image\":\"g\",\"collect\":[\"/home/a/x\",\"/home/a/y\"]},"
	  "\"promote\":{\"invariants\":[{\"name\":\"seed\"}]},"
	  "\"services\":[{\"name\":\"box\",\"resources\":{\"memory_mb\":512,\"pids\":64}},"
	  "{\"name\":\"db\",\"health\":{}}]}",
	  1, "nothing deleted", "volume pg was deleted" },
	{ "{\"egress\":\"deny\",\"agent\":{\"service\":\"box\"},\"volumes\":[\"home\",\"pg\"],"
	  "\"promote\":{\"invariants\":[]},"
	  "\"services\":[{\"name\":\"box\",\"resources\":{\"memory_mb\":512,\"pids\":64}}]}",
	  1, "nothing deleted", "service db was deleted (and 2 more)" },
	{ "{\"egress\":\"allow\",\"agent\":{\"service\":\"box\"},\"volumes\":[\"home\",\"pg\"],"
	  "\"verifier\":{\"image\":\"g\",\"collect\":[\"/home/a/x\",\"/home/a/y\"]},"
	  "\"promote\":{\"invariants\":[{\"name\":\"seed\"}]},"
	  "\"services\":[{\"name\":\"box\",\"resources\":{\"memory_mb\":512,\"pids\":64}},"
	  "{\"name\":\"db\",\"health\":{}}]}",
	  1, "nothing disabled", "egress was opened (deny to allow)" },
	{ "{\"egress\":\"deny\",\"agent\":{\"service\":\"box\"},\"volumes\":[\"home\",\"pg\"],"
	  "\"verifier\":{\"image\":\"g\",\"collect\":[\"/home/a/x\",\"/home/a/y\"]},"
	  "\"promote\":{\"invariants\":[{\"name\":\"seed\"}]},"
	  "\"services\":[{\"name\":\"box\",\"resources\":{\"memory_mb\":512,\"pids\":0}},"
	  "{\"name\":\"db\",\"health\":{}}]}",
	  1, "nothing disabled", "service box lost its pids cap" },
	{ "{\"egress\":\"deny\",\"volumes\":[\"home\",\"pg\"],"
	  "\"verifier\":{\"image\":\"g\",\"collect\":[\"/home/a/x\",\"/home/a/y\"]},"
	  "\"promote\":{\"invariants\":[{\"name\":\"seed\"}]},"
	  "\"services\":[{\"name\":\"box\",\"resources\":{\"memory_mb\":512,\"pids\":64}},"
	  "{\"name\":\"db\",\"health\":{}}]}",
	  1, "nothing disabled", "x-denv.agent.service box is no longer the agent" },
	{ "{\"egress\":\"deny\",\"agent\":{\"service\":\"box\"},\"volumes\":[\"home\",\"pg\"],"
	  "\"verifier\":{\"image\":\"g\",\"collect\":[\"/home/a/x\"]},"
	  "\"promote\":{\"invariants\":[{\"name\":\"seed\"}]},"
	  "\"services\":[{\"name\":\"box\",\"resources\":{\"memory_mb\":512,\"pids\":64}},"
	  "{\"name\":\"db\",\"health\":{}}]}",
	  1, "nothing silenced", "/home/a/y is no longer collected for the verifier" },
	{ "{\"egress\":\"deny\",\"agent\":{\"service\":\"box\"},\"volumes\":[\"home\",\"pg\"],"
	  "\"verifier\":{\"image\":\"g\",\"collect\":[\"/home/a/x\",\"/home/a/y\"]},"
	  "\"promote\":{\"invariants\":[{\"name\":\"seed\"}]},"
	  "\"services\":[{\"name\":\"box\",\"resources\":{\"memory_mb\":512,\"pids\":64}},{\"name\":\"db\"}]}",
	  1, "nothing silenced", "service db lost its health check" },
};

static struct json *parse(const char *s)
{
	struct json *v = NULL;
	struct err e = { "", 0 };

	if (json_parse(s, strlen(s), NULL, &v, &e) < 0)
		tap_diag("bad JSON in a case: %s", e.msg);
	return v;
}

static void test_cases(void)
{
	struct json *old = parse(BASE);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct json *new = parse(cases[i].new_spec), *checks = json_new_array();
		int failed = cp_promote_invariants(old, new, checks);

		ok(failed == cases[i].failed && json_len(checks) == 3, "case %zu: %d check(s) failed", i, failed);
		for (size_t k = 0; cases[i].check && k < json_len(checks); k++) {
			const struct json *c = json_at(checks, k);

			if (!strcmp(json_get_str(c, "name"), cases[i].check)) {
				ok(!json_get_bool(c, "ok", true), "  %s fails", cases[i].check);
				is_str(json_get_str(c, "detail"), cases[i].detail, "  with its detail");
			}
		}
		json_free(new);
		json_free(checks);
	}
	json_free(old);
}

static void test_first(void)
{
	struct json *new = parse(BASE), *checks = json_new_array();

	ok(cp_promote_invariants(NULL, new, checks) == 0 && json_len(checks) == 3, "no target version: all pass");
	is_str(json_get_str(json_at(checks, 0), "detail"), "no previous version", "  saying why");
	json_free(new);
	json_free(checks);
}

int main(void)
{
	test_cases();
	test_first();
	return tap_done();
}
