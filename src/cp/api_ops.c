/*
 * api_ops.c: routes that act on an environment through its host: fork,
 * snapshot, rollback, verify and destroy start deployments (202, run by the
 * orchestrator); exec and files send one command and answer when its
 * result arrives (the request is parked meanwhile).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

/* The caller's environment, not destroyed; NULL after answering. */
const struct json *cp_live_env(struct cp *cp, struct http_req *req, struct cp_caller *who)
{
	const struct json *env;

	if (cp_auth(cp, req, CP_AUTH_TEAM, who) < 0)
		return NULL;
	env = cp_team_row(cp, req, "environments", who->team_id, http_req_param(req, "env"), "environment");
	if (env && str_eq(json_get_str(env, "Status"), "destroyed")) {
		http_respond_error(req, 409, "environment is destroyed");
		return NULL;
	}
	/* Every route here acts on the environment: that is activity (ttl.c). */
	if (env)
		cp_ttl_activity(cp, json_get_str(env, "ID"));
	return env;
}

/* A version of the team that can be forked or restored: healthy, with a snapshot. */
static bool usable_version(const struct json *v, const char *team_id)
{
	const char *snap = json_get_str(v, "Snapshot");

	return v && str_eq(json_get_str(v, "TeamID"), team_id) && json_get_bool(v, "Healthy", false) && snap && *snap;
}

struct json *cp_fork_create(struct cp *cp, struct st_txn *txn, const char *team_id, const struct json *version,
			    const char *name, char env_id[ID_MAX], struct json **env_out)
{
	struct cp_ttl_req none = { CP_TTL_UNSET, CP_TTL_UNSET, NULL }, base;

	/* A fork keeps its source's TTLs (the clocks start again). */
	cp_ttl_source(st_get(cp->db, "environments", json_get_str(version, "EnvID")), &base);
	return cp_fork_create_ttl(cp, txn, team_id, version, name, &none, &base, env_id, env_out);
}

struct json *cp_fork_create_ttl(struct cp *cp, struct st_txn *txn, const char *team_id, const struct json *version,
				const char *name, const struct cp_ttl_req *ttl, const struct cp_ttl_req *base,
				char env_id[ID_MAX], struct json **env_out)
{
	return cp_fork_create_on(cp, txn, team_id, version, name, ttl, base, NULL, env_id, env_out);
}

struct json *cp_fork_create_on(struct cp *cp, struct st_txn *txn, const char *team_id, const struct json *version,
			       const char *name, const struct cp_ttl_req *ttl, const struct cp_ttl_req *base,
			       const char *host_id, char env_id[ID_MAX], struct json **env_out)
{
	const char *vid = json_get_str(version, "ID");
	struct json *env = cp_env_new(team_id, json_get_str(version, "ProjectID"), name, "fork");
	struct json *params;

	cp_ttl_apply(env, ttl, base);
	json_object_set_str(env, "ParentVersionID", vid);
	str_copy(env_id, ID_MAX, json_get_str(env, "ID"));
	if (env_out)
		*env_out = cp_public(env, "environments");
	st_put(txn, "environments", env_id, env);
	params = cp_obj("from_env", json_new_str(json_get_str(version, "EnvID")), "version", json_new_str(vid), "name",
			json_new_str(name), NULL);
	if (host_id && *host_id)
		json_object_set_str(params, "host", host_id);
	return cp_deployment_create_v(txn, team_id, json_get_str(version, "ProjectID"), env_id, "fork", params, vid);
}

/* A name for a new environment in project: given and valid and free, or
 * generated from prefix. NULL after answering 400/409. */
const char *cp_new_env_name(struct cp *cp, struct http_req *req, const char *project_id, const char *given,
			    const char *prefix, char *buf, size_t n)
{
	if (!given || !*given) {
		cp_short_name(prefix, buf, n);
		return buf;
	}
	if (cp_name_ok(req, "name", given) < 0)
		return NULL;
	if (cp_find(cp, "environments", "ProjectID", project_id, "Name", given)) {
		cp_fail(req, 409, "environment \"%s\" already exists", given);
		return NULL;
	}
	return given;
}

/* A host of the team named by id or by name (a sidecar: a fork's pin), or
 * NULL after a 400. */
static const struct json *team_host(struct cp *cp, struct http_req *req, const char *team_id, const char *ref)
{
	const struct json *h = st_get(cp->db, "hosts", ref);

	if (!h || !str_eq(json_get_str(h, "TeamID"), team_id))
		h = cp_find(cp, "hosts", "TeamID", team_id, "Name", ref);
	if (!h) {
		cp_fail(req, 400, "host \"%s\" is not a host of this team", ref);
		return NULL;
	}
	return h;
}

static void h_fork(struct cp *cp, struct http_req *req)
{
	const char *name = NULL, *vid = NULL, *host = NULL;
	const struct json *pinned = NULL;
	char env_id[ID_MAX], buf[CP_NAME_MAX + 1];
	struct cp_ttl_req ttl, base;
	struct cp_caller who;
	const struct json *env, *v;
	struct json *body = NULL, *resp;
	struct st_txn *txn;

	if (!(env = cp_live_env(cp, req, &who)) || cp_body(req, &body) < 0)
		return;
	if (cp_opt_str(req, body, "name", &name) < 0 || cp_opt_str(req, body, "version", &vid) < 0 ||
	    cp_opt_str(req, body, "host", &host) < 0 || cp_ttl_read(req, body, &ttl) < 0)
		goto out;
	if (host && *host && !(pinned = team_host(cp, req, who.team_id, host)))
		goto out;
	if (!vid || !*vid)
		vid = json_get_str(env, "CurrentVersionID");
	v = vid && *vid ? st_get(cp->db, "versions", vid) : NULL;
	if (!usable_version(v, who.team_id)) {
		http_respond_error(req, 400, "version must be a healthy snapshot");
		goto out;
	}
	name = cp_new_env_name(cp, req, json_get_str(v, "ProjectID"), name, "fork-", buf, sizeof(buf));
	if (!name || cp_quota_check(cp, req, who.team_id, CP_QUOTA_ENVS) < 0)
		goto out;
	/* The body's TTLs, else the environment forked from's. */
	cp_ttl_source(env, &base);
	txn = st_begin(cp->db);
	resp = cp_fork_create_on(cp, txn, who.team_id, v, name, &ttl, &base, json_get_str(pinned, "ID"), env_id, NULL);
	cp_commit_deploy(cp, txn, req, 202, resp, env_id);
out:
	json_free(body);
}

static void h_snapshot(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const struct json *env, *cur;
	struct json *v, *resp;
	struct st_txn *txn;
	char env_id[ID_MAX], vid[ID_MAX];

	if (!(env = cp_live_env(cp, req, &who)))
		return;
	cur = st_get(cp->db, "versions", json_get_str(env, "CurrentVersionID"));
	if (!cur) {
		http_respond_error(req, 409, "the environment has no version yet; deploy it first");
		return;
	}
	/* The new version is the snapshot's; its id is in the 202 already. */
	v = cp_version_new(cp, env, json_get(cur, "Spec"));
	str_copy(vid, sizeof(vid), json_get_str(v, "ID"));
	str_copy(env_id, sizeof(env_id), json_get_str(env, "ID"));
	txn = st_begin(cp->db);
	resp = cp_deployment_create_v(txn, who.team_id, json_get_str(env, "ProjectID"), env_id, "snapshot",
				      json_new_object(), vid);
	st_put(txn, "versions", vid, v);
	cp_commit_deploy(cp, txn, req, 202, resp, env_id);
}

static void h_rollback(struct cp *cp, struct http_req *req)
{
	const char *vid = NULL;
	struct cp_caller who;
	const struct json *env, *v;
	struct json *body = NULL, *resp;
	struct st_txn *txn;
	char env_id[ID_MAX];

	if (!(env = cp_live_env(cp, req, &who)) || cp_body(req, &body) < 0)
		return;
	if (cp_req_str(req, body, "version", &vid) < 0)
		goto out;
	str_copy(env_id, sizeof(env_id), json_get_str(env, "ID"));
	v = st_get(cp->db, "versions", vid);
	if (!usable_version(v, who.team_id) || !str_eq(json_get_str(v, "EnvID"), env_id)) {
		http_respond_error(req, 400, "version must be a healthy snapshot of this environment");
		goto out;
	}
	txn = st_begin(cp->db);
	resp = cp_deployment_create_v(txn, who.team_id, json_get_str(env, "ProjectID"), env_id, "rollback",
				      cp_obj("version", json_new_str(vid), NULL), vid);
	cp_commit_deploy(cp, txn, req, 202, resp, env_id);
out:
	json_free(body);
}

/* The hosted provider an environment lives on, or NULL (a sidecar, or none yet). */
static const char *env_provider(struct cp *cp, const struct json *env)
{
	return cp_host_driver(cp, st_get(cp->db, "hosts", json_get_str(env, "HostID")));
}

static void h_verify(struct cp *cp, struct http_req *req)
{
	int resume = -1;
	struct cp_caller who;
	const struct json *env, *cur, *spec;
	struct json *body = NULL, *v, *resp;
	struct st_txn *txn;
	char env_id[ID_MAX], vid[ID_MAX];

	if (!(env = cp_live_env(cp, req, &who)) || cp_body(req, &body) < 0)
		return;
	if (cp_opt_bool(req, body, "resume", &resume) < 0)
		goto out;
	/* Verify needs the sidecar's collect and a grader fork: a hosted
	 * provider has neither (targets.md, the capability table's Verify). */
	if (env_provider(cp, env)) {
		char msg[128];

		snprintf(msg, sizeof(msg), "%s: verify.collect: not supported on %s yet", env_provider(cp, env),
			 env_provider(cp, env));
		http_respond_error(req, 400, msg);
		goto out;
	}
	cur = st_get(cp->db, "versions", json_get_str(env, "CurrentVersionID"));
	spec = json_get(cur, "Spec");
	if (!json_get_str(json_get(spec, "agent"), "service") || !json_get(spec, "verifier")) {
		http_respond_error(req, 400, "verify needs x-denv.agent.service and x-denv.verifier in the "
					     "environment's current version");
		goto out;
	}
	/* The capture is a version of its own. */
	v = cp_version_new(cp, env, spec);
	str_copy(vid, sizeof(vid), json_get_str(v, "ID"));
	str_copy(env_id, sizeof(env_id), json_get_str(env, "ID"));
	txn = st_begin(cp->db);
	resp = cp_deployment_create_v(txn, who.team_id, json_get_str(env, "ProjectID"), env_id, "verify",
				      cp_obj("resume", json_new_bool(resume == 1), NULL), vid);
	st_put(txn, "versions", vid, v);
	cp_commit_deploy(cp, txn, req, 202, resp, env_id);
out:
	json_free(body);
}

static void h_destroy(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const struct json *env;
	struct json *resp, *dep;
	struct st_txn *txn;
	char env_id[ID_MAX];

	if (!(env = cp_live_env(cp, req, &who)))
		return;
	str_copy(env_id, sizeof(env_id), json_get_str(env, "ID"));
	txn = st_begin(cp->db);
	resp = cp_deployment_create(txn, who.team_id, json_get_str(env, "ProjectID"), env_id, "destroy",
				    json_new_object());
	dep = json_dup(json_get(resp, "deployment"));
	json_free(resp);
	cp_commit_deploy(cp, txn, req, 202, cp_obj("deployment", dep, NULL), env_id);
}

/* ---- one command, answered when its result comes ---- */

/* PARK_PUT_WHERE: a put with target or owner, whose answer also says where
 * it landed and whose it is (a plain put keeps api.md's {ok, bytes}). */
enum park_kind { PARK_EXEC, PARK_PUT, PARK_PUT_WHERE, PARK_GET };

struct park {
	struct cp *cp;
	struct http_req *req;		/* NULL once the client went away from an exec */
	struct cp_cmd *cmd;
	enum park_kind kind;
	size_t bytes;
	char exec_team[ID_MAX];		/* "" unless it holds one of the team's exec slots (quota.c) */
};

static void park_gone(struct http_req *req, void *arg)
{
	struct park *p = arg;

	http_respond_error(req, 502, "client went away");
	if (*p->exec_team) {
		/* The exec still runs on the host and keeps its slot until it ends. */
		p->req = NULL;
		return;
	}
	/* The command still runs and is recorded; nobody waits for it. */
	cp_cmd_cancel(p->cmd);
	free(p);
}

static void park_done(struct cp *cp, const struct cp_result *res, void *arg)
{
	struct park *p = arg;
	const struct json *pl = res->payload;
	struct buf tar = BUF_INIT;
	struct err e;

	if (*p->exec_team)
		cp_quota_exec_put(cp, p->exec_team);
	if (!p->req) {
		free(p);
		return;
	}
	http_req_on_gone(p->req, NULL, NULL);
	if (!res->ok) {
		http_respond_error(p->req, 502, res->error);
	} else if (p->kind == PARK_EXEC) {
		const struct json *out = json_get(pl, "stdout"), *err = json_get(pl, "stderr");
		/* Copied whole: the output may hold NUL bytes. */
		struct json *r = cp_obj("exit_code", json_new_int(json_get_int(pl, "exit_code", -1)), "stdout",
					out && out->type == JSON_STRING ? json_dup(out) : json_new_str(""), "stderr",
					err && err->type == JSON_STRING ? json_dup(err) : json_new_str(""), NULL);

		/* The host cut stdout or stderr at its cap: say so, or a client
		 * cannot tell cut output from whole. */
		if (json_get_bool(pl, "truncated", false))
			json_object_set_bool(r, "truncated", true);
		cp_reply(p->req, 200, r);
	} else if (p->kind == PARK_PUT || p->kind == PARK_PUT_WHERE) {
		struct json *r = cp_obj("ok", json_new_bool(true), "bytes", json_new_int((int64_t)p->bytes), NULL);

		if (p->kind == PARK_PUT_WHERE && json_get_str(pl, "path"))
			json_object_set_str(r, "path", json_get_str(pl, "path"));
		if (p->kind == PARK_PUT_WHERE && json_get_str(pl, "owner"))
			json_object_set_str(r, "owner", json_get_str(pl, "owner"));
		cp_reply(p->req, 200, r);
	} else {
		buf_init(&tar, CP_ARCHIVE_MAX);
		if (cp_result_archive(res, &tar, &e) < 0)
			cp_fail(p->req, 502, "files: %s", e.msg);
		else
			http_respond(p->req, 200, "application/x-tar", tar.data, tar.len);
		buf_release(&tar);
	}
	free(p);
}

const char *cp_env_host(struct cp *cp, struct http_req *req, const struct json *env)
{
	const char *host = json_get_str(env, "HostID");

	if (!host || !*host) {
		http_respond_error(req, 502, "the environment has no host; deploy it first");
		return NULL;
	}
	if (!cp_host_connected(cp, host)) {
		cp_fail(req, 502, "host %s is not connected", host);
		return NULL;
	}
	return host;
}

static void park(struct cp *cp, struct http_req *req, const struct json *env, const char *host, const char *kind,
		 struct json *payload, struct buf *data, int64_t timeout_ms, enum park_kind pk, size_t bytes)
{
	struct park *p = xcalloc(1, sizeof(*p));

	p->cp = cp;
	p->req = req;
	p->kind = pk;
	p->bytes = bytes;
	if (pk == PARK_EXEC)	/* h_exec took the slot */
		str_copy(p->exec_team, sizeof(p->exec_team), json_get_str(env, "TeamID"));
	p->cmd = cp_cmd_send(cp, host, json_get_str(env, "ID"), kind, payload, data, timeout_ms, park_done, p);
	http_req_on_gone(req, park_gone, p);
}

/* cmd: a non-empty array of strings. */
static bool argv_ok(const struct json *cmd)
{
	if (!cmd || cmd->type != JSON_ARRAY || json_len(cmd) == 0)
		return false;
	for (size_t i = 0; i < json_len(cmd); i++)
		if (json_at(cmd, i)->type != JSON_STRING)
			return false;
	return true;
}

static void h_exec(struct cp *cp, struct http_req *req)
{
	const char *service = NULL, *host;
	int64_t timeout = CP_EXEC_TIMEOUT_DEFAULT_S;
	struct cp_caller who;
	const struct json *env;
	struct json *body = NULL, *payload;

	if (!(env = cp_live_env(cp, req, &who)) || cp_body(req, &body) < 0)
		return;
	if (cp_req_str(req, body, "service", &service) < 0 || cp_opt_int(req, body, "timeout_sec", &timeout) < 0)
		goto out;
	if (!argv_ok(json_get(body, "cmd"))) {
		http_respond_error(req, 400, "cmd must be a non-empty array of strings");
		goto out;
	}
	if (timeout <= 0 || timeout > CP_EXEC_TIMEOUT_MAX_S) {
		cp_fail(req, 400, "timeout_sec must be 1 to %d", CP_EXEC_TIMEOUT_MAX_S);
		goto out;
	}
	if (!(host = cp_env_host(cp, req, env)) || cp_quota_exec_take(cp, req, who.team_id) < 0)
		goto out;
	payload = cp_obj("service", json_new_str(service), "cmd", json_dup(json_get(body, "cmd")), "timeout_sec",
			 json_new_int(timeout), NULL);
	park(cp, req, env, host, "env.exec", payload, NULL, timeout * 1000 + CP_EXEC_SLACK_MS, PARK_EXEC, 0);
out:
	json_free(body);
}

/* service and path from the query; NULL after answering 400. */
static bool files_query(struct http_req *req, const char **service, const char **path)
{
	*service = http_req_query(req, "service");
	*path = http_req_query(req, "path");
	if (!*service || !**service) {
		http_respond_error(req, 400, "service is required");
		return false;
	}
	if (!*path || !**path) {
		http_respond_error(req, 400, "path is required");
		return false;
	}
	return true;
}

static void h_files_put(struct cp *cp, struct http_req *req)
{
	const char *service, *path, *host;
	const char *target = http_req_query(req, "target"), *owner = http_req_query(req, "owner");
	struct cp_caller who;
	const struct json *env;
	struct json *payload;
	struct buf data = BUF_INIT;
	size_t len;
	const char *body;

	if (!(env = cp_live_env(cp, req, &who)))
		return;
	/* target (docker cp's rules) instead of path (a directory to extract into). */
	service = http_req_query(req, "service");
	path = http_req_query(req, "path");
	if (!service || !*service) {
		http_respond_error(req, 400, "service is required");
		return;
	}
	if ((!path || !*path) == (!target || !*target)) {
		http_respond_error(req, 400, "path or target is required (one of them)");
		return;
	}
	if (owner && !*owner) {
		http_respond_error(req, 400, "owner must be user[:group]");
		return;
	}
	if (!(host = cp_env_host(cp, req, env)))
		return;
	body = http_req_body(req, &len);
	payload = cp_obj("service", json_new_str(service), NULL);
	json_object_set_str(payload, path && *path ? "path" : "target", path && *path ? path : target);
	if (owner)
		json_object_set_str(payload, "owner", owner);
	/* The archive goes in chunk frames before the command (doc/host-stream-chunks.md). */
	buf_init(&data, CP_ARCHIVE_MAX);
	if (buf_add(&data, body, len) < 0) {
		json_free(payload);
		http_respond_error(req, 413, "archive larger than 32 MiB");
		return;
	}
	park(cp, req, env, host, "env.put", payload, &data, 0, path && *path && !owner ? PARK_PUT : PARK_PUT_WHERE, len);
}

static void h_files_get(struct cp *cp, struct http_req *req)
{
	const char *service, *path, *host;
	struct cp_caller who;
	const struct json *env;

	if (!(env = cp_live_env(cp, req, &who)) || !files_query(req, &service, &path) || !(host = cp_env_host(cp, req, env)))
		return;
	park(cp, req, env, host, "env.get",
	     cp_obj("service", json_new_str(service), "path", json_new_str(path), NULL), NULL, 0, PARK_GET, 0);
}

int cp_api_ops(struct cp *cp)
{
	if (cp_route(cp, "POST", "/v1/envs/{env}/fork", CP_BODY_JSON, h_fork) < 0 ||
	    cp_route(cp, "POST", "/v1/envs/{env}/snapshot", CP_BODY_JSON, h_snapshot) < 0 ||
	    cp_route(cp, "POST", "/v1/envs/{env}/rollback", CP_BODY_JSON, h_rollback) < 0 ||
	    cp_route(cp, "POST", "/v1/envs/{env}/verify", CP_BODY_JSON, h_verify) < 0 ||
	    cp_route(cp, "DELETE", "/v1/envs/{env}", 0, h_destroy) < 0 ||
	    cp_route(cp, "POST", "/v1/envs/{env}/exec", CP_BODY_JSON, h_exec) < 0 ||
	    cp_exec_stream_route(cp) < 0 ||
	    cp_route(cp, "PUT", "/v1/envs/{env}/files", CP_BODY_FILES, h_files_put) < 0 ||
	    cp_route(cp, "GET", "/v1/envs/{env}/files", 0, h_files_get) < 0)
		return -1;
	return 0;
}
