/*
 * driver_e2b.c: environment commands on an E2B target, driven from the
 * control plane over E2B's REST API and the envd agent in each sandbox
 * (targets.md, "What each driver does today"). Wire shapes are the e2b
 * Python SDK 2.56's, which the fake t/fakes/fake_e2b.py is checked against:
 *
 *   env.create   POST {api}/v2/sandboxes {templateID: image, timeout, metadata, envVars}
 *   env.exec     POST {envd}/process.Process/Start, Connect server stream, JSON codec
 *   env.put      POST {envd}/files?path=P (application/octet-stream), once per file
 *   env.get      GET  {envd}/files?path=P, one file, answered as a tar of it
 *   env.snapshot POST {api}/sandboxes/{id}/pause, then POST {api}/v2/sandboxes/{id}/connect
 *   env.destroy  DELETE {api}/sandboxes/{id}
 *
 * {envd} is https://49983-{id}.{domain} (the sandbox's own host, as the SDK
 * builds it), or DENV_E2B_SANDBOX_URL for every sandbox; each envd call also
 * names the sandbox in E2b-Sandbox-Id as E2B's sandbox proxy expects. The
 * sandbox id and its envd access token live on the environment's row
 * (Driver), written when env.create succeeds. Everything else, fork and
 * verify among them, is refused with the words of targets.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/enc.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

#define E2B_ENVD_PORT 49983			/* envd's port in every sandbox (the SDK's envd_port) */
#define E2B_DEFAULT_DOMAIN "e2b.app"		/* the SDK's E2B_DOMAIN default */
#define E2B_SANDBOX_TIMEOUT_S 3600		/* the sandbox's time to live at create */
#define E2B_STREAM_MAX ((size_t)16 << 20)	/* a command's whole Connect stream */
#define E2B_EXTRA_MS 10000			/* a command's own timeout plus this, per call */
#define E2B_EXEC_TIMEOUT_S 120			/* env.exec without timeout_sec */

enum step { S_CREATE, S_COMMAND, S_EXEC, S_PROBE, S_PUT, S_GET, S_PAUSE, S_RESUME };

struct e2b_op {
	struct cp_drv_op d;	/* first: driver.c runs the operation's life through it */
	enum step step;
	char sandbox[CP_DRV_ID_MAX];
	char domain[128];
};

/* One call to the REST API (envd false) or to the sandbox's envd. */
static int call(struct cp_drv_op *d, const char *method, bool envd, const char *path, const char *ctype,
		const void *body, size_t len, size_t max_body)
{
	struct e2b_op *op = (struct e2b_op *)d;
	const char *sandbox_url = op->d.cp->cfg.e2b_sandbox_url;
	struct cp_drv_headers hs = { 0 };

	if (!envd) {
		cp_drv_header(&hs, "X-API-KEY: %s", op->d.token);
		return cp_drv_send(&op->d, method, &hs, ctype, body, len, max_body, path, "%s%s", op->d.cp->cfg.e2b_api_url,
				   path);
	}
	cp_drv_header(&hs, "E2b-Sandbox-Id: %s", op->sandbox);
	cp_drv_header(&hs, "E2b-Sandbox-Port: %d", E2B_ENVD_PORT);
	if (op->d.secret[0])
		cp_drv_header(&hs, "X-Access-Token: %s", op->d.secret);
	if (op->step == S_EXEC || op->step == S_COMMAND || op->step == S_PROBE)
		cp_drv_header(&hs, "Connect-Protocol-Version: 1");
	if (sandbox_url && *sandbox_url)
		return cp_drv_send(&op->d, method, &hs, ctype, body, len, max_body, "envd", "%s%s", sandbox_url, path);
	return cp_drv_send(&op->d, method, &hs, ctype, body, len, max_body, "envd", "https://%d-%s.%s%s", E2B_ENVD_PORT,
			   op->sandbox, op->domain[0] ? op->domain : E2B_DEFAULT_DOMAIN, path);
}

/* ---- the environment's sandbox ---- */

static int load_sandbox(struct e2b_op *op)
{
	const struct json *d = cp_drv_sandbox(&op->d, op->sandbox, sizeof(op->sandbox));

	if (!d)
		return -1;
	str_copy(op->d.secret, sizeof(op->d.secret), json_get_str(d, "access_token") ? json_get_str(d, "access_token") : "");
	str_copy(op->domain, sizeof(op->domain), json_get_str(d, "domain") ? json_get_str(d, "domain") : "");
	return 0;
}

/* ---- env.create ---- */

static void start_create(struct e2b_op *op)
{
	const struct json *s = cp_drv_one_service(&op->d, "to use as the E2B template");
	struct json *body, *vars;

	if (!s)
		return;
	vars = cp_drv_env_object(json_get(s, "env"));	/* E2B wants an object */
	body = cp_obj("templateID", json_new_str(json_get_str(s, "image")), "timeout", json_new_int(E2B_SANDBOX_TIMEOUT_S), "metadata",
		      cp_obj("denv_env", json_new_str(op->d.env_id), NULL), "envVars", vars, NULL);
	cp_drv_call_json(&op->d, "POST", false, body, "/v2/sandboxes");
	json_free(body);
}

static void start_exec(struct e2b_op *op, const struct json *cmd);

/* The service's command runs in the background, as a container's would. */
static void start_command(struct e2b_op *op)
{
	struct json *argv = cp_drv_up(&op->d, false, "provider network config", op->sandbox);

	if (!argv)
		return;
	op->step = S_COMMAND;
	start_exec(op, argv);
	json_free(argv);
}

static void created(struct e2b_op *op, const struct http_client_resp *resp)
{
	struct json *doc = NULL;
	struct err pe;
	const char *id, *tok, *dom;

	if (json_parse(resp->body.data, resp->body.len, NULL, &doc, &pe) < 0 ||
	    !(id = json_get_str(doc, "sandboxID")) || !*id) {
		json_free(doc);
		cp_drv_fail(&op->d, "POST /v2/sandboxes answered %d without a sandboxID", resp->status);
		return;
	}
	tok = json_get_str(doc, "envdAccessToken");
	dom = json_get_str(doc, "domain");
	cp_update(op->d.cp, "environments", op->d.env_id,
		  cp_obj("Driver", cp_obj("provider", json_new_str("e2b"), "sandbox_id", json_new_str(id), "access_token",
					  json_new_str(tok ? tok : ""), "domain", json_new_str(dom ? dom : ""), NULL),
			 NULL));
	log_info("e2b", "env %s: sandbox %s created from template %s", op->d.env_id, id,
		 json_get_str(doc, "templateID") ? json_get_str(doc, "templateID") : "?");
	str_copy(op->sandbox, sizeof(op->sandbox), id);
	str_copy(op->d.secret, sizeof(op->d.secret), tok ? tok : "");
	str_copy(op->domain, sizeof(op->domain), dom ? dom : "");
	json_free(doc);	/* id, tok and dom point into it */
	start_command(op);
}

/* ---- env.exec: a Connect server stream in the JSON codec ---- */

static void start_exec(struct e2b_op *op, const struct json *cmd)
{
	struct json *args = json_new_array(), *msg;
	struct buf b = BUF_INIT;
	char *text;
	size_t n;
	unsigned char hdr[5];

	if (!cp_drv_argv_ok(&op->d, cmd)) {
		json_free(args);
		return;
	}
	for (size_t i = 1; i < json_len(cmd); i++)
		json_array_push(args, json_dup(json_at(cmd, i)));
	msg = cp_obj("process", cp_obj("cmd", json_dup(json_at(cmd, 0)), "args", args, NULL), "stdin",
		     json_new_bool(false), NULL);
	text = json_to_string(msg, JSON_COMPACT);
	json_free(msg);
	n = strlen(text);
	/* The envelope: one flags byte (0, a message) and a big-endian length. */
	hdr[0] = 0;
	hdr[1] = (unsigned char)(n >> 24);
	hdr[2] = (unsigned char)(n >> 16);
	hdr[3] = (unsigned char)(n >> 8);
	hdr[4] = (unsigned char)n;
	buf_add(&b, hdr, sizeof(hdr));
	buf_add(&b, text, n);
	free(text);
	call(&op->d, "POST", true, "/process.Process/Start", "application/connect+json", b.data, b.len, E2B_STREAM_MAX);
	buf_release(&b);
}

/* One StartResponse event into the result; -1 with msg on a malformed one. */
static int exec_event(const struct json *m, struct buf *out, struct buf *errb, int64_t *code, bool *ended)
{
	const struct json *ev = json_get(m, "event"), *data = json_get(ev, "data"), *end = json_get(ev, "end");
	const char *s;
	struct err e;

	if (data) {
		if ((s = json_get_str(data, "stdout")) && enc_base64_decode(out, s, strlen(s), ENC_BASE64, &e) < 0)
			return -1;
		if ((s = json_get_str(data, "stderr")) && enc_base64_decode(errb, s, strlen(s), ENC_BASE64, &e) < 0)
			return -1;
	}
	if (end) {
		/* proto3 JSON leaves a zero exitCode out */
		*code = json_get_int(end, "exitCode", 0);
		*ended = true;
	}
	return 0;
}

static void exec_answered(struct e2b_op *op, const struct http_client_resp *resp)
{
	const unsigned char *p = (const unsigned char *)resp->body.data;
	size_t len = resp->body.len, off = 0;
	struct buf out, errb;
	int64_t code = -1;
	bool ended = false;
	char emsg[ERR_MSG_MAX] = "";

	buf_init(&out, E2B_STREAM_MAX);
	buf_init(&errb, E2B_STREAM_MAX);
	while (off + 5 <= len && !emsg[0]) {
		unsigned flags = p[off];
		size_t n = ((size_t)p[off + 1] << 24) | ((size_t)p[off + 2] << 16) | ((size_t)p[off + 3] << 8) | p[off + 4];
		struct json *m = NULL;
		struct err pe;

		if (n > len - off - 5) {
			snprintf(emsg, sizeof(emsg), "the process stream was cut in a message");
			break;
		}
		if (json_parse((const char *)p + off + 5, n, NULL, &m, &pe) < 0) {
			snprintf(emsg, sizeof(emsg), "the process stream has a message that is not JSON");
		} else if (flags & 2) {
			const struct json *er = json_get(m, "error");

			if (er)
				snprintf(emsg, sizeof(emsg), "envd: %.40s: %.200s", json_get_str(er, "code") ? json_get_str(er, "code") : "error",
					 json_get_str(er, "message") ? json_get_str(er, "message") : "");
		} else if (exec_event(m, &out, &errb, &code, &ended) < 0) {
			snprintf(emsg, sizeof(emsg), "the process output is not base64");
		}
		json_free(m);
		off += 5 + n;
	}
	if (!emsg[0] && !ended)
		snprintf(emsg, sizeof(emsg), "the process stream ended before the process did");
	if (emsg[0]) {
		buf_release(&out);
		buf_release(&errb);
		cp_drv_fail(&op->d, "%s", emsg);
		return;
	}
	if (op->step == S_PROBE) {
		int rc = cp_drv_probed(&op->d, code, out.data);

		buf_release(&out);
		buf_release(&errb);
		if (rc == 0) {
			op->step = S_PUT;
			cp_drv_put_next(&op->d);
		}
		return;
	}
	if (op->step == S_COMMAND) {
		buf_release(&out);
		buf_release(&errb);
		cp_drv_command_started(&op->d, code);
		return;
	}
	cp_drv_done(&op->d, true,
	     cp_obj("exit_code", json_new_int(code), "stdout", cp_drv_text(&out), "stderr", cp_drv_text(&errb), NULL));
	buf_release(&out);
	buf_release(&errb);
}

/* ---- env.put: the archive's files one at a time ---- */

static void put_one(struct cp_drv_op *d, const struct cp_drv_file *f)
{
	struct buf path = BUF_INIT;

	cp_drv_file_route(&path, "/files?path=", f->path);
	call(d, "POST", true, path.data, "application/octet-stream", f->data.data, f->data.len, CP_PROVIDER_BODY_MAX);
	buf_release(&path);
}

/* ---- answers ---- */

static void answered(struct cp_drv_op *d, const struct http_client_resp *resp)
{
	struct e2b_op *op = (struct e2b_op *)d;
	struct json *b;

	switch (op->step) {
	case S_CREATE:
		created(op, resp);
		break;
	case S_EXEC:
	case S_COMMAND:
	case S_PROBE:
		exec_answered(op, resp);
		break;
	case S_PAUSE:
		op->step = S_RESUME;
		b = cp_obj("timeout", json_new_int(E2B_SANDBOX_TIMEOUT_S), NULL);
		cp_drv_call_json(&op->d, "POST", false, b, "/v2/sandboxes/%s/connect", op->sandbox);
		json_free(b);
		break;
	case S_RESUME:
		cp_drv_snapshot_done(&op->d, "pause/resume", NULL);
		break;
	default:	/* S_PUT, S_GET: driver.c answers them */
		break;
	}
}

/* ---- entry ---- */

static void begin(struct cp_drv_op *d, int step, const struct buf *data)
{
	struct e2b_op *op = (struct e2b_op *)d;
	struct json *argv;
	int how;

	op->step = (enum step)step;
	if (op->step == S_CREATE) {
		start_create(op);
		return;
	}
	if (load_sandbox(op) < 0)
		return;
	switch (op->step) {
	case S_EXEC:
		start_exec(op, json_get(op->d.payload, "cmd"));
		break;
	case S_PUT:
		how = cp_drv_put_begin(&op->d, data);
		if (how == 0) {
			cp_drv_put_next(&op->d);
		} else if (how == 1) {
			op->step = S_PROBE;
			argv = cp_drv_probe_argv(json_get_str(op->d.payload, "target"));
			start_exec(op, argv);
			json_free(argv);
		}
		break;
	case S_GET:
		cp_drv_get(&op->d, "/files?path=", NULL);
		break;
	case S_PAUSE:
		cp_drv_call_json(&op->d, "POST", false, NULL, "/sandboxes/%s/pause", op->sandbox);
		break;
	default:
		break;
	}
}

static const struct cp_drv_kind e2b_kinds[] = {
	{ "env.create", S_CREATE }, { "env.exec", S_EXEC },	{ "env.put", S_PUT },
	{ "env.get", S_GET },	    { "env.snapshot", S_PAUSE },
};

const struct cp_drv_provider cp_drv_e2b = {
	.name = "e2b", .title = "E2B", .kinds = e2b_kinds, .nkinds = sizeof(e2b_kinds) / sizeof(e2b_kinds[0]),
	.fork_refused = "E2B has no fork: pause/resume continues the same sandbox and cannot branch it; use your "
			"machines or Daytona for forks",
	.destroy_route = "/sandboxes/", .op_size = sizeof(struct e2b_op), .exec_default_s = E2B_EXEC_TIMEOUT_S,
	.exec_extra_ms = E2B_EXTRA_MS, .begin = begin, .call = call, .answered = answered, .put = put_one,
};
