/* respond.c: answering requests, reading bodies, committing then answering,
 * and the team-scoped lookups every route group uses. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

void cp_reply(struct http_req *req, int status, struct json *v)
{
	http_respond_json(req, status, v);
	json_free(v);
}

void cp_reply_with(struct http_req *req, int status, const char *key, struct json *v)
{
	cp_reply(req, status, cp_obj(key, v, NULL));
}

struct json *cp_row_new(const char *prefix, const char *team_id, char id[ID_MAX])
{
	id_new(prefix, id);
	return cp_obj("ID", json_new_str(id), "TeamID", json_new_str(team_id), NULL);
}

void cp_fail(struct http_req *req, int status, const char *fmt, ...)
{
	char msg[ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	http_respond_error(req, status, msg);
}

struct pending {
	struct cp *cp;
	struct http_req *req;
	int status;
	struct json *resp;
	cp_after_fn after;
	void *after_arg;
};

static void commit_done(int status, struct err *e, void *arg)
{
	struct pending *p = arg;

	if (p->after)
		p->after(p->cp, status == 0, p->after_arg);
	if (status == 0) {
		http_respond_json(p->req, p->status, p->resp);
	} else {
		log_error("cp", "commit: %s", e ? e->msg : "failed");
		cp_fail(p->req, 500, "store: %s", e ? e->msg : "commit failed");
	}
	json_free(p->resp);
	free(p);
}

void cp_commit_reply(struct cp *cp, struct st_txn *txn, struct http_req *req, int status,
		     struct json *resp, cp_after_fn after, void *after_arg)
{
	struct pending *p = xcalloc(1, sizeof(*p));
	struct err e;

	p->cp = cp;
	p->req = req;
	p->status = status;
	p->resp = resp;
	p->after = after;
	p->after_arg = after_arg;
	/* With a loop, st_commit never calls done itself; a refusal means
	 * nothing was written, so answer here. */
	if (st_commit(txn, commit_done, p, &e) < 0) {
		if (after)
			after(cp, false, after_arg);
		log_error("cp", "commit refused: %s", e.msg);
		cp_fail(req, 500, "store: %s", e.msg);
		json_free(resp);
		free(p);
	}
}

static void quiet_done(int status, struct err *e, void *arg)
{
	if (status != 0)
		log_error("cp", "%s: %s", (const char *)arg, e ? e->msg : "commit failed");
}

void cp_commit_quiet(struct st_txn *txn, const char *what)
{
	struct err e;

	if (st_commit(txn, quiet_done, (void *)what, &e) < 0)
		log_error("cp", "%s: %s", what, e.msg);
}

int cp_update(struct cp *cp, const char *table, const char *id, struct json *fields)
{
	const struct json *row = st_get(cp->db, table, id);
	struct json *upd;
	struct st_txn *txn;

	if (!row) {
		json_free(fields);
		return -1;
	}
	upd = json_dup(row);
	for (size_t i = 0; fields && i < fields->u.obj.n; i++) {
		json_object_set(upd, fields->u.obj.m[i].key, fields->u.obj.m[i].val);
		fields->u.obj.m[i].val = json_new_null();	/* moved */
	}
	json_free(fields);
	txn = st_begin(cp->db);
	st_put(txn, table, id, upd);
	cp_commit_quiet(txn, "row update");
	return 0;
}

struct json *cp_obj(const char *key, ...)
{
	struct json *o = json_new_object();
	va_list ap;

	va_start(ap, key);
	for (const char *k = key; k; k = va_arg(ap, const char *))
		json_object_set(o, k, va_arg(ap, struct json *));
	va_end(ap);
	return o;
}

int cp_body(struct http_req *req, struct json **out)
{
	struct json_limits lim = { 64, 0 };
	struct err e;
	size_t len;
	const char *body = http_req_body(req, &len);
	size_t i;

	for (i = 0; i < len && strchr(" \t\r\n", body[i]); i++)
		;
	if (i == len) {
		*out = json_new_object();
		return 0;
	}
	if (json_parse(body, len, &lim, out, &e) < 0) {
		cp_fail(req, 400, "invalid JSON body: %s", e.msg);
		return -1;
	}
	if ((*out)->type != JSON_OBJECT) {
		json_free(*out);
		*out = NULL;
		http_respond_error(req, 400, "body must be a JSON object");
		return -1;
	}
	return 0;
}

/* The member, or NULL when absent or JSON null. */
static const struct json *member(const struct json *body, const char *key)
{
	const struct json *v = json_get(body, key);

	return v && v->type != JSON_NULL ? v : NULL;
}

/* body's member key in *v when it is of type t (NULL when absent or null);
 * -1 after a 400 that says what it must be. */
static int typed_member(struct http_req *req, const struct json *body, const char *key, enum json_type t,
			const char *want, const struct json **v)
{
	*v = member(body, key);
	if (*v && (*v)->type != t) {
		cp_fail(req, 400, "%s must be %s", key, want);
		return -1;
	}
	return 0;
}

int cp_opt_str(struct http_req *req, const struct json *body, const char *key, const char **out)
{
	const struct json *v = member(body, key);

	if (!v)
		return 0;
	if (v->type != JSON_STRING || memchr(v->u.str.s, '\0', v->u.str.len)) {
		cp_fail(req, 400, "%s must be a string", key);
		return -1;
	}
	*out = v->u.str.s;
	return 0;
}

int cp_req_str(struct http_req *req, const struct json *body, const char *key, const char **out)
{
	const char *s = NULL;

	if (cp_opt_str(req, body, key, &s) < 0)
		return -1;
	if (!s || !*s) {
		cp_fail(req, 400, "%s is required", key);
		return -1;
	}
	*out = s;
	return 0;
}

int cp_opt_bool(struct http_req *req, const struct json *body, const char *key, int *out)
{
	const struct json *v;

	if (typed_member(req, body, key, JSON_BOOL, "true, false or null", &v) < 0)
		return -1;
	if (v)
		*out = v->u.b;
	return 0;
}

int cp_opt_int(struct http_req *req, const struct json *body, const char *key, int64_t *out)
{
	const struct json *v;

	if (typed_member(req, body, key, JSON_INT, "an integer", &v) < 0)
		return -1;
	if (v)
		*out = v->u.i;
	return 0;
}

int cp_name_ok(struct http_req *req, const char *field, const char *value)
{
	if (cp_valid_name(value))
		return 0;
	cp_fail(req, 400, "%s must be 1 to %d letters, digits, '.', '_' or '-'", field, CP_NAME_MAX);
	return -1;
}

bool cp_valid_name(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > CP_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

		if (!alnum && (i == 0 || !strchr("._-", c)))
			return false;
	}
	return true;
}

void cp_now(char out[48])
{
	clock_format_rfc3339(clock_now_ns(), out);
}

struct json *cp_now_json(void)
{
	char now[48];

	cp_now(now);
	return json_new_str(now);
}

/* Fields stored for our own bookkeeping, per table, never shown. */
static const char *const *hidden_fields(const char *table)
{
	static const char *const secret[] = { "Hash", NULL };
	static const char *const team[] = { "TeamID", "Sandbox", "Pool", NULL };	/* Sandbox: quota.c's count; Pool: pool.c's */
	static const char *const none[] = { NULL };

	if (str_eq(table, "keys") || str_eq(table, "sessions") || str_eq(table, "join_tokens") ||
	    str_eq(table, "hosts"))
		return secret;
	if (str_eq(table, "environments") || str_eq(table, "deployments") || str_eq(table, "versions"))
		return team;
	return none;
}

struct json *cp_public(const struct json *row, const char *table)
{
	struct json *v = json_dup(row);

	for (const char *const *f = hidden_fields(table); *f; f++)
		json_object_del(v, *f);
	return v;
}

struct list_ctx {
	const char *table;
	struct json *out;
	size_t limit;
	cp_keep_fn keep;
	void *keep_arg;
};

static int list_one(const char *id, const struct json *row, void *arg)
{
	struct list_ctx *c = arg;

	if (c->keep && !c->keep(row, c->keep_arg))
		return 0;
	json_array_push(c->out, cp_public(row, c->table));
	return c->limit && json_len(c->out) >= c->limit;
}

struct json *cp_list(struct cp *cp, const char *table, const char *field, const char *value,
		     bool newest_first, size_t limit, cp_keep_fn keep, void *keep_arg)
{
	struct list_ctx c = { table, json_new_array(), limit, keep, keep_arg };
	struct st_range r = { NULL, 0, newest_first };
	struct err e;

	if (st_scan(cp->db, table, field, value, &r, list_one, &c, &e) < 0)
		log_error("cp", "scan %s: %s", table, e.msg);
	return c.out;
}

struct find_ctx {
	const char *key;
	const char *want;
	const struct json *row;
};

static int find_one(const char *id, const struct json *row, void *arg)
{
	struct find_ctx *c = arg;

	if (c->key && !str_eq(json_get_str(row, c->key), c->want))
		return 0;
	c->row = row;
	return 1;
}

const struct json *cp_find(struct cp *cp, const char *table, const char *field, const char *value,
			   const char *key, const char *want)
{
	struct find_ctx c = { key, want, NULL };
	struct err e;

	if (st_scan(cp->db, table, field, value, NULL, find_one, &c, &e) < 0)
		log_error("cp", "scan %s: %s", table, e.msg);
	return c.row;
}

const struct json *cp_team_row(struct cp *cp, struct http_req *req, const char *table, const char *team_id,
			       const char *id, const char *what)
{
	const struct json *row = id ? st_get(cp->db, table, id) : NULL;

	/* Another team's object is reported exactly like a missing one. */
	if (!row || !str_eq(json_get_str(row, "TeamID"), team_id)) {
		cp_fail(req, 404, "%s not found", what);
		return NULL;
	}
	return row;
}

const struct json *cp_team_project(struct cp *cp, struct http_req *req, const char *team_id, const char *ref)
{
	const struct json *row = ref ? st_get(cp->db, "projects", ref) : NULL;

	if (!row || !str_eq(json_get_str(row, "TeamID"), team_id))
		row = ref ? cp_find(cp, "projects", "TeamID", team_id, "Name", ref) : NULL;
	if (!row)
		cp_fail(req, 404, "project not found");
	return row;
}
