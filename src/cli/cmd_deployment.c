/* cmd_deployment.c: deployment get|watch, events. */
#include "cli/cli.h"

#include <string.h>

#include "base/str.h"
#include "http/http.h"
#include "json/json.h"

static int run_dep_get(struct cli *c, const struct cli_args *a, struct err *e)
{
	return cli_send_print(c, "GET", "/v1/deployments/", a->pos[0], NULL, NULL, e);
}

/* Like --wait: phase lines, the final status, exit 1 unless it succeeded. */
static int run_dep_watch(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct json *final = NULL;
	const char *st;
	int rc;

	if (cli_wait(c, a->pos[0], &final, e) < 0)
		return CLI_FAIL;
	st = json_get_str(json_get(final, "deployment"), "Status");
	rc = str_eq(st, "succeeded") ? CLI_OK : CLI_FAIL;
	if (rc != CLI_OK)
		err_set(e, "deployment %s %s", a->pos[0], str_eq(st, "rolled_back") ? "rolled back" : "failed");
	json_free(final);
	return rc;
}

static const struct cli_flag watch_flags[] = { CLI_FLAG_VERBOSE, { 0 } };

static const struct cli_cmd dep_subs[] = {
	{ .name = "get", .args = "<deployment>", .summary = "show a deployment and its phases", .min_pos = 1,
	  .max_pos = 1, .run = run_dep_get },
	{ .name = "watch", .args = "<deployment>", .summary = "print phases as they change until it ends",
	  .flags = watch_flags, .min_pos = 1, .max_pos = 1, .run = run_dep_watch },
	{ 0 },
};

const struct cli_cmd cli_cmd_deployment = {
	.name = "deployment", .summary = "show or follow a deployment", .subs = dep_subs,
};

/* env:<project>/<env> is resolved to env:<id>; other subjects go as given. */
static int run_events(struct cli *c, const struct cli_args *a, struct err *e)
{
	const char *subject = a->pos[0];
	struct buf path = BUF_INIT;
	char id[CLI_ID_MAX];
	int rc = -1;

	buf_adds(&path, "/v1/events?subject=");
	if (str_has_prefix(subject, "env:")) {
		if (cli_resolve_env(c, subject + 4, id, sizeof(id), e) < 0)
			goto out;
		buf_adds(&path, "env%3A");
		http_pct_encode(&path, id, "");
	} else {
		http_pct_encode(&path, subject, "");
	}
	rc = cli_get_print(c, path.data, e);
out:
	buf_release(&path);
	return rc;
}

const struct cli_cmd cli_cmd_events = {
	.name = "events", .args = "<subject>",
	.summary = "recent events (newest first) of env:<env>, dep:<id>, host:<id> or cmd:<id>",
	.min_pos = 1, .max_pos = 1, .run = run_events,
};
