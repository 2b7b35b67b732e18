/*
 * driver_prime.c: environment commands on a Prime Intellect target, driven
 * from the control plane over Prime's sandbox REST API and the gateway in
 * front of each sandbox (targets.md, "What each driver does today"). Wire
 * shapes are the prime-sandboxes Python SDK 0.5.1's, which the fake
 * t/fakes/fake_prime.py is checked against (t/fakes/test_sdk_prime.py):
 *
 *   env.create   POST {api}/sandbox {name, docker_image, vm, ...}, then GET {api}/sandbox/{id}
 *                until RUNNING; a command starts in the background
 *   env.exec     POST {api}/sandbox/{id}/auth: {gateway_url, user_ns, job_id, token}, then
 *                POST {gw}/command_session.CommandSession/Start, a Connect server stream in
 *                the JSON codec (the SDK speaks protobuf; the gateway takes both)
 *   env.put      POST {gw}/upload?path=P&sandbox_id=ID, multipart part "file", once per file
 *   env.get      GET  {gw}/download?path=P&sandbox_id=ID, one file, answered as a tar of it
 *   env.snapshot POST {api}/sandbox/{id}/checkpoints, then GET {api}/sandbox/checkpoints/{cid}
 *                until DURABLE
 *   env.fork     POST {api}/sandbox {checkpoint_id, ...}: a new sandbox restored from it
 *   env.destroy  DELETE {api}/sandbox/{id}
 *
 * {api} is DENV_PRIME_API_URL (the SDK's base with its /api/v1); {gw} is
 * {gateway_url}/{user_ns}/{job_id} as /auth answers it. The cloud's key goes
 * to the API as a bearer token; the gateway takes /auth's short-lived token
 * instead, asked for at the start of each operation that needs it and never
 * stored. The environment's row (Driver) keeps the sandbox id and, per
 * snapshot name, Prime's checkpoint id, which is how a fork finds its
 * checkpoint from {from_env, from_snapshot} alone. Egress deny is an empty
 * network allowlist, Prime's "no destination". Verify and the rest are
 * refused as targets.md says.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crypto.h"
#include "base/enc.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

#define PRM_GATEWAY_MAX (CP_DRV_URL_MAX / 2)	/* the gateway's base, so a route and query fit after it */
#define PRM_ID_MAX 128			/* a sandbox, checkpoint or job id */
#define PRM_EXTRA_MS 10000		/* a command's own timeout plus this, per call */
#define PRM_EXEC_TIMEOUT_S 120		/* env.exec without timeout_sec */
#define PRM_SANDBOX_MINUTES 60		/* the sandbox's lifetime at create (the SDK's default) */
#define PRM_STREAM_MAX ((size_t)16 << 20)	/* a command's whole Connect stream */
#define PRM_CONNECT_JSON "application/connect+json"

enum step {
	S_CREATE, S_WAIT, S_AUTH, S_COMMAND, S_EXEC, S_PROBE, S_PUT, S_GET, S_CHECKPOINT, S_CK_WAIT, S_FORK
};

struct prm_op {
	struct cp_drv_op d;	/* first: driver.c runs the operation's life through it */
	enum step step, then;	/* then: the gateway step S_AUTH leads to */
	char sandbox[PRM_ID_MAX];
	char checkpoint[PRM_ID_MAX];
	char gateway[PRM_GATEWAY_MAX];	/* {gateway_url}/{user_ns}/{job_id} */
};

/* One call to the REST API (gateway false, path under {api}) or the gateway. */
static int call(struct cp_drv_op *d, const char *method, bool gateway, const char *path, const char *ctype,
		const void *body, size_t len, size_t max_body)
{
	struct prm_op *op = (struct prm_op *)d;
	struct cp_drv_headers hs = { 0 };

	cp_drv_header(&hs, "Authorization: Bearer %s", gateway ? op->d.secret : op->d.token);
	if (ctype && str_eq(ctype, PRM_CONNECT_JSON)) {
		cp_drv_header(&hs, "Connect-Protocol-Version: 1");
		cp_drv_header(&hs, "Connect-Timeout-Ms: %" PRId64, op->d.timeout_ms);
	}
	return cp_drv_send(&op->d, method, &hs, ctype, body, len, max_body, gateway ? "gateway" : path, "%s%s",
			   gateway ? op->gateway : op->d.cp->cfg.prime_api_url, path);
}

/* The answer's body as a JSON object, or NULL after failing op naming what. */
static struct json *answer_doc(struct prm_op *op, const struct http_client_resp *resp, const char *what)
{
	struct json *doc = NULL;
	struct err pe;

	if (json_parse(resp->body.data, resp->body.len, NULL, &doc, &pe) < 0 || doc->type != JSON_OBJECT) {
		json_free(doc);
		cp_drv_fail(&op->d, "%s answered %d without a JSON object", what, resp->status);
		return NULL;
	}
	return doc;
}

/* ---- the environment's row: its sandbox, and its checkpoints by name ---- */

/* Driver {provider, sandbox_id, checkpoints}, with name -> cid added when given. */
static void save_driver(struct prm_op *op, const char *name, const char *cid)
{
	const struct json *had = json_get(cp_drv_row(&op->d, op->d.env_id), "checkpoints");
	struct json *cks = had && had->type == JSON_OBJECT ? json_dup(had) : json_new_object();

	if (name && cid)
		json_object_set_str(cks, name, cid);
	cp_update(op->d.cp, "environments", op->d.env_id,
		  cp_obj("Driver", cp_obj("provider", json_new_str("prime"), "sandbox_id", json_new_str(op->sandbox),
					  "checkpoints", cks, NULL), NULL));
}

/* ---- env.create and env.fork: a new sandbox, waited for ---- */

static struct json *create_body(struct prm_op *op, const struct json *s, const char *checkpoint)
{
	char key[33];
	unsigned char raw[16];
	struct err e;
	struct json *body;

	if (crypto_random(raw, sizeof(raw), &e) < 0)
		memset(raw, 0, sizeof(raw));
	enc_hex_write(key, raw, sizeof(raw));
	key[32] = '\0';
	body = cp_obj("name", json_new_str(op->d.env_id), "cpu_cores", json_new_int(1), "memory_gb", json_new_int(1),
		      "timeout_minutes", json_new_int(PRM_SANDBOX_MINUTES), "environment_vars",
		      cp_drv_env_object(json_get(s, "env")), "labels", json_new_array(), "vm", json_new_bool(true),
		      "idempotency_key", json_new_str(key), NULL);
	json_array_push(json_get(body, "labels"), json_new_str("denv"));
	json_array_push(json_get(body, "labels"), json_new_str(op->d.env_id));
	if (checkpoint) {
		json_object_set_str(body, "checkpoint_id", checkpoint);	/* no image nor disk size: the SDK's rule */
	} else {
		json_object_set_str(body, "docker_image", json_get_str(s, "image"));
		json_object_set_int(body, "disk_size_gb", 5);	/* the SDK's default */
	}
	if (!str_eq(json_get_str(op->d.payload, "egress"), "allow"))
		json_object_set(body, "network_allowlist", json_new_array());	/* no destination */
	return body;
}

static void start_sandbox(struct prm_op *op, const char *checkpoint)
{
	const struct json *s = cp_drv_one_service(&op->d, checkpoint ? NULL : "for the Prime sandbox");
	struct json *body;

	if (!s)
		return;
	body = create_body(op, s, checkpoint);
	cp_drv_wait_begin(&op->d);
	cp_drv_call_json(&op->d, "POST", false, body, "/sandbox");
	json_free(body);
}

static void authorize(struct prm_op *op, enum step then);

/* The sandbox runs: the result, then the service's command in the background. */
static void running(struct prm_op *op)
{
	bool allow = str_eq(json_get_str(op->d.payload, "egress"), "allow");
	struct json *argv = cp_drv_up(&op->d, op->checkpoint[0], allow ? "allow" : "deny", op->sandbox);

	if (argv) {
		json_free(argv);	/* built again for the call, once the gateway is known */
		authorize(op, S_COMMAND);
	}
}

static void look(struct ev *ev, void *arg)
{
	struct prm_op *op = arg;

	(void)ev;
	if (op->step == S_CK_WAIT)
		cp_drv_call_json(&op->d, "GET", false, NULL, "/sandbox/checkpoints/%s", op->checkpoint);
	else
		cp_drv_call_json(&op->d, "GET", false, NULL, "/sandbox/%s", op->sandbox);
}

static void created(struct prm_op *op, const struct json *doc)
{
	const char *id = json_get_str(doc, "id");

	if (!id || !*id || strlen(id) >= sizeof(op->sandbox)) {
		cp_drv_fail(&op->d, "POST /sandbox answered without a sandbox id");
		return;
	}
	str_copy(op->sandbox, sizeof(op->sandbox), id);
	save_driver(op, NULL, NULL);
	log_info("prime", "env %s: sandbox %s created%s%s", op->d.env_id, id, op->checkpoint[0] ? " from checkpoint " : "",
		 op->checkpoint);
	op->step = S_WAIT;
}

/* A sandbox's answer while it is created (S_CREATE, S_FORK) or starts (S_WAIT). */
static void sandbox_answered(struct prm_op *op, const struct http_client_resp *resp)
{
	struct json *doc = answer_doc(op, resp, "the sandbox API");
	const char *status;

	if (!doc)
		return;
	if (op->step == S_CREATE || op->step == S_FORK)
		created(op, doc);
	status = json_get_str(doc, "status");
	if (op->step != S_WAIT) {
		/* created failed the operation */
	} else if (!status) {
		cp_drv_fail(&op->d, "sandbox %s answered without a status", op->sandbox);
	} else if (str_eq(status, "RUNNING")) {
		running(op);
	} else if (str_eq(status, "ERROR") || str_eq(status, "TERMINATED") || str_eq(status, "TIMEOUT")) {
		const char *type = json_get_str(doc, "errorType"), *why = json_get_str(doc, "errorMessage");

		cp_drv_fail(&op->d, "sandbox %s is %s%s%.60s%s%s%.200s", op->sandbox, status, type ? " (" : "",
			    type ? type : "", type ? ")" : "", why && *why ? ": " : "", why ? why : "");
	} else {
		cp_drv_wait_more(&op->d, op->sandbox, status, look);
	}
	json_free(doc);
}

/* ---- the gateway: its address and token, then the step it was asked for ---- */

static void authorize(struct prm_op *op, enum step then)
{
	op->then = then;
	op->step = S_AUTH;
	cp_drv_call_json(&op->d, "POST", false, NULL, "/sandbox/%s/auth", op->sandbox);
}

static void gateway_step(struct prm_op *op);

static void authorized(struct prm_op *op, const struct http_client_resp *resp)
{
	struct json *doc = answer_doc(op, resp, "POST /sandbox/{id}/auth");
	const char *url, *ns, *job, *token;
	size_t ulen;
	int k;

	if (!doc)
		return;
	url = json_get_str(doc, "gateway_url");
	ns = json_get_str(doc, "user_ns");
	job = json_get_str(doc, "job_id");
	token = json_get_str(doc, "token");
	if (!url || (strncmp(url, "https://", 8) && strncmp(url, "http://", 7)) || !ns || !*ns || !job || !*job ||
	    !token || !*token || strcspn(token, "\r\n") != strlen(token) || strlen(token) >= sizeof(op->d.secret)) {
		json_free(doc);
		cp_drv_fail(&op->d, "POST /sandbox/{id}/auth answered without a usable gateway_url, user_ns, job_id and token");
		return;
	}
	for (ulen = strlen(url); ulen && url[ulen - 1] == '/'; ulen--)
		;
	k = snprintf(op->gateway, sizeof(op->gateway), "%.*s/%s/%s", (int)ulen, url, ns, job);
	if (k < 0 || (size_t)k >= sizeof(op->gateway)) {
		json_free(doc);
		cp_drv_fail(&op->d, "the gateway's address is longer than %d bytes", PRM_GATEWAY_MAX);
		return;
	}
	str_copy(op->d.secret, sizeof(op->d.secret), token);
	memset((char *)token, 0, strlen(token));
	json_free(doc);
	op->step = op->then;
	gateway_step(op);
}

/* ---- env.exec: a Connect server stream in the JSON codec ---- */

static void start_exec(struct prm_op *op, const struct json *cmd)
{
	struct json *args, *msg;
	struct buf b = BUF_INIT;
	char *text;

	if (!cp_drv_argv_ok(&op->d, cmd))
		return;
	args = json_new_array();
	for (size_t i = 1; i < json_len(cmd); i++)
		json_array_push(args, json_dup(json_at(cmd, i)));
	msg = cp_obj("command", cp_obj("cmd", json_dup(json_at(cmd, 0)), "args", args, NULL), "stdin",
		     json_new_bool(false), NULL);
	text = json_to_string(msg, JSON_COMPACT);
	json_free(msg);
	buf_init(&b, 0);
	http_connect_envelope(&b, 0, text, strlen(text));
	free(text);
	call(&op->d, "POST", true, "/command_session.CommandSession/Start", PRM_CONNECT_JSON, b.data, b.len,
	     PRM_STREAM_MAX);
	buf_release(&b);
}

struct run {
	struct buf out, err;
	int64_t code;
	bool ended;
};

/* One StartResponse: {event: {start | data: {stdout | stderr} | end: {exitCode} | keepalive}}. */
static int run_event(const char *msg, size_t len, void *arg, char *why, size_t n)
{
	struct run *r = arg;
	struct json *m = NULL;
	const struct json *ev, *data, *end;
	const char *s;
	struct err e;
	int rc = 0;

	if (json_parse(msg, len, NULL, &m, &e) < 0) {
		snprintf(why, n, "the command stream has a message that is not JSON");
		return -1;
	}
	ev = json_get(m, "event");
	data = json_get(ev, "data");
	end = json_get(ev, "end");
	if (((s = json_get_str(data, "stdout")) && enc_base64_decode(&r->out, s, strlen(s), ENC_BASE64, &e) < 0) ||
	    ((s = json_get_str(data, "stderr")) && enc_base64_decode(&r->err, s, strlen(s), ENC_BASE64, &e) < 0)) {
		snprintf(why, n, "the command's output: %.200s", e.msg);
		rc = -1;
	} else if (end && (s = json_get_str(end, "error")) && *s) {
		snprintf(why, n, "the command did not run: %.300s", s);
		rc = -1;
	} else if (end) {
		r->code = json_get_int(end, "exitCode", 0);	/* proto3 JSON leaves a zero out */
		r->ended = true;
	}
	json_free(m);
	return rc;
}

/* What the stream said, for the step that asked. */
static void ran(struct prm_op *op, struct run *r)
{
	if (op->step == S_PROBE) {
		buf_addch(&r->out, '\0');
		if (cp_drv_probed(&op->d, r->code, r->out.data) == 0) {
			op->step = S_PUT;
			cp_drv_put_next(&op->d);
		}
	} else if (op->step == S_COMMAND) {
		cp_drv_command_started(&op->d, r->code);
	} else {
		cp_drv_done(&op->d, true,
			    cp_obj("exit_code", json_new_int(r->code), "stdout", cp_drv_text(&r->out), "stderr",
				   cp_drv_text(&r->err), NULL));
	}
}

static void exec_answered(struct prm_op *op, const struct http_client_resp *resp)
{
	const char *ctype = http_client_resp_header(resp, "content-type");
	struct run r = { .code = -1 };
	char why[ERR_MSG_MAX];

	if (!ctype || strncmp(ctype, PRM_CONNECT_JSON, strlen(PRM_CONNECT_JSON))) {
		cp_drv_fail(&op->d, "the gateway answered %.80s, not a Connect JSON stream", ctype ? ctype : "no content type");
		return;
	}
	buf_init(&r.out, PRM_STREAM_MAX);
	buf_init(&r.err, PRM_STREAM_MAX);
	if (http_connect_stream(resp->body.data, resp->body.len, 0, run_event, &r, why, sizeof(why)) < 0)
		cp_drv_fail(&op->d, "gateway: %s", why);
	else if (!r.ended)
		cp_drv_fail(&op->d, "gateway: the command stream ended before the command did");
	else
		ran(op, &r);
	buf_release(&r.out);
	buf_release(&r.err);
}

/* ---- env.put and env.get: the gateway's files routes ---- */

/* "&sandbox_id=ID", after the path in the files routes' query. */
static void sandbox_query(struct prm_op *op, struct buf *q)
{
	buf_adds(q, "&sandbox_id=");
	http_pct_encode(q, op->sandbox, "/");
}

static void put_one(struct cp_drv_op *d, const struct cp_drv_file *f)
{
	struct prm_op *op = (struct prm_op *)d;
	struct buf path = BUF_INIT;

	cp_drv_file_route(&path, "/upload?path=", f->path);
	sandbox_query(op, &path);
	cp_drv_put_multipart(&op->d, f, path.data);
	buf_release(&path);
}

static void gateway_step(struct prm_op *op)
{
	struct buf q = BUF_INIT;
	struct json *argv;

	switch (op->step) {
	case S_COMMAND:
		argv = cp_drv_background_argv(json_get(json_at(json_get(op->d.payload, "services"), 0), "command"));
		start_exec(op, argv);
		json_free(argv);
		break;
	case S_EXEC:
		start_exec(op, json_get(op->d.payload, "cmd"));
		break;
	case S_PROBE:
		argv = cp_drv_probe_argv(json_get_str(op->d.payload, "target"));
		start_exec(op, argv);
		json_free(argv);
		break;
	case S_PUT:
		cp_drv_put_next(&op->d);
		break;
	case S_GET:
		sandbox_query(op, &q);
		cp_drv_get(&op->d, "/download?path=", q.data);
		break;
	default:
		cp_drv_fail(&op->d, "no gateway call for this step");
		break;
	}
	buf_release(&q);
}

/* ---- env.snapshot: a checkpoint, waited until durable ---- */

static void checkpoint_answered(struct prm_op *op, const struct http_client_resp *resp)
{
	struct json *doc = answer_doc(op, resp, "the checkpoint API");
	const char *id, *state, *name = json_get_str(op->d.payload, "name");

	if (!doc)
		return;
	if (op->step == S_CHECKPOINT) {
		id = json_get_str(doc, "id");
		if (!id || !*id || strlen(id) >= sizeof(op->checkpoint) || strchr(id, '/')) {
			json_free(doc);
			cp_drv_fail(&op->d, "POST /sandbox/{id}/checkpoints answered without a checkpoint id");
			return;
		}
		str_copy(op->checkpoint, sizeof(op->checkpoint), id);
		op->step = S_CK_WAIT;
	}
	state = json_get_str(doc, "state");
	if (state && str_eq(state, "DURABLE")) {
		save_driver(op, name ? name : "", op->checkpoint);
		cp_drv_snapshot_done(&op->d, "prime checkpoint", op->checkpoint);
	} else if (!state || str_eq(state, "FAILED") || str_eq(state, "DELETING")) {
		const char *why = json_get_str(doc, "error");

		cp_drv_fail(&op->d, "checkpoint %s is %s%s%.200s", op->checkpoint, state ? state : "without a state",
			    why && *why ? ": " : "", why ? why : "");
	} else {
		cp_drv_wait_more(&op->d, op->checkpoint, state, look);
	}
	json_free(doc);
}

/* ---- answers ---- */

static void answered(struct cp_drv_op *d, const struct http_client_resp *resp)
{
	struct prm_op *op = (struct prm_op *)d;

	switch (op->step) {
	case S_CREATE:
	case S_FORK:
	case S_WAIT:
		sandbox_answered(op, resp);
		break;
	case S_AUTH:
		authorized(op, resp);
		break;
	case S_COMMAND:
	case S_EXEC:
	case S_PROBE:
		exec_answered(op, resp);
		break;
	case S_CHECKPOINT:
	case S_CK_WAIT:
		checkpoint_answered(op, resp);
		break;
	default:	/* S_PUT, S_GET: driver.c answers them */
		break;
	}
}

/* ---- entry ---- */

/* env.fork: the checkpoint the source environment's snapshot is. */
static void begin_fork(struct prm_op *op)
{
	const char *from = json_get_str(op->d.payload, "from_env"), *name = json_get_str(op->d.payload, "from_snapshot");
	const char *cid = json_get_str(json_get(cp_drv_row(&op->d, from ? from : ""), "checkpoints"), name ? name : "");

	if (!cid || !*cid || strlen(cid) >= sizeof(op->checkpoint)) {
		cp_drv_fail(&op->d, "environment %s has no Prime checkpoint for snapshot %s", from ? from : "?",
			    name ? name : "?");
		return;
	}
	str_copy(op->checkpoint, sizeof(op->checkpoint), cid);
	start_sandbox(op, op->checkpoint);
}

/* By path: extract under it. By target: docker cp's rules, after a look at it. */
static void begin_put(struct prm_op *op, const struct buf *data)
{
	int how = cp_drv_put_begin(&op->d, data);

	if (how >= 0)
		authorize(op, how == 0 ? S_PUT : S_PROBE);
}

static void begin(struct cp_drv_op *d, int step, const struct buf *data)
{
	struct prm_op *op = (struct prm_op *)d;

	op->step = (enum step)step;
	if (op->step == S_CREATE) {
		start_sandbox(op, NULL);
		return;
	}
	if (op->step == S_FORK) {
		begin_fork(op);
		return;
	}
	if (!cp_drv_sandbox(&op->d, op->sandbox, sizeof(op->sandbox)))
		return;
	switch (op->step) {
	case S_EXEC:
		authorize(op, S_EXEC);
		break;
	case S_PUT:
		begin_put(op, data);
		break;
	case S_GET:
		authorize(op, S_GET);
		break;
	case S_CHECKPOINT:
		cp_drv_wait_begin(&op->d);
		cp_drv_call_json(&op->d, "POST", false, NULL, "/sandbox/%s/checkpoints", op->sandbox);
		break;
	default:
		break;
	}
}

static const struct cp_drv_kind prime_kinds[] = {
	{ "env.create", S_CREATE }, { "env.exec", S_EXEC },		  { "env.put", S_PUT },
	{ "env.get", S_GET },	    { "env.snapshot", S_CHECKPOINT }, { "env.fork", S_FORK },
};

const struct cp_drv_provider cp_drv_prime = {
	.name = "prime", .title = "Prime", .kinds = prime_kinds, .nkinds = sizeof(prime_kinds) / sizeof(prime_kinds[0]),
	.destroy_route = "/sandbox/", .op_size = sizeof(struct prm_op), .exec_default_s = PRM_EXEC_TIMEOUT_S,
	.exec_extra_ms = PRM_EXTRA_MS, .begin = begin, .call = call, .answered = answered, .put = put_one,
};
