/* api_auth.c: signing in. Dev login and the device flow the CLI uses (GitHub
 * sign-in is auth_github.c). Device codes live in memory only (config.md,
 * "Process notes"). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/crypto.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

/* ---- users, teams, sessions ---- */

struct json *cp_team_create(struct st_txn *txn, const char *name, const char *owner_id)
{
	struct json *team = json_new_object(), *m;
	char id[ID_MAX], mid[CP_ROW_ID_MAX];

	id_new("team", id);
	json_object_set_str(team, "ID", id);
	json_object_set_str(team, "Name", name);
	json_object_set(team, "CreatedAt", cp_now_json());
	if (owner_id) {
		m = json_new_object();
		cp_member_id(id, owner_id, mid);
		json_object_set_str(m, "TeamID", id);
		json_object_set_str(m, "UserID", owner_id);
		json_object_set_str(m, "Role", "owner");
		json_object_set(m, "CreatedAt", cp_now_json());
		st_put(txn, "members", mid, m);
	}
	st_put(txn, "teams", id, json_dup(team));
	return team;
}

int cp_session_new(struct st_txn *txn, const char *user_id, char *token, struct err *e)
{
	char id[ID_MAX];
	struct json *s = cp_secret_row_new("session token", "dst", "ses", CP_SESSION_TTL_S, token, CRYPTO_TOKEN_MAX, id, e);

	if (!s)
		return -1;
	json_object_set_str(s, "UserID", user_id);
	st_put(txn, "sessions", id, s);
	return 0;
}

bool cp_valid_email(const char *s)
{
	const char *at = strchr(s, '@');
	size_t n = strlen(s);

	if (!at || at == s || !at[1] || strchr(at + 1, '@') || n > CP_EMAIL_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
			return false;
	return true;
}

/* An HTTP status with the message: err_set clears the code. */
static int fail_code(struct err *e, int code, const char *msg)
{
	err_set(e, "%s", msg);
	e->code = code;
	return -1;
}

int cp_dev_signin(struct cp *cp, struct st_txn *txn, const char *email, const char *name, char *token,
		  struct err *e)
{
	char uid[ID_MAX], login[CP_NAME_MAX + 1];
	const struct json *user;
	const char *user_id;

	if (!email || !cp_valid_email(email))
		return fail_code(e, 400, "email must be an address like you@example.com");
	user = cp_find(cp, "users", "Email", email, NULL, NULL);
	if (user) {
		user_id = json_get_str(user, "ID");
	} else {
		/* A first sign-in gets a personal team, as GitHub sign-in does. */
		struct json *u = json_new_object();
		size_t n = strcspn(email, "@");

		snprintf(login, sizeof(login), "%.*s", (int)n, email);
		id_new("user", uid);
		json_object_set_str(u, "ID", uid);
		json_object_set_str(u, "Email", email);
		json_object_set_str(u, "Name", name && *name ? name : login);
		json_object_set_str(u, "Login", login);
		json_object_set(u, "CreatedAt", cp_now_json());
		st_put(txn, "users", uid, u);
		json_free(cp_team_create(txn, login, uid));
		user_id = uid;
	}
	if (cp_session_new(txn, user_id, token, e) < 0) {
		e->code = 500;
		return -1;
	}
	return 0;
}

static void h_dev_login(struct cp *cp, struct http_req *req)
{
	const char *email = NULL, *name = NULL;
	char token[CRYPTO_TOKEN_MAX];
	struct json *body = NULL, *resp;
	struct st_txn *txn;
	struct err e;

	if (!cp->cfg.dev_login) {
		http_respond_error(req, 404, "not found");
		return;
	}
	if (cp_body(req, &body) < 0)
		return;
	if (cp_req_str(req, body, "email", &email) < 0 || cp_opt_str(req, body, "name", &name) < 0)
		goto out;
	txn = st_begin(cp->db);
	if (cp_dev_signin(cp, txn, email, name, token, &e) < 0) {
		st_abort(txn);
		cp_fail(req, e.code ? e.code : 500, "%s", e.msg);
		goto out;
	}
	resp = json_new_object();
	json_object_set_str(resp, "token", token);
	memset(token, 0, sizeof(token));
	cp_commit_reply(cp, txn, req, 200, resp, NULL, NULL);
out:
	json_free(body);
}

/* ---- device flow ---- */

static void devices_prune(struct cp *cp)
{
	int64_t now = clock_now_ms();

	for (struct cp_device **p = &cp->devices; *p;) {
		struct cp_device *d = *p;

		if (d->expires_ms > now) {
			p = &d->next;
			continue;
		}
		*p = d->next;
		if (d->api_key) {
			memset(d->api_key, 0, strlen(d->api_key));
			free(d->api_key);
		}
		free(d);
		cp->ndevices--;
	}
}

static struct cp_device *device_by_user_code(struct cp *cp, const char *code)
{
	for (struct cp_device *d = cp->devices; d; d = d->next)
		if (str_eq(d->user_code, code))
			return d;
	return NULL;
}

/* Eight letters a person can read back without ambiguity: no vowels (no
 * words), no look-alikes. */
static int user_code_new(char out[10], struct err *e)
{
	static const char alphabet[] = "BCDFGHJKLMNPQRSTVWXZ";
	unsigned char r[8];

	if (crypto_random(r, sizeof(r), e) < 0)
		return -1;
	for (int i = 0, j = 0; i < 8; i++) {
		out[j++] = alphabet[r[i] % (sizeof(alphabet) - 1)];
		if (i == 3)
			out[j++] = '-';
	}
	out[9] = '\0';
	return 0;
}

/* What a person types: any case, the dash optional. */
static const char *user_code_normal(const char *in, char out[10])
{
	size_t j = 0;

	for (; *in && j < 9; in++) {
		if (*in == '-' || *in == ' ')
			continue;
		if (j == 4)
			out[j++] = '-';
		out[j++] = (char)toupper((unsigned char)*in);
	}
	out[j] = '\0';
	return *in ? "" : out;
}

/* Where the approval page is: the console when there is one, else our own
 * page (web_device.c) at the public URL if one was given, else a path the
 * CLI resolves against the server it called (the default public URL,
 * localhost:8080, is often not where this server listens). */
static const char *device_page_base(const struct cp *cp)
{
	if (cp->cfg.console_url)
		return cp->cfg.console_url;
	return cp->cfg.public_url_given ? cp->cfg.public_url : "";
}

static void h_device_code(struct cp *cp, struct http_req *req)
{
	char code[CRYPTO_TOKEN_MAX], uri[512];
	struct cp_device *d;
	struct json *resp;
	struct err e;

	devices_prune(cp);
	if (cp->ndevices >= CP_DEVICE_MAX) {
		http_respond_error(req, 503, "too many sign-ins in progress; try again in a few minutes");
		return;
	}
	d = xcalloc(1, sizeof(*d));
	if (crypto_token("ddc", CP_TOKEN_BYTES, code, sizeof(code), &e) < 0 ||
	    sha256_hex(code, strlen(code), d->code_hash) < 0) {
		free(d);
		cp_fail(req, 500, "device code: %s", e.msg);
		return;
	}
	do {
		if (user_code_new(d->user_code, &e) < 0) {
			free(d);
			cp_fail(req, 500, "device code: %s", e.msg);
			return;
		}
	} while (device_by_user_code(cp, d->user_code));
	d->expires_ms = clock_now_ms() + cp->cfg.device_ttl_ms;
	d->next = cp->devices;
	cp->devices = d;
	cp->ndevices++;

	snprintf(uri, sizeof(uri), "%s/app/device/", device_page_base(cp));
	resp = json_new_object();
	json_object_set_str(resp, "device_code", code);
	json_object_set_str(resp, "user_code", d->user_code);
	json_object_set_str(resp, "verification_uri", uri);
	str_copy(uri + strlen(uri), sizeof(uri) - strlen(uri), "?code=");
	str_copy(uri + strlen(uri), sizeof(uri) - strlen(uri), d->user_code);
	json_object_set_str(resp, "verification_uri_complete", uri);
	json_object_set_int(resp, "expires_in", cp->cfg.device_ttl_ms / 1000);
	json_object_set_int(resp, "interval", CP_DEVICE_INTERVAL_S);
	cp_reply(req, 200, resp);
	memset(code, 0, sizeof(code));
}

struct approval {
	char user_code[10];
	char team_id[ID_MAX];
	char *api_key;
};

/* After the key is durable: hand it to the waiting device (if it is still there). */
static void approve_done(struct cp *cp, bool ok, void *arg)
{
	struct approval *a = arg;
	struct cp_device *d = device_by_user_code(cp, a->user_code);

	if (ok && d && d->state == CP_DEVICE_PENDING) {
		d->state = CP_DEVICE_APPROVED;
		d->api_key = a->api_key;
		a->api_key = NULL;
		str_copy(d->team_id, sizeof(d->team_id), a->team_id);
	}
	if (a->api_key) {
		memset(a->api_key, 0, strlen(a->api_key));
		free(a->api_key);
	}
	free(a);
}

struct json *cp_key_create(struct st_txn *txn, const char *team_id, const char *name, const char *created_by,
			   char *key, struct err *e)
{
	char id[ID_MAX], hash[SHA256_HEX_LEN + 1];
	struct json *row;

	if (crypto_token("dak", CP_TOKEN_BYTES, key, CRYPTO_TOKEN_MAX, e) < 0)
		return NULL;
	if (sha256_hex(key, strlen(key), hash) < 0) {
		err_set(e, "cannot hash the key");
		return NULL;
	}
	row = cp_row_new("key", team_id, id);
	json_object_set_str(row, "Name", name);
	json_object_set_str(row, "CreatedBy", created_by);
	json_object_set(row, "CreatedAt", cp_now_json());
	json_object_set(row, "LastUsedAt", json_new_null());
	json_object_set(row, "RevokedAt", json_new_null());
	json_object_set_str(row, "Hash", hash);
	st_put(txn, "keys", id, json_dup(row));
	json_object_del(row, "Hash");
	return row;
}

struct cp_device *cp_device_find(struct cp *cp, const char *user_code)
{
	char norm[10];

	devices_prune(cp);
	return user_code ? device_by_user_code(cp, user_code_normal(user_code, norm)) : NULL;
}

int cp_device_approve(struct cp *cp, const char *user_id, const char *code, const char *team_id, const char *name,
		      struct cp_approval *out, struct err *e)
{
	char key[CRYPTO_TOKEN_MAX];
	struct cp_device *d = cp_device_find(cp, code);
	struct approval *a;
	struct json *row;

	memset(out, 0, sizeof(*out));
	if (!d)
		return fail_code(e, 404, "unknown or expired user_code");
	if (d->state != CP_DEVICE_PENDING)
		return fail_code(e, 409, "this code was already approved");
	if (!cp_is_member(cp, team_id, user_id, NULL))
		return fail_code(e, 403, "not a member of that team");
	out->txn = st_begin(cp->db);
	row = cp_key_create(out->txn, team_id, name && *name ? name : "cli", user_id, key, e);
	if (!row) {
		st_abort(out->txn);
		out->txn = NULL;
		e->code = 500;
		return -1;
	}
	str_copy(out->key_id, sizeof(out->key_id), json_get_str(row, "ID"));
	json_free(row);
	a = xcalloc(1, sizeof(*a));
	str_copy(a->user_code, sizeof(a->user_code), d->user_code);
	str_copy(a->team_id, sizeof(a->team_id), team_id);
	a->api_key = xstrdup(key);
	memset(key, 0, sizeof(key));
	out->done = approve_done;
	out->done_arg = a;
	return 0;
}

static void h_device_approve(struct cp *cp, struct http_req *req)
{
	const char *code = NULL, *team_id = NULL, *name = NULL;
	struct cp_caller who;
	struct cp_approval ap;
	struct json *body = NULL, *resp;
	struct err e;

	if (cp_auth(cp, req, CP_AUTH_USER, &who) < 0 || cp_body(req, &body) < 0)
		return;
	if (cp_req_str(req, body, "user_code", &code) < 0 || cp_req_str(req, body, "team_id", &team_id) < 0 ||
	    cp_opt_str(req, body, "name", &name) < 0)
		goto out;
	if (cp_device_approve(cp, who.user_id, code, team_id, name, &ap, &e) < 0) {
		cp_fail(req, e.code ? e.code : 500, "%s", e.msg);
		goto out;
	}
	resp = json_new_object();
	json_object_set_bool(resp, "approved", true);
	json_object_set_str(resp, "key_id", ap.key_id);
	json_object_set_str(resp, "team_id", team_id);
	cp_commit_reply(cp, ap.txn, req, 200, resp, ap.done, ap.done_arg);
out:
	json_free(body);
}

static void h_device_token(struct cp *cp, struct http_req *req)
{
	const char *code = NULL;
	char hash[SHA256_HEX_LEN + 1];
	struct cp_device *d;
	struct json *body = NULL, *resp, *team;
	const struct json *trow;

	if (cp_body(req, &body) < 0)
		return;
	if (cp_opt_str(req, body, "device_code", &code) < 0)
		goto out;
	devices_prune(cp);
	d = NULL;
	if (code && sha256_hex(code, strlen(code), hash) == 0)
		for (d = cp->devices; d && !crypto_equal(d->code_hash, hash, SHA256_HEX_LEN); d = d->next)
			;
	if (!d) {
		http_respond_error(req, 400, "invalid_device_code");
		goto out;
	}
	if (d->state == CP_DEVICE_PENDING) {
		http_respond_error(req, 428, "authorization_pending");
		goto out;
	}
	if (d->state == CP_DEVICE_CLAIMED) {
		http_respond_error(req, 410, "the key for this code was already handed out");
		goto out;
	}
	trow = st_get(cp->db, "teams", d->team_id);
	team = json_new_object();
	json_object_set_str(team, "ID", d->team_id);
	json_object_set_str(team, "Name", json_get_str(trow, "Name"));
	json_object_set_str(team, "CreatedAt", json_get_str(trow, "CreatedAt"));
	resp = json_new_object();
	json_object_set_str(resp, "api_key", d->api_key);
	json_object_set(resp, "team", team);
	/* Exactly once: the plaintext is dropped as it goes out. */
	memset(d->api_key, 0, strlen(d->api_key));
	free(d->api_key);
	d->api_key = NULL;
	d->state = CP_DEVICE_CLAIMED;
	cp_reply(req, 200, resp);
out:
	json_free(body);
}

int cp_api_auth(struct cp *cp)
{
	if (cp_route(cp, "POST", "/auth/dev-login", CP_BODY_JSON, h_dev_login) < 0 ||
	    cp_route(cp, "POST", "/v1/device/code", CP_BODY_JSON, h_device_code) < 0 ||
	    cp_route(cp, "POST", "/v1/device/approve", CP_BODY_JSON, h_device_approve) < 0 ||
	    cp_route(cp, "POST", "/v1/device/token", CP_BODY_JSON, h_device_token) < 0)
		return -1;
	return 0;
}
