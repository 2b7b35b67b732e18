/*
 * api_place.c: the routes that steer placement (denv-cp(8), "PLACEMENT"):
 * drain and undrain a host, the team's placement policy, and redeploy, which
 * re-creates an environment from one of its versions wherever placement
 * puts it now (a lost environment's host is not connected, so elsewhere).
 */
#include <stdio.h>
#include <string.h>

#include "base/str.h"
#include "cp/cp.h"

/* ---- POST /v1/hosts/{host}/drain, /undrain ---- */

static void set_draining(struct cp *cp, struct http_req *req, bool draining)
{
	struct cp_caller who;
	const struct json *h;
	struct json *row, *resp;
	struct st_txn *txn;
	char host_id[ID_MAX], subject[ST_ID_MAX];

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	h = cp_team_row(cp, req, "hosts", who.team_id, http_req_param(req, "host"), "host");
	if (!h)
		return;
	str_copy(host_id, sizeof(host_id), json_get_str(h, "ID"));
	row = json_dup(h);
	json_object_set_bool(row, "Draining", draining);
	resp = cp_obj("host", cp_public(row, "hosts"), NULL);
	json_object_set_bool(json_get(resp, "host"), "connected", cp_host_connected(cp, host_id));
	txn = st_begin(cp->db);
	st_put(txn, "hosts", host_id, row);
	snprintf(subject, sizeof(subject), "host:%s", host_id);
	cp_event(cp, txn, who.team_id, subject, draining ? "host.drained" : "host.undrained",
		 cp_obj("host", json_new_str(host_id), NULL));
	cp_commit_reply(cp, txn, req, 200, resp, NULL, NULL);
}

static void h_drain(struct cp *cp, struct http_req *req)
{
	set_draining(cp, req, true);
}

static void h_undrain(struct cp *cp, struct http_req *req)
{
	set_draining(cp, req, false);
}

/* ---- GET, PUT /v1/teams/{team}/placement ---- */

/* The caller's team when it is the route's; NULL after answering 404. */
static const struct json *own_team(struct cp *cp, struct http_req *req, struct cp_caller *who)
{
	const struct json *team;

	if (cp_auth(cp, req, CP_AUTH_TEAM, who) < 0)
		return NULL;
	team = st_get(cp->db, "teams", who->team_id);
	if (!team || !str_eq(http_req_param(req, "team"), who->team_id)) {
		http_respond_error(req, 404, "team not found");
		return NULL;
	}
	return team;
}

static struct json *policy_view(const struct json *team)
{
	enum cp_place_policy p = CP_PLACE_SPREAD;

	cp_place_policy_parse(json_get_str(team, "Placement"), &p);
	return cp_obj("placement", json_new_str(cp_place_policy_name(p)), NULL);
}

static void h_policy_get(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const struct json *team = own_team(cp, req, &who);

	if (team)
		cp_reply(req, 200, policy_view(team));
}

/* A body's "placement", when given, must name a policy; -1 after answering 400. */
static int read_policy(struct http_req *req, const struct json *body, const char **out)
{
	enum cp_place_policy p;

	*out = NULL;
	if (cp_opt_str(req, body, "placement", out) < 0)
		return -1;
	if (*out && cp_place_policy_parse(*out, &p) < 0) {
		cp_fail(req, 400, "placement must be spread or pack, got \"%.64s\"", *out);
		return -1;
	}
	return 0;
}

static void h_policy_put(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const struct json *team = own_team(cp, req, &who);
	const char *policy;
	struct json *body = NULL, *row;
	struct st_txn *txn;

	if (!team || cp_body(req, &body) < 0)
		return;
	if (read_policy(req, body, &policy) < 0)
		goto out;
	if (!policy) {
		http_respond_error(req, 400, "placement is required");
		goto out;
	}
	row = json_dup(team);
	json_object_set_str(row, "Placement", policy);
	txn = st_begin(cp->db);
	st_put(txn, "teams", who.team_id, row);
	cp_commit_reply(cp, txn, req, 200, policy_view(row), NULL, NULL);
out:
	json_free(body);
}

/* ---- POST /v1/envs/{env}/redeploy {version?, placement?} ---- */

static void h_redeploy(struct cp *cp, struct http_req *req)
{
	const char *vid = NULL, *policy;
	struct cp_caller who;
	const struct json *env, *v, *spec, *warm;
	struct json *body = NULL, *params, *resp;
	struct st_txn *txn;
	char env_id[ID_MAX];

	if (!(env = cp_live_env(cp, req, &who)) || cp_body(req, &body) < 0)
		return;
	if (cp_opt_str(req, body, "version", &vid) < 0 || read_policy(req, body, &policy) < 0)
		goto out;
	str_copy(env_id, sizeof(env_id), json_get_str(env, "ID"));
	if (!vid || !*vid)
		vid = json_get_str(env, "CurrentVersionID");
	v = vid && *vid ? st_get(cp->db, "versions", vid) : NULL;
	spec = json_get(v, "Spec");
	if (!v || !str_eq(json_get_str(v, "EnvID"), env_id) || !spec || spec->type != JSON_OBJECT) {
		http_respond_error(req, 400, "version must be a version of this environment");
		goto out;
	}
	warm = json_get(spec, "warm");
	params = cp_obj("spec", json_dup(spec), "warm", json_len(warm) > 0 ? json_dup(warm) : json_new_null(),
			"from_version", json_new_str(vid), NULL);
	if (policy)
		json_object_set_str(params, "placement", policy);
	txn = st_begin(cp->db);
	resp = cp_deployment_create(txn, who.team_id, json_get_str(env, "ProjectID"), env_id, "deploy", params);
	cp_commit_deploy(cp, txn, req, 202, resp, env_id);
out:
	json_free(body);
}

/* The deploy body's placement into params (project deploys, api_projects.c);
 * -1 after answering 400. */
int cp_place_param(struct http_req *req, const struct json *body, struct json *params)
{
	const char *policy;

	if (read_policy(req, body, &policy) < 0)
		return -1;
	if (policy)
		json_object_set_str(params, "placement", policy);
	return 0;
}

int cp_api_place(struct cp *cp)
{
	if (cp_route(cp, "POST", "/v1/hosts/{host}/drain", CP_BODY_JSON, h_drain) < 0 ||
	    cp_route(cp, "POST", "/v1/hosts/{host}/undrain", CP_BODY_JSON, h_undrain) < 0 ||
	    cp_route(cp, "GET", "/v1/teams/{team}/placement", 0, h_policy_get) < 0 ||
	    cp_route(cp, "PUT", "/v1/teams/{team}/placement", CP_BODY_JSON, h_policy_put) < 0 ||
	    cp_route(cp, "POST", "/v1/envs/{env}/redeploy", CP_BODY_JSON, h_redeploy) < 0)
		return -1;
	return 0;
}
