/* cmd_bg.c: denv bg: background commands of an environment (denv-cp(8),
 * "Background commands"): start, list, status, output, wait, kill. */
#include <stdio.h>
#include <string.h>

#include "base/enc.h"
#include "base/str.h"
#include "cli/cli.h"
#include "http/http.h"
#include "json/json.h"

#define BG_FOLLOW_WAIT_S 1	/* --follow: how long one read waits for the end */
#define BG_WAIT_SLICE_S 600	/* one wait request (the server's most) */

/* /v1/envs/<id>/commands[/<cmd>][<tail>] into path; 0 / -1 with e. */
static int bg_path(struct cli *c, const char *ref, const char *cmd, const char *tail, struct buf *path, struct err *e)
{
	if (cli_env_path(c, ref, "/commands", path, e) < 0)
		return -1;
	if (cmd) {
		buf_addch(path, '/');
		http_pct_encode(path, cmd, "");
	}
	if (tail)
		buf_adds(path, tail);
	return 0;
}

static int run_start(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct json *body, *resp = NULL;
	struct buf path = BUF_INIT;
	int64_t t;
	int rc = -1;

	if (!(body = cli_exec_body(a, "bg start", &t, e)))
		return CLI_USAGE;
	if (bg_path(c, a->pos[0], NULL, NULL, &path, e) == 0 && cli_call(c, "POST", path.data, body, &resp, e) == 0) {
		if (cli_flag_bool(a, "json", false))
			rc = cli_print_json(resp, e);
		else
		{
			const char *id = json_get_str(json_get(resp, "command"), "id");

			rc = printf("%s\n", id ? id : "") < 0 ? -1 : 0;
		}
	}
	json_free(body);
	json_free(resp);
	buf_release(&path);
	return rc;
}

static int run_list(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct buf path = BUF_INIT;
	int rc = bg_path(c, a->pos[0], NULL, NULL, &path, e);

	if (rc == 0)
		rc = cli_get_print(c, path.data, e);
	buf_release(&path);
	return rc;
}

static int run_status(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct buf path = BUF_INIT;
	int rc = bg_path(c, a->pos[0], a->pos[1], NULL, &path, e);

	if (rc == 0)
		rc = cli_get_print(c, path.data, e);
	buf_release(&path);
	return rc;
}

/* Decode the base64 member key of cmd to f; how many bytes, or -1. */
static int64_t write_b64(FILE *f, const struct json *cmd, const char *key, struct err *e)
{
	const struct json *v = json_get(cmd, key);
	struct buf raw = BUF_INIT;
	int64_t n = -1;

	if (!v || v->type != JSON_STRING)
		return err_set(e, "bg output: the answer has no %s", key);
	if (enc_base64_decode(&raw, v->u.str.s, v->u.str.len, ENC_BASE64, e) == 0 &&
	    (raw.len == 0 || (fwrite(raw.data, 1, raw.len, f) == raw.len && fflush(f) == 0)))
		n = (int64_t)raw.len;
	else if (!e->msg[0])
		err_set(e, "bg output: cannot write the output");
	buf_release(&raw);
	return n;
}

static int run_output(struct cli *c, const struct cli_args *a, struct err *e)
{
	bool follow = cli_flag_bool(a, "follow", false);
	int64_t off[2] = { 0, 0 };
	int rc;

	for (;;) {
		struct buf path = BUF_INIT;
		struct json *resp = NULL;
		const struct json *cmd;
		int64_t got[2];
		bool more;

		if (bg_path(c, a->pos[0], a->pos[1], "/output", &path, e) < 0) {
			buf_release(&path);
			return -1;
		}
		buf_addf(&path, "?stdout_offset=%lld&stderr_offset=%lld", (long long)off[0], (long long)off[1]);
		if (follow)
			buf_addf(&path, "&wait=%d", BG_FOLLOW_WAIT_S);
		rc = cli_call(c, "GET", path.data, NULL, &resp, e);
		buf_release(&path);
		if (rc < 0)
			return -1;
		cmd = json_get(resp, "command");
		got[0] = write_b64(stdout, cmd, "stdout", e);
		got[1] = got[0] < 0 ? -1 : write_b64(stderr, cmd, "stderr", e);
		if (got[1] < 0) {
			json_free(resp);
			return -1;
		}
		off[0] += got[0];
		off[1] += got[1];
		/* More recorded than this answer carried, or more to come: read on. */
		more = off[0] < json_get_int(cmd, "stdout_bytes", 0) || off[1] < json_get_int(cmd, "stderr_bytes", 0) ||
		       (follow && !json_get_bool(cmd, "done", true));
		json_free(resp);
		if (!more)
			return 0;
	}
}

/* The command's exit code once it has ended (124 timed out, 125 lost). */
static int run_wait(struct cli *c, const struct cli_args *a, struct err *e)
{
	const char *timeout = cli_flag_str(a, "timeout");
	int64_t left = -1;

	if (timeout && (str_to_i64(timeout, &left) < 0 || left < 0))
		return err_set(e, "bg wait: --timeout must be a number of seconds"), CLI_USAGE;
	for (;;) {
		int64_t slice = left < 0 || left > BG_WAIT_SLICE_S ? BG_WAIT_SLICE_S : left;
		struct buf path = BUF_INIT;
		struct json *body = json_new_object(), *resp = NULL;
		const struct json *cmd;
		int rc;

		json_object_set_int(body, "timeout_sec", slice);
		c->timeout_ms = slice * 1000 + CLI_EXEC_SLACK_MS;
		rc = bg_path(c, a->pos[0], a->pos[1], "/wait", &path, e) < 0 ? -1
		     : cli_call(c, "POST", path.data, body, &resp, e);
		json_free(body);
		buf_release(&path);
		if (rc < 0)
			return -1;
		cmd = json_get(resp, "command");
		if (json_get_bool(cmd, "done", false)) {
			const char *state = json_get_str(cmd, "state");

			rc = json_get_bool(cmd, "timed_out", false) ? CLI_EXEC_TIMEOUT
			     : str_eq(state, "lost")		  ? CLI_EXEC_FAIL
								  : (int)(json_get_int(cmd, "exit_code", -1) & 0xff);
			if (str_eq(state, "lost"))
				err_set(e, "bg wait: the command's supervisor on the host is gone; its end is not known");
			json_free(resp);
			return str_eq(state, "lost") ? -1 : rc;
		}
		json_free(resp);
		if (left >= 0 && (left -= slice) <= 0)
			return err_set(e, "bg wait: the command still runs after %s s", timeout), CLI_EXEC_TIMEOUT;
	}
}

static int run_kill(struct cli *c, const struct cli_args *a, struct err *e)
{
	const char *sig = cli_flag_str(a, "signal");
	struct buf path = BUF_INIT;
	struct json *body;
	int rc = -1;

	if (bg_path(c, a->pos[0], a->pos[1], "/signal", &path, e) == 0) {
		body = json_new_object();
		json_object_set_str(body, "signal", sig && *sig ? sig : "KILL");
		rc = cli_send_print(c, "POST", path.data, NULL, NULL, body, e);
	}
	buf_release(&path);
	return rc;
}

static const struct cli_flag start_flags[] = {
	{ "service", 0, CLI_STR, "S", "service to run the command in (required)" },
	{ "timeout", 0, CLI_STR, "SEC", "kill it after SEC seconds (default and most: 7 days)" },
	{ "json", 0, CLI_BOOL, NULL, "print the whole answer, not only the id" },
	{ 0 },
};

static const struct cli_flag output_flags[] = {
	{ "follow", 'f', CLI_BOOL, NULL, "keep reading until the command ends" },
	{ 0 },
};

static const struct cli_flag wait_flags[] = {
	{ "timeout", 0, CLI_STR, "SEC", "give up after SEC seconds (exit 124)" },
	{ 0 },
};

static const struct cli_flag kill_flags[] = {
	{ "signal", 's', CLI_STR, "SIG", "HUP INT QUIT KILL TERM USR1 USR2 (default KILL)" },
	{ 0 },
};

static const struct cli_cmd bg_subs[] = {
	{ .name = "start", .args = "<env> [--] <cmd> [args...]",
	  .summary = "start a command that runs on after denv exits; prints its id",
	  .flags = start_flags, .min_pos = 2, .max_pos = -1, .stop_after = 1, .run = run_start },
	{ .name = "list", .args = "<env>", .summary = "the environment's background commands",
	  .min_pos = 1, .max_pos = 1, .run = run_list },
	{ .name = "status", .args = "<env> <id>", .summary = "one command's state, exit code and output sizes",
	  .min_pos = 2, .max_pos = 2, .run = run_status },
	{ .name = "output", .args = "<env> <id>",
	  .summary = "the command's recorded stdout and stderr, as bytes, to stdout and stderr",
	  .flags = output_flags, .min_pos = 2, .max_pos = 2, .run = run_output },
	{ .name = "wait", .args = "<env> <id>", .summary = "wait for the end; exit with the command's code",
	  .notes = "Exit status: the command's own code; 124 it timed out (or --timeout passed);\n"
		   "125 denv could not tell (a \"denv: \" line on stderr says why).\n",
	  .flags = wait_flags, .min_pos = 2, .max_pos = 2, .own_fail = CLI_EXEC_FAIL, .run = run_wait },
	{ .name = "kill", .args = "<env> <id>", .summary = "signal the command and what it started",
	  .flags = kill_flags, .min_pos = 2, .max_pos = 2, .run = run_kill },
	{ 0 },
};

const struct cli_cmd cli_cmd_bg = {
	.name = "bg", .summary = "background commands: start, list, status, output, wait, kill", .subs = bg_subs,
};
