/* cmd_quotas.c: denv quotas: a team's quotas and use, and (for the operator
 * team) setting them (denv-cp(8), QUOTAS). */
#include <string.h>

#include "base/str.h"
#include "cli/cli.h"
#include "json/json.h"

/* Flag, the quota it sets. */
static const struct {
	const char *flag;
	const char *wire;
} quota_flags[] = {
	{ "envs", "max_environments" },
	{ "sandboxes", "max_sandboxes" },
	{ "exec", "max_exec" },
};
#define NQUOTA_FLAGS (sizeof(quota_flags) / sizeof(quota_flags[0]))

/* The team to show: --team, or the credential's own. 0 / -1 with e. */
static int quota_team(struct cli *c, const struct cli_args *a, char *out, size_t n, struct err *e)
{
	struct json *me = NULL;
	const char *id = cli_flag_str(a, "team");
	int rc = 0;

	if (id && *id)
		return str_copy(out, n, id) < 0 ? err_set(e, "--team: too long") : 0;
	if (cli_call(c, "GET", "/v1/me", NULL, &me, e) < 0)
		return -1;
	id = json_get_str(json_get(me, "team"), "ID");
	if (!id || !*id || str_copy(out, n, id) < 0)
		rc = err_set(e, "this credential has no team: give --team ID");
	json_free(me);
	return rc;
}

/* The PUT body from --envs, --sandboxes, --exec (a number, or "default");
 * NULL when none was given. CLI_USAGE with e for a bad value. */
static int quota_body(const struct cli_args *a, struct json **out, struct err *e)
{
	*out = NULL;
	for (size_t i = 0; i < NQUOTA_FLAGS; i++) {
		const char *v = cli_flag_str(a, quota_flags[i].flag);
		int64_t q;

		if (!v)
			continue;
		if (!*out)
			*out = json_new_object();
		if (str_eq(v, "default")) {
			json_object_set(*out, quota_flags[i].wire, json_new_null());
		} else if (str_to_i64(v, &q) == 0 && q >= 0) {
			json_object_set_int(*out, quota_flags[i].wire, q);
		} else {
			json_free(*out);
			*out = NULL;
			err_set(e, "--%s: want a number (0: no limit) or default, not %s", quota_flags[i].flag, v);
			return CLI_USAGE;
		}
	}
	return 0;
}

static int run_quotas(struct cli *c, const struct cli_args *a, struct err *e)
{
	char team[128];
	struct json *body = NULL;
	int rc = quota_body(a, &body, e);

	if (rc != 0)
		return rc;
	if (quota_team(c, a, team, sizeof(team), e) < 0) {
		json_free(body);
		return -1;
	}
	return cli_send_print(c, body ? "PUT" : "GET", "/v1/teams/", team, "/quotas", body, e);
}

static const struct cli_flag quotas_flags[] = {
	{ "team", 0, CLI_STR, "ID", "the team (default: the credential's)" },
	{ "envs", 0, CLI_STR, "N", "set its live environments quota: N (0: no limit) or default" },
	{ "sandboxes", 0, CLI_STR, "N", "set its live sandboxes quota, likewise" },
	{ "exec", 0, CLI_STR, "N", "set its quota of execs in flight, likewise" },
	{ 0 },
};

const struct cli_cmd cli_cmd_quotas = {
	.name = "quotas", .summary = "show a team's quotas and use; the operator team sets them",
	.flags = quotas_flags, .max_pos = 0, .run = run_quotas,
	.notes = "Setting quotas is for the server's operator team (its first team); see denv-cp(8), QUOTAS.\n",
};
