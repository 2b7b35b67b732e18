/* auth.c: who is calling. Bearer tokens are hashed and looked up through
 * the store's Hash indexes; the token itself is never stored or logged. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/clock.h"
#include "base/crypto.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

struct json *cp_secret_row_new(const char *what, const char *prefix, const char *id_prefix, int64_t ttl_s, char *token,
			       size_t n, char id[ID_MAX], struct err *e)
{
	char hash[SHA256_HEX_LEN + 1], exp[CLOCK_RFC3339_MAX];

	if (crypto_token(prefix, CP_TOKEN_BYTES, token, n, e) < 0)
		return NULL;
	if (sha256_hex(token, strlen(token), hash) < 0) {
		memset(token, 0, n);
		err_set(e, "%s: cannot hash it", what);
		return NULL;
	}
	id_new(id_prefix, id);
	clock_format_rfc3339(clock_now_ns() + ttl_s * 1000000000, exp);
	return cp_obj("ID", json_new_str(id), "Hash", json_new_str(hash), "CreatedAt", cp_now_json(), "ExpiresAt",
		      json_new_str(exp), NULL);
}

void cp_member_id(const char *team_id, const char *user_id, char out[CP_ROW_ID_MAX])
{
	snprintf(out, CP_ROW_ID_MAX, "%s:%s", team_id, user_id);
}

bool cp_is_member(struct cp *cp, const char *team_id, const char *user_id, const char **role)
{
	char id[CP_ROW_ID_MAX];
	const struct json *m;

	if (!team_id || !*team_id || !user_id || !*user_id)
		return false;
	cp_member_id(team_id, user_id, id);
	m = st_get(cp->db, "members", id);
	if (m && role)
		*role = json_get_str(m, "Role");
	return m != NULL;
}

/* The token after "Bearer ", or NULL. */
static const char *bearer(struct http_req *req)
{
	const char *h = http_req_header(req, "Authorization");

	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return NULL;
	h += 7;
	while (*h == ' ')
		h++;
	return *h ? h : NULL;
}

/*
 * LastUsedAt: written when it is unset or older than CP_KEY_TOUCH_MS, in its
 * own transaction that no reply waits for. A busy key costs one small record
 * a minute instead of one per request, and the group fsync covers it.
 */
static void key_touch(struct cp *cp, const char *key_id, const struct json *row)
{
	const char *last = json_get_str(row, "LastUsedAt");
	int64_t last_ns;
	struct json *upd;
	struct st_txn *txn;

	if (last && clock_parse_rfc3339(last, &last_ns) == 0 &&
	    clock_now_ns() - last_ns < (int64_t)CP_KEY_TOUCH_MS * 1000000)
		return;
	upd = json_dup(row);
	json_object_set(upd, "LastUsedAt", cp_now_json());
	txn = st_begin(cp->db);
	st_put(txn, "keys", key_id, upd);
	cp_commit_quiet(txn, "key LastUsedAt");
}

static int auth_key(struct cp *cp, struct http_req *req, const char *hash, struct cp_caller *who)
{
	const struct json *row = cp_find(cp, "keys", "Hash", hash, NULL, NULL);
	const char *id;

	if (!row) {
		http_respond_error(req, 401, "invalid API key");
		return -1;
	}
	if (json_get_str(row, "RevokedAt")) {
		http_respond_error(req, 401, "API key revoked");
		return -1;
	}
	id = json_get_str(row, "ID");
	str_copy(who->key_id, sizeof(who->key_id), id);
	str_copy(who->team_id, sizeof(who->team_id), json_get_str(row, "TeamID"));
	key_touch(cp, who->key_id, row);
	return 0;
}

struct first_team {
	char team_id[ID_MAX];
	const char *want;	/* X-Denv-Team: an id or a name */
	struct cp *cp;
};

/* Memberships scan in id order; the first team is the user's default. */
static int pick_team(const char *id, const struct json *row, void *arg)
{
	struct first_team *c = arg;
	const char *team_id = json_get_str(row, "TeamID");
	const struct json *team;

	if (!c->want) {
		str_copy(c->team_id, sizeof(c->team_id), team_id);
		return 1;
	}
	team = st_get(c->cp->db, "teams", team_id);
	if (str_eq(team_id, c->want) || str_eq(json_get_str(team, "Name"), c->want)) {
		str_copy(c->team_id, sizeof(c->team_id), team_id);
		return 1;
	}
	return 0;
}

/* The session row of a token hash, NULL when unknown or expired. */
static const struct json *live_session(struct cp *cp, const char *hash)
{
	const struct json *row = cp_find(cp, "sessions", "Hash", hash, NULL, NULL);
	const char *exp = json_get_str(row, "ExpiresAt");
	int64_t exp_ns;

	if (!row || !exp || clock_parse_rfc3339(exp, &exp_ns) < 0 || exp_ns <= clock_now_ns())
		return NULL;
	return row;
}

int cp_session_user(struct cp *cp, const char *token, char user_id[ID_MAX])
{
	char hash[SHA256_HEX_LEN + 1];
	const struct json *row;
	const char *uid;

	if (!token || !str_has_prefix(token, "dst_") || sha256_hex(token, strlen(token), hash) < 0)
		return -1;
	row = live_session(cp, hash);
	uid = json_get_str(row, "UserID");
	if (!uid || !*uid || str_copy(user_id, ID_MAX, uid) < 0)
		return -1;
	return 0;
}

static int auth_session(struct cp *cp, struct http_req *req, const char *hash, enum cp_auth_need need,
			struct cp_caller *who)
{
	const struct json *row = live_session(cp, hash);
	const char *want = http_req_header(req, "X-Denv-Team");
	struct first_team c = { "", NULL, cp };
	struct err e;

	if (!row) {
		http_respond_error(req, 401, "invalid or expired session");
		return -1;
	}
	str_copy(who->user_id, sizeof(who->user_id), json_get_str(row, "UserID"));
	c.want = want && *want ? want : NULL;
	if (st_scan(cp->db, "members", "UserID", who->user_id, NULL, pick_team, &c, &e) < 0)
		log_error("cp", "members: %s", e.msg);
	if (c.want && !*c.team_id) {
		http_respond_error(req, 403, "not a member of that team");
		return -1;
	}
	if (!*c.team_id && need == CP_AUTH_TEAM) {
		http_respond_error(req, 403, "this session has no team: create one with POST /v1/teams");
		return -1;
	}
	str_copy(who->team_id, sizeof(who->team_id), c.team_id);
	return 0;
}

int cp_auth(struct cp *cp, struct http_req *req, enum cp_auth_need need, struct cp_caller *who)
{
	const char *tok = bearer(req);
	char hash[SHA256_HEX_LEN + 1];

	memset(who, 0, sizeof(*who));
	if (!tok) {
		http_respond_error(req, 401, "missing credentials: send Authorization: Bearer <key>");
		return -1;
	}
	if (sha256_hex(tok, strlen(tok), hash) < 0) {
		http_respond_error(req, 500, "cannot hash the credential");
		return -1;
	}
	if (str_has_prefix(tok, "dak_")) {
		if (need == CP_AUTH_USER) {
			http_respond_error(req, 403, "this route needs a user session, not an API key");
			return -1;
		}
		return auth_key(cp, req, hash, who);
	}
	if (str_has_prefix(tok, "dst_"))
		return auth_session(cp, req, hash, need, who);
	http_respond_error(req, 401, "invalid credentials: expected a dak_ key or a dst_ session");
	return -1;
}
