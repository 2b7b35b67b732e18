/*
 * orch.c: the orchestrator's core. One deployment at a time per environment:
 * the others wait as pending rows and start, oldest first, when the running
 * one finishes (cp_orch_kick). A running deployment steps through its phases
 * one per loop turn (ev_defer), so a phase that finishes at once never
 * recurses into the next. Every change is committed as it happens, so
 * GET /v1/deployments/{id} shows the phases as they move.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/orch.h"

struct cp_watch {
	char dep_id[ID_MAX];
	cp_watch_fn fn;
	void *arg;
	struct cp_watch *next;
};

static const struct run_kind *const kinds[] = {
	&cp_kind_deploy, &cp_kind_fork, &cp_kind_snapshot, &cp_kind_rollback, &cp_kind_verify, &cp_kind_destroy,
	&cp_kind_promote,
};

static const struct run_kind *kind_of(const char *name)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (str_eq(kinds[i]->kind, name))
			return kinds[i];
	return NULL;
}

static struct cp_run *run_of_env(struct cp *cp, const char *env_id)
{
	for (struct cp_run *r = cp->runs; r; r = r->next)
		if (str_eq(r->env_id, env_id))
			return r;
	return NULL;
}

int64_t run_took_ms(const struct cp_run *r)
{
	return ev_mono_ms() - r->started_ms;
}

void run_env(struct cp_run *r, struct json *fields)
{
	cp_update(r->cp, "environments", r->env_id, fields);
}

int64_t run_duration_ms(const struct json *v, bool number_is_ms)
{
	int64_t ms = 0;

	if (!v)
		return 0;
	if (v->type == JSON_INT)
		return number_is_ms ? v->u.i : v->u.i * 1000;
	if (v->type == JSON_DOUBLE)
		return (int64_t)(number_is_ms ? v->u.d : v->u.d * 1000.0);
	if (v->type == JSON_STRING && clock_parse_duration(v->u.str.s, &ms) == 0)
		return ms;
	return 0;
}

static void phase_update(struct cp_run *r, struct json *fields)
{
	char pid[CP_ROW_ID_MAX];

	cp_phase_id(r->dep_id, r->phase + 1, pid);
	cp_update(r->cp, "phases", pid, fields);
}

static void dep_update(struct cp_run *r, struct json *fields)
{
	cp_update(r->cp, "deployments", r->dep_id, fields);
}

void run_event(struct cp_run *r, const char *kind, struct json *body)
{
	char subject[ST_ID_MAX];

	snprintf(subject, sizeof(subject), "env:%s", r->env_id);
	cp_event(r->cp, NULL, r->team_id, subject, kind, json_dup(body));
	snprintf(subject, sizeof(subject), "dep:%s", r->dep_id);
	cp_event(r->cp, NULL, r->team_id, subject, kind, body);
}

static void step(struct ev *ev, void *arg);

static void step_soon(struct cp_run *r)
{
	ev_defer(r->cp->ev, step, r);
}

static bool at_verdict(const struct cp_run *r)
{
	return str_eq(r->names[r->phase], "verdict");
}

/* unix_ns as a timestamp; 0 is now. */
static struct json *time_json(int64_t unix_ns)
{
	char t[CLOCK_RFC3339_MAX];

	if (!unix_ns)
		return cp_now_json();
	clock_format_rfc3339(unix_ns, t);
	return json_new_str(t);
}

void run_handover(struct cp_run *r, int64_t unix_ns)
{
	int64_t now = clock_now_ns();

	/* Never in the future: a host's durations may add up past our clock... */
	r->handover_ns = unix_ns > 0 && unix_ns < now ? unix_ns : now;
	/* ...nor before the phase began: the phases stay in order. */
	if (r->handover_ns < r->phase_started_ns)
		r->handover_ns = r->phase_started_ns;
}

/* Start the next phase; after a failure, skip everything up to the verdict. */
static void step(struct ev *ev, void *arg)
{
	struct cp_run *r = arg;

	r->phase++;
	while (r->failed && r->names[r->phase] && !at_verdict(r)) {
		phase_update(r, cp_obj("Status", json_new_str("skipped"), NULL));
		r->phase++;
	}
	if (!r->names[r->phase] || !r->k->phases[r->phase]) {
		/* A kind without a verdict function: a bug, but end cleanly. */
		run_done(r, r->failed ? "failed" : "succeeded", NULL);
		return;
	}
	r->phase_started_ns = r->handover_ns ? r->handover_ns : clock_now_ns();
	phase_update(r, cp_obj("Status", json_new_str("running"), "StartedAt", time_json(r->phase_started_ns), NULL));
	r->handover_ns = 0;
	log_debug("orch", "%s %s: %s", r->k->kind, r->dep_id, r->names[r->phase]);
	r->k->phases[r->phase](r);
}

static void phase_end(struct cp_run *r, const char *status, struct json *evidence, const char *error)
{
	phase_update(r, cp_obj("Status", json_new_str(status), "Evidence", evidence ? evidence : json_new_null(),
			       "Error", json_new_str(error ? error : ""), "FinishedAt", time_json(r->handover_ns), NULL));
	step_soon(r);
}

void run_ok(struct cp_run *r, struct json *evidence)
{
	phase_end(r, "ok", evidence, NULL);
}

void run_skip(struct cp_run *r, struct json *evidence)
{
	phase_end(r, "skipped", evidence, NULL);
}

void run_fail(struct cp_run *r, struct json *evidence, const char *fmt, ...)
{
	char msg[ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->failed = true;
	snprintf(r->error, sizeof(r->error), "%s: %.450s", r->names[r->phase], msg);
	log_info("orch", "%s %s failed at %s: %s", r->k->kind, r->dep_id, r->names[r->phase], msg);
	phase_end(r, "failed", evidence, msg);
}

static void cmd_done(struct cp *cp, const struct cp_result *res, void *arg)
{
	struct cp_run *r = arg;
	run_cmd_fn fn = r->cmd_fn;

	r->cmd = NULL;
	r->cmd_fn = NULL;
	fn(r, res);
}

int run_cmd(struct cp_run *r, const char *env_id, const char *kind, struct json *payload, int64_t timeout_ms,
	    run_cmd_fn fn)
{
	return run_cmd_data(r, env_id, kind, payload, NULL, timeout_ms, fn);
}

int run_cmd_data(struct cp_run *r, const char *env_id, const char *kind, struct json *payload, struct buf *data,
		 int64_t timeout_ms, run_cmd_fn fn)
{
	if (!*r->host_id) {
		json_free(payload);
		run_fail(r, NULL, "the environment has no host");
		return -1;
	}
	return run_cmd_on(r, r->host_id, env_id, kind, payload, data, timeout_ms, fn);
}

int run_cmd_on(struct cp_run *r, const char *host_id, const char *env_id, const char *kind, struct json *payload,
	       struct buf *data, int64_t timeout_ms, run_cmd_fn fn)
{
	if (!cp_host_connected(r->cp, host_id)) {
		json_free(payload);
		run_fail(r, NULL, "host %s is not connected", host_id);
		return -1;
	}
	r->cmd_fn = fn;
	r->cmd = cp_cmd_send(r->cp, host_id, env_id, kind, payload, data, timeout_ms, cmd_done, r);
	return 0;
}

static void run_free(struct cp_run *r)
{
	for (struct cp_run **p = &r->cp->runs; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	cp_cmd_cancel(r->cmd);
	ev_timer_stop(r->cp->ev, &r->soak_timer);
	run_place_free(r);
	json_free(r->params);
	json_free(r->ctx);
	free(r);
}

struct kick {
	struct cp *cp;
	char env_id[ID_MAX];
};

static void kick_later(struct ev *ev, void *arg)
{
	struct kick *k = arg;

	cp_orch_kick(k->cp, k->env_id);
	free(k);
}

void run_done(struct cp_run *r, const char *status, struct json *evidence)
{
	struct cp *cp = r->cp;
	struct kick *k = xcalloc(1, sizeof(*k));
	bool ok = str_eq(status, "succeeded");
	const struct json *dep;

	phase_update(r, cp_obj("Status", json_new_str(ok ? "ok" : "failed"), "Evidence",
			       evidence ? evidence : json_new_null(), "Error", json_new_str(ok ? "" : r->error),
			       "FinishedAt", cp_now_json(), NULL));
	dep_update(r, cp_obj("Status", json_new_str(status), "Error", json_new_str(r->error), "FinishedAt",
			     cp_now_json(), NULL));
	run_event(r, "deployment.finished",
		    cp_obj("status", json_new_str(status), "took_ms", json_new_int(run_took_ms(r)), "error",
			   json_new_str(r->error), NULL));
	log_info("orch", "%s %s on %s: %s%s%s", r->k->kind, r->dep_id, r->env_id, status, *r->error ? ": " : "",
		 r->error);
	dep = st_get(cp->db, "deployments", r->dep_id);
	for (struct cp_watch **p = &cp->watches; *p;) {
		struct cp_watch *w = *p;

		if (str_eq(w->dep_id, r->dep_id)) {
			*p = w->next;
			w->fn(cp, dep, w->arg);
			free(w);
		} else {
			p = &w->next;
		}
	}
	k->cp = cp;
	str_copy(k->env_id, sizeof(k->env_id), r->env_id);
	/* The idle clock starts when the environment is ready, not while it deploys. */
	cp_ttl_activity(cp, r->env_id);
	run_free(r);
	ev_defer(cp->ev, kick_later, k);
}

static void run_start(struct cp *cp, const struct json *dep, const struct run_kind *k)
{
	struct cp_run *r = xcalloc(1, sizeof(*r));
	const struct json *env;

	r->cp = cp;
	r->k = k;
	str_copy(r->dep_id, sizeof(r->dep_id), json_get_str(dep, "ID"));
	str_copy(r->env_id, sizeof(r->env_id), json_get_str(dep, "EnvID"));
	str_copy(r->team_id, sizeof(r->team_id), json_get_str(dep, "TeamID"));
	str_copy(r->project_id, sizeof(r->project_id), json_get_str(dep, "ProjectID"));
	str_copy(r->version_id, sizeof(r->version_id), json_get_str(dep, "VersionID"));
	env = st_get(cp->db, "environments", r->env_id);
	str_copy(r->host_id, sizeof(r->host_id), json_get_str(env, "HostID"));
	r->names = cp_phase_names(k->kind);
	r->phase = -1;
	r->started_ms = ev_mono_ms();
	r->params = json_dup(json_get(dep, "Params"));
	r->ctx = json_new_object();
	r->next = cp->runs;
	cp->runs = r;
	dep_update(r, cp_obj("Status", json_new_str("running"), NULL));
	if (k->env_status)
		run_env(r, cp_obj("Status", json_new_str(k->env_status), NULL));
	run_event(r, "deployment.started", cp_obj("kind", json_new_str(k->kind), NULL));
	log_info("orch", "%s %s on %s: started", k->kind, r->dep_id, r->env_id);
	step_soon(r);
}

struct pick {
	const struct json *dep;
};

static int first_pending(const char *id, const struct json *row, void *arg)
{
	struct pick *p = arg;

	if (!str_eq(json_get_str(row, "Status"), "pending"))
		return 0;
	p->dep = row;
	return 1;
}

void cp_orch_kick(struct cp *cp, const char *env_id)
{
	struct pick p = { NULL };
	const struct run_kind *k;
	struct err e;

	if (cp->stopping || run_of_env(cp, env_id))
		return;
	/* Deployment ids are ULIDs: id order is creation order. */
	if (st_scan(cp->db, "deployments", "EnvID", env_id, NULL, first_pending, &p, &e) < 0) {
		log_error("orch", "deployments: %s", e.msg);
		return;
	}
	if (!p.dep)
		return;
	k = kind_of(json_get_str(p.dep, "Kind"));
	if (!k) {
		/* A kind a newer control plane wrote: nothing here can run it. */
		cp_update(cp, "deployments", json_get_str(p.dep, "ID"),
			  cp_obj("Status", json_new_str("failed"), "Error",
				 json_new_str("this deployment kind is not available yet"), "FinishedAt", cp_now_json(),
				 NULL));
		return;
	}
	run_start(cp, p.dep, k);
}

struct cp_watch *cp_orch_watch(struct cp *cp, const char *dep_id, cp_watch_fn fn, void *arg)
{
	struct cp_watch *w = xcalloc(1, sizeof(*w));

	str_copy(w->dep_id, sizeof(w->dep_id), dep_id);
	w->fn = fn;
	w->arg = arg;
	w->next = cp->watches;
	cp->watches = w;
	return w;
}

void cp_orch_unwatch(struct cp *cp, struct cp_watch *w)
{
	for (struct cp_watch **p = &cp->watches; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			free(w);
			return;
		}
}

/* ---- start-up ---- */

struct scan_ids {
	struct json *running;	/* deployment ids */
	struct json *envs;	/* env ids with pending deployments */
};

static int scan_dep(const char *id, const struct json *row, void *arg)
{
	struct scan_ids *s = arg;
	const char *st = json_get_str(row, "Status");

	if (str_eq(st, "running"))
		json_array_push(s->running, json_new_str(id));
	else if (str_eq(st, "pending"))
		json_array_push(s->envs, json_new_str(json_get_str(row, "EnvID")));
	return 0;
}

/* A deployment the previous run left running cannot be resumed (its
 * command's answer went to that process): fail it where it stood. */
static void fail_interrupted(struct cp *cp, const char *dep_id)
{
	const struct json *dep = st_get(cp->db, "deployments", dep_id);
	const char *const *names = cp_phase_names(json_get_str(dep, "Kind"));
	char pid[CP_ROW_ID_MAX], msg[ERR_MSG_MAX] = "";

	for (int seq = 1; names && names[seq - 1]; seq++) {
		const struct json *ph;
		const char *st;

		cp_phase_id(dep_id, seq, pid);
		ph = st_get(cp->db, "phases", pid);
		st = json_get_str(ph, "Status");
		if (str_eq(st, "running")) {
			snprintf(msg, sizeof(msg), "%s: the control plane restarted during this phase", names[seq - 1]);
			cp_update(cp, "phases", pid,
				  cp_obj("Status", json_new_str("failed"), "Error",
					 json_new_str("the control plane restarted during this phase"), "FinishedAt",
					 cp_now_json(), NULL));
		} else if (str_eq(st, "pending")) {
			cp_update(cp, "phases", pid, cp_obj("Status", json_new_str("skipped"), NULL));
		}
	}
	if (!*msg)
		str_copy(msg, sizeof(msg), "the control plane restarted during this deployment");
	cp_update(cp, "deployments", dep_id,
		  cp_obj("Status", json_new_str("failed"), "Error", json_new_str(msg), "FinishedAt", cp_now_json(),
			 NULL));
	log_warn("orch", "deployment %s was running when the control plane stopped: marked failed", dep_id);
}

void cp_orch_start(struct cp *cp)
{
	struct scan_ids s = { json_new_array(), json_new_array() };
	struct err e;

	if (st_scan(cp->db, "deployments", NULL, NULL, NULL, scan_dep, &s, &e) < 0)
		log_error("orch", "deployments: %s", e.msg);
	for (size_t i = 0; i < json_len(s.running); i++)
		fail_interrupted(cp, json_at(s.running, i)->u.str.s);
	/* Servers those (and earlier) deployments created that never joined. */
	cp_orch_sweep_machines(cp);
	for (size_t i = 0; i < json_len(s.envs); i++)
		cp_orch_kick(cp, json_at(s.envs, i)->u.str.s);
	json_free(s.running);
	json_free(s.envs);
}

void cp_orch_free_all(struct cp *cp)
{
	while (cp->runs)
		run_free(cp->runs);
	run_sweeps_free(cp);
	while (cp->watches) {
		struct cp_watch *w = cp->watches;

		cp->watches = w->next;
		free(w);
	}
}

/* ---- routes' helper ---- */

struct commit_kick {
	char env_id[ID_MAX];
};

static void after_commit(struct cp *cp, bool ok, void *arg)
{
	struct commit_kick *k = arg;

	if (ok)
		cp_orch_kick(cp, k->env_id);
	free(k);
}

void cp_commit_deploy(struct cp *cp, struct st_txn *txn, struct http_req *req, int status, struct json *resp,
		      const char *env_id)
{
	struct commit_kick *k = xcalloc(1, sizeof(*k));

	str_copy(k->env_id, sizeof(k->env_id), env_id);
	cp_commit_reply(cp, txn, req, status, resp, after_commit, k);
}
