/*
 * driver_daytona.c: environment commands on a Daytona target, driven from
 * the control plane over Daytona's REST API and the toolbox API of each
 * sandbox (targets.md, "What each driver does today"). Wire shapes are the
 * daytona Python SDK 0.226.1's and its generated clients', which the fake
 * t/fakes/fake_daytona.py is checked against (t/fakes/test_sdks.py):
 *
 *   env.create   POST {api}/sandbox {buildInfo: {dockerfileContent: "FROM image"}, env, labels},
 *                then GET {api}/sandbox/{id} until "started"; a command starts in the background
 *   env.exec     POST {toolbox}/{id}/process/execute {command, timeout}: {exitCode, result}
 *   env.put      POST {toolbox}/{id}/files/upload-v2?path=P, multipart part "file", once per file
 *   env.get      GET  {toolbox}/{id}/files/download?path=P, one file, answered as a tar of it
 *   env.snapshot POST {api}/sandbox/{id}/snapshot {name}, then GET until out of "snapshotting"
 *   env.fork     POST {api}/sandbox {snapshot: name, ...}: a new sandbox from that snapshot
 *   env.destroy  DELETE {api}/sandbox/{id}
 *
 * {toolbox} is the sandbox's toolboxProxyUrl as Daytona answers it, kept on
 * the environment's row (Driver) with the sandbox id. Every call carries the
 * cloud's key as a bearer token, as the SDK sends it to both APIs. Daytona's
 * execute answers the command's output as one text (stdout and stderr
 * together), so exec reports it all as stdout. Daytona names snapshots per
 * organisation, so an environment's snapshot is named from the environment
 * and the snapshot ("denv-<env>-<name>"), which lets a fork find it from
 * its payload alone. Verify and the rest are refused as targets.md says.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

#define DTN_NAME_MAX 128		/* a Daytona snapshot name */
#define DTN_EXTRA_MS 10000		/* a command's own timeout plus this, per call */
#define DTN_COMMAND_TIMEOUT_S 30	/* starting the service's command in the background */
#define DTN_EXEC_TIMEOUT_S 120		/* env.exec without timeout_sec (Daytona's own default is 10) */

enum step { S_CREATE, S_WAIT, S_COMMAND, S_EXEC, S_PROBE, S_PUT, S_GET, S_SNAPSHOT, S_SNAP_WAIT, S_FORK };

struct dtn_op {
	struct cp_drv_op d;	/* first: driver.c runs the operation's life through it */
	enum step step;
	char sandbox[CP_DRV_ID_MAX];
	char toolbox[CP_DRV_URL_MAX];	/* the sandbox's toolboxProxyUrl */
	char snap[DTN_NAME_MAX];
};

/* One call to the REST API (toolbox false) or to the sandbox's toolbox. */
static int call(struct cp_drv_op *d, const char *method, bool toolbox, const char *path, const char *ctype,
		const void *body, size_t len, size_t max_body)
{
	struct dtn_op *op = (struct dtn_op *)d;
	struct cp_drv_headers hs = { 0 };

	cp_drv_header(&hs, "Authorization: Bearer %s", op->d.token);
	cp_drv_header(&hs, "X-Daytona-Source: denv-cp");
	if (toolbox)
		return cp_drv_send(&op->d, method, &hs, ctype, body, len, max_body, "toolbox", "%s/%s%s", op->toolbox,
				   op->sandbox, path);
	return cp_drv_send(&op->d, method, &hs, ctype, body, len, max_body, path, "%s%s", op->d.cp->cfg.daytona_api_url,
			   path);
}

/* ---- the environment's sandbox ---- */

static int load_sandbox(struct dtn_op *op)
{
	const struct json *d = cp_drv_sandbox(&op->d, op->sandbox, sizeof(op->sandbox));
	const char *tb = json_get_str(d, "toolbox_url");

	if (!d)
		return -1;
	str_copy(op->toolbox, sizeof(op->toolbox), tb ? tb : "");
	return 0;
}

/* Daytona's name for snapshot name of environment env. */
static void snap_name(char *out, size_t n, const char *env, const char *name)
{
	snprintf(out, n, "denv-%s-%s", env ? env : "", name ? name : "");
	for (char *p = out; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
		      *p == '_' || *p == '.'))
			*p = '-';
}

/* ---- env.create and env.fork: a new sandbox, waited for ---- */

static void start_sandbox(struct dtn_op *op, const char *from_snapshot)
{
	const struct json *s = cp_drv_one_service(&op->d, from_snapshot ? NULL : "to build the Daytona sandbox from");
	const char *image = json_get_str(s, "image");
	struct json *body;

	if (!s)
		return;
	body = cp_obj("env", cp_drv_env_object(json_get(s, "env")), "labels",
		      cp_obj("denv_env", json_new_str(op->d.env_id), NULL), NULL);
	if (from_snapshot) {
		json_object_set_str(body, "snapshot", from_snapshot);
	} else {
		struct buf df = BUF_INIT;

		/* what the SDK sends for an image given by name (Image.base) */
		buf_addf(&df, "FROM %s\n", image);
		json_object_set(body, "buildInfo", cp_obj("dockerfileContent", json_new_strn(df.data, df.len), NULL));
		buf_release(&df);
	}
	cp_drv_wait_begin(&op->d);
	cp_drv_call_json(&op->d, "POST", false, body, "/sandbox");
	json_free(body);
}

static void start_exec(struct dtn_op *op, const struct json *cmd, int64_t timeout_s);

/* The sandbox is up: record it, then start the service's command. */
static void started(struct dtn_op *op)
{
	struct json *argv = cp_drv_up(&op->d, op->step == S_WAIT && op->snap[0], "limited", op->sandbox);

	if (!argv)
		return;
	op->step = S_COMMAND;
	start_exec(op, argv, DTN_COMMAND_TIMEOUT_S);
	json_free(argv);
}

static void look(struct ev *ev, void *arg)
{
	struct dtn_op *op = arg;

	(void)ev;
	cp_drv_call_json(&op->d, "GET", false, NULL, "/sandbox/%s", op->sandbox);
}

/* A sandbox's answer while it starts (S_WAIT) or snapshots (S_SNAP_WAIT). */
static void state_answered(struct dtn_op *op, const struct http_client_resp *resp)
{
	struct json *doc = NULL;
	struct err pe;
	const char *state, *id, *tb;

	if (json_parse(resp->body.data, resp->body.len, NULL, &doc, &pe) < 0 || !(state = json_get_str(doc, "state"))) {
		json_free(doc);
		cp_drv_fail(&op->d, "Daytona answered %d without a sandbox state", resp->status);
		return;
	}
	if (op->step == S_CREATE || op->step == S_FORK) {
		id = json_get_str(doc, "id");
		tb = json_get_str(doc, "toolboxProxyUrl");
		if (!id || !*id || strlen(id) >= sizeof(op->sandbox) || !tb ||
		    (strncmp(tb, "https://", 8) && strncmp(tb, "http://", 7)) || strlen(tb) >= sizeof(op->toolbox) / 2) {
			json_free(doc);
			cp_drv_fail(&op->d, "POST /sandbox answered %d without a sandbox id and toolboxProxyUrl", resp->status);
			return;
		}
		str_copy(op->sandbox, sizeof(op->sandbox), id);
		str_copy(op->toolbox, sizeof(op->toolbox), tb);
		while (strlen(op->toolbox) && op->toolbox[strlen(op->toolbox) - 1] == '/')
			op->toolbox[strlen(op->toolbox) - 1] = '\0';
		cp_update(op->d.cp, "environments", op->d.env_id,
			  cp_obj("Driver", cp_obj("provider", json_new_str("daytona"), "sandbox_id", json_new_str(id),
						  "toolbox_url", json_new_str(op->toolbox), NULL), NULL));
		log_info("daytona", "env %s: sandbox %s created%s%s", op->d.env_id, id, op->snap[0] ? " from snapshot " : "",
			 op->snap);
		op->step = S_WAIT;
	}
	if (str_eq(state, "error") || str_eq(state, "build_failed") || str_eq(state, "destroyed")) {
		const char *why = json_get_str(doc, "errorReason");

		cp_drv_fail(&op->d, "sandbox %s is %s%s%.200s", op->sandbox, state, why && *why ? ": " : "", why ? why : "");
	} else if (op->step == S_WAIT && str_eq(state, "started")) {
		started(op);
	} else if (op->step == S_SNAP_WAIT && !str_eq(state, "snapshotting")) {
		cp_drv_snapshot_done(&op->d, "daytona snapshot", op->snap);
	} else {
		char what[sizeof(op->sandbox) + 16];

		snprintf(what, sizeof(what), "sandbox %s", op->sandbox);
		cp_drv_wait_more(&op->d, what, state, look);
	}
	json_free(doc);
}

/* ---- env.exec: one shell command line ---- */

/* argv as one POSIX shell line, each word in single quotes. */
static void shell_line(struct buf *out, const struct json *cmd)
{
	for (size_t i = 0; i < json_len(cmd); i++) {
		if (i)
			buf_addch(out, ' ');
		buf_add_shell_word(out, json_at(cmd, i)->u.str.s);
	}
}

static void start_exec(struct dtn_op *op, const struct json *cmd, int64_t timeout_s)
{
	struct buf line = BUF_INIT;
	struct json *body;

	if (!cp_drv_argv_ok(&op->d, cmd))
		return;
	shell_line(&line, cmd);
	body = cp_obj("command", json_new_strn(line.data, line.len), "timeout", json_new_int(timeout_s), NULL);
	cp_drv_call_json(&op->d, "POST", true, body, "/process/execute");
	json_free(body);
	buf_release(&line);
}

static void exec_answered(struct dtn_op *op, const struct http_client_resp *resp)
{
	struct json *doc = NULL, *res;
	struct err pe;
	const struct json *out;
	int64_t code;

	if (json_parse(resp->body.data, resp->body.len, NULL, &doc, &pe) < 0 ||
	    !(out = json_get(doc, "result")) || out->type != JSON_STRING) {
		json_free(doc);
		cp_drv_fail(&op->d, "process/execute answered %d without a result", resp->status);
		return;
	}
	code = json_get_int(doc, "exitCode", json_get_int(doc, "code", -1));
	if (op->step == S_PROBE) {
		int rc = cp_drv_probed(&op->d, code, out->u.str.s);

		json_free(doc);
		if (rc == 0) {
			op->step = S_PUT;
			cp_drv_put_next(&op->d);
		}
		return;
	}
	if (op->step == S_COMMAND) {
		json_free(doc);
		cp_drv_command_started(&op->d, code);
		return;
	}
	res = cp_obj("exit_code", json_new_int(code), "stdout", json_dup(out), "stderr", json_new_str(""), NULL);
	json_free(doc);
	cp_drv_done(&op->d, true, res);
}

/* ---- env.put: the archive's files one at a time, multipart ---- */

static void put_one(struct cp_drv_op *d, const struct cp_drv_file *f)
{
	struct buf path = BUF_INIT;

	cp_drv_file_route(&path, "/files/upload-v2?path=", f->path);
	cp_drv_put_multipart(d, f, path.data);
	buf_release(&path);
}

/* ---- answers ---- */

static void answered(struct cp_drv_op *d, const struct http_client_resp *resp)
{
	struct dtn_op *op = (struct dtn_op *)d;

	switch (op->step) {
	case S_CREATE:
	case S_FORK:
	case S_WAIT:
	case S_SNAPSHOT:
	case S_SNAP_WAIT:
		if (op->step == S_SNAPSHOT)
			op->step = S_SNAP_WAIT;
		state_answered(op, resp);
		break;
	case S_EXEC:
	case S_COMMAND:
	case S_PROBE:
		exec_answered(op, resp);
		break;
	default:	/* S_PUT, S_GET: driver.c answers them */
		break;
	}
}

/* ---- entry ---- */

/* By path: extract under it. By target: docker cp's rules, after a look at it. */
static void begin_put(struct dtn_op *op, const struct buf *data)
{
	int how = cp_drv_put_begin(&op->d, data);
	struct json *argv;

	if (how == 0) {
		cp_drv_put_next(&op->d);
	} else if (how == 1) {
		op->step = S_PROBE;
		argv = cp_drv_probe_argv(json_get_str(op->d.payload, "target"));
		start_exec(op, argv, DTN_COMMAND_TIMEOUT_S);
		json_free(argv);
	}
}

static void begin(struct cp_drv_op *d, int step, const struct buf *data)
{
	struct dtn_op *op = (struct dtn_op *)d;
	struct json *b;

	op->step = (enum step)step;
	if (op->step == S_CREATE) {
		start_sandbox(op, NULL);
		return;
	}
	if (op->step == S_FORK) {
		snap_name(op->snap, sizeof(op->snap), json_get_str(op->d.payload, "from_env"),
			  json_get_str(op->d.payload, "from_snapshot"));
		start_sandbox(op, op->snap);
		return;
	}
	if (load_sandbox(op) < 0)
		return;
	switch (op->step) {
	case S_EXEC:
		start_exec(op, json_get(op->d.payload, "cmd"), json_get_int(op->d.payload, "timeout_sec", DTN_EXEC_TIMEOUT_S));
		break;
	case S_PUT:
		begin_put(op, data);
		break;
	case S_GET:
		cp_drv_get(&op->d, "/files/download?path=", NULL);
		break;
	case S_SNAPSHOT:
		snap_name(op->snap, sizeof(op->snap), op->d.env_id, json_get_str(op->d.payload, "name"));
		cp_drv_wait_begin(&op->d);
		b = cp_obj("name", json_new_str(op->snap), NULL);
		cp_drv_call_json(&op->d, "POST", false, b, "/sandbox/%s/snapshot", op->sandbox);
		json_free(b);
		break;
	default:
		break;
	}
}

static const struct cp_drv_kind daytona_kinds[] = {
	{ "env.create", S_CREATE },	{ "env.exec", S_EXEC }, { "env.put", S_PUT },	      { "env.get", S_GET },
	{ "env.snapshot", S_SNAPSHOT }, { "env.fork", S_FORK },
};

const struct cp_drv_provider cp_drv_daytona = {
	.name = "daytona", .title = "Daytona", .kinds = daytona_kinds,
	.nkinds = sizeof(daytona_kinds) / sizeof(daytona_kinds[0]), .destroy_route = "/sandbox/",
	.op_size = sizeof(struct dtn_op), .exec_default_s = DTN_EXEC_TIMEOUT_S, .exec_extra_ms = DTN_EXTRA_MS,
	.begin = begin, .call = call, .answered = answered, .put = put_one,
};
