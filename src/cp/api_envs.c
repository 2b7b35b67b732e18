/* api_envs.c: reading environments, their versions and deployments, and a
 * deployment with its phases. Routes that act on a host are in api_ops.c. */
#include "base/str.h"
#include "cp/cp.h"

/* The caller's environment named by {env}, or NULL after a 404. */
static const struct json *team_env(struct cp *cp, struct http_req *req, struct cp_caller *who)
{
	if (cp_auth(cp, req, CP_AUTH_TEAM, who) < 0)
		return NULL;
	return cp_team_row(cp, req, "environments", who->team_id, http_req_param(req, "env"), "environment");
}

static void h_env_get(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const struct json *env = team_env(cp, req, &who);
	struct json *resp;

	if (!env)
		return;
	resp = json_new_object();
	json_object_set(resp, "environment", cp_public(env, "environments"));
	json_object_set_bool(resp, "connected", cp_host_connected(cp, json_get_str(env, "HostID")));
	cp_ttl_view(cp, env, resp);
	cp_reply(req, 200, resp);
}

/* 200 {table: the rows of table that belong to the caller's {env}}. */
static void reply_env_rows(struct cp *cp, struct http_req *req, const char *table, bool newest_first)
{
	struct cp_caller who;
	const struct json *env = team_env(cp, req, &who);

	if (env)
		cp_reply_with(req, 200, table,
			      cp_list(cp, table, "EnvID", json_get_str(env, "ID"), newest_first, 0, NULL, NULL));
}

static void h_env_versions(struct cp *cp, struct http_req *req)
{
	reply_env_rows(cp, req, "versions", false);
}

static void h_env_deployments(struct cp *cp, struct http_req *req)
{
	reply_env_rows(cp, req, "deployments", true);
}

static void h_deployment_get(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const struct json *dep;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	dep = cp_team_row(cp, req, "deployments", who.team_id, http_req_param(req, "dep"), "deployment");
	if (dep)
		cp_reply(req, 200, cp_deployment_view(cp, dep));
}

int cp_api_envs(struct cp *cp)
{
	if (cp_route(cp, "GET", "/v1/envs/{env}", 0, h_env_get) < 0 ||
	    cp_route(cp, "GET", "/v1/envs/{env}/versions", 0, h_env_versions) < 0 ||
	    cp_route(cp, "GET", "/v1/envs/{env}/deployments", 0, h_env_deployments) < 0 ||
	    cp_route(cp, "GET", "/v1/deployments/{dep}", 0, h_deployment_get) < 0)
		return -1;
	return 0;
}
