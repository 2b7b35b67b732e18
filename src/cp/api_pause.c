/*
 * api_pause.c: POST /v1/envs/{env}/pause and /resume (denv-cp(8), "PAUSE AND
 * RESUME"): every service of an environment, or the one in {"service": S},
 * frozen or thawed on its host (env.pause / env.resume, docker pause). No
 * deployment: the environment keeps its version, volumes and memory; its
 * row says Paused and PausedServices, and an env.paused or env.resumed
 * event records who and what. The TTL reaper pauses the same way
 * (cp_pause_env) when an environment's ttl_action is pause.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

struct pause_call {
	struct cp *cp;
	struct http_req *req;		/* NULL: the reaper's, nobody to answer */
	struct cp_cmd *cmd;
	bool pause;
	char env_id[ID_MAX];
	char reason[128];		/* the reaper's: in the event */
};

static void pause_gone(struct http_req *req, void *arg)
{
	struct pause_call *c = arg;

	/* The command still runs; its result is recorded by nobody here, so the
	 * row is brought up to date by the next pause or resume. */
	http_respond_error(req, 502, "client went away");
	cp_cmd_cancel(c->cmd);
	free(c);
}

/* The row after the host's answer, with the event, in one transaction. */
static struct st_txn *record(struct cp *cp, const struct pause_call *c, const struct json *pl, struct json **row_out)
{
	const struct json *env = st_get(cp->db, "environments", c->env_id);
	const struct json *marked = json_get(pl, "paused_services");
	const struct json *changed = json_get(pl, c->pause ? "paused" : "resumed");
	char subject[ST_ID_MAX];
	struct json *row, *body;
	struct st_txn *txn;

	if (!env)
		return NULL;
	row = json_dup(env);
	json_object_set_bool(row, "Paused", marked && json_len(marked) > 0);
	json_object_set(row, "PausedServices", marked ? json_dup(marked) : json_new_array());
	json_object_set(row, "PausedAt", c->pause ? cp_now_json() : json_new_null());
	json_object_set(row, "PausedReason", c->pause && *c->reason ? json_new_str(c->reason) : json_new_null());
	txn = st_begin(cp->db);
	st_put(txn, "environments", c->env_id, json_dup(row));
	snprintf(subject, sizeof(subject), "env:%s", c->env_id);
	body = cp_obj("services", changed ? json_dup(changed) : json_new_array(), "paused_services",
		      marked ? json_dup(marked) : json_new_array(), NULL);
	if (*c->reason)
		json_object_set_str(body, "reason", c->reason);
	cp_event(cp, txn, json_get_str(env, "TeamID"), subject,
		 *c->reason ? "ttl.paused" : c->pause ? "env.paused" : "env.resumed", body);
	*row_out = row;
	return txn;
}

static void pause_done(struct cp *cp, const struct cp_result *res, void *arg)
{
	struct pause_call *c = arg;
	struct json *row = NULL, *resp;
	struct st_txn *txn;
	struct err e;

	if (c->req)
		http_req_on_gone(c->req, NULL, NULL);
	if (!res->ok) {
		log_info("cp", "%s %s: %s", c->pause ? "pause" : "resume", c->env_id, res->error);
		if (c->req)
			http_respond_error(c->req, strstr(res->error, "has no service") ? 404 : 502, res->error);
		free(c);
		return;
	}
	txn = record(cp, c, res->payload, &row);
	if (!txn) {
		if (c->req)
			http_respond_error(c->req, 404, "environment not found");
		free(c);
		return;
	}
	if (!c->req) {
		if (st_commit(txn, NULL, NULL, &e) < 0)
			log_error("ttl", "pausing %s: %s", c->env_id, e.msg);
	} else {
		resp = cp_obj("environment", cp_public(row, "environments"), c->pause ? "paused" : "resumed",
			      json_dup(json_get(res->payload, c->pause ? "paused" : "resumed")), NULL);
		cp_commit_reply(cp, txn, c->req, 200, resp, NULL, NULL);
	}
	json_free(row);
	free(c);
}

static struct pause_call *send_pause(struct cp *cp, const char *host, const char *env_id, bool pause,
				     const char *service, struct http_req *req)
{
	struct pause_call *c = xcalloc(1, sizeof(*c));
	struct json *payload = json_new_object();

	c->cp = cp;
	c->req = req;
	c->pause = pause;
	str_copy(c->env_id, sizeof(c->env_id), env_id);
	if (service && *service)
		json_object_set_str(payload, "service", service);
	c->cmd = cp_cmd_send(cp, host, env_id, pause ? "env.pause" : "env.resume", payload, NULL, CP_PAUSE_TIMEOUT_MS,
			     pause_done, c);
	return c;
}

int cp_pause_env(struct cp *cp, const char *env_id, const char *reason, struct err *e)
{
	const struct json *env = st_get(cp->db, "environments", env_id);
	const char *host = json_get_str(env, "HostID");
	struct pause_call *c;

	if (!host || !*host || !cp_host_connected(cp, host))
		return err_set(e, "host %s is not connected", host && *host ? host : "(none)");
	c = send_pause(cp, host, env_id, true, NULL, NULL);
	str_copy(c->reason, sizeof(c->reason), reason);
	return 0;
}

static void h_pause_or_resume(struct cp *cp, struct http_req *req, bool pause)
{
	struct cp_caller who;
	const struct json *env;
	const char *service = NULL, *host;
	struct json *body = NULL;
	struct pause_call *c;

	/* Both are activity (cp_live_env): a resumed environment starts its idle clock anew. */
	if (!(env = cp_live_env(cp, req, &who)) || cp_body(req, &body) < 0)
		return;
	if (cp_opt_str(req, body, "service", &service) == 0 && (host = cp_env_host(cp, req, env))) {
		c = send_pause(cp, host, json_get_str(env, "ID"), pause, service, req);
		http_req_on_gone(req, pause_gone, c);
	}
	json_free(body);
}

static void h_pause(struct cp *cp, struct http_req *req)
{
	h_pause_or_resume(cp, req, true);
}

static void h_resume(struct cp *cp, struct http_req *req)
{
	h_pause_or_resume(cp, req, false);
}

int cp_api_pause(struct cp *cp)
{
	if (cp_route(cp, "POST", "/v1/envs/{env}/pause", CP_BODY_JSON, h_pause) < 0 ||
	    cp_route(cp, "POST", "/v1/envs/{env}/resume", CP_BODY_JSON, h_resume) < 0)
		return -1;
	return 0;
}
