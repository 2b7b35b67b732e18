/*
 * api_bg.c: background commands of an environment (denv-cp(8), "Background
 * commands"): start one, list them, read one's status and output from byte
 * offsets, wait for its end, signal it. The host keeps them (denvd's bg.c):
 * each route is one env.bg.* command whose result is the answer, so a
 * command outlives the request, the client and this process.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/id.h"
#include "base/str.h"
#include "cp/cp.h"

struct bg_call {
	struct http_req *req;	/* NULL once the client went away */
	struct cp_cmd *cmd;
	int status;		/* on success */
};

static void bg_gone(struct http_req *req, void *arg)
{
	struct bg_call *c = arg;

	http_respond_error(req, 502, "client went away");
	cp_cmd_cancel(c->cmd);	/* it still runs and is recorded */
	free(c);
}

/* The host's refusal as the status a client can act on. */
static int status_of(const char *error)
{
	if (strstr(error, "no background command"))
		return 404;
	if (strstr(error, "has ended") || strstr(error, "background commands already run"))
		return 409;
	if (strstr(error, "payload.") || strstr(error, "signal must be"))
		return 400;
	return 502;
}

static void bg_done(struct cp *cp, const struct cp_result *res, void *arg)
{
	struct bg_call *c = arg;
	const char *msg;

	(void)cp;
	http_req_on_gone(c->req, NULL, NULL);
	if (!res->ok) {
		/* The host prefixes its kind ("env.bg.get: "); the client did not send one. */
		msg = str_has_prefix(res->error, "env.bg.") && strstr(res->error, ": ") ? strstr(res->error, ": ") + 2
											 : res->error;
		http_respond_error(c->req, status_of(res->error), msg);
	} else {
		cp_reply(c->req, c->status, res->payload ? json_dup(res->payload) : json_new_object());
	}
	free(c);
}

/* The live environment and its connected host; NULL after answering. */
static const struct json *bg_env(struct cp *cp, struct http_req *req, const char **host)
{
	struct cp_caller who;
	const struct json *env = cp_live_env(cp, req, &who);

	return env && (*host = cp_env_host(cp, req, env)) ? env : NULL;
}

static void send_bg(struct cp *cp, struct http_req *req, const struct json *env, const char *host, const char *kind,
		    struct json *payload, int64_t wait_s, int status)
{
	struct bg_call *c = xcalloc(1, sizeof(*c));

	c->req = req;
	c->status = status;
	c->cmd = cp_cmd_send(cp, host, json_get_str(env, "ID"), kind, payload, NULL,
			     wait_s * 1000 + CP_EXEC_SLACK_MS, bg_done, c);
	http_req_on_gone(req, bg_gone, c);
}

/* The {cmd} of the path; NULL after answering 404. */
static const char *bg_id(struct http_req *req)
{
	const char *id = http_req_param(req, "cmd");

	if (!id || !id_valid(id, "bg")) {
		http_respond_error(req, 404, "no such background command");
		return NULL;
	}
	return id;
}

/* A query member as a number from 0 (absent: fallback); -1 after answering 400. */
static int query_int(struct http_req *req, const char *key, int64_t max, int64_t *out)
{
	const char *v = http_req_query(req, key);
	char *end;
	long long n;

	if (!v || !*v)
		return 0;
	n = strtoll(v, &end, 10);
	if (*end || n < 0 || n > max) {
		cp_fail(req, 400, "%s must be a number from 0 to %lld", key, (long long)max);
		return -1;
	}
	*out = n;
	return 0;
}

static void h_start(struct cp *cp, struct http_req *req)
{
	const char *service = NULL, *host;
	const struct json *env, *cmd;
	int64_t timeout = CP_BG_TIMEOUT_MAX_S;
	struct json *body = NULL;

	if (!(env = bg_env(cp, req, &host)) || cp_body(req, &body) < 0)
		return;
	if (cp_req_str(req, body, "service", &service) < 0 || cp_opt_int(req, body, "timeout_sec", &timeout) < 0)
		goto out;
	cmd = json_get(body, "cmd");
	if (!cmd || cmd->type != JSON_ARRAY || json_len(cmd) == 0) {
		http_respond_error(req, 400, "cmd must be a non-empty array of strings");
		goto out;
	}
	for (size_t i = 0; i < json_len(cmd); i++)
		if (json_at(cmd, i)->type != JSON_STRING) {
			http_respond_error(req, 400, "cmd must be a non-empty array of strings");
			goto out;
		}
	if (timeout <= 0 || timeout > CP_BG_TIMEOUT_MAX_S) {
		cp_fail(req, 400, "timeout_sec must be 1 to %d", CP_BG_TIMEOUT_MAX_S);
		goto out;
	}
	send_bg(cp, req, env, host, "env.bg.start",
		cp_obj("service", json_new_str(service), "cmd", json_dup(cmd), "timeout_sec", json_new_int(timeout),
		       NULL), CP_BG_START_WAIT_S, 201);
out:
	json_free(body);
}

static void h_list(struct cp *cp, struct http_req *req)
{
	const struct json *env;
	const char *host;

	if ((env = bg_env(cp, req, &host)))
		send_bg(cp, req, env, host, "env.bg.list", json_new_object(), 0, 200);
}

/* GET …/commands/{cmd} and …/output: ?wait= (seconds), and for the output
 * ?stdout_offset=, ?stderr_offset=, ?max_bytes=. */
static void get_common(struct cp *cp, struct http_req *req, bool output)
{
	int64_t wait = 0, so = 0, se = 0, max = CP_BG_READ_MAX;
	const struct json *env;
	const char *host, *id;
	struct json *p;

	if (!(env = bg_env(cp, req, &host)) || !(id = bg_id(req)) ||
	    query_int(req, "wait", CP_BG_WAIT_MAX_S, &wait) < 0 ||
	    (output && (query_int(req, "stdout_offset", INT64_MAX / 2, &so) < 0 ||
			query_int(req, "stderr_offset", INT64_MAX / 2, &se) < 0 ||
			query_int(req, "max_bytes", CP_BG_READ_MAX, &max) < 0)))
		return;
	p = cp_obj("id", json_new_str(id), "wait_sec", json_new_int(wait), NULL);
	if (output) {
		json_object_set_bool(p, "output", true);
		json_object_set_int(p, "stdout_offset", so);
		json_object_set_int(p, "stderr_offset", se);
		json_object_set_int(p, "max_bytes", max);
	}
	send_bg(cp, req, env, host, "env.bg.get", p, wait, 200);
}

static void h_get(struct cp *cp, struct http_req *req)
{
	get_common(cp, req, false);
}

static void h_output(struct cp *cp, struct http_req *req)
{
	get_common(cp, req, true);
}

static void h_wait(struct cp *cp, struct http_req *req)
{
	int64_t timeout = CP_BG_WAIT_MAX_S;
	const struct json *env;
	const char *host, *id;
	struct json *body = NULL;

	if (!(env = bg_env(cp, req, &host)) || !(id = bg_id(req)) || cp_body(req, &body) < 0)
		return;
	if (cp_opt_int(req, body, "timeout_sec", &timeout) == 0) {
		if (timeout < 0 || timeout > CP_BG_WAIT_MAX_S)
			cp_fail(req, 400, "timeout_sec must be 0 to %d", CP_BG_WAIT_MAX_S);
		else
			send_bg(cp, req, env, host, "env.bg.get",
				cp_obj("id", json_new_str(id), "wait_sec", json_new_int(timeout), NULL), timeout, 200);
	}
	json_free(body);
}

static void signal_with(struct cp *cp, struct http_req *req, const char *fixed)
{
	const char *sig = fixed ? fixed : "TERM", *host, *id;
	const struct json *env;
	struct json *body = NULL;

	if (!(env = bg_env(cp, req, &host)) || !(id = bg_id(req)) || cp_body(req, &body) < 0)
		return;
	if (fixed || cp_opt_str(req, body, "signal", &sig) == 0)
		send_bg(cp, req, env, host, "env.bg.signal",
			cp_obj("id", json_new_str(id), "signal", json_new_str(sig), NULL), 0, 200);
	json_free(body);
}

static void h_signal(struct cp *cp, struct http_req *req)
{
	signal_with(cp, req, NULL);
}

static void h_kill(struct cp *cp, struct http_req *req)
{
	signal_with(cp, req, "KILL");
}

int cp_api_bg(struct cp *cp)
{
	if (cp_route(cp, "POST", "/v1/envs/{env}/commands", CP_BODY_JSON, h_start) < 0 ||
	    cp_route(cp, "GET", "/v1/envs/{env}/commands", 0, h_list) < 0 ||
	    cp_route(cp, "GET", "/v1/envs/{env}/commands/{cmd}", 0, h_get) < 0 ||
	    cp_route(cp, "GET", "/v1/envs/{env}/commands/{cmd}/output", 0, h_output) < 0 ||
	    cp_route(cp, "POST", "/v1/envs/{env}/commands/{cmd}/wait", CP_BODY_JSON, h_wait) < 0 ||
	    cp_route(cp, "POST", "/v1/envs/{env}/commands/{cmd}/signal", CP_BODY_JSON, h_signal) < 0 ||
	    cp_route(cp, "POST", "/v1/envs/{env}/commands/{cmd}/kill", CP_BODY_JSON, h_kill) < 0)
		return -1;
	return 0;
}
