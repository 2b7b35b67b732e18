/* api_github.c: the GitHub App side: the webhook (installations and
 * pushes, which deploy through gh_deploy.c), deploy-from-source, and the
 * /v1/github routes. Without
 * DENV_GITHUB_APP_ID and DENV_GITHUB_APP_PRIVATE_KEY the app is off: the
 * webhook answers 503 and the installation list says configured: false. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crypto.h"
#include "base/enc.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

static bool app_configured(const struct cp *cp)
{
	return cp->cfg.gh_app_id && cp->cfg.gh_app_key;
}

static const char app_off[] = "the GitHub App is not configured on this server";

/* X-Hub-Signature-256: "sha256=" and the hex HMAC of the body. */
static bool signature_ok(const struct cp *cp, struct http_req *req, const char *body, size_t len)
{
	const char *sig = http_req_header(req, "X-Hub-Signature-256");
	const char *secret = cp->cfg.gh_webhook_secret;
	uint8_t mac[SHA256_LEN];
	char hex[SHA256_HEX_LEN + 1];

	if (!sig || !str_has_prefix(sig, "sha256=") || strlen(sig) != 7 + SHA256_HEX_LEN)
		return false;
	if (hmac_sha256(secret, strlen(secret), body, len, mac) < 0)
		return false;
	enc_hex_write(hex, mac, sizeof(mac));
	/* GitHub sends lowercase hex, as enc_hex_write writes it. */
	return crypto_equal(hex, sig + 7, SHA256_HEX_LEN);
}

static void installation_event(struct cp *cp, struct http_req *req, const struct json *ev)
{
	const char *action = json_get_str(ev, "action");
	const struct json *inst = json_get(ev, "installation");
	int64_t n = json_get_int(inst, "id", 0);
	const struct json *old;
	struct json *row, *resp = json_new_object();
	struct st_txn *txn;
	char id[32];

	json_object_set_bool(resp, "ok", true);
	if (n <= 0) {
		json_free(resp);
		http_respond_error(req, 400, "installation event without installation.id");
		return;
	}
	snprintf(id, sizeof(id), "%" PRId64, n);
	old = st_get(cp->db, "installations", id);
	txn = st_begin(cp->db);
	if (str_eq(action, "deleted")) {
		st_delete(txn, "installations", id);
	} else if (str_eq(action, "created") || str_eq(action, "unsuspend") ||
		   str_eq(action, "new_permissions_accepted")) {
		/* Keep an existing link to a team. */
		row = json_new_object();
		json_object_set_int(row, "InstallationID", n);
		json_object_set_str(row, "TeamID", old ? json_get_str(old, "TeamID") : "");
		json_object_set_str(row, "AccountLogin", json_get_str(json_get(inst, "account"), "login"));
		json_object_set(row, "CreatedAt",
				old ? json_dup(json_get(old, "CreatedAt")) : cp_now_json());
		st_put(txn, "installations", id, row);
	}
	cp_commit_reply(cp, txn, req, 200, resp, NULL, NULL);
}

/* One webhook's answer, sent when every project's flow has answered. */
struct push {
	struct cp *cp;
	struct http_req *req;
	struct json *resp;		/* {ok, sha, branch, projects} */
	size_t pending;
	struct push_slot {
		struct push *push;
		struct json *entry;	/* in resp's projects */
		struct cp_gh_flow *flow;
	} slots[CP_GH_PUSH_PROJECTS_MAX];
	size_t nslots;
};

static void push_reply(struct push *p)
{
	http_req_on_gone(p->req, NULL, NULL);
	cp_reply(p->req, 200, p->resp);
	free(p);
}

static void push_gone(struct http_req *req, void *arg)
{
	struct push *p = arg;

	(void)req;
	/* The flows go on (the push happened); nobody waits for their answers. */
	for (size_t i = 0; i < p->nslots; i++)
		cp_gh_deploy_forget(p->slots[i].flow);
	json_free(p->resp);
	free(p);
}

static void push_deployed(struct cp *cp, int status, const struct json *resp, const char *error, void *arg)
{
	struct push_slot *s = arg;
	struct push *p = s->push;

	(void)cp;
	s->flow = NULL;
	if (status == 202) {
		json_object_set_str(s->entry, "deployment", json_get_str(json_get(resp, "deployment"), "ID"));
	} else {
		json_object_set_str(s->entry, "error", error ? error : "not deployed");
	}
	if (--p->pending == 0)
		push_reply(p);
}

/* Should this push deploy the project of src, and where? "" in *skip
 * and env set, else *skip says why not. */
static void push_target(struct cp *cp, const struct json *src, const char *branch, const char *repo_default,
			char env[CP_NAME_MAX + 1], char *skip, size_t n)
{
	const char *dflt = json_get_str(src, "DefaultBranch");
	const struct json *e;

	*skip = '\0';
	if (!dflt || !*dflt)
		dflt = repo_default && *repo_default ? repo_default : "main";
	if (str_eq(branch, dflt)) {
		str_copy(env, CP_NAME_MAX + 1, "alpha");
		return;
	}
	cp_gh_branch_env(branch, env);
	e = cp_find(cp, "environments", "ProjectID", json_get_str(src, "ProjectID"), "Name", env);
	if (e && str_eq(json_get_str(e, "Status"), "destroyed"))
		e = NULL;
	if (!e && !json_get_bool(src, "DeployBranches", false))
		snprintf(skip, n,
			 "branch %.150s is not the default branch (%.150s): no environment %.63s exists and deploy_branches is off",
			 branch, dflt, env);
	else if (!cp_valid_name(env))
		snprintf(skip, n, "branch %.150s makes no valid environment name (%.63s)", branch, env);
}

/* The installation a project's pushes deploy with: the source's, else the
 * event's; it must be linked to the project's team. 0 with why set if none. */
static int64_t push_installation(struct cp *cp, const struct json *src, const char *team_id, int64_t event_inst,
				 char *why, size_t n)
{
	int64_t id = json_get_int(src, "InstallationID", 0);
	const struct json *row;
	char key[32];

	if (id <= 0)
		id = event_inst;
	snprintf(key, sizeof(key), "%" PRId64, id);
	row = id > 0 ? st_get(cp->db, "installations", key) : NULL;
	if (!row || !str_eq(json_get_str(row, "TeamID"), team_id)) {
		snprintf(why, n, "GitHub installation %" PRId64 " is not linked to this project's team", id);
		return 0;
	}
	return id;
}

/* A git ref or sha we put into a URL path: no spaces, no '?', '#' or '%'. */
static bool ref_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > CP_GH_REF_MAX || strstr(s, ".."))
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f || strchr("?#%\\", s[i]))
			return false;
	return true;
}

static void push_project(struct push *p, const struct json *src, const struct json *ev, const char *branch,
			 const char *sha)
{
	struct cp *cp = p->cp;
	const char *pid = json_get_str(src, "ProjectID");
	const struct json *proj = st_get(cp->db, "projects", pid);
	const char *team = json_get_str(proj, "TeamID"), *path = json_get_str(src, "ComposePath");
	const struct json *repo = json_get(ev, "repository");
	struct json *entry = json_new_object();
	struct push_slot *s;
	char env[CP_NAME_MAX + 1], why[ERR_MSG_MAX];
	struct cp_gh_deploy_req rq = { 0 };

	json_object_set_str(entry, "project", pid);
	json_array_push(json_get(p->resp, "projects"), entry);
	push_target(cp, src, branch, json_get_str(repo, "default_branch"), env, why, sizeof(why));
	if (*why) {
		json_object_set_str(entry, "skipped", why);
		return;
	}
	json_object_set_str(entry, "env", env);
	rq.installation = push_installation(cp, src, team, json_get_int(json_get(ev, "installation"), "id", 0), why,
					    sizeof(why));
	if (!proj || !rq.installation || p->nslots >= CP_GH_PUSH_PROJECTS_MAX) {
		json_object_set_str(entry, "error", !proj ? "project not found"
					  : rq.installation ? "too many projects for one push" : why);
		return;
	}
	rq.team_id = team;
	rq.project_id = pid;
	rq.repo = json_get_str(src, "Repo");
	rq.branch = branch;
	rq.sha = sha;
	rq.env = env;
	rq.compose_path = path && *path ? path : CP_GH_COMPOSE_DEFAULT;
	s = &p->slots[p->nslots++];
	s->push = p;
	s->entry = entry;
	p->pending++;
	s->flow = cp_gh_deploy(cp, &rq, push_deployed, s);
}

/* A push deploys every project whose source is the repository (api.md). */
static void push_event(struct cp *cp, struct http_req *req, const struct json *ev)
{
	const char *ref = json_get_str(ev, "ref"), *sha = json_get_str(ev, "after");
	const char *repo = json_get_str(json_get(ev, "repository"), "full_name");
	const char *branch = ref && str_has_prefix(ref, "refs/heads/") ? ref + 11 : NULL;
	struct push *p = xcalloc(1, sizeof(*p));
	struct json *srcs;
	const char *skip = NULL;

	p->cp = cp;
	p->req = req;
	p->resp = json_new_object();
	json_object_set_bool(p->resp, "ok", true);
	json_object_set_str(p->resp, "sha", sha);
	json_object_set_str(p->resp, "branch", branch ? branch : ref);
	json_object_set(p->resp, "projects", json_new_array());
	if (!branch)
		skip = "not a branch push";
	else if (json_get_bool(ev, "deleted", false) || (sha && strspn(sha, "0") == strlen(sha)))
		skip = "the branch was deleted";
	else if (!ref_ok(branch) || !ref_ok(sha) || !ref_ok(repo))
		skip = "the push names no usable branch, sha and repository";
	srcs = repo ? cp_list(cp, "sources", "Repo", repo, false, 0, NULL, NULL) : json_new_array();
	for (size_t i = 0; i < json_len(srcs); i++) {
		if (skip) {
			struct json *o = cp_obj("project", json_new_str(json_get_str(json_at(srcs, i), "ProjectID")),
						"skipped", json_new_str(skip), NULL);

			json_array_push(json_get(p->resp, "projects"), o);
		} else {
			push_project(p, json_at(srcs, i), ev, branch, sha);
		}
	}
	json_free(srcs);
	if (p->pending == 0) {
		push_reply(p);
		return;
	}
	http_req_on_gone(req, push_gone, p);
}

static void h_webhook(struct cp *cp, struct http_req *req)
{
	const char *kind = http_req_header(req, "X-GitHub-Event");
	struct json *ev = NULL, *resp;
	size_t len;
	const char *body = http_req_body(req, &len);
	struct err e;

	if (!app_configured(cp)) {
		http_respond_error(req, 503, app_off);
		return;
	}
	if (!cp->cfg.gh_webhook_secret) {
		http_respond_error(req, 401, "webhooks are refused: DENV_GITHUB_WEBHOOK_SECRET is not set");
		return;
	}
	if (!signature_ok(cp, req, body, len)) {
		http_respond_error(req, 401, "X-Hub-Signature-256 does not match");
		return;
	}
	if (json_parse(body, len, NULL, &ev, &e) < 0 || ev->type != JSON_OBJECT) {
		json_free(ev);
		http_respond_error(req, 400, "webhook body must be a JSON object");
		return;
	}
	if (str_eq(kind, "installation")) {
		installation_event(cp, req, ev);
	} else if (str_eq(kind, "push")) {
		push_event(cp, req, ev);
	} else {
		resp = json_new_object();
		json_object_set_bool(resp, "ok", true);
		cp_reply(req, 200, resp);
	}
	json_free(ev);
}

static void h_installations(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	struct json *resp;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	resp = json_new_object();
	json_object_set(resp, "installations",
			cp_list(cp, "installations", "TeamID", who.team_id, false, 0, NULL, NULL));
	json_object_set_bool(resp, "configured", app_configured(cp));
	cp_reply(req, 200, resp);
}

static void h_installation_link(struct cp *cp, struct http_req *req)
{
	const char *id = http_req_param(req, "id");
	struct cp_caller who;
	const struct json *row;
	const char *owner;
	struct json *upd, *resp;
	struct st_txn *txn;
	char key[32];

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	if (!app_configured(cp)) {
		http_respond_error(req, 503, app_off);
		return;
	}
	row = st_get(cp->db, "installations", id);
	if (!row) {
		http_respond_error(req, 404, "installation not found (the app has not reported it)");
		return;
	}
	owner = json_get_str(row, "TeamID");
	if (owner && *owner && !str_eq(owner, who.team_id)) {
		http_respond_error(req, 409, "installation is already linked to another team");
		return;
	}
	str_copy(key, sizeof(key), id);
	upd = json_dup(row);
	json_object_set_str(upd, "TeamID", who.team_id);
	resp = json_new_object();
	json_object_set(resp, "installation", json_dup(upd));
	txn = st_begin(cp->db);
	st_put(txn, "installations", key, upd);
	cp_commit_reply(cp, txn, req, 200, resp, NULL, NULL);
}

/* ---- POST /v1/projects/{project}/deploy-from-source ---- */

static void from_source_gone(struct http_req *req, void *arg)
{
	(void)req;
	cp_gh_deploy_forget(arg);
}

static void from_source_done(struct cp *cp, int status, const struct json *resp, const char *error, void *arg)
{
	struct http_req *req = arg;

	(void)cp;
	http_req_on_gone(req, NULL, NULL);
	if (status == 202)
		cp_reply(req, 202, json_dup(resp));
	else
		http_respond_error(req, status, error ? error : "not deployed");
}

/* The team's installation for src: the source's own, else the first linked one. */
static int64_t team_installation(struct cp *cp, const struct json *src, const char *team_id)
{
	int64_t id = json_get_int(src, "InstallationID", 0);
	const struct json *row;

	if (id > 0)
		return id;
	row = cp_find(cp, "installations", "TeamID", team_id, NULL, NULL);
	return row ? json_get_int(row, "InstallationID", 0) : 0;
}

static void h_deploy_from_source(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const struct json *p, *src;
	struct json *body = NULL;
	const char *branch = "", *env = "", *path, *dflt;
	char env_buf[CP_NAME_MAX + 1];
	struct cp_gh_deploy_req rq = { 0 };
	struct cp_gh_flow *f;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	p = cp_team_project(cp, req, who.team_id, http_req_param(req, "project"));
	if (!p)
		return;
	if (!app_configured(cp)) {
		http_respond_error(req, 503, app_off);
		return;
	}
	src = st_get(cp->db, "sources", json_get_str(p, "ID"));
	if (!src) {
		http_respond_error(req, 404, "project has no GitHub source (create it with source github:owner/repo)");
		return;
	}
	if (cp_body(req, &body) < 0)
		return;
	if (cp_opt_str(req, body, "branch", &branch) < 0 || cp_opt_str(req, body, "env", &env) < 0)
		goto out;
	rq.installation = team_installation(cp, src, who.team_id);
	if (!rq.installation) {
		cp_fail(req, 409, "no GitHub installation linked to this team can see %s", json_get_str(src, "Repo"));
		goto out;
	}
	if ((*branch && !ref_ok(branch)) || (*env && !cp_valid_name(env))) {
		http_respond_error(req, 400, *env && !cp_valid_name(env) ? "env is not a valid environment name"
									 : "branch is not a usable branch name");
		goto out;
	}
	dflt = json_get_str(src, "DefaultBranch");
	if (!*branch && dflt && *dflt)
		branch = dflt;
	if (!*env && *branch) {
		/* api.md: alpha for the default branch, else the branch's name. */
		if (dflt && str_eq(branch, dflt))
			str_copy(env_buf, sizeof(env_buf), "alpha");
		else
			cp_gh_branch_env(branch, env_buf);
		env = env_buf;
	}
	if (*env && !cp_valid_name(env)) {
		cp_fail(req, 400, "branch %s makes no valid environment name (%s): give env", branch, env);
		goto out;
	}
	path = json_get_str(src, "ComposePath");
	rq.team_id = who.team_id;
	rq.project_id = json_get_str(p, "ID");
	rq.repo = json_get_str(src, "Repo");
	rq.branch = branch;
	rq.env = env;
	rq.compose_path = path && *path ? path : CP_GH_COMPOSE_DEFAULT;
	f = cp_gh_deploy(cp, &rq, from_source_done, req);
	http_req_on_gone(req, from_source_gone, f);
out:
	json_free(body);
}

/* ---- GET /v1/github/repos ---- */

struct repos {
	struct http_req *req;
	int64_t installation;
	int page;
	struct json *list;
	struct cp_gh_call *call;
};

static void repos_free(struct repos *r)
{
	json_free(r->list);
	free(r);
}

static void repos_gone(struct http_req *req, void *arg)
{
	struct repos *r = arg;

	(void)req;
	cp_gh_call_cancel(NULL, r->call);
	repos_free(r);
}

static void repos_page(struct cp *cp, struct repos *r);

static void repos_answered(struct cp *cp, const struct http_client_resp *resp, const char *error, void *arg)
{
	struct repos *r = arg;
	struct json *doc = NULL, *resp_doc;
	const struct json *items;
	char says[ERR_MSG_MAX];
	struct err pe;

	r->call = NULL;
	http_req_on_gone(r->req, NULL, NULL);
	if (!resp || resp->status != 200 ||
	    json_parse(resp->body.data, resp->body.len, NULL, &doc, &pe) < 0) {
		if (resp)
			cp_gh_says(resp, says, sizeof(says));
		cp_fail(r->req, 502, "GitHub did not list the installation's repositories: %.400s",
			resp ? says : error ? error : "no answer");
		json_free(doc);
		repos_free(r);
		return;
	}
	items = json_get(doc, "repositories");
	for (size_t i = 0; i < json_len(items); i++) {
		const struct json *it = json_at(items, i);

		json_array_push(r->list, cp_obj("full_name", json_new_str(json_get_str(it, "full_name")),
						"default_branch", json_new_str(json_get_str(it, "default_branch")),
						"private", json_new_bool(json_get_bool(it, "private", false)), NULL));
	}
	if (json_len(items) == CP_GH_PER_PAGE && (int64_t)json_len(r->list) < json_get_int(doc, "total_count", 0) &&
	    r->page < CP_GH_REPOS_PAGES_MAX) {
		json_free(doc);
		repos_page(cp, r);
		return;
	}
	json_free(doc);
	resp_doc = json_new_object();
	json_object_set(resp_doc, "repos", r->list);
	r->list = NULL;
	cp_reply(r->req, 200, resp_doc);
	repos_free(r);
}

static void repos_page(struct cp *cp, struct repos *r)
{
	char path[128];

	snprintf(path, sizeof(path), "/installation/repositories?per_page=%d&page=%d", CP_GH_PER_PAGE, ++r->page);
	r->call = cp_gh_call(cp, r->installation, "GET", path, NULL, 0, 0, repos_answered, r);
	http_req_on_gone(r->req, repos_gone, r);
}

static void h_repos(struct cp *cp, struct http_req *req)
{
	const char *id = http_req_query(req, "installation");
	struct cp_caller who;
	const struct json *row;
	struct repos *r;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	if (!app_configured(cp)) {
		http_respond_error(req, 503, app_off);
		return;
	}
	if (!id || !*id) {
		http_respond_error(req, 400, "installation is required");
		return;
	}
	row = st_get(cp->db, "installations", id);
	if (!row || !str_eq(json_get_str(row, "TeamID"), who.team_id)) {
		http_respond_error(req, 404, "installation not found");
		return;
	}
	r = xcalloc(1, sizeof(*r));
	r->req = req;
	r->installation = json_get_int(row, "InstallationID", 0);
	r->list = json_new_array();
	repos_page(cp, r);
}

int cp_api_github(struct cp *cp)
{
	struct err e;

	if (cp_gh_app_start(cp, &e) < 0) {
		log_error("cp", "%s", e.msg);
		return -1;
	}
	if (cp_route(cp, "POST", "/webhooks/github", CP_BODY_WEBHOOK, h_webhook) < 0 ||
	    cp_route(cp, "GET", "/v1/github/installations", 0, h_installations) < 0 ||
	    cp_route(cp, "POST", "/v1/github/installations/{id}/link", CP_BODY_JSON, h_installation_link) < 0 ||
	    cp_route(cp, "GET", "/v1/github/repos", 0, h_repos) < 0 ||
	    cp_route(cp, "POST", "/v1/projects/{project}/deploy-from-source", CP_BODY_JSON, h_deploy_from_source) < 0)
		return -1;
	return 0;
}
