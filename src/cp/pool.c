/*
 * pool.c: warm pools of image sandboxes (-sandbox-pool, DENV_SANDBOX_POOL).
 *
 * A pool is a sandbox request body with a size and a team: the control plane
 * keeps that many such sandboxes deployed and healthy, and a POST
 * /v1/sandboxes whose body makes the same spec takes one instead of
 * deploying, so the answer costs one store commit.
 *
 * Where the pool lives: here, as ordinary environment rows of the pool's
 * team carrying "Pool" (the pool's key, an indexed field), in the project
 * CP_POOL_PROJECT. denvd names an environment's containers, network and
 * data by the environment id and Docker cannot relabel a container, so a
 * pool inside denvd would need a second id for every sidecar command (exec,
 * files, snapshot, destroy, restart recovery). Keeping the environment id
 * and changing only the row's owner fields (project, name, TTLs, the
 * sandbox mark) on claim needs no sidecar call at all: bench/sandbox.sh on
 * the 2-core VM measured the claim at 1.4 ms (median) and claim -> first
 * exec at 70 ms, against 446 ms for a cold create -> first exec.
 *
 * Freshness: a row leaves the pool when claimed ("Pool" deleted) and never
 * comes back; its destroy is the ordinary one, and the refill deploys a new
 * environment (new network, new volumes). A claim takes only a sandbox whose
 * deployment succeeded and which no one has used: pool rows belong to no
 * caller until then. A request the pooled spec does not match exactly
 * (image, cmd, env, ports, volumes, egress) or pinned to a target is created
 * fresh.
 *
 * A compose file's x-denv.pool: N asks the same for from_version sandboxes:
 * N forks of each healthy version, in the version's project. Such a pool is
 * made when its version turns healthy or is first asked for, and retired
 * (its waiting forks destroyed) when a newer version of the same
 * environment gets one.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crypto.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"
#include "spec/spec.h"

struct cp_pool {
	struct cp_pool *next;
	char key[ID_MAX];			/* the spec's hash, or the version id: the rows' "Pool" */
	char team[CP_TEAM_NAME_MAX + 1];	/* team name (image pools) */
	char version_id[ID_MAX];		/* "" for an image pool (-sandbox-pool) */
	char team_id[ID_MAX];			/* the version's team (version pools) */
	char env_id[ID_MAX];			/* the version's environment (version pools) */
	char image[SPEC_MAX_STRING];
	int64_t size;
	struct json *spec;
	int64_t claims, misses, fills, failures;
	int64_t next_fill_ms;			/* back-off after a failed fill */
	int64_t backoff_ms;
};

/* ---- configuration ---- */

static int pool_add(struct cp *cp, const struct json *o, struct err *e)
{
	const char *image = json_get_str(o, "image"), *team = json_get_str(o, "team");
	int64_t size = json_get_int(o, "size", -1);
	struct cp_pool *p;
	char *text, hex[SHA256_HEX_LEN + 1];

	if (o->type != JSON_OBJECT || !image || !*image)
		return err_set(e, "-sandbox-pool: each pool needs an image");
	if (size < 1 || size > CP_POOL_SIZE_MAX)
		return err_set(e, "-sandbox-pool: size must be 1 to %d", CP_POOL_SIZE_MAX);
	if (json_get(o, "project") || json_get(o, "name") || json_get(o, "from_version"))
		return err_set(e, "-sandbox-pool: project, name and from_version belong to the claim, not the pool");
	p = xcalloc(1, sizeof(*p));
	if (cp_sandbox_spec_of(o, image, &p->spec, e) < 0) {
		free(p);
		return err_prefix(e, "-sandbox-pool %s", image);
	}
	str_copy(p->image, sizeof(p->image), image);
	str_copy(p->team, sizeof(p->team), team && *team ? team : cp->cfg.team_name);
	p->size = size;
	text = json_to_string(p->spec, 0);
	sha256_hex(text, strlen(text), hex);
	free(text);
	snprintf(p->key, sizeof(p->key), "%.*s", CP_POOL_KEY_LEN, hex);
	p->next = cp->pools;
	cp->pools = p;
	return 0;
}

static int pool_config(struct cp *cp, struct err *e)
{
	const char *v = cp->cfg.sandbox_pool;
	struct json *doc = NULL;
	int rc = 0;

	if (!v || !*v)
		return 0;
	if (json_parse(v, strlen(v), NULL, &doc, e) < 0)
		return err_prefix(e, "-sandbox-pool: not JSON");
	if (doc->type == JSON_ARRAY) {
		for (size_t i = 0; i < json_len(doc) && rc == 0; i++)
			rc = pool_add(cp, json_at(doc, i), e);
	} else {
		rc = pool_add(cp, doc, e);
	}
	json_free(doc);
	return rc;
}

/* ---- counting and filling ---- */

struct tally {
	struct cp *cp;
	int64_t ready, starting;
	char ready_id[ID_MAX];			/* the oldest ready row */
	char failed_id[ID_MAX];			/* a failed row to take out of the pool */
};

static bool row_ready(struct cp *cp, const struct json *row)
{
	const char *reaped = json_get_str(row, "ReapedAt");

	return str_eq(json_get_str(row, "Status"), "running") && !(reaped && *reaped) &&
	       cp_host_connected(cp, json_get_str(row, "HostID"));
}

static int tally_row(const char *id, const struct json *row, void *arg)
{
	struct tally *t = arg;
	const char *st = json_get_str(row, "Status");

	if (row_ready(t->cp, row)) {
		if (!t->ready++)
			str_copy(t->ready_id, sizeof(t->ready_id), id);
	} else if (str_eq(st, "pending") || str_eq(st, "deploying")) {
		t->starting++;
	} else if (!*t->failed_id && !str_eq(st, "destroyed") && !str_eq(st, "destroying")) {
		/* failed, or running on a host that is gone */
		str_copy(t->failed_id, sizeof(t->failed_id), id);
	}
	return 0;
}

static void pool_tally(struct cp *cp, const struct cp_pool *p, struct tally *t)
{
	struct err e;

	memset(t, 0, sizeof(*t));
	t->cp = cp;
	if (st_scan(cp->db, "environments", "Pool", p->key, NULL, tally_row, t, &e) < 0)
		log_error("pool", "%s: %s", p->image, e.msg);
}

static const char *team_id_of(struct cp *cp, const struct cp_pool *p)
{
	const struct json *team;

	if (*p->version_id)
		return p->team_id;
	team = cp_find(cp, "teams", NULL, NULL, "Name", p->team);

	return team ? json_get_str(team, "ID") : NULL;
}

struct any_host {
	struct cp *cp;
	bool up;
};

static int host_up(const char *id, const struct json *row, void *arg)
{
	struct any_host *h = arg;

	(void)row;
	h->up = cp_host_connected(h->cp, id);
	return h->up;
}

static bool team_has_host(struct cp *cp, const char *team_id)
{
	struct any_host h = { cp, false };
	struct err e;

	if (st_scan(cp->db, "hosts", "TeamID", team_id, NULL, host_up, &h, &e) < 0)
		log_error("pool", "hosts: %s", e.msg);
	return h.up;
}

/* A pool row that is neither healthy nor starting leaves the pool and is
 * destroyed; the next fill waits longer each time (up to CP_POOL_BACKOFF_MAX_MS). */
/* Take a waiting row out of its pool and destroy it. */
static void row_destroy(struct cp *cp, const char *env_id, const char *why)
{
	const struct json *env = st_get(cp->db, "environments", env_id);
	struct st_txn *txn;
	struct json *row, *resp;

	if (!env || str_eq(json_get_str(env, "Status"), "destroyed"))
		return;
	txn = st_begin(cp->db);
	row = json_dup(env);
	json_object_del(row, "Pool");
	st_put(txn, "environments", env_id, row);
	resp = cp_deployment_create(txn, json_get_str(env, "TeamID"), json_get_str(env, "ProjectID"), env_id,
				    "destroy", json_new_object());
	json_free(resp);
	cp_commit_quiet(txn, why);
	cp_orch_kick(cp, env_id);
}

static void drop_failed(struct cp *cp, struct cp_pool *p, const char *env_id)
{
	row_destroy(cp, env_id, "pool: drop a failed sandbox");
	p->failures++;
	p->backoff_ms = p->backoff_ms ? p->backoff_ms * 2 : CP_POOL_TICK_MS;
	if (p->backoff_ms > CP_POOL_BACKOFF_MAX_MS)
		p->backoff_ms = CP_POOL_BACKOFF_MAX_MS;
	p->next_fill_ms = ev_now(cp->ev) + p->backoff_ms;
	log_warn("pool", "%s: sandbox %s failed; next fill in %" PRId64 " ms", p->image, env_id, p->backoff_ms);
}

static void fill_one(struct cp *cp, struct cp_pool *p, const char *team_id)
{
	struct cp_ttl_req none = { CP_TTL_UNSET, CP_TTL_UNSET, NULL };
	struct cp_sandbox_new n = { team_id, NULL, &none, NULL, false, p->key };
	char pid[ID_MAX], name[CP_NAME_MAX + 1], env_id[ID_MAX], dep_id[ID_MAX];
	const struct json *v = *p->version_id ? st_get(cp->db, "versions", p->version_id) : NULL;
	struct st_txn *txn;

	if (*p->version_id && !json_get_bool(v, "Healthy", false))
		return;
	txn = st_begin(cp->db);
	cp_short_name("pool-", name, sizeof(name));
	n.name = name;
	if (v) {
		cp_sandbox_fork_put(cp, txn, &n, v, env_id, dep_id);
	} else {
		cp_sandbox_project(cp, txn, team_id, CP_POOL_PROJECT, pid);
		cp_sandbox_image_put(cp, txn, &n, p->spec, pid, env_id, dep_id);
	}
	cp_commit_quiet(txn, "pool: fill");
	cp_orch_kick(cp, env_id);
	p->fills++;
	log_debug("pool", "%s: filling with %s (deployment %s)", p->image, env_id, dep_id);
}

static void pool_fill(struct cp *cp, struct cp_pool *p)
{
	const char *team_id = team_id_of(cp, p);
	struct tally t;

	if (!team_id || !team_has_host(cp, team_id))
		return;		/* nowhere to run them yet */
	pool_tally(cp, p, &t);
	if (*t.failed_id) {
		drop_failed(cp, p, t.failed_id);
		return;
	}
	if (t.ready > 0)
		p->backoff_ms = 0;
	if (ev_now(cp->ev) < p->next_fill_ms)
		return;
	/* At most CP_POOL_FILL_MAX deployments start per tick: a big pool on a
	 * fresh host fills over a few ticks instead of in one burst. */
	for (int64_t k = 0; t.ready + t.starting + k < p->size && k < CP_POOL_FILL_MAX; k++)
		fill_one(cp, p, team_id);
}

static void pool_tick(struct ev *ev, void *arg)
{
	struct cp *cp = arg;

	if (!cp->stopping)
		for (struct cp_pool *p = cp->pools; p; p = p->next)
			pool_fill(cp, p);
	ev_timer_start(ev, &cp->pool_timer, CP_POOL_TICK_MS, pool_tick, cp);
}

int cp_pool_start(struct cp *cp, struct err *e)
{
	if (pool_config(cp, e) < 0)
		return -1;
	ev_timer_start(cp->ev, &cp->pool_timer, 0, pool_tick, cp);
	return 0;
}

void cp_pool_free(struct cp *cp)
{
	while (cp->pools) {
		struct cp_pool *p = cp->pools;

		cp->pools = p->next;
		json_free(p->spec);
		free(p);
	}
	if (cp->ev)
		ev_timer_stop(cp->ev, &cp->pool_timer);
}

/* ---- claiming ---- */

static struct cp_pool *pool_for(struct cp *cp, const char *team_id, const struct cp_pool_claim *c)
{
	for (struct cp_pool *p = cp->pools; p; p = p->next) {
		const char *tid;

		if (c->version_id ? !str_eq(p->version_id, c->version_id) : (*p->version_id || !json_equal(p->spec, c->spec)))
			continue;
		if (!(tid = team_id_of(cp, p)) || !str_eq(tid, team_id))
			continue;
		return p;
	}
	return NULL;
}

/* Collected first: a scan's callback must not commit. */
struct retire_list {
	char ids[CP_POOL_SIZE_MAX][ID_MAX];
	size_t n;
};

static int retire_collect(const char *id, const struct json *row, void *arg)
{
	struct retire_list *l = arg;

	(void)row;
	if (l->n < CP_POOL_SIZE_MAX)
		str_copy(l->ids[l->n++], ID_MAX, id);
	return 0;
}

static void pool_retire(struct cp *cp, struct cp_pool *p)
{
	struct retire_list *l = xcalloc(1, sizeof(*l));
	size_t n;
	struct err e;

	if (st_scan(cp->db, "environments", "Pool", p->key, NULL, retire_collect, l, &e) < 0)
		log_error("pool", "%s: %s", p->key, e.msg);
	for (size_t i = 0; i < l->n; i++)
		row_destroy(cp, l->ids[i], "pool: retire");
	n = l->n;
	free(l);
	log_info("pool", "version %s: pool retired (%zu waiting forks destroyed)", p->version_id, n);
}

void cp_pool_version(struct cp *cp, const char *version_id)
{
	const struct json *v = st_get(cp->db, "versions", version_id);
	const struct json *env = v ? st_get(cp->db, "environments", json_get_str(v, "EnvID")) : NULL;
	int64_t size = json_get_int(json_get(v, "Spec"), "pool", 0);
	struct cp_pool **pp, *p;

	if (size <= 0 || !env || json_get_str(env, "Pool") || json_get_bool(env, "Sandbox", false))
		return;		/* no pool asked, or a sandbox's own version */
	for (pp = &cp->pools; (p = *pp);) {
		if (str_eq(p->version_id, version_id))
			return;
		if (*p->version_id && str_eq(p->env_id, json_get_str(v, "EnvID"))) {
			*pp = p->next;
			pool_retire(cp, p);
			free(p);
			continue;
		}
		pp = &p->next;
	}
	p = xcalloc(1, sizeof(*p));
	str_copy(p->key, sizeof(p->key), version_id);
	str_copy(p->version_id, sizeof(p->version_id), version_id);
	str_copy(p->image, sizeof(p->image), version_id);
	str_copy(p->team_id, sizeof(p->team_id), json_get_str(v, "TeamID"));
	str_copy(p->env_id, sizeof(p->env_id), json_get_str(v, "EnvID"));
	p->size = size > CP_POOL_SIZE_MAX ? CP_POOL_SIZE_MAX : size;
	p->next = cp->pools;
	cp->pools = p;
	log_info("pool", "version %s: keeping %" PRId64 " warm forks", version_id, p->size);
	ev_timer_start(cp->ev, &cp->pool_timer, 0, pool_tick, cp);
}

/* The pooled row as the caller's: what cp_sandbox_image_put would have written. */
static struct json *claimed_row(struct cp *cp, const struct json *env, const struct cp_pool_claim *c,
				const char *project_id, const char *name)
{
	struct json *row = json_dup(env);
	struct cp_ttl_req defaults;

	json_object_del(row, "Pool");
	json_object_del(row, "LastActivityAt");
	json_object_set_str(row, "ProjectID", project_id);
	json_object_set_str(row, "Name", name);
	json_object_set(row, "CreatedAt", cp_now_json());	/* the max TTL counts from the claim */
	cp_ttl_sandbox_defaults(cp, &defaults);
	cp_ttl_apply(row, c->ttl, &defaults);
	json_object_set_bool(row, "Sandbox", true);
	return row;
}

int cp_pool_claim(struct cp *cp, struct http_req *req, const struct cp_pool_claim *c)
{
	struct cp_pool *p = pool_for(cp, c->team_id, c);
	const struct json *env, *dep;
	char pid[ID_MAX], buf[CP_NAME_MAX + 1];
	const char *name;
	struct st_txn *txn;
	struct json *row, *resp;
	struct tally t;

	if (!p)
		return 0;
	pool_tally(cp, p, &t);
	if (!t.ready) {
		p->misses++;
		return 0;
	}
	env = st_get(cp->db, "environments", t.ready_id);
	dep = cp_find(cp, "deployments", "EnvID", t.ready_id, "Kind", c->version_id ? "fork" : "deploy");
	txn = st_begin(cp->db);
	if (c->version_id)
		str_copy(pid, sizeof(pid), json_get_str(env, "ProjectID"));	/* a fork stays in its version's project */
	else
		cp_sandbox_project(cp, txn, c->team_id, c->project, pid);
	if (!(name = cp_new_env_name(cp, req, pid, c->name, "sbx-", buf, sizeof(buf)))) {
		st_abort(txn);
		return -1;
	}
	row = claimed_row(cp, env, c, pid, name);
	resp = cp_obj("environment", cp_public(row, "environments"), NULL);
	if (dep) {
		/* Its deployment moves to the caller's project with it. */
		struct json *d = json_dup(dep);

		json_object_set_str(d, "ProjectID", pid);
		json_object_set(resp, "deployment", cp_public(d, "deployments"));
		st_put(txn, "deployments", json_get_str(dep, "ID"), d);
	}
	cp_ttl_view(cp, row, resp);
	st_put(txn, "environments", t.ready_id, row);
	p->claims++;
	log_info("pool", "%s: %s claimed as %s", p->image, t.ready_id, name);
	cp_commit_reply(cp, txn, req, 201, resp, NULL, NULL);
	ev_timer_start(cp->ev, &cp->pool_timer, 0, pool_tick, cp);	/* refill now */
	return 1;
}

/* ---- GET /v1/pools ---- */

struct json *cp_pool_view(struct cp *cp, const char *team_id)
{
	struct json *list = json_new_array();

	for (struct cp_pool *p = cp->pools; p; p = p->next) {
		const char *tid = team_id_of(cp, p);
		struct tally t;

		if (!tid || !str_eq(tid, team_id))
			continue;
		pool_tally(cp, p, &t);
		json_array_push(list, cp_obj("key", json_new_str(p->key), "image",
					     json_new_str(*p->version_id ? "" : p->image), "version",
					     json_new_str(p->version_id), "size",
					     json_new_int(p->size), "ready", json_new_int(t.ready), "starting",
					     json_new_int(t.starting), "claims", json_new_int(p->claims), "misses",
					     json_new_int(p->misses), "fills", json_new_int(p->fills), "failures",
					     json_new_int(p->failures), NULL));
	}
	return list;
}

static void h_pools(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	cp_reply(req, 200, cp_obj("pools", cp_pool_view(cp, who.team_id), NULL));
}

int cp_api_pools(struct cp *cp)
{
	return cp_route(cp, "GET", "/v1/pools", 0, h_pools);
}
