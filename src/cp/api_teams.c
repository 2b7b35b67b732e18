/* api_teams.c: /v1/me, /v1/teams and /v1/keys. */
#include <string.h>

#include "base/crypto.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

/* {ID, Name, CreatedAt, Role} for a team row. */
static struct json *team_with_role(const struct json *team, const char *role)
{
	struct json *t = json_dup(team);

	json_object_set_str(t, "Role", role);
	return t;
}

struct teams_ctx {
	struct cp *cp;
	struct json *out;
};

static int add_membership(const char *id, const struct json *m, void *arg)
{
	struct teams_ctx *c = arg;
	const struct json *team = st_get(c->cp->db, "teams", json_get_str(m, "TeamID"));

	if (team)
		json_array_push(c->out, team_with_role(team, json_get_str(m, "Role")));
	return 0;
}

/* The user's teams with their roles, in membership order. */
static struct json *user_teams(struct cp *cp, const char *user_id)
{
	struct teams_ctx c = { cp, json_new_array() };
	struct err e;

	if (st_scan(cp->db, "members", "UserID", user_id, NULL, add_membership, &c, &e) < 0)
		log_error("cp", "members: %s", e.msg);
	return c.out;
}

static void h_me(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const struct json *team, *user;
	struct json *resp, *teams;

	if (cp_auth(cp, req, CP_AUTH_ANY, &who) < 0)
		return;
	team = *who.team_id ? st_get(cp->db, "teams", who.team_id) : NULL;
	resp = json_new_object();
	json_object_set(resp, "team", team ? json_dup(team) : json_new_null());
	if (*who.key_id) {
		teams = json_new_array();
		if (team)
			json_array_push(teams, team_with_role(team, "key"));
	} else {
		teams = user_teams(cp, who.user_id);
	}
	json_object_set(resp, "teams", teams);
	user = *who.user_id ? st_get(cp->db, "users", who.user_id) : NULL;
	if (user)
		json_object_set(resp, "user", json_dup(user));
	cp_reply(req, 200, resp);
}

static void h_teams_list(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;

	if (cp_auth(cp, req, CP_AUTH_USER, &who) < 0)
		return;
	cp_reply_with(req, 200, "teams", user_teams(cp, who.user_id));
}

static void h_teams_create(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const char *name = NULL;
	struct json *body = NULL, *resp;
	struct st_txn *txn;

	if (cp_auth(cp, req, CP_AUTH_USER, &who) < 0 || cp_body(req, &body) < 0)
		return;
	if (cp_req_str(req, body, "name", &name) < 0)
		goto out;
	if (strlen(name) > CP_TEAM_NAME_MAX) {
		cp_fail(req, 400, "name is longer than %d bytes", CP_TEAM_NAME_MAX);
		goto out;
	}
	txn = st_begin(cp->db);
	resp = json_new_object();
	json_object_set(resp, "team", cp_team_create(txn, name, who.user_id));
	cp_commit_reply(cp, txn, req, 201, resp, NULL, NULL);
out:
	json_free(body);
}

static void h_keys_list(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	cp_reply_with(req, 200, "keys", cp_list(cp, "keys", "TeamID", who.team_id, false, 0, NULL, NULL));
}

static void h_keys_create(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	const char *name = NULL;
	char key[CRYPTO_TOKEN_MAX];
	struct json *body = NULL, *row, *resp;
	struct st_txn *txn;
	struct err e;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0 || cp_body(req, &body) < 0)
		return;
	if (cp_opt_str(req, body, "name", &name) < 0)
		goto out;
	if (!name || !*name)
		name = "key";
	if (strlen(name) > CP_NAME_MAX) {
		cp_fail(req, 400, "name is longer than %d bytes", CP_NAME_MAX);
		goto out;
	}
	txn = st_begin(cp->db);
	/* CreatedBy: the signed-in user, or the key that minted this one. */
	row = cp_key_create(txn, who.team_id, name, *who.user_id ? who.user_id : who.key_id, key, &e);
	if (!row) {
		st_abort(txn);
		cp_fail(req, 500, "%s", e.msg);
		goto out;
	}
	resp = json_new_object();
	json_object_set(resp, "key", row);
	json_object_set_str(resp, "api_key", key);
	memset(key, 0, sizeof(key));
	cp_commit_reply(cp, txn, req, 201, resp, NULL, NULL);
out:
	json_free(body);
}

static void h_keys_revoke(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	char id[ID_MAX];
	const struct json *row;
	struct json *upd, *resp;
	struct st_txn *txn;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	row = cp_team_row(cp, req, "keys", who.team_id, http_req_param(req, "id"), "key");
	if (!row)
		return;
	resp = json_new_object();
	json_object_set_bool(resp, "revoked", true);
	if (json_get_str(row, "RevokedAt")) {
		cp_reply(req, 200, resp);	/* already revoked: keep the first time */
		return;
	}
	str_copy(id, sizeof(id), json_get_str(row, "ID"));
	upd = json_dup(row);
	json_object_set(upd, "RevokedAt", cp_now_json());
	txn = st_begin(cp->db);
	st_put(txn, "keys", id, upd);
	cp_commit_reply(cp, txn, req, 200, resp, NULL, NULL);
}

int cp_api_teams(struct cp *cp)
{
	if (cp_route(cp, "GET", "/v1/me", 0, h_me) < 0 ||
	    cp_route(cp, "GET", "/v1/teams", 0, h_teams_list) < 0 ||
	    cp_route(cp, "POST", "/v1/teams", CP_BODY_JSON, h_teams_create) < 0 ||
	    cp_route(cp, "GET", "/v1/keys", 0, h_keys_list) < 0 ||
	    cp_route(cp, "POST", "/v1/keys", CP_BODY_JSON, h_keys_create) < 0 ||
	    cp_route(cp, "DELETE", "/v1/keys/{id}", 0, h_keys_revoke) < 0)
		return -1;
	return 0;
}
