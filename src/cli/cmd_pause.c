/* cmd_pause.c: denv pause and denv resume: freeze or thaw an environment's
 * services on their host, without a deployment (denv-cp(8), PAUSE AND RESUME). */
#include <stdio.h>

#include "base/str.h"
#include "cli/cli.h"
#include "json/json.h"

/* POST /v1/envs/<id><route> (/pause or /resume). */
static int pause_or_resume(struct cli *c, const struct cli_args *a, const char *route, struct err *e)
{
	const char *service = cli_flag_str(a, "service");
	char id[CLI_ID_MAX];
	struct json *body = json_new_object();

	if (service && *service)
		json_object_set_str(body, "service", service);
	if (cli_resolve_env(c, a->pos[0], id, sizeof(id), e) < 0) {
		json_free(body);
		return -1;
	}
	return cli_send_print(c, "POST", "/v1/envs/", id, route, body, e);
}

static int run_pause(struct cli *c, const struct cli_args *a, struct err *e)
{
	return pause_or_resume(c, a, "/pause", e);
}

static int run_resume(struct cli *c, const struct cli_args *a, struct err *e)
{
	return pause_or_resume(c, a, "/resume", e);
}

static const struct cli_flag pause_flags[] = {
	{ "service", 0, CLI_STR, "S", "only this service (default: all of them)" },
	{ 0 },
};

const struct cli_cmd cli_cmd_pause = {
	.name = "pause", .args = "<env>",
	.summary = "freeze an environment's services (memory, processes and data kept)",
	.flags = pause_flags, .min_pos = 1, .max_pos = 1, .run = run_pause,
};

const struct cli_cmd cli_cmd_resume = {
	.name = "resume", .args = "<env>", .summary = "thaw what pause froze",
	.flags = pause_flags, .min_pos = 1, .max_pos = 1, .run = run_resume,
};
