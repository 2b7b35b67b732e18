/*
 * api_sandboxes.c: POST /v1/sandboxes and POST /v1/targets/{name}/sandboxes:
 * one environment for one episode, answered when it is healthy (201), when
 * its deployment failed (502) or when timeout_sec passed first (504). The
 * image form deploys a one-service spec (service "main") into a project
 * ("sandboxes" unless named, created on demand); the from_version form forks
 * a healthy version.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"
#include "spec/spec.h"

struct sbx {
	struct cp *cp;
	struct http_req *req;
	struct cp_watch *watch;
	struct ev_timer timer;
	int64_t timeout_s;
	char env_id[ID_MAX];
	char dep_id[ID_MAX];
	char target[CP_NAME_MAX + 1];	/* "" unless pinned */
	struct cp_ttl_req ttl;		/* the body's; the server's defaults fill in */
};

static void sbx_free(struct sbx *s)
{
	if (s->watch)
		cp_orch_unwatch(s->cp, s->watch);
	ev_timer_stop(s->cp->ev, &s->timer);
	free(s);
}

static void sbx_finished(struct cp *cp, const struct json *dep, void *arg)
{
	struct sbx *s = arg;
	const struct json *env = st_get(cp->db, "environments", s->env_id);
	const char *status = json_get_str(dep, "Status"), *error = json_get_str(dep, "Error");
	struct json *resp;

	s->watch = NULL;	/* the orchestrator frees a watch it has called */
	http_req_on_gone(s->req, NULL, NULL);
	if (str_eq(status, "succeeded")) {
		resp = cp_obj("environment", cp_public(env, "environments"), "deployment", cp_public(dep, "deployments"),
			      NULL);
		if (*s->target)
			json_object_set_str(resp, "target", s->target);
		cp_ttl_view(cp, env, resp);
		cp_reply(s->req, 201, resp);
	} else {
		cp_fail(s->req, 502, "sandbox: %s", error && *error ? error : status);
	}
	sbx_free(s);
}

static void sbx_timeout(struct ev *ev, void *arg)
{
	struct sbx *s = arg;

	/* The deployment goes on; only the wait ends. */
	http_req_on_gone(s->req, NULL, NULL);
	cp_fail(s->req, 504, "sandbox did not become healthy in %" PRId64 " s (deployment %s)", s->timeout_s, s->dep_id);
	sbx_free(s);
}

static void sbx_gone(struct http_req *req, void *arg)
{
	struct sbx *s = arg;

	http_respond_error(req, 504, "client went away");
	sbx_free(s);
}

static void sbx_committed(int status, struct err *e, void *arg)
{
	struct sbx *s = arg;

	if (status != 0) {
		log_error("cp", "sandbox: %s", e ? e->msg : "commit failed");
		cp_fail(s->req, 500, "store: %s", e ? e->msg : "commit failed");
		sbx_free(s);
		return;
	}
	s->watch = cp_orch_watch(s->cp, s->dep_id, sbx_finished, s);
	ev_timer_start(s->cp->ev, &s->timer, s->timeout_s * 1000, sbx_timeout, s);
	http_req_on_gone(s->req, sbx_gone, s);
	cp_orch_kick(s->cp, s->env_id);
}

/* A volume name from a container path: "/home/agent" -> "home-agent". */
static void volume_name(const char *path, size_t i, char *out, size_t n)
{
	size_t k = 0;

	for (const char *p = path; *p && k + 1 < n && k < SPEC_MAX_NAME; p++) {
		char c = (char)tolower((unsigned char)*p);

		if (isalnum((unsigned char)c))
			out[k++] = c;
		else if (k > 0 && out[k - 1] != '-')
			out[k++] = '-';
	}
	while (k > 0 && out[k - 1] == '-')
		k--;
	out[k] = '\0';
	if (k == 0)
		snprintf(out, n, "vol%zu", i);
}

/* The compose document of an image sandbox, as the compose reader takes it. */
static struct json *image_compose(const char *image, const struct json *body, const char *egress)
{
	const struct json *cmd = json_get(body, "cmd"), *env = json_get(body, "env"), *ports = json_get(body, "ports");
	const struct json *vols = json_get(body, "volumes");
	struct json *svc = cp_obj("image", json_new_str(image), NULL), *vlist = json_new_array();
	struct json *vdecl = json_new_object();
	char name[SPEC_MAX_NAME + 1], spec[SPEC_MAX_STRING];

	if (cmd && cmd->type != JSON_NULL)
		json_object_set(svc, "command", json_dup(cmd));
	if (env && env->type != JSON_NULL)
		json_object_set(svc, "environment", json_dup(env));
	if (ports && ports->type != JSON_NULL)
		json_object_set(svc, "ports", json_dup(ports));
	if (!vols || vols->type == JSON_NULL) {
		json_array_push(vlist, json_new_str("work:/work"));
		json_object_set(vdecl, "work", json_new_object());
	}
	for (size_t i = 0; vols && i < json_len(vols); i++) {
		const struct json *p = json_at(vols, i);

		if (p->type != JSON_STRING)
			continue;	/* refused by the caller */
		volume_name(p->u.str.s, i, name, sizeof(name));
		if (json_get(vdecl, name))
			snprintf(name, sizeof(name), "vol%zu", i);
		snprintf(spec, sizeof(spec), "%s:%s", name, p->u.str.s);
		json_array_push(vlist, json_new_str(spec));
		json_object_set(vdecl, name, json_new_object());
	}
	json_object_set(svc, "volumes", vlist);
	return cp_obj("x-denv", cp_obj("egress", json_new_str(egress), NULL), "services",
		      cp_obj("main", svc, NULL), "volumes", vdecl, NULL);
}

static bool strings_or_null(const struct json *v)
{
	if (!v || v->type == JSON_NULL)
		return true;
	if (v->type != JSON_ARRAY)
		return false;
	for (size_t i = 0; i < json_len(v); i++)
		if (json_at(v, i)->type != JSON_STRING)
			return false;
	return true;
}

/* The team's project called name, created in txn when missing; its id in out. */
void cp_sandbox_project(struct cp *cp, struct st_txn *txn, const char *team_id, const char *name, char out[ID_MAX])
{
	const struct json *p = cp_find(cp, "projects", "TeamID", team_id, "Name", name);
	struct json *row;

	if (p) {
		str_copy(out, ID_MAX, json_get_str(p, "ID"));
		return;
	}
	id_new("prj", out);
	row = cp_obj("ID", json_new_str(out), "TeamID", json_new_str(team_id), "Name", json_new_str(name), "Kind",
		     json_new_str("rl-environment"), "Source", json_new_str(""), "CreatedAt", cp_now_json(), NULL);
	st_put(txn, "projects", out, row);
}

int cp_sandbox_spec_of(const struct json *body, const char *image, struct json **spec, struct err *e)
{
	const char *egress = json_get_str(body, "egress");
	const struct json *envv = json_get(body, "env"), *eg = json_get(body, "egress");
	struct json *compose;
	int rc;

	*spec = NULL;
	if (eg && eg->type != JSON_NULL && eg->type != JSON_STRING)
		return err_set(e, "egress must be a string");
	if (!egress || !*egress)
		egress = "deny";
	if (!strings_or_null(json_get(body, "cmd")) || !strings_or_null(json_get(body, "ports")) ||
	    !strings_or_null(json_get(body, "volumes")))
		return err_set(e, "cmd, ports and volumes must be arrays of strings");
	if (envv && envv->type != JSON_NULL && envv->type != JSON_OBJECT)
		return err_set(e, "env must be an object");
	if (!str_eq(egress, "deny") && !str_eq(egress, "allow"))
		return err_set(e, "egress must be deny or allow, got \"%.64s\"", egress);
	compose = image_compose(image, body, egress);
	rc = spec_from_compose(compose, spec, e);
	json_free(compose);
	return rc;
}

int cp_sandbox_image_spec(struct http_req *req, const struct json *body, const char *image, struct json **spec,
			  const char **project)
{
	const char *egress = NULL;
	struct err e;

	*spec = NULL;
	*project = "sandboxes";
	if (cp_opt_str(req, body, "egress", &egress) < 0 || cp_opt_str(req, body, "project", project) < 0)
		return -1;
	if (!**project)
		*project = "sandboxes";
	if (cp_sandbox_spec_of(body, image, spec, &e) < 0) {
		http_respond_error(req, 400, e.msg);
		return -1;
	}
	if (!cp_valid_name(*project)) {
		json_free(*spec);
		*spec = NULL;
		cp_fail(req, 400, "project must be 1 to %d letters, digits, '.', '_' or '-'", CP_NAME_MAX);
		return -1;
	}
	return 0;
}

void cp_sandbox_image_put(struct cp *cp, struct st_txn *txn, const struct cp_sandbox_new *n, const struct json *spec,
			  const char *project_id, char env_id[ID_MAX], char dep_id[ID_MAX])
{
	struct cp_ttl_req defaults;
	struct json *env, *params, *resp;

	env = cp_env_new(n->team_id, project_id, n->name, "sandbox");
	cp_ttl_sandbox_defaults(cp, &defaults);
	if (n->pool) {
		/* Waiting in a pool: no TTL and no sandbox mark until a claim
		 * gives it the caller's (pool.c). */
		defaults.idle_s = defaults.max_s = 0;
		json_object_set_str(env, "Pool", n->pool);
	}
	cp_ttl_apply(env, n->ttl, &defaults);
	if (!n->pool)
		json_object_set_bool(env, "Sandbox", true);	/* counted by the sandbox quota */
	str_copy(env_id, ID_MAX, json_get_str(env, "ID"));
	st_put(txn, "environments", env_id, env);
	params = cp_obj("spec", json_dup(spec), "warm", json_new_null(), NULL);
	if (n->target && *n->target)
		json_object_set_str(params, "target", n->target);
	if (n->spread)
		json_object_set_bool(params, "spread", true);
	resp = cp_deployment_create(txn, n->team_id, project_id, env_id, "deploy", params);
	str_copy(dep_id, ID_MAX, json_get_str(json_get(resp, "deployment"), "ID"));
	json_free(resp);
}

const struct json *cp_sandbox_version(struct cp *cp, struct http_req *req, const char *team_id, const char *vid)
{
	const struct json *v = st_get(cp->db, "versions", vid);
	const char *snap = json_get_str(v, "Snapshot");

	if (!v || !str_eq(json_get_str(v, "TeamID"), team_id) || !json_get_bool(v, "Healthy", false) || !snap ||
	    !*snap) {
		http_respond_error(req, 400, "from_version must be a healthy version of this team");
		return NULL;
	}
	return v;
}

void cp_sandbox_fork_put(struct cp *cp, struct st_txn *txn, const struct cp_sandbox_new *n, const struct json *v,
			 char env_id[ID_MAX], char dep_id[ID_MAX])
{
	struct cp_ttl_req defaults;
	struct json *resp, *env;

	/* A sandbox: the server's sandbox TTLs, not the source's; none while
	 * it waits in a pool (pool.c). */
	cp_ttl_sandbox_defaults(cp, &defaults);
	if (n->pool)
		defaults.idle_s = defaults.max_s = 0;
	resp = cp_fork_create_ttl(cp, txn, n->team_id, v, n->name, n->ttl, &defaults, env_id, &env);
	/* The row again with the sandbox quota's mark (the later put wins). */
	json_object_set_str(env, "TeamID", n->team_id);
	if (n->pool)
		json_object_set_str(env, "Pool", n->pool);
	else
		json_object_set_bool(env, "Sandbox", true);
	st_put(txn, "environments", env_id, env);
	str_copy(dep_id, ID_MAX, json_get_str(json_get(resp, "deployment"), "ID"));
	json_free(resp);
}

/* The image form. Fills s and txn; 1 when a pooled sandbox answered, -1
 * after answering an error. */
static int image_form(struct cp *cp, struct http_req *req, const char *team_id, const struct json *body,
		      const char *image, struct sbx *s, struct st_txn **txn)
{
	const char *project, *name = NULL;
	char pid[ID_MAX], buf[CP_NAME_MAX + 1];
	struct json *spec;
	struct cp_sandbox_new n = { team_id, NULL, &s->ttl, s->target, false, NULL };

	if (cp_sandbox_image_spec(req, body, image, &spec, &project) < 0 || cp_opt_str(req, body, "name", &name) < 0) {
		json_free(spec);
		return -1;
	}
	if (!*s->target) {
		/* A warm sandbox of the same spec, when a pool has one ready (pool.c). */
		struct cp_pool_claim c = { team_id, NULL, spec, project, name, &s->ttl };
		int claimed = cp_pool_claim(cp, req, &c);

		if (claimed != 0) {
			json_free(spec);
			return claimed > 0 ? 1 : -1;
		}
	}
	*txn = st_begin(cp->db);
	cp_sandbox_project(cp, *txn, team_id, project, pid);
	if (!(n.name = cp_new_env_name(cp, req, pid, name, "sbx-", buf, sizeof(buf)))) {
		st_abort(*txn);
		json_free(spec);
		return -1;
	}
	cp_sandbox_image_put(cp, *txn, &n, spec, pid, s->env_id, s->dep_id);
	json_free(spec);
	return 0;
}

static int version_form(struct cp *cp, struct http_req *req, const char *team_id, const struct json *body,
			const char *vid, struct sbx *s, struct st_txn **txn)
{
	const struct json *v;
	const char *name = NULL;
	char buf[CP_NAME_MAX + 1];
	struct cp_sandbox_new n = { team_id, NULL, &s->ttl, NULL, false, NULL };

	if (cp_opt_str(req, body, "name", &name) < 0 || !(v = cp_sandbox_version(cp, req, team_id, vid)))
		return -1;
	if (json_get_int(json_get(v, "Spec"), "pool", 0) > 0) {
		/* A warm fork of this version (x-denv.pool, pool.c). */
		struct cp_pool_claim c = { team_id, vid, NULL, NULL, name, &s->ttl };
		int claimed;

		cp_pool_version(cp, vid);
		if ((claimed = cp_pool_claim(cp, req, &c)) != 0)
			return claimed > 0 ? 1 : -1;
	}
	if (!(n.name = cp_new_env_name(cp, req, json_get_str(v, "ProjectID"), name, "sbx-", buf, sizeof(buf))))
		return -1;
	*txn = st_begin(cp->db);
	cp_sandbox_fork_put(cp, *txn, &n, v, s->env_id, s->dep_id);
	return 0;
}

static void sandbox(struct cp *cp, struct http_req *req, bool pinned)
{
	const char *image = NULL, *vid = NULL, *target = http_req_param(req, "name");
	int64_t timeout = CP_SANDBOX_TIMEOUT_DEFAULT_S;
	struct cp_ttl_req ttl;
	struct cp_caller who;
	struct json *body = NULL;
	struct st_txn *txn = NULL;
	struct sbx *s;
	struct err e;
	int rc;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	if (pinned && !cp_find(cp, "clouds", "TeamID", who.team_id, "Name", target)) {
		http_respond_error(req, 404, "cloud not found");
		return;
	}
	if (cp_body(req, &body) < 0)
		return;
	if (cp_opt_str(req, body, "image", &image) < 0 || cp_opt_str(req, body, "from_version", &vid) < 0 ||
	    cp_opt_int(req, body, "timeout_sec", &timeout) < 0 || cp_ttl_read(req, body, &ttl) < 0)
		goto out;
	if (pinned && vid && *vid) {
		http_respond_error(req, 400, "a target sandbox takes the image form only");
		goto out;
	}
	if ((!image || !*image) == (!vid || !*vid)) {
		http_respond_error(req, 400, "one of image or from_version is required");
		goto out;
	}
	if (timeout <= 0 || timeout > CP_SANDBOX_TIMEOUT_MAX_S) {
		cp_fail(req, 400, "timeout_sec must be 1 to %d", CP_SANDBOX_TIMEOUT_MAX_S);
		goto out;
	}
	if (cp_quota_check(cp, req, who.team_id, CP_QUOTA_ENVS) < 0 ||
	    cp_quota_check(cp, req, who.team_id, CP_QUOTA_SANDBOXES) < 0)
		goto out;
	s = xcalloc(1, sizeof(*s));
	s->cp = cp;
	s->req = req;
	s->timeout_s = timeout;
	s->ttl = ttl;
	if (pinned)
		str_copy(s->target, sizeof(s->target), target);
	/* 1: a pooled sandbox answered */
	rc = image && *image ? image_form(cp, req, who.team_id, body, image, s, &txn)
			     : version_form(cp, req, who.team_id, body, vid, s, &txn);
	if (rc != 0) {
		free(s);
		goto out;
	}
	/* Parked from here: answered by sbx_finished, sbx_timeout or a store failure. */
	if (st_commit(txn, sbx_committed, s, &e) < 0) {
		cp_fail(req, 500, "store: %s", e.msg);
		free(s);
	}
out:
	json_free(body);
}

static void h_sandboxes(struct cp *cp, struct http_req *req)
{
	sandbox(cp, req, false);
}

static void h_target_sandboxes(struct cp *cp, struct http_req *req)
{
	sandbox(cp, req, true);
}

int cp_api_sandboxes(struct cp *cp)
{
	if (cp_route(cp, "POST", "/v1/sandboxes", CP_BODY_JSON, h_sandboxes) < 0 ||
	    cp_route(cp, "POST", "/v1/targets/{name}/sandboxes", CP_BODY_JSON, h_target_sandboxes) < 0)
		return -1;
	return 0;
}
