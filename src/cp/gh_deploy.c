/*
 * gh_deploy.c: deploying a project from its GitHub repository
 * (push-to-deploy.md), for a push and for POST deploy-from-source.
 *
 * A flow, each step a call on the loop (gh_app.c): the branch's head when
 * no sha is given (GET /repos/{repo}/branches/{branch}); a check run named
 * denv on the commit, in progress (a 403, an app without Checks: write,
 * means no check runs, as config.md allows); the tarball at the sha
 * (redirect followed, CP_GH_TARBALL_MAX); the compose file out of it
 * (gh_tarball.c); the compose parsed as POST /deploy parses it; the
 * deployment, its Params.source naming repo, branch and sha. A refusal on
 * the way ends the check run failure with the reason and makes no
 * deployment. Then the flow watches the deployment: when it finishes the
 * check run completes, success or failure, with details_url on the
 * deployment's phase log (the console's page when DENV_CONSOLE_URL is set,
 * else GET /v1/deployments/{id}).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"
#include "spec/spec.h"

#define SUMMARY_MAX 1024
#define WHY_MAX 2048		/* a refusal: our words, GitHub's and a path */

enum flow_step { STEP_REPO, STEP_SHA, STEP_CHECK, STEP_TARBALL, STEP_WATCH, STEP_CLOSE };

struct cp_gh_flow {
	struct cp *cp;
	enum flow_step step;
	char team_id[ID_MAX], project_id[ID_MAX], env_id[ID_MAX], dep_id[ID_MAX];
	char repo[CP_GH_REF_MAX + 1], branch[CP_GH_REF_MAX + 1], sha[CP_GH_REF_MAX + 1];
	char env[CP_NAME_MAX + 1];
	char compose_path[CP_GH_REF_MAX * 4 + 1];
	int64_t installation;
	int64_t check_id;		/* 0: no check run */
	struct cp_gh_call *call;
	struct cp_watch *watch;
	cp_gh_deploy_fn fn;		/* NULL once the caller has gone */
	void *arg;
	struct cp_gh_flow *next;
};

static void flow_free(struct cp_gh_flow *f)
{
	struct cp *cp = f->cp;

	for (struct cp_gh_flow **p = &cp->gh_flows; *p; p = &(*p)->next)
		if (*p == f) {
			*p = f->next;
			break;
		}
	cp_gh_call_cancel(cp, f->call);
	if (f->watch)
		cp_orch_unwatch(cp, f->watch);
	free(f);
}

void cp_gh_flows_free(struct cp *cp)
{
	while (cp->gh_flows)
		flow_free(cp->gh_flows);
}

void cp_gh_deploy_forget(struct cp_gh_flow *f)
{
	if (f)
		f->fn = NULL;
}

static void tell(struct cp_gh_flow *f, int status, const struct json *resp, const char *error)
{
	cp_gh_deploy_fn fn = f->fn;

	f->fn = NULL;
	if (fn)
		fn(f->cp, status, resp, error, f->arg);
}

static void step_answered(struct cp *cp, const struct http_client_resp *resp, const char *error, void *arg);

static void call(struct cp_gh_flow *f, enum flow_step step, const char *method, const char *path,
		 const struct json *body, size_t max_body, int timeout_ms)
{
	f->step = step;
	f->call = cp_gh_call(f->cp, f->installation, method, path, body, max_body, timeout_ms, step_answered, f);
}

/* The check run's last word (status completed), then the flow ends. */
static void close_check(struct cp_gh_flow *f, const char *conclusion, const char *title, const char *summary)
{
	char path[HTTP_MAX_URL], now[CLOCK_RFC3339_MAX], url[HTTP_MAX_URL];
	struct json *body;

	if (!f->check_id) {
		flow_free(f);
		return;
	}
	clock_format_rfc3339(clock_now_ns(), now);
	body = cp_obj("status", json_new_str("completed"), "conclusion", json_new_str(conclusion), "completed_at",
		      json_new_str(now), "output",
		      cp_obj("title", json_new_str(title), "summary", json_new_str(summary), NULL), NULL);
	if (*f->dep_id) {
		if (f->cp->cfg.console_url)
			snprintf(url, sizeof(url), "%s/app/deployment/?id=%s", f->cp->cfg.console_url, f->dep_id);
		else
			snprintf(url, sizeof(url), "%s/v1/deployments/%s", f->cp->cfg.public_url, f->dep_id);
		json_object_set_str(body, "details_url", url);
	}
	snprintf(path, sizeof(path), "/repos/%s/check-runs/%" PRId64, f->repo, f->check_id);
	call(f, STEP_CLOSE, "PATCH", path, body, 0, 0);
	json_free(body);
}

/* No deployment: the caller hears status and why, the check run fails. */
static void refuse(struct cp_gh_flow *f, int status, const char *why)
{
	log_info("cp", "github %s@%.12s for %s: %s", f->repo, f->sha, f->project_id, why);
	tell(f, status, NULL, why);
	close_check(f, "failure", "denv: not deployed", why);
}

static void watched(struct cp *cp, const struct json *dep, void *arg)
{
	struct cp_gh_flow *f = arg;
	const char *status = json_get_str(dep, "Status"), *error = json_get_str(dep, "Error");
	char summary[SUMMARY_MAX];
	bool ok = str_eq(status, "succeeded");

	(void)cp;
	f->watch = NULL;	/* the orchestrator frees it */
	if (ok)
		snprintf(summary, sizeof(summary), "Deployment %s of %s to %s succeeded.", f->dep_id, f->sha, f->env);
	else if (str_eq(status, "rolled_back"))
		snprintf(summary, sizeof(summary),
			 "Deployment %s failed (%.400s) and was rolled back to the previous healthy version.", f->dep_id,
			 error ? error : "");
	else
		snprintf(summary, sizeof(summary), "Deployment %s %s: %.400s", f->dep_id, status ? status : "ended",
			 error ? error : "");
	close_check(f, ok ? "success" : "failure", ok ? "denv: deployed" : "denv: deployment failed", summary);
}

static void committed(int status, struct err *e, void *arg)
{
	struct cp_gh_flow *f = arg;
	const struct json *dep;
	struct json *resp;

	if (status != 0) {
		log_error("cp", "github deploy of %s: %s", f->project_id, e ? e->msg : "commit failed");
		*f->dep_id = '\0';
		refuse(f, 500, "the server could not save the deployment");
		return;
	}
	f->step = STEP_WATCH;
	f->watch = cp_orch_watch(f->cp, f->dep_id, watched, f);
	cp_orch_kick(f->cp, f->env_id);
	dep = st_get(f->cp->db, "deployments", f->dep_id);
	resp = dep ? cp_deployment_view(f->cp, dep) : json_new_object();
	json_object_set_str(resp, "branch", f->branch);
	json_object_set_str(resp, "env", f->env);
	json_object_set_str(resp, "sha", f->sha);
	tell(f, 202, resp, NULL);
	json_free(resp);
}

/* The compose file is in hand: parse it, put the deployment, commit. */
static void deploy(struct cp_gh_flow *f, const struct buf *compose)
{
	struct cp *cp = f->cp;
	struct json *spec = NULL, *params, *resp, *src;
	const struct json *row;
	struct st_txn *txn;
	char why[WHY_MAX];
	struct err e;

	if (spec_parse_compose(compose->data, compose->len, &spec, &e) < 0 ||
	    cp_contexts_attach(cp, f->team_id, spec, NULL, &e) < 0) {
		json_free(spec);
		snprintf(why, sizeof(why), "%.300s: %.600s", f->compose_path, e.msg);
		refuse(f, 400, why);
		return;
	}
	txn = st_begin(cp->db);
	params = cp_obj("source", cp_obj("repo", json_new_str(f->repo), "branch", json_new_str(f->branch), "sha",
					 json_new_str(f->sha), "compose_path", json_new_str(f->compose_path), NULL),
			NULL);
	resp = cp_deploy_put(cp, txn, f->team_id, f->project_id, f->env, spec, NULL, NULL, params, f->env_id);
	str_copy(f->dep_id, sizeof(f->dep_id), json_get_str(json_get(resp, "deployment"), "ID"));
	json_free(resp);
	if ((row = st_get(cp->db, "sources", f->project_id))) {
		src = json_dup(row);
		json_object_set_str(src, "LastDeployedSHA", f->sha);
		st_put(txn, "sources", f->project_id, src);
	}
	log_info("cp", "github %s@%.12s: deploying %s to %s (%s)", f->repo, f->sha, f->project_id, f->env, f->dep_id);
	if (st_commit(txn, committed, f, &e) < 0) {
		*f->dep_id = '\0';
		refuse(f, 500, "the server could not save the deployment");
	}
}

static void start_check(struct cp_gh_flow *f)
{
	char path[HTTP_MAX_URL], now[CLOCK_RFC3339_MAX];
	struct json *body;

	clock_format_rfc3339(clock_now_ns(), now);
	body = cp_obj("name", json_new_str("denv"), "head_sha", json_new_str(f->sha), "status",
		      json_new_str("in_progress"), "started_at", json_new_str(now), "output",
		      cp_obj("title", json_new_str("denv: deploying"),
			     "summary", json_new_str("Reading the compose file and deploying."), NULL),
		      NULL);
	snprintf(path, sizeof(path), "/repos/%s/check-runs", f->repo);
	call(f, STEP_CHECK, "POST", path, body, 0, 0);
	json_free(body);
}

static void fetch_tarball(struct cp_gh_flow *f)
{
	char path[HTTP_MAX_URL];

	snprintf(path, sizeof(path), "/repos/%s/tarball/%s", f->repo, f->sha);
	call(f, STEP_TARBALL, "GET", path, NULL, CP_GH_TARBALL_MAX, CP_GH_TARBALL_TIMEOUT_MS);
}

/* A sha as GitHub writes one: 40 (or 64) lowercase hex digits. */
static bool sha_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return (n == 40 || n == 64) && strspn(s, "0123456789abcdef") == n;
}

static struct json *answer_json(const struct http_client_resp *resp)
{
	struct json *doc = NULL;
	struct err pe;

	if (!resp->body.len || json_parse(resp->body.data, resp->body.len, NULL, &doc, &pe) < 0)
		return NULL;
	return doc;
}

static void ask_sha(struct cp_gh_flow *f)
{
	char path[HTTP_MAX_URL];

	snprintf(path, sizeof(path), "/repos/%s/branches/%s", f->repo, f->branch);
	call(f, STEP_SHA, "GET", path, NULL, 0, 0);
}

/* GitHub's own default branch (the source names none); alpha is its environment. */
static void on_repo(struct cp_gh_flow *f, const struct http_client_resp *resp)
{
	struct json *doc = answer_json(resp);
	const char *dflt = json_get_str(doc, "default_branch");
	char says[ERR_MSG_MAX], why[WHY_MAX];

	if (resp->status != 200 || !dflt || !*dflt || strlen(dflt) > CP_GH_REF_MAX) {
		cp_gh_says(resp, says, sizeof(says));
		snprintf(why, sizeof(why), "no GitHub installation linked to this team can see %s (%.300s)", f->repo,
			 says);
		json_free(doc);
		tell(f, resp->status == 404 ? 409 : 502, NULL, why);
		flow_free(f);
		return;
	}
	str_copy(f->branch, sizeof(f->branch), dflt);
	if (!*f->env)
		str_copy(f->env, sizeof(f->env), "alpha");
	json_free(doc);
	ask_sha(f);
}

static void on_sha(struct cp_gh_flow *f, const struct http_client_resp *resp)
{
	struct json *doc = answer_json(resp);
	const char *sha = json_get_str(json_get(doc, "commit"), "sha");
	char says[ERR_MSG_MAX], why[WHY_MAX];

	if (resp->status != 200 || !sha_ok(sha)) {
		cp_gh_says(resp, says, sizeof(says));
		snprintf(why, sizeof(why), "GitHub has no branch %.200s in %s that this team's installation can see (%.300s)",
			 f->branch, f->repo, says);
		json_free(doc);
		/* No commit: no check run to hang the refusal on. */
		tell(f, resp->status == 404 ? 409 : 502, NULL, why);
		flow_free(f);
		return;
	}
	str_copy(f->sha, sizeof(f->sha), sha);
	json_free(doc);
	start_check(f);
}

static void on_check(struct cp_gh_flow *f, const struct http_client_resp *resp)
{
	struct json *doc = answer_json(resp);
	char says[ERR_MSG_MAX];

	if (resp->status == 201 && json_get_int(doc, "id", 0) > 0) {
		f->check_id = json_get_int(doc, "id", 0);
	} else {
		cp_gh_says(resp, says, sizeof(says));
		/* 403: the app may not write checks (config.md): deploy without them. */
		log_info("cp", "github %s: no check run (%s)", f->repo, says);
	}
	json_free(doc);
	fetch_tarball(f);
}

static void on_tarball(struct cp_gh_flow *f, const struct http_client_resp *resp)
{
	struct buf compose = BUF_INIT;
	char says[ERR_MSG_MAX], why[WHY_MAX];
	struct err e;

	if (resp->status != 200) {
		cp_gh_says(resp, says, sizeof(says));
		snprintf(why, sizeof(why), "GitHub did not give the tarball of %s at %.40s: %.300s", f->repo, f->sha,
			 says);
		refuse(f, 502, why);
		return;
	}
	buf_init(&compose, CP_GH_COMPOSE_MAX);
	if (cp_gh_tarball_file(resp->body.data, resp->body.len, f->compose_path, &compose, &e) < 0) {
		snprintf(why, sizeof(why), "%.900s", e.msg);
		refuse(f, 400, why);
	} else {
		deploy(f, &compose);
	}
	buf_release(&compose);
}

static void step_answered(struct cp *cp, const struct http_client_resp *resp, const char *error, void *arg)
{
	struct cp_gh_flow *f = arg;
	char why[WHY_MAX];

	(void)cp;
	f->call = NULL;
	if (!resp) {
		snprintf(why, sizeof(why), "%.900s", error ? error : "GitHub could not be reached");
		if (f->step == STEP_CLOSE) {
			log_warn("cp", "github %s: check run %" PRId64 " not completed: %s", f->repo, f->check_id, why);
			flow_free(f);
		} else if (f->step == STEP_CHECK) {
			log_info("cp", "github %s: no check run (%s)", f->repo, why);
			fetch_tarball(f);
		} else {
			tell(f, 502, NULL, why);
			if (f->step == STEP_SHA || f->step == STEP_REPO)
				flow_free(f);
			else
				close_check(f, "failure", "denv: not deployed", why);
		}
		return;
	}
	switch (f->step) {
	case STEP_REPO:
		on_repo(f, resp);
		break;
	case STEP_SHA:
		on_sha(f, resp);
		break;
	case STEP_CHECK:
		on_check(f, resp);
		break;
	case STEP_TARBALL:
		on_tarball(f, resp);
		break;
	case STEP_CLOSE:
		if (resp->status != 200) {
			cp_gh_says(resp, why, sizeof(why));
			log_warn("cp", "github %s: check run %" PRId64 " not completed: %s", f->repo, f->check_id, why);
		}
		flow_free(f);
		break;
	case STEP_WATCH:
		break;
	}
}

struct cp_gh_flow *cp_gh_deploy(struct cp *cp, const struct cp_gh_deploy_req *rq, cp_gh_deploy_fn fn, void *arg)
{
	struct cp_gh_flow *f = xcalloc(1, sizeof(*f));

	f->cp = cp;
	str_copy(f->team_id, sizeof(f->team_id), rq->team_id);
	str_copy(f->project_id, sizeof(f->project_id), rq->project_id);
	str_copy(f->repo, sizeof(f->repo), rq->repo);
	str_copy(f->branch, sizeof(f->branch), rq->branch ? rq->branch : "");
	str_copy(f->sha, sizeof(f->sha), rq->sha ? rq->sha : "");
	str_copy(f->env, sizeof(f->env), rq->env ? rq->env : "");
	str_copy(f->compose_path, sizeof(f->compose_path), rq->compose_path);
	f->installation = rq->installation;
	f->fn = fn;
	f->arg = arg;
	f->next = cp->gh_flows;
	cp->gh_flows = f;
	if (*f->sha) {
		start_check(f);
	} else if (*f->branch) {
		ask_sha(f);
	} else {
		char path[HTTP_MAX_URL];

		snprintf(path, sizeof(path), "/repos/%s", f->repo);
		call(f, STEP_REPO, "GET", path, NULL, 0, 0);
	}
	return f;
}
