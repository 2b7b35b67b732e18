/* warm.c: the warm command (x-denv.warm, and the API's per-deploy warm)
 * into the argv the sidecar runs. compose.md calls it an argv, while the
 * blog writes ["psql -h db -U postgres -f /seed/orders.sql"], one string
 * holding a whole command line; run as an argv that is a program named
 * "psql -h db ..." that does not exist (exit 126). So the rule, as
 * denv-compose(5) states it:
 *   a string                                  sh -c STRING
 *   a list of one string containing whitespace  sh -c STRING (the blog's form)
 *   any other list                            the argv as written
 *   null, [], "" or only whitespace           no warm command
 * The result is what runs, so the deployment's Params show it. */
#include <stdbool.h>
#include <string.h>

#include "spec/spec.h"

static bool has_space(const char *s)
{
	return strpbrk(s, " \t\n\r") != NULL;
}

static bool only_space(const char *s)
{
	return s[strspn(s, " \t\n\r")] == '\0';
}

static struct json *shell(const char *line)
{
	struct json *argv = json_new_array();

	if (only_space(line))
		return argv;
	json_array_push(argv, json_new_str("sh"));
	json_array_push(argv, json_new_str("-c"));
	json_array_push(argv, json_new_str(line));
	return argv;
}

struct json *spec_warm(const struct json *v, const char *what, struct err *e)
{
	struct json *argv;

	if (!v || v->type == JSON_NULL)
		return json_new_array();
	if (v->type == JSON_STRING) {
		if (v->u.str.len >= SPEC_MAX_STRING || memchr(v->u.str.s, '\0', v->u.str.len)) {
			err_set(e, "%s is longer than %d bytes or holds a NUL byte", what, SPEC_MAX_STRING - 1);
			return NULL;
		}
		return shell(v->u.str.s);
	}
	if (v->type != JSON_ARRAY) {
		err_set(e, "%s must be a string or a list of strings", what);
		return NULL;
	}
	if (!(argv = spec_argv(v, what, e)))
		return NULL;
	if (json_len(argv) == 1 && has_space(json_at(argv, 0)->u.str.s)) {
		struct json *sh = shell(json_at(argv, 0)->u.str.s);

		json_free(argv);
		return sh;
	}
	return argv;
}
