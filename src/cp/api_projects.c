/* api_projects.c: templates, projects, their environments and GitHub
 * source, and deploys (validated here, run by the orchestrator). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"
#include "spec/spec.h"

static bool valid_kind(const char *k)
{
	return str_eq(k, "rl-environment") || str_eq(k, "agent");
}

static struct json *str_array(const char *const *list)
{
	struct json *a = json_new_array();

	for (; list && *list; list++)
		json_array_push(a, json_new_str(*list));
	return a;
}

static void h_templates(struct cp *cp, struct http_req *req)
{
	static const char *const kinds[] = { "rl-environment", "agent", NULL };
	const char *kind = http_req_query(req, "kind");
	struct cp_caller who;
	struct json *resp, *list;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	if (kind && *kind && !valid_kind(kind)) {
		http_respond_error(req, 400, "kind must be rl-environment or agent");
		return;
	}
	list = json_new_array();
	for (size_t i = 0; i < cp_ntemplates; i++) {
		const struct cp_template *t = &cp_templates[i];
		struct json *o;

		if (kind && *kind && !str_eq(kind, t->kind))
			continue;
		o = json_new_object();
		json_object_set_str(o, "name", t->name);
		json_object_set_str(o, "kind", t->kind);
		json_object_set_str(o, "description", t->description);
		if (t->requires)
			json_object_set(o, "requires", str_array(t->requires));
		json_object_set_str(o, "compose", t->compose);
		if (t->warm)
			json_object_set(o, "warm", str_array(t->warm));
		json_array_push(list, o);
	}
	resp = json_new_object();
	json_object_set(resp, "kinds", str_array(kinds));
	json_object_set(resp, "templates", list);
	cp_reply(req, 200, resp);
}

static void h_projects_list(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	cp_reply_with(req, 200, "projects", cp_list(cp, "projects", "TeamID", who.team_id, false, 0, NULL, NULL));
}

/* "github:owner/repo" -> "owner/repo" in out; false for anything else. */
static bool github_repo(const char *source, char *out, size_t n)
{
	const char *r, *slash;

	if (!str_has_prefix(source, "github:"))
		return false;
	r = source + strlen("github:");
	slash = strchr(r, '/');
	if (!slash || slash == r || !slash[1] || strchr(slash + 1, '/') || strlen(r) >= n)
		return false;
	return str_only(r, "-_./") && str_copy(out, n, r) == 0;
}

static struct json *source_new(const char *project_id, const char *repo)
{
	struct json *s = json_new_object();

	json_object_set_str(s, "ProjectID", project_id);
	json_object_set_str(s, "Repo", repo);
	json_object_set_str(s, "DefaultBranch", "main");
	json_object_set_str(s, "ComposePath", "docker-compose.yaml");
	json_object_set_int(s, "InstallationID", 0);
	json_object_set_bool(s, "DeployBranches", false);
	json_object_set_str(s, "LastDeployedSHA", "");
	return s;
}

static void h_projects_create(struct cp *cp, struct http_req *req)
{
	const char *name = NULL, *kind = "rl-environment", *source = "";
	char id[ID_MAX], repo[256];
	struct cp_caller who;
	struct json *body = NULL, *p, *env, *resp, *envs;
	struct st_txn *txn;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0 || cp_body(req, &body) < 0)
		return;
	if (cp_req_str(req, body, "name", &name) < 0 || cp_opt_str(req, body, "kind", &kind) < 0 ||
	    cp_opt_str(req, body, "source", &source) < 0)
		goto out;
	if (!*kind)
		kind = "rl-environment";
	if (cp_name_ok(req, "name", name) < 0)
		goto out;
	if (!valid_kind(kind)) {
		http_respond_error(req, 400, "kind must be rl-environment or agent");
		goto out;
	}
	if (strlen(source) > 1024) {
		http_respond_error(req, 400, "source is longer than 1024 bytes");
		goto out;
	}
	if (cp_find(cp, "projects", "TeamID", who.team_id, "Name", name)) {
		cp_fail(req, 409, "project \"%s\" already exists", name);
		goto out;
	}
	if (cp_quota_check(cp, req, who.team_id, CP_QUOTA_ENVS) < 0)	/* its alpha environment */
		goto out;
	p = cp_row_new("prj", who.team_id, id);
	json_object_set_str(p, "Name", name);
	json_object_set_str(p, "Kind", kind);
	json_object_set_str(p, "Source", source);
	json_object_set(p, "CreatedAt", cp_now_json());

	txn = st_begin(cp->db);
	env = cp_env_new(who.team_id, id, "alpha", "alpha");
	st_put(txn, "environments", json_get_str(env, "ID"), json_dup(env));
	if (github_repo(source, repo, sizeof(repo)))
		st_put(txn, "sources", id, source_new(id, repo));
	resp = json_new_object();
	json_object_set(resp, "project", json_dup(p));
	envs = json_new_array();
	json_array_push(envs, cp_public(env, "environments"));
	json_free(env);
	json_object_set(resp, "environments", envs);
	st_put(txn, "projects", id, p);
	cp_commit_reply(cp, txn, req, 201, resp, NULL, NULL);
out:
	json_free(body);
}

static void h_project_envs(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const struct json *p;
	struct json *resp;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	p = cp_team_project(cp, req, who.team_id, http_req_param(req, "project"));
	if (!p)
		return;
	resp = json_new_object();
	json_object_set(resp, "environments",
			cp_list(cp, "environments", "ProjectID", json_get_str(p, "ID"), false, 0, NULL, NULL));
	cp_reply(req, 200, resp);
}

/* The project's source row, or NULL after answering 404. */
static const struct json *project_source(struct cp *cp, struct http_req *req, const struct json *p)
{
	const struct json *s = st_get(cp->db, "sources", json_get_str(p, "ID"));

	if (!s)
		http_respond_error(req, 404, "project has no GitHub source (create it with source github:owner/repo)");
	return s;
}

static void h_source_get(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const struct json *p, *s;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	p = cp_team_project(cp, req, who.team_id, http_req_param(req, "project"));
	if (!p || !(s = project_source(cp, req, p)))
		return;
	cp_reply_with(req, 200, "source", json_dup(s));
}

/* A compose path inside the repository: relative, no "..". */
static bool valid_compose_path(const char *s)
{
	char **parts;
	bool ok = *s && *s != '/' && strlen(s) <= CP_COMPOSE_PATH_MAX;

	parts = ok ? str_split(s, "/", NULL) : NULL;
	for (char **q = parts; q && *q; q++)
		if (str_eq(*q, "..") || str_eq(*q, "."))
			ok = false;
	str_list_free(parts);
	return ok;
}

static void h_source_set(struct cp *cp, struct http_req *req)
{
	const char *branch = NULL, *path = NULL;
	int64_t inst = 0;
	int deploy_branches = -1;
	char pid[ID_MAX], inst_id[32];
	struct cp_caller who;
	const struct json *p, *s, *irow;
	struct json *body = NULL, *upd, *resp;
	struct st_txn *txn;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	p = cp_team_project(cp, req, who.team_id, http_req_param(req, "project"));
	if (!p || !(s = project_source(cp, req, p)) || cp_body(req, &body) < 0)
		return;
	if (cp_opt_str(req, body, "default_branch", &branch) < 0 || cp_opt_str(req, body, "compose_path", &path) < 0 ||
	    cp_opt_int(req, body, "installation_id", &inst) < 0 ||
	    cp_opt_bool(req, body, "deploy_branches", &deploy_branches) < 0)
		goto out;
	if (branch && strlen(branch) > CP_BRANCH_MAX) {
		http_respond_error(req, 400, "default_branch is too long");
		goto out;
	}
	if (path && *path && !valid_compose_path(path)) {
		http_respond_error(req, 400, "compose_path must be a relative path inside the repository");
		goto out;
	}
	if (inst < 0) {
		http_respond_error(req, 400, "installation_id must be positive");
		goto out;
	}
	snprintf(inst_id, sizeof(inst_id), "%" PRId64, inst);
	irow = inst ? st_get(cp->db, "installations", inst_id) : NULL;
	if (inst && !str_eq(json_get_str(irow, "TeamID"), who.team_id)) {
		cp_fail(req, 400, "installation %" PRId64 " is not linked to this team", inst);
		goto out;
	}
	str_copy(pid, sizeof(pid), json_get_str(p, "ID"));
	upd = json_dup(s);
	/* Empty strings and 0 leave a field as it is. */
	if (branch && *branch)
		json_object_set_str(upd, "DefaultBranch", branch);
	if (path && *path)
		json_object_set_str(upd, "ComposePath", path);
	if (inst)
		json_object_set_int(upd, "InstallationID", inst);
	if (deploy_branches >= 0)
		json_object_set_bool(upd, "DeployBranches", deploy_branches);
	resp = json_new_object();
	json_object_set(resp, "source", json_dup(upd));
	txn = st_begin(cp->db);
	st_put(txn, "sources", pid, upd);
	cp_commit_reply(cp, txn, req, 200, resp, NULL, NULL);
out:
	json_free(body);
}

/* warm: a string (run under sh -c) or an argv, by the rule of x-denv.warm
 * (spec_warm); absent, null, [] or "" is no warm command. */
static int read_warm(struct http_req *req, const struct json *body, struct json **out)
{
	const struct json *w = json_get(body, "warm");
	struct json *argv;
	struct err e;

	*out = NULL;
	if (!w || w->type == JSON_NULL)
		return 0;
	err_clear(&e);
	/* The API takes strings only: spec_argv would also take numbers. */
	for (size_t i = 0; w->type == JSON_ARRAY && i < json_len(w); i++)
		if (json_at(w, i)->type != JSON_STRING)
			goto bad;
	if (!(argv = spec_warm(w, "warm", &e)))
		goto bad;
	if (json_len(argv) > 0)
		*out = argv;
	else
		json_free(argv);
	return 0;
bad:
	http_respond_error(req, 400, "warm must be a string or an array of strings");
	return -1;
}

struct json *cp_deploy_put(struct cp *cp, struct st_txn *txn, const char *team_id, const char *pid,
			   const char *env_name, struct json *spec, struct json *warm, const struct cp_ttl_req *ttl,
			   struct json *params, char env_id[ID_MAX])
{
	const struct json *env = cp_find(cp, "environments", "ProjectID", pid, "Name", env_name);
	struct json *resp;

	if (env) {
		str_copy(env_id, ID_MAX, json_get_str(env, "ID"));
		/* TTLs given with a deploy replace the environment's (ttl.c). */
		if (ttl && cp_ttl_given(ttl)) {
			struct json *n = json_dup(env);

			cp_ttl_apply(n, ttl, NULL);
			st_put(txn, "environments", env_id, n);
		}
	} else {
		/* Deploying to a name the project does not have yet creates it. */
		struct json *n = cp_env_new(team_id, pid, env_name, "branch");

		if (ttl && cp_ttl_given(ttl))
			cp_ttl_apply(n, ttl, NULL);
		str_copy(env_id, ID_MAX, json_get_str(n, "ID"));
		st_put(txn, "environments", env_id, n);
	}
	/* The per-deploy warm overrides the file's (compose.md). */
	if (!params)
		params = json_new_object();
	if (!warm) {
		const struct json *w = json_get(spec, "warm");

		warm = json_len(w) > 0 ? json_dup(w) : json_new_null();
	}
	json_object_set(params, "spec", spec);
	json_object_set(params, "warm", warm);
	resp = cp_deployment_create(txn, team_id, pid, env_id, "deploy", params);
	/* The compose warnings are known now (spec_parse_compose always sets
	 * them); the resolve phase's evidence repeats them. */
	json_object_set(resp, "warnings", json_dup(json_get(json_get(params, "spec"), "warnings")));
	return resp;
}

static void h_deploy(struct cp *cp, struct http_req *req)
{
	const char *env_name = "alpha", *compose = NULL;
	char pid[ID_MAX], env_id[ID_MAX];
	struct cp_caller who;
	const struct json *p;
	struct json *body = NULL, *spec = NULL, *warm = NULL, *params, *resp;
	struct cp_ttl_req ttl;
	struct st_txn *txn;
	struct err e;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	p = cp_team_project(cp, req, who.team_id, http_req_param(req, "project"));
	if (!p || cp_body(req, &body) < 0)
		return;
	if (cp_opt_str(req, body, "env", &env_name) < 0 || cp_req_str(req, body, "compose", &compose) < 0 ||
	    read_warm(req, body, &warm) < 0 || cp_ttl_read(req, body, &ttl) < 0)
		goto out;
	if (!*env_name)
		env_name = "alpha";
	if (cp_name_ok(req, "env", env_name) < 0)
		goto out;
	if (spec_parse_compose(compose, strlen(compose), &spec, &e) < 0 ||
	    cp_contexts_attach(cp, who.team_id, spec, json_get(body, "contexts"), &e) < 0) {
		http_respond_error(req, 400, e.msg);
		goto out;
	}
	str_copy(pid, sizeof(pid), json_get_str(p, "ID"));
	if (!cp_find(cp, "environments", "ProjectID", pid, "Name", env_name) &&
	    cp_quota_check(cp, req, who.team_id, CP_QUOTA_ENVS) < 0)
		goto out;
	params = json_new_object();
	if (cp_place_param(req, body, params) < 0) {
		json_free(params);
		goto out;
	}
	txn = st_begin(cp->db);
	resp = cp_deploy_put(cp, txn, who.team_id, pid, env_name, spec, warm, &ttl, params, env_id);
	spec = warm = NULL;
	cp_commit_deploy(cp, txn, req, 202, resp, env_id);
out:
	json_free(spec);
	json_free(warm);
	json_free(body);
}

int cp_api_projects(struct cp *cp)
{
	if (cp_route(cp, "GET", "/v1/templates", 0, h_templates) < 0 ||
	    cp_route(cp, "GET", "/v1/projects", 0, h_projects_list) < 0 ||
	    cp_route(cp, "POST", "/v1/projects", CP_BODY_JSON, h_projects_create) < 0 ||
	    cp_route(cp, "GET", "/v1/projects/{project}/envs", 0, h_project_envs) < 0 ||
	    cp_route(cp, "GET", "/v1/projects/{project}/source", 0, h_source_get) < 0 ||
	    cp_route(cp, "POST", "/v1/projects/{project}/source", CP_BODY_JSON, h_source_set) < 0 ||
	    cp_route(cp, "POST", "/v1/projects/{project}/deploy", CP_BODY_DEPLOY, h_deploy) < 0)
		return -1;
	return 0;
}
