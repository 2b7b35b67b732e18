/*
 * quota.c: per-team quotas (denv-cp(8), "Quotas"): live environments,
 * sandboxes, and execs in flight. A limit is the team's own (the quotas
 * table, set by the operator with PUT /v1/teams/{team}/quotas) or else the
 * server's flag; 0 is no limit. Environments and sandboxes are counted from
 * the store when one is about to be made, so the count is always the
 * truth; execs in flight live in memory (none survive a restart anyway).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

/* Per kind: the stored field, the wire name, how a 429 names the use, the flag. */
static const struct {
	const char *field;
	const char *wire;
	const char *what;
	const char *flag;
	const char *env;
} kinds[CP_QUOTA_KINDS] = {
	{ "MaxEnvironments", "max_environments", "live environments", "max-envs", "DENV_MAX_ENVS" },
	{ "MaxSandboxes", "max_sandboxes", "live sandboxes", "max-sandboxes", "DENV_MAX_SANDBOXES" },
	{ "MaxExec", "max_exec", "execs in flight", "max-exec", "DENV_MAX_EXEC" },
};

struct cp_exec_use {
	char team_id[ID_MAX];
	int64_t n;
	struct cp_exec_use *next;
};

int cp_policy_config(struct cp_config *c)
{
	const char *v;

	for (int k = 0; k < CP_QUOTA_KINDS; k++) {
		int64_t n = 0;

		v = c->quota_flag[k] ? c->quota_flag[k] : getenv(kinds[k].env);

		if (v && *v && (str_to_i64(v, &n) < 0 || n < 0 || n > CP_QUOTA_FLAG_MAX)) {
			fprintf(stderr, "denv-cp: -%s: want a number from 0 (no limit) to %d, not %s\n", kinds[k].flag,
				CP_QUOTA_FLAG_MAX, v);
			return -1;
		}
		c->quota_default[k] = n;
	}
	c->idem_ttl_ms = (int64_t)CP_IDEM_TTL_DEFAULT_S * 1000;
	v = getenv("DENV_IDEMPOTENCY_MAX");
	c->idem_max = CP_IDEM_PER_SCOPE;
	if (v && *v && (str_to_i64(v, &c->idem_max) < 0 || c->idem_max < 1 || c->idem_max > CP_IDEM_PER_SCOPE)) {
		fprintf(stderr, "denv-cp: DENV_IDEMPOTENCY_MAX: want 1 to %d, not %s\n", CP_IDEM_PER_SCOPE, v);
		return -1;
	}
	if (!c->idem_ttl_flag)
		c->idem_ttl_flag = getenv("DENV_IDEMPOTENCY_TTL");
	if (c->idem_ttl_flag && *c->idem_ttl_flag) {
		int64_t ms;

		if (clock_parse_duration(c->idem_ttl_flag, &ms) < 0 || ms < 1000 ||
		    ms > (int64_t)CP_IDEM_TTL_MAX_S * 1000) {
			fprintf(stderr, "denv-cp: -idempotency-ttl: want a duration from 1s to %dh, not %s\n",
				CP_IDEM_TTL_MAX_S / 3600, c->idem_ttl_flag);
			return -1;
		}
		c->idem_ttl_ms = ms;
	}
	return 0;
}

/* The limit of kind for team_id (0: none); *own says whether the team has its own. */
static int64_t limit_in(struct cp *cp, const struct json *row, int kind, bool *own)
{
	const struct json *v = json_get(row, kinds[kind].field);

	*own = v && v->type == JSON_INT;
	return *own ? v->u.i : cp->cfg.quota_default[kind];
}

static int64_t limit_of(struct cp *cp, const char *team_id, int kind, bool *own)
{
	return limit_in(cp, st_get(cp->db, "quotas", team_id), kind, own);
}

struct env_count {
	int64_t envs, sandboxes;
};

static int count_env(const char *id, const struct json *row, void *arg)
{
	struct env_count *c = arg;

	if (str_eq(json_get_str(row, "Status"), "destroyed"))
		return 0;
	c->envs++;
	if (json_get_bool(row, "Sandbox", false))
		c->sandboxes++;
	return 0;
}

static void env_use(struct cp *cp, const char *team_id, struct env_count *c)
{
	struct err e;

	memset(c, 0, sizeof(*c));
	if (st_scan(cp->db, "environments", "TeamID", team_id, NULL, count_env, c, &e) < 0)
		log_error("cp", "quota: environments: %s", e.msg);
}

static struct cp_exec_use *exec_slot(struct cp *cp, const char *team_id)
{
	for (struct cp_exec_use *u = cp->exec_use; u; u = u->next)
		if (str_eq(u->team_id, team_id))
			return u;
	return NULL;
}

int64_t cp_quota_exec_use(struct cp *cp, const char *team_id)
{
	struct cp_exec_use *u = exec_slot(cp, team_id);

	return u ? u->n : 0;
}

static int64_t use_of(struct cp *cp, const char *team_id, int kind)
{
	struct env_count c;

	if (kind == CP_QUOTA_EXEC)
		return cp_quota_exec_use(cp, team_id);
	env_use(cp, team_id, &c);
	return kind == CP_QUOTA_ENVS ? c.envs : c.sandboxes;
}

/* 0 when want more fit, else -1 after the 429. */
static int room(struct cp *cp, struct http_req *req, const char *team_id, int kind, int64_t use, int64_t want)
{
	bool own;
	int64_t limit = limit_of(cp, team_id, kind, &own);
	char more[48] = "";

	if (limit == 0 || use + want <= limit)
		return 0;
	if (want > 1)
		snprintf(more, sizeof(more), ", %" PRId64 " more asked", want);
	cp_fail(req, 429, "quota exceeded: %s %" PRId64 " of %" PRId64 " (%s%s)", kinds[kind].what, use, limit,
		own ? "this team's quota" : "server default", more);
	return -1;
}

int cp_quota_check_n(struct cp *cp, struct http_req *req, const char *team_id, enum cp_quota_kind kind,
		     int64_t n)
{
	return room(cp, req, team_id, (int)kind, use_of(cp, team_id, (int)kind), n);
}

int cp_quota_check(struct cp *cp, struct http_req *req, const char *team_id, enum cp_quota_kind kind)
{
	return cp_quota_check_n(cp, req, team_id, kind, 1);
}

int cp_quota_exec_take(struct cp *cp, struct http_req *req, const char *team_id)
{
	struct cp_exec_use *u = exec_slot(cp, team_id);

	if (room(cp, req, team_id, CP_QUOTA_EXEC, u ? u->n : 0, 1) < 0)
		return -1;
	if (!u) {
		u = xcalloc(1, sizeof(*u));
		str_copy(u->team_id, sizeof(u->team_id), team_id);
		u->next = cp->exec_use;
		cp->exec_use = u;
	}
	u->n++;
	return 0;
}

void cp_quota_exec_put(struct cp *cp, const char *team_id)
{
	struct cp_exec_use **pp = &cp->exec_use;

	while (*pp && !str_eq((*pp)->team_id, team_id))
		pp = &(*pp)->next;
	if (!*pp) {
		log_error("cp", "quota: exec slot of team %s put back twice", team_id);
		return;
	}
	if (--(*pp)->n <= 0) {
		struct cp_exec_use *u = *pp;

		*pp = u->next;
		free(u);
	}
}

void cp_quota_free_all(struct cp *cp)
{
	while (cp->exec_use) {
		struct cp_exec_use *u = cp->exec_use;

		cp->exec_use = u->next;
		free(u);
	}
}

/* ---- GET, PUT /v1/teams/{team}/quotas ---- */

/* The server's operator team: the first team, made at bootstrap. "" if none. */
static int first_team(const char *id, const struct json *row, void *arg)
{
	str_copy(arg, ID_MAX, id);
	return 1;
}

static bool is_operator(struct cp *cp, const struct cp_caller *who)
{
	char op[ID_MAX] = "";
	struct st_range r = { NULL, 1, false };
	struct err e;
	const char *role = NULL;

	if (st_scan(cp->db, "teams", NULL, NULL, &r, first_team, op, &e) < 0 || !*op)
		return false;
	if (*who->key_id)
		return str_eq(who->team_id, op);
	return cp_is_member(cp, op, who->user_id, &role) && str_eq(role, "owner");
}

/* {team_id, limits, overrides, defaults, use} with row the team's quotas row (may be NULL). */
static struct json *quota_view(struct cp *cp, const char *team_id, const struct json *row)
{
	struct json *limits = json_new_object(), *over = json_new_object(), *defs = json_new_object();
	struct json *use = json_new_object();
	struct env_count c;
	bool own;

	env_use(cp, team_id, &c);
	for (int k = 0; k < CP_QUOTA_KINDS; k++) {
		const struct json *v = json_get(row, kinds[k].field);

		json_object_set_int(limits, kinds[k].wire, limit_in(cp, row, k, &own));
		json_object_set(over, kinds[k].wire, v && v->type == JSON_INT ? json_new_int(v->u.i) : json_new_null());
		json_object_set_int(defs, kinds[k].wire, cp->cfg.quota_default[k]);
	}
	json_object_set_int(use, "environments", c.envs);
	json_object_set_int(use, "sandboxes", c.sandboxes);
	json_object_set_int(use, "exec", cp_quota_exec_use(cp, team_id));
	return cp_obj("team_id", json_new_str(team_id), "limits", limits, "overrides", over, "defaults", defs, "use",
		      use, NULL);
}

/* The team of the route, visible to the caller (operator or member); NULL after answering. */
static const char *quota_team(struct cp *cp, struct http_req *req, struct cp_caller *who, bool *op)
{
	const char *team_id = http_req_param(req, "team");

	if (cp_auth(cp, req, CP_AUTH_ANY, who) < 0)
		return NULL;
	if (!st_get(cp->db, "teams", team_id)) {
		http_respond_error(req, 404, "team not found");
		return NULL;
	}
	*op = is_operator(cp, who);
	if (!*op && !(*who->key_id ? str_eq(who->team_id, team_id) : cp_is_member(cp, team_id, who->user_id, NULL))) {
		http_respond_error(req, 403, "not a member of that team");
		return NULL;
	}
	return team_id;
}

static void h_quotas_get(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const char *team_id;
	bool op;

	if ((team_id = quota_team(cp, req, &who, &op)))
		cp_reply(req, 200, quota_view(cp, team_id, st_get(cp->db, "quotas", team_id)));
}

/* Merge body's limits into upd: an integer sets, null clears; -1 after a 400. */
static int quota_merge(struct http_req *req, const struct json *body, struct json *upd)
{
	for (size_t i = 0; i < body->u.obj.n; i++) {
		const char *key = body->u.obj.m[i].key;
		const struct json *v = body->u.obj.m[i].val;
		int k = 0;

		while (k < CP_QUOTA_KINDS && !str_eq(key, kinds[k].wire))
			k++;
		if (k == CP_QUOTA_KINDS) {
			cp_fail(req, 400, "unknown quota \"%s\": want max_environments, max_sandboxes or max_exec", key);
			return -1;
		}
		if (v->type == JSON_NULL) {
			json_object_del(upd, kinds[k].field);
		} else if (v->type != JSON_INT || v->u.i < 0 || v->u.i > CP_QUOTA_FLAG_MAX) {
			cp_fail(req, 400, "%s must be 0 (no limit) to %d, or null for the server default", key,
				CP_QUOTA_FLAG_MAX);
			return -1;
		} else {
			json_object_set_int(upd, kinds[k].field, v->u.i);
		}
	}
	return 0;
}

static void h_quotas_put(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const char *team_id;
	const struct json *row;
	struct json *body = NULL, *upd, *resp;
	struct st_txn *txn;
	bool op;

	if (!(team_id = quota_team(cp, req, &who, &op)))
		return;
	if (!op) {
		http_respond_error(req, 403, "quotas are set by the server's operator team (the first team)");
		return;
	}
	if (cp_body(req, &body) < 0)
		return;
	row = st_get(cp->db, "quotas", team_id);
	upd = row ? json_dup(row) : cp_obj("TeamID", json_new_str(team_id), NULL);
	if (quota_merge(req, body, upd) < 0) {
		json_free(upd);
		goto out;
	}
	json_object_set(upd, "UpdatedAt", cp_now_json());
	json_object_set_str(upd, "UpdatedBy", *who.user_id ? who.user_id : who.key_id);
	resp = quota_view(cp, team_id, upd);
	txn = st_begin(cp->db);
	st_put(txn, "quotas", team_id, upd);
	cp_commit_reply(cp, txn, req, 200, resp, NULL, NULL);
out:
	json_free(body);
}

int cp_api_quotas(struct cp *cp)
{
	if (cp_route(cp, "GET", "/v1/teams/{team}/quotas", 0, h_quotas_get) < 0 ||
	    cp_route(cp, "PUT", "/v1/teams/{team}/quotas", CP_BODY_JSON, h_quotas_put) < 0)
		return -1;
	return 0;
}
