/*
 * ttl.c: time-to-live policy for environments (denv-cp(8), "TTLs").
 *
 * An environment row may carry IdleTTLSec (reap after this long without
 * activity), MaxTTLSec (reap this long after CreatedAt, active or not) and
 * TTLAction (what reaching the idle TTL does: destroy, or pause; the max
 * TTL always destroys). 0 or absent is no limit. The
 * reaper is a timer on the loop: every CP_TTL_TICK_MS it reads at most
 * CP_TTL_SCAN_MAX environment rows from where the last tick stopped and
 * starts at most CP_TTL_REAP_MAX destroy deployments, so a big store costs
 * several ticks, never one long one. It decides from stored timestamps
 * only, so the policy survives a restart.
 *
 * Activity (exec, files, fork, snapshot, touch, PATCH, a deployment that
 * finishes) is kept in memory per environment and written to the row's
 * LastActivityAt at most once per CP_TTL_ACTIVITY_WRITE_MS, not once per
 * exec. So the stored value may lag the truth by less than that; after a
 * restart the reaper adds that much to the stored value: an idle TTL can
 * run up to CP_TTL_ACTIVITY_WRITE_MS long across a restart, never short.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/ev.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

#define TTL_BUCKETS 1024

/* What this process saw of one environment's activity. */
struct ttl_seen {
	char env_id[ID_MAX];
	int64_t last_ms;		/* realtime of the latest activity */
	int64_t written_ms;		/* the LastActivityAt the row holds (0: none) */
	bool queued;			/* on the write list */
	struct ttl_seen *next;		/* bucket chain */
	struct ttl_seen *next_write;
};

struct cp_ttl {
	struct cp *cp;
	struct ev_timer tick;
	struct ev_timer flush;		/* 0 ms: writes the write list next turn */
	char cursor[ID_MAX];		/* the last environment the reaper read ("": start over) */
	struct ttl_seen *buckets[TTL_BUCKETS];
	size_t nseen;
	struct ttl_seen *writes;
};

/* ---- pure parts (unit-tested in t/unit/cp-ttl.c) ---- */

int cp_ttl_check(const struct cp_ttl_req *t, struct err *e)
{
	if (t->idle_s != CP_TTL_UNSET && (t->idle_s < 0 || t->idle_s > CP_TTL_MAX_S))
		return err_set(e, "idle_ttl_sec must be 0 (none) to %d, got %" PRId64, CP_TTL_MAX_S, t->idle_s);
	if (t->max_s != CP_TTL_UNSET && (t->max_s < 0 || t->max_s > CP_TTL_MAX_S))
		return err_set(e, "max_ttl_sec must be 0 (none) to %d, got %" PRId64, CP_TTL_MAX_S, t->max_s);
	if (!t->action || str_eq(t->action, "destroy") || str_eq(t->action, "pause"))
		return 0;
	return err_set(e, "ttl_action must be destroy or pause, got \"%.64s\"", t->action);
}

enum cp_ttl_verdict cp_ttl_due(int64_t created_ms, int64_t last_ms, int64_t idle_s, int64_t max_s, int64_t now_ms,
			       char *reason, size_t n)
{
	/* The max TTL first: it is the one activity cannot move. */
	if (max_s > 0 && now_ms >= created_ms + max_s * 1000) {
		snprintf(reason, n, "ttl: max %" PRId64 " s reached", max_s);
		return CP_TTL_MAX;
	}
	if (idle_s > 0 && now_ms >= last_ms + idle_s * 1000) {
		snprintf(reason, n, "ttl: idle %" PRId64 " s exceeded", idle_s);
		return CP_TTL_IDLE;
	}
	if (n)
		reason[0] = '\0';
	return CP_TTL_KEEP;
}

bool cp_ttl_write_due(int64_t written_ms, int64_t now_ms)
{
	return now_ms - written_ms >= CP_TTL_ACTIVITY_WRITE_MS;
}

/* ---- the in-memory activity table ---- */

static size_t bucket_of(const char *env_id)
{
	uint32_t h = 2166136261u;	/* FNV-1a */

	for (const unsigned char *p = (const unsigned char *)env_id; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h % TTL_BUCKETS;
}

static struct ttl_seen *seen_find(struct cp_ttl *t, const char *env_id)
{
	for (struct ttl_seen *s = t->buckets[bucket_of(env_id)]; s; s = s->next)
		if (str_eq(s->env_id, env_id))
			return s;
	return NULL;
}

static void seen_drop(struct cp_ttl *t, const char *env_id)
{
	for (struct ttl_seen **p = &t->buckets[bucket_of(env_id)]; *p; p = &(*p)->next) {
		struct ttl_seen *s = *p;

		if (!str_eq(s->env_id, env_id))
			continue;
		if (s->queued)
			return;	/* the flush still needs it; a later tick drops it */
		*p = s->next;
		t->nseen--;
		free(s);
		return;
	}
}

static int64_t stamp_ms(const struct json *row, const char *key)
{
	int64_t ns;
	const char *s = json_get_str(row, key);

	if (!s || !*s || clock_parse_rfc3339(s, &ns) < 0)
		return 0;
	return ns / 1000000;
}

static void flush_writes(struct ev *ev, void *arg)
{
	struct cp_ttl *t = arg;
	char at[CLOCK_RFC3339_MAX];

	while (t->writes) {
		struct ttl_seen *s = t->writes;

		t->writes = s->next_write;
		s->queued = false;
		s->written_ms = s->last_ms;
		clock_format_rfc3339(s->last_ms * 1000000, at);
		cp_update(t->cp, "environments", s->env_id, cp_obj("LastActivityAt", json_new_str(at), NULL));
	}
}

static void queue_write(struct cp_ttl *t, struct ttl_seen *s)
{
	if (s->queued)
		return;
	s->queued = true;
	s->next_write = t->writes;
	t->writes = s;
	/* Not now: the caller may still hold the row that a write would free. */
	if (!ev_timer_armed(&t->flush))
		ev_timer_start(t->cp->ev, &t->flush, 0, flush_writes, t);
}

void cp_ttl_activity(struct cp *cp, const char *env_id)
{
	struct cp_ttl *t = cp->ttl;
	struct ttl_seen *s;
	int64_t now = clock_now_ms();

	if (!t || !env_id || !*env_id)
		return;
	s = seen_find(t, env_id);
	if (!s) {
		if (t->nseen >= CP_TTL_SEEN_MAX) {
			log_warn("ttl", "%zu environments active at once: activity of %s not kept", t->nseen, env_id);
			return;
		}
		s = xcalloc(1, sizeof(*s));
		str_copy(s->env_id, sizeof(s->env_id), env_id);
		s->written_ms = stamp_ms(st_get(cp->db, "environments", env_id), "LastActivityAt");
		s->next = t->buckets[bucket_of(env_id)];
		t->buckets[bucket_of(env_id)] = s;
		t->nseen++;
	}
	s->last_ms = now;
	if (cp_ttl_write_due(s->written_ms, now))
		queue_write(t, s);
}

/* When env was last active as far as this process can tell (realtime ms). */
static int64_t last_active_ms(struct cp_ttl *t, const struct json *env)
{
	const struct ttl_seen *s = t ? seen_find(t, json_get_str(env, "ID")) : NULL;
	int64_t stored = stamp_ms(env, "LastActivityAt"), created = stamp_ms(env, "CreatedAt");

	if (s && s->last_ms)
		return s->last_ms;
	/* Not seen since start-up: what a previous run did not write yet was
	 * less than one write interval after the stored value. */
	if (stored)
		return stored + CP_TTL_ACTIVITY_WRITE_MS;
	return created;
}

/* ---- requests ---- */

int cp_ttl_read(struct http_req *req, const struct json *body, struct cp_ttl_req *out)
{
	struct err e;

	out->idle_s = out->max_s = CP_TTL_UNSET;
	out->action = NULL;
	if (cp_opt_int(req, body, "idle_ttl_sec", &out->idle_s) < 0 ||
	    cp_opt_int(req, body, "max_ttl_sec", &out->max_s) < 0 || cp_opt_str(req, body, "ttl_action", &out->action) < 0)
		return -1;
	if (cp_ttl_check(out, &e) < 0) {
		http_respond_error(req, 400, e.msg);
		return -1;
	}
	return 0;
}

bool cp_ttl_given(const struct cp_ttl_req *t)
{
	return t->idle_s != CP_TTL_UNSET || t->max_s != CP_TTL_UNSET || t->action;
}

void cp_ttl_apply(struct json *env, const struct cp_ttl_req *t, const struct cp_ttl_req *base)
{
	int64_t idle = t->idle_s, max = t->max_s;
	const char *action = t->action;

	if (idle == CP_TTL_UNSET)
		idle = base && base->idle_s != CP_TTL_UNSET ? base->idle_s : json_get_int(env, "IdleTTLSec", 0);
	if (max == CP_TTL_UNSET)
		max = base && base->max_s != CP_TTL_UNSET ? base->max_s : json_get_int(env, "MaxTTLSec", 0);
	if (!action)
		action = base && base->action ? base->action : json_get_str(env, "TTLAction");
	json_object_set_int(env, "IdleTTLSec", idle);
	json_object_set_int(env, "MaxTTLSec", max);
	json_object_set_str(env, "TTLAction", action && *action ? action : "destroy");
}

void cp_ttl_sandbox_defaults(const struct cp *cp, struct cp_ttl_req *out)
{
	out->idle_s = cp->cfg.sandbox_idle_ttl_s;
	out->max_s = cp->cfg.sandbox_max_ttl_s;
	out->action = "destroy";
}

void cp_ttl_source(const struct json *env, struct cp_ttl_req *out)
{
	const char *a = json_get_str(env, "TTLAction");

	out->idle_s = json_get_int(env, "IdleTTLSec", 0);
	out->max_s = json_get_int(env, "MaxTTLSec", 0);
	out->action = a && *a ? a : NULL;
}

static struct json *stamp_json(int64_t ms)
{
	char at[CLOCK_RFC3339_MAX];

	clock_format_rfc3339(ms * 1000000, at);
	return json_new_str(at);
}

void cp_ttl_view(struct cp *cp, const struct json *env, struct json *resp)
{
	int64_t idle = json_get_int(env, "IdleTTLSec", 0), max = json_get_int(env, "MaxTTLSec", 0);
	bool live = !str_eq(json_get_str(env, "Status"), "destroyed");

	json_object_set(resp, "expires_at",
			live && max > 0 ? stamp_json(stamp_ms(env, "CreatedAt") + max * 1000) : json_new_null());
	json_object_set(resp, "idle_expires_at",
			live && idle > 0 ? stamp_json(last_active_ms(cp->ttl, env) + idle * 1000) : json_new_null());
}

/* ---- the reaper ---- */

struct due {
	char env_id[ID_MAX];
	char reason[96];
	bool pause;		/* the idle TTL of an environment whose action is pause */
};

struct scan {
	struct cp_ttl *t;
	int64_t now_ms;
	size_t visited;
	struct due due[CP_TTL_REAP_MAX];
	size_t ndue;
};

static int in_flight(const char *id, const struct json *row, void *arg)
{
	const char *s = json_get_str(row, "Status");

	*(bool *)arg = str_eq(s, "pending") || str_eq(s, "running");
	return *(bool *)arg;
}

static int scan_env(const char *id, const struct json *env, void *arg)
{
	struct scan *sc = arg;
	const char *status = json_get_str(env, "Status"), *reaped = json_get_str(env, "ReapedAt");
	int64_t idle = json_get_int(env, "IdleTTLSec", 0), max = json_get_int(env, "MaxTTLSec", 0);
	enum cp_ttl_verdict verdict;
	struct due *d;

	sc->visited++;
	str_copy(sc->t->cursor, sizeof(sc->t->cursor), id);
	if (str_eq(status, "destroyed")) {
		seen_drop(sc->t, id);
		return 0;
	}
	/* Only a settled environment: one that is deploying, forking or
	 * snapshotting is looked at again once that is over. */
	if ((idle <= 0 && max <= 0) || (reaped && *reaped) || (!str_eq(status, "running") && !str_eq(status, "failed")))
		return 0;
	d = &sc->due[sc->ndue];
	verdict = cp_ttl_due(stamp_ms(env, "CreatedAt"), last_active_ms(sc->t, env), idle, max, sc->now_ms,
			     d->reason, sizeof(d->reason));
	/* A paused environment is idle by design: only its max TTL ends it. */
	if (verdict == CP_TTL_KEEP || (verdict == CP_TTL_IDLE && json_get_bool(env, "Paused", false)))
		return 0;
	d->pause = verdict == CP_TTL_IDLE && str_eq(json_get_str(env, "TTLAction"), "pause");
	str_copy(d->env_id, sizeof(d->env_id), id);
	/* Full: stop here; the next tick goes on from this row. */
	return ++sc->ndue == CP_TTL_REAP_MAX;
}

struct reaped {
	struct cp *cp;
	char env_id[ID_MAX];
};

static void reap_committed(int status, struct err *e, void *arg)
{
	struct reaped *r = arg;

	if (status != 0)
		log_error("ttl", "reaping %s: %s", r->env_id, e ? e->msg : "commit failed");
	else
		cp_orch_kick(r->cp, r->env_id);
	free(r);
}

/* The idle TTL with action pause: the row says Paused at once (so the next
 * tick does not pause it again), the host pauses it, and its answer records
 * the ttl.paused event (api_pause.c). */
static void reap_pause(struct cp *cp, const struct json *env, const struct due *d)
{
	struct json *row = json_dup(env);
	struct st_txn *txn = st_begin(cp->db);
	struct err e;

	json_object_set_bool(row, "Paused", true);
	json_object_set(row, "PausedAt", cp_now_json());
	json_object_set_str(row, "PausedReason", d->reason);
	st_put(txn, "environments", d->env_id, row);
	if (st_commit(txn, NULL, NULL, &e) < 0 || cp_pause_env(cp, d->env_id, d->reason, &e) < 0)
		log_error("ttl", "pausing %s: %s", d->env_id, e.msg);
	else
		log_info("ttl", "%s: %s: pausing", d->env_id, d->reason);
}

/* Start the destroy deployment and say why, in one transaction. */
static void reap(struct cp *cp, const struct due *d)
{
	const struct json *env = st_get(cp->db, "environments", d->env_id);
	const char *team = json_get_str(env, "TeamID");
	char subject[ST_ID_MAX], dep_id[ID_MAX];
	struct json *row, *resp;
	struct st_txn *txn;
	struct reaped *r;
	struct err e;
	bool busy = false;

	if (!env || st_scan(cp->db, "deployments", "EnvID", d->env_id, NULL, in_flight, &busy, &e) < 0 || busy)
		return;	/* a deployment of its own is queued: the next pass decides */
	if (d->pause) {
		reap_pause(cp, env, d);
		return;
	}
	txn = st_begin(cp->db);
	resp = cp_deployment_create(txn, team, json_get_str(env, "ProjectID"), d->env_id, "destroy",
				    cp_obj("reason", json_new_str(d->reason), NULL));
	str_copy(dep_id, sizeof(dep_id), json_get_str(json_get(resp, "deployment"), "ID"));
	json_free(resp);
	row = json_dup(env);
	json_object_set(row, "ReapedAt", cp_now_json());
	json_object_set_str(row, "ReapedReason", d->reason);
	st_put(txn, "environments", d->env_id, row);
	snprintf(subject, sizeof(subject), "env:%s", d->env_id);
	cp_event(cp, txn, team, subject, "ttl.reaped",
		 cp_obj("reason", json_new_str(d->reason), "action", json_new_str("destroy"), "deployment",
			json_new_str(dep_id), NULL));
	log_info("ttl", "%s: %s: destroying (deployment %s)", d->env_id, d->reason, dep_id);
	r = xcalloc(1, sizeof(*r));
	r->cp = cp;
	str_copy(r->env_id, sizeof(r->env_id), d->env_id);
	if (st_commit(txn, reap_committed, r, &e) < 0) {
		log_error("ttl", "reaping %s: %s", d->env_id, e.msg);
		free(r);
	}
}

static void tick(struct ev *ev, void *arg)
{
	struct cp_ttl *t = arg;
	char after[ID_MAX];
	struct st_range range = { NULL, CP_TTL_SCAN_MAX, false };
	struct scan *sc = xcalloc(1, sizeof(*sc));
	struct err e;

	/* A copy: the scan moves t->cursor as it goes. */
	str_copy(after, sizeof(after), t->cursor);
	range.after = after[0] ? after : NULL;

	sc->t = t;
	sc->now_ms = clock_now_ms();
	if (!t->cp->stopping) {
		if (st_scan(t->cp->db, "environments", NULL, NULL, &range, scan_env, sc, &e) < 0)
			log_error("ttl", "environments: %s", e.msg);
		/* The end of the table: the next tick starts over. */
		if (sc->visited < CP_TTL_SCAN_MAX && sc->ndue < CP_TTL_REAP_MAX)
			t->cursor[0] = '\0';
		for (size_t i = 0; i < sc->ndue; i++)
			reap(t->cp, &sc->due[i]);
	}
	free(sc);
	ev_timer_start(ev, &t->tick, CP_TTL_TICK_MS, tick, t);
}

void cp_ttl_start(struct cp *cp)
{
	struct cp_ttl *t = xcalloc(1, sizeof(*t));

	t->cp = cp;
	cp->ttl = t;
	ev_timer_start(cp->ev, &t->tick, CP_TTL_TICK_MS, tick, t);
}

void cp_ttl_free(struct cp *cp)
{
	struct cp_ttl *t = cp->ttl;

	if (!t)
		return;
	ev_timer_stop(cp->ev, &t->tick);
	ev_timer_stop(cp->ev, &t->flush);
	/* Shutting down: all activity not written yet goes to the store now,
	 * so that a clean restart loses none. */
	for (size_t i = 0; i < TTL_BUCKETS; i++)
		for (struct ttl_seen *s = t->buckets[i]; s; s = s->next)
			if (s->last_ms > s->written_ms && !s->queued) {
				s->queued = true;
				s->next_write = t->writes;
				t->writes = s;
			}
	if (cp->db && !st_failed(cp->db))
		flush_writes(cp->ev, t);
	for (size_t i = 0; i < TTL_BUCKETS; i++)
		while (t->buckets[i]) {
			struct ttl_seen *s = t->buckets[i];

			t->buckets[i] = s->next;
			free(s);
		}
	free(t);
	cp->ttl = NULL;
}

/* ---- routes: PATCH /v1/envs/{env}, POST /v1/envs/{env}/touch ---- */

const struct json *cp_team_env(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const struct json *env;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return NULL;
	env = cp_team_row(cp, req, "environments", who.team_id, http_req_param(req, "env"), "environment");
	if (env && str_eq(json_get_str(env, "Status"), "destroyed")) {
		http_respond_error(req, 409, "environment is destroyed");
		return NULL;
	}
	return env;
}

/* {environment, expires_at, idle_expires_at}. */
static struct json *ttl_answer(struct cp *cp, const struct json *env)
{
	struct json *resp = cp_obj("environment", cp_public(env, "environments"), NULL);

	cp_ttl_view(cp, env, resp);
	return resp;
}

static void h_touch(struct cp *cp, struct http_req *req)
{
	const struct json *env = cp_team_env(cp, req);

	if (!env)
		return;
	cp_ttl_activity(cp, json_get_str(env, "ID"));
	cp_reply(req, 200, ttl_answer(cp, env));
}

static void h_patch(struct cp *cp, struct http_req *req)
{
	const struct json *env = cp_team_env(cp, req);
	struct json *body = NULL, *row;
	struct cp_ttl_req set;
	struct st_txn *txn;

	if (!env || cp_body(req, &body) < 0)
		return;
	if (cp_ttl_read(req, body, &set) < 0)
		goto out;
	if (!cp_ttl_given(&set)) {
		http_respond_error(req, 400, "nothing to change: give idle_ttl_sec, max_ttl_sec or ttl_action");
		goto out;
	}
	cp_ttl_activity(cp, json_get_str(env, "ID"));
	row = json_dup(env);
	cp_ttl_apply(row, &set, NULL);
	txn = st_begin(cp->db);
	st_put(txn, "environments", json_get_str(env, "ID"), json_dup(row));
	/* Answered from the new row: the stored one is replaced by the commit. */
	cp_commit_reply(cp, txn, req, 200, ttl_answer(cp, row), NULL, NULL);
	json_free(row);
out:
	json_free(body);
}

int cp_api_ttl(struct cp *cp)
{
	if (cp_route(cp, "PATCH", "/v1/envs/{env}", CP_BODY_JSON, h_patch) < 0 ||
	    cp_route(cp, "POST", "/v1/envs/{env}/touch", CP_BODY_JSON, h_touch) < 0)
		return -1;
	return 0;
}
