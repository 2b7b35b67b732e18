/* cmd_env.c: env, fork, snapshot, verify, rollback, exec. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/str.h"
#include "json/json.h"

/* GET or DELETE an environment route and print the answer. */
static int env_simple(struct cli *c, const char *method, const char *ref, const char *suffix, struct err *e)
{
	struct buf path = BUF_INIT;
	int rc = -1;

	if (cli_env_path(c, ref, suffix, &path, e) == 0)
		rc = cli_send_print(c, method, path.data, NULL, NULL, NULL, e);
	buf_release(&path);
	return rc;
}

static int run_env_get(struct cli *c, const struct cli_args *a, struct err *e)
{
	return env_simple(c, "GET", a->pos[0], "", e);
}

static int run_env_versions(struct cli *c, const struct cli_args *a, struct err *e)
{
	return env_simple(c, "GET", a->pos[0], "/versions", e);
}

static int run_env_deployments(struct cli *c, const struct cli_args *a, struct err *e)
{
	return env_simple(c, "GET", a->pos[0], "/deployments", e);
}

/* Destroy starts a deployment but does not wait (the environment goes away). */
static int run_env_destroy(struct cli *c, const struct cli_args *a, struct err *e)
{
	return env_simple(c, "DELETE", a->pos[0], "", e);
}

/* ---- TTLs (denv-cp(8), "TTLS") ---- */

static int run_env_touch(struct cli *c, const struct cli_args *a, struct err *e)
{
	return env_simple(c, "POST", a->pos[0], "/touch", e);
}

/* One of ttl's flags, in whole seconds, into body as key. */
static int ttl_secs(const struct cli_args *a, const char *flag, const char *key, struct json *body, struct err *e)
{
	const char *v = cli_flag_str(a, flag);
	int64_t n;

	if (!v)
		return 0;
	if (str_to_i64(v, &n) < 0 || n < 0)
		return err_set(e, "env ttl: --%s must be a number of seconds (0: none)", flag);
	json_object_set_int(body, key, n);
	return 0;
}

static int run_env_ttl(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct json *body = json_new_object();
	struct buf path = BUF_INIT;
	int rc = -1;

	if (ttl_secs(a, "idle", "idle_ttl_sec", body, e) < 0 || ttl_secs(a, "max", "max_ttl_sec", body, e) < 0) {
		json_free(body);
		return CLI_RUN_USAGE;
	}
	if (cli_flag_str(a, "action"))
		json_object_set_str(body, "ttl_action", cli_flag_str(a, "action"));
	/* No flag: show the TTLs (GET answers expires_at and idle_expires_at too). */
	if (!json_len(body)) {
		json_free(body);
		body = NULL;
	}
	if (cli_env_path(c, a->pos[0], "", &path, e) == 0)
		rc = cli_send_print(c, body ? "PATCH" : "GET", path.data, NULL, NULL, body, e);
	else
		json_free(body);
	buf_release(&path);
	return rc;
}

static const struct cli_flag ttl_flags[] = {
	{ "idle", 0, CLI_STR, "SEC", "destroy after SEC seconds without activity (0: never)" },
	{ "max", 0, CLI_STR, "SEC", "destroy SEC seconds after creation, active or not (0: never)" },
	{ "action", 0, CLI_STR, "A", "what reaching a TTL does: destroy" },
	{ 0 },
};

static const struct cli_cmd env_subs[] = {
	{ .name = "get", .args = "<env>", .summary = "show an environment and whether its host is connected",
	  .min_pos = 1, .max_pos = 1, .run = run_env_get },
	{ .name = "versions", .args = "<env>", .summary = "list an environment's versions", .min_pos = 1,
	  .max_pos = 1, .run = run_env_versions },
	{ .name = "deployments", .args = "<env>", .summary = "list an environment's deployments",
	  .min_pos = 1, .max_pos = 1, .run = run_env_deployments },
	{ .name = "destroy", .args = "<env>", .summary = "start destroying an environment (does not wait)",
	  .min_pos = 1, .max_pos = 1, .run = run_env_destroy },
	{ .name = "touch", .args = "<env>", .summary = "reset an environment's idle TTL (counts as activity)",
	  .min_pos = 1, .max_pos = 1, .run = run_env_touch },
	{ .name = "ttl", .args = "<env>", .summary = "show or change an environment's TTLs",
	  .flags = ttl_flags, .min_pos = 1, .max_pos = 1, .run = run_env_ttl },
	{ 0 },
};

const struct cli_cmd cli_cmd_env = {
	.name = "env", .summary = "inspect and destroy environments", .subs = env_subs,
};

/* POST an environment action and follow the deployment it starts. */
static int env_action(struct cli *c, const struct cli_args *a, const char *suffix, const struct json *body,
		      void (*extra)(const struct json *), struct err *e)
{
	struct buf path = BUF_INIT;
	struct json *resp = NULL;
	int rc = CLI_FAIL;

	if (cli_env_path(c, a->pos[0], suffix, &path, e) == 0 && cli_call(c, "POST", path.data, body, &resp, e) == 0)
		rc = cli_started(c, resp, cli_flag_bool(a, "wait", true), extra, e);
	json_free(resp);
	buf_release(&path);
	return rc;
}

/* ---- fork ---- */

/* <source name>-fork-<unix seconds> when the source's name is known. */
static void default_fork_name(struct cli *c, const char *ref, struct json *body)
{
	char name[CLI_NAME_MAX * 2], proj[CLI_NAME_MAX], env[CLI_NAME_MAX];
	struct err e;
	int r = cli_ref_split(ref, proj, sizeof(proj), env, sizeof(env), &e);

	if (r == 0 && !cli_ref_is_id(ref)) {
		str_copy(env, sizeof(env), ref);	/* a bare name */
	} else if (r != 1) {
		struct buf path = BUF_INIT;
		struct json *doc = NULL;

		/* An id: ask for the name; without it the server picks one. */
		if (cli_env_path(c, ref, "", &path, &e) == 0 && cli_call(c, "GET", path.data, NULL, &doc, &e) == 0)
			str_copy(env, sizeof(env), json_get_str(json_get(doc, "environment"), "Name") ?
						   json_get_str(json_get(doc, "environment"), "Name") : "");
		else
			env[0] = '\0';
		json_free(doc);
		buf_release(&path);
	}
	if (!env[0])
		return;
	snprintf(name, sizeof(name), "%.40s-fork-%lld", env, (long long)time(NULL));
	json_object_set_str(body, "name", name);
}

static int run_fork(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct json *body = json_new_object();
	int rc;

	if (cli_flag_str(a, "name"))
		json_object_set_str(body, "name", cli_flag_str(a, "name"));
	else
		default_fork_name(c, a->pos[0], body);
	if (cli_flag_str(a, "version"))
		json_object_set_str(body, "version", cli_flag_str(a, "version"));
	rc = env_action(c, a, "/fork", body, NULL, e);
	json_free(body);
	return rc;
}

static const struct cli_flag fork_flags[] = {
	{ "name", 0, CLI_STR, "NAME", "name of the new environment (default <env>-fork-<unix time>)" },
	{ "version", 0, CLI_STR, "VER", "healthy version to fork (default: the current one)" },
	CLI_FLAG_WAIT,
	CLI_FLAG_VERBOSE,
	{ 0 },
};

const struct cli_cmd cli_cmd_fork = {
	.name = "fork", .args = "<env>", .summary = "create a new environment from a version of this one",
	.flags = fork_flags, .min_pos = 1, .max_pos = 1, .run = run_fork,
};

/* ---- snapshot ---- */

static int run_snapshot(struct cli *c, const struct cli_args *a, struct err *e)
{
	return env_action(c, a, "/snapshot", NULL, NULL, e);
}

static const struct cli_flag wait_only_flags[] = { CLI_FLAG_WAIT, CLI_FLAG_VERBOSE, { 0 } };

const struct cli_cmd cli_cmd_snapshot = {
	.name = "snapshot", .args = "<env>", .summary = "capture the live state as a new version",
	.flags = wait_only_flags, .min_pos = 1, .max_pos = 1, .run = run_snapshot,
};

/* ---- verify ---- */

/* The verdict phase's evidence: refused, or whose fault an error is, then
 * reward and source, printed last. */
static void print_reward(const struct json *final)
{
	const struct json *phases = json_get(final, "phases"), *ev = NULL, *reward, *refused;
	struct buf text = BUF_INIT;

	for (size_t i = 0; i < json_len(phases); i++)
		if (str_eq(json_get_str(json_at(phases, i), "Name"), "verdict"))
			ev = json_get(json_at(phases, i), "Evidence");
	refused = json_get(ev, "refused");
	if (refused && refused->type != JSON_NULL && refused->type != JSON_BOOL && json_len(refused) > 0) {
		json_write(&text, refused, JSON_COMPACT);
		printf("refused: %s\n", text.data);
		buf_reset(&text);
	}
	if (json_get_str(ev, "fault"))	/* no reward: whose fault, and what failed */
		printf("error (%s): %s\n", json_get_str(ev, "fault"), json_get_str(ev, "error") ? json_get_str(ev, "error") : "");
	reward = json_get(ev, "reward");
	if (reward)
		json_write(&text, reward, JSON_COMPACT);
	else
		buf_adds(&text, "null");
	printf("reward: %s (source: %s)\n", text.data, json_get_str(ev, "source") ? json_get_str(ev, "source") : "none");
	fflush(stdout);
	buf_release(&text);
}

static int run_verify(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct json *body = json_new_object();
	int rc;

	json_object_set_bool(body, "resume", cli_flag_bool(a, "resume", false));
	rc = env_action(c, a, "/verify", body, print_reward, e);
	json_free(body);
	return rc;
}

static const struct cli_flag verify_flags[] = {
	{ "resume", 0, CLI_BOOL, NULL, "unfreeze the agent service afterwards" },
	CLI_FLAG_WAIT,
	CLI_FLAG_VERBOSE,
	{ 0 },
};

const struct cli_cmd cli_cmd_verify = {
	.name = "verify", .args = "<env>",
	.summary = "freeze the agent, collect its submission, grade it on a fork; prints the reward",
	.flags = verify_flags, .min_pos = 1, .max_pos = 1, .run = run_verify,
};

/* ---- rollback ---- */

static int run_rollback(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct json *body = json_new_object();
	int rc;

	json_object_set_str(body, "version", a->pos[1]);
	rc = env_action(c, a, "/rollback", body, NULL, e);
	json_free(body);
	return rc;
}

const struct cli_cmd cli_cmd_rollback = {
	.name = "rollback", .args = "<env> <version>",
	.summary = "return an environment to a healthy snapshot of its own", .flags = wait_only_flags,
	.min_pos = 2, .max_pos = 2, .run = run_rollback,
};

/* ---- redeploy ---- */

static int run_redeploy(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct json *body = json_new_object();
	int rc;

	if (cli_flag_str(a, "version"))
		json_object_set_str(body, "version", cli_flag_str(a, "version"));
	if (cli_flag_str(a, "placement"))
		json_object_set_str(body, "placement", cli_flag_str(a, "placement"));
	rc = env_action(c, a, "/redeploy", body, NULL, e);
	json_free(body);
	return rc;
}

static const struct cli_flag redeploy_flags[] = {
	{ "version", 0, CLI_STR, "V", "the version to re-create (default: the current one)" },
	{ "placement", 0, CLI_STR, "spread|pack", "how a new host is chosen (default: the team's policy)" },
	CLI_FLAG_WAIT,
	CLI_FLAG_VERBOSE,
	{ 0 },
};

const struct cli_cmd cli_cmd_redeploy = {
	.name = "redeploy", .args = "<env>",
	.summary = "re-create an environment from one of its versions, on whichever host placement picks",
	.flags = redeploy_flags, .min_pos = 1, .max_pos = 1, .run = run_redeploy,
};

/* ---- exec ---- */

bool cli_exec_timed_out(int status, const char *msg)
{
	return status == 502 && msg &&
	       (str_has_prefix(msg, "env.exec: timed out") || str_has_prefix(msg, "env.exec timed out"));
}

int cli_exec_code(const struct json *resp, struct err *e)
{
	const struct json *code = json_get(resp, "exit_code");

	if (!code || code->type != JSON_INT || code->u.i < 0 || code->u.i > 255)
		return err_set(e, "exec: the host reported no exit code for the command");
	return (int)code->u.i;
}

/* Write a JSON string member's bytes to f. */
static int write_stream(FILE *f, const struct json *resp, const char *key)
{
	const struct json *v = json_get(resp, key);

	if (!v || v->type != JSON_STRING || v->u.str.len == 0)
		return 0;
	return fwrite(v->u.str.s, 1, v->u.str.len, f) == v->u.str.len && fflush(f) == 0 ? 0 : -1;
}

/* The answer as the command's own output and exit code. */
static int exec_passthrough(const struct json *resp, struct err *e)
{
	int code = cli_exec_code(resp, e);

	if (write_stream(stdout, resp, "stdout") < 0 || write_stream(stderr, resp, "stderr") < 0)
		return err_set(e, "exec: cannot write the command's output");
	if (json_get_bool(resp, "truncated", false)) {
		/* Say so, but keep the command's code: its output was cut, not lost. */
		fprintf(stderr, "denv: exec: the host cut the output at its limit\n");
	}
	return code;
}

/* The host names the environment by id (in "denv verify --resume <id>"):
 * say it the way the user did. */
static void name_as_given(struct err *e, const char *id, const char *ref)
{
	struct buf b = BUF_INIT;
	size_t idlen = strlen(id);
	const char *p = e->msg, *hit;

	if (!*id || str_eq(id, ref) || !strstr(p, id))
		return;
	while ((hit = strstr(p, id))) {
		buf_add(&b, p, (size_t)(hit - p));
		buf_adds(&b, ref);
		p = hit + idlen;
	}
	buf_adds(&b, p);
	err_set(e, "%s", b.data);
	buf_release(&b);
}

struct json *cli_exec_body(const struct cli_args *a, const char *verb, int64_t *timeout_s, struct err *e)
{
	const char *service = cli_flag_str(a, "service"), *timeout = cli_flag_str(a, "timeout");
	struct json *body, *cmd;

	*timeout_s = 0;
	if (!service || !*service) {
		err_set(e, "%s: --service is required", verb);
		return NULL;
	}
	if (timeout && (str_to_i64(timeout, timeout_s) < 0 || *timeout_s <= 0)) {
		err_set(e, "%s: --timeout must be a positive number of seconds", verb);
		return NULL;
	}
	body = json_new_object();
	cmd = json_new_array();
	json_object_set_str(body, "service", service);
	for (int i = 1; i < a->npos; i++)
		json_array_push(cmd, json_new_str(a->pos[i]));
	json_object_set(body, "cmd", cmd);
	if (*timeout_s > 0)
		json_object_set_int(body, "timeout_sec", *timeout_s);
	return body;
}

/* Returns the exit code to pass on, -1, or CLI_RUN_USAGE (cli_cmd.own_fail). */
static int run_exec(struct cli *c, const struct cli_args *a, struct err *e)
{
	bool as_json = cli_flag_bool(a, "json", false);
	bool interactive = cli_flag_bool(a, "interactive", false), tty = cli_flag_bool(a, "tty", false);
	char id[CLI_ID_MAX] = "";
	struct json *body, *resp = NULL;
	struct buf path = BUF_INIT;
	int64_t t = 0;
	int rc = -1;

	if (!(body = cli_exec_body(a, "exec", &t, e)))
		return CLI_RUN_USAGE;
	if (interactive)
		json_object_set_bool(body, "stdin", true);
	if (tty) {
		int rows, cols;

		json_object_set_bool(body, "tty", true);
		if (cli_tty_size(1, &rows, &cols) == 0 || cli_tty_size(0, &rows, &cols) == 0) {
			json_object_set_int(body, "rows", rows);
			json_object_set_int(body, "cols", cols);
		}
	}
	if ((interactive || tty) && as_json) {
		err_set(e, "exec: -i and -t need the stream; they do not go with --json");
		rc = CLI_RUN_USAGE;
		goto out;
	}
	if (cli_resolve_env(c, a->pos[0], id, sizeof(id), e) < 0)
		goto out;
	cli_path(&path, "/v1/envs/", id, "/exec");
	/* Streamed unless --json (whose answer is the one-shot's). */
	if (!as_json) {
		rc = cli_exec_stream(c, id, body, t, e);
		if (rc != CLI_EXEC_NO_STREAM) {
			if (rc < 0)
				name_as_given(e, id, a->pos[0]);
			goto out;
		}
		rc = -1;
		if (interactive || tty) {
			err_set(e, "exec: this server has no exec stream, which -i and -t need");
			goto out;
		}
	}
	/* The server answers when the command ends: wait at least that long. */
	if (t * 1000 + CLI_EXEC_SLACK_MS > CLI_HTTP_TIMEOUT_MS)
		c->timeout_ms = t * 1000 + CLI_EXEC_SLACK_MS;
	if (cli_call(c, "POST", path.data, body, &resp, e) < 0) {
		if (cli_exec_timed_out(e->code, e->msg))
			rc = CLI_EXEC_TIMEOUT;
		name_as_given(e, id, a->pos[0]);
		goto out;
	}
	/* --json: the whole answer, exit 0 whatever the command's code. */
	rc = as_json ? cli_print_json(resp, e) : exec_passthrough(resp, e);
out:
	json_free(body);
	json_free(resp);
	buf_release(&path);
	return rc;
}

static const struct cli_flag exec_flags[] = {
	{ "service", 0, CLI_STR, "S", "service to run the command in (required)" },
	{ "timeout", 0, CLI_STR, "SEC", "server-side timeout in seconds (default 120)" },
	{ "json", 0, CLI_BOOL, NULL, "print {exit_code, stdout, stderr} and exit 0 instead" },
	{ "interactive", 'i', CLI_BOOL, NULL, "send our stdin to the command (its end too)" },
	{ "tty", 't', CLI_BOOL, NULL, "give the command a terminal of our size (stderr joins stdout)" },
	{ 0 },
};

const struct cli_cmd cli_cmd_exec = {
	.name = "exec", .args = "<env> [--] <cmd> [args...]",
	.summary = "run a command in a service: its stdout, stderr and exit code",
	.notes = "The command's stdout goes to stdout and its stderr to stderr, as bytes, while it\n"
		 "runs (streamed over a WebSocket; from a server without the stream, once it has\n"
		 "ended, stdout first, then stderr). Exit status: the command's own code;\n"
		 "124 it ran past --timeout and was killed; 125 denv could not run it (usage,\n"
		 "credential, environment, host; a \"denv: \" line on stderr says why).\n"
		 "With --json: the answer as JSON and 0, whatever the command's code.\n"
		 "-i sends stdin to the command; -t gives it a terminal (ours in raw mode\n"
		 "meanwhile; a resize follows). `denv exec -it ENV -- sh` works like docker's.\n"
		 "If denv goes away mid-command, the command is killed.\n",
	.flags = exec_flags, .min_pos = 2, .max_pos = -1, .stop_after = 1, .own_fail = CLI_EXEC_FAIL,
	.run = run_exec,
};
