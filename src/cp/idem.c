/*
 * idem.c: Idempotency-Key on POST (denv-cp(8), "Idempotency-Key"). Applied
 * in the route trampoline, so every POST route gets it without code of its
 * own. The first request with a key runs; its answer (status, type, body)
 * is taken at http_respond through the server's response hook, stored in
 * the idempotency table, and sent once that commit is durable: a retry
 * after a crash finds it or finds nothing, never a reply that was sent but
 * not kept. A retry with the same request gets the stored answer with
 * Idempotent-Replayed: true; with another request, 422; while the first
 * still runs, 409 with Retry-After. A client that goes away does not stop
 * the first request (its handler is not told): the answer it would have
 * got is kept for its retry.
 *
 * Keys are scoped to the team for API keys and to the user for sessions,
 * kept for -idempotency-ttl, at most CP_IDEM_PER_SCOPE per scope (the
 * oldest go first). Not kept, so that a retry runs again: 5xx answers and
 * 429 (the work was not done, or may succeed later), answers over
 * CP_IDEM_BODY_MAX, streamed or upgraded responses, and answers that carry
 * a new secret (an API key, a join token): secrets are stored as hashes
 * only, so such a retry mints another.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/crypto.h"
#include "base/log.h"
#include "base/str.h"
#include "base/utf8.h"
#include "cp/cp.h"

/* A key whose first request is running. */
struct cp_idem {
	struct cp *cp;
	struct http_req *req;
	char lookup[SHA256_HEX_LEN + 1];	/* sha256(scope, key): the row's Lookup */
	char scope[ID_MAX + 8];
	char fingerprint[SHA256_HEX_LEN + 1];
	char key[CP_IDEM_KEY_MAX + 1];
	/* the answer, between the hook and the commit */
	int status;
	char *ctype;
	char *body;
	size_t len;
	struct cp_idem *next;
};

static void flight_unlink(struct cp *cp, struct cp_idem *f)
{
	for (struct cp_idem **pp = &cp->idem; *pp; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			return;
		}
}

static void flight_free(struct cp_idem *f)
{
	free(f->ctype);
	free(f->body);
	free(f);
}

/* "team:<id>" for an API key, "user:<id>" for a session; -1 when the
 * credential is not a live one (the handler's own auth answers it). */
static int scope_of(struct cp *cp, struct http_req *req, char *out, size_t n)
{
	const char *h = http_req_header(req, "Authorization");
	char hash[SHA256_HEX_LEN + 1], uid[ID_MAX];
	const struct json *row;

	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return -1;
	for (h += 7; *h == ' '; h++)
		;
	if (str_has_prefix(h, "dst_")) {
		if (cp_session_user(cp, h, uid) < 0)
			return -1;
		snprintf(out, n, "user:%s", uid);
		return 0;
	}
	if (!str_has_prefix(h, "dak_") || sha256_hex(h, strlen(h), hash) < 0)
		return -1;
	row = cp_find(cp, "keys", "Hash", hash, NULL, NULL);
	if (!row || json_get_str(row, "RevokedAt"))
		return -1;
	snprintf(out, n, "team:%s", json_get_str(row, "TeamID"));
	return 0;
}

/* What makes two requests the same: method, target, chosen team, body. */
static int fingerprint(struct http_req *req, char out[SHA256_HEX_LEN + 1])
{
	const char *team = http_req_header(req, "X-Denv-Team");
	size_t len;
	const char *body = http_req_body(req, &len);
	struct buf b = BUF_INIT;
	int rc;

	buf_init(&b, len + HTTP_MAX_URL + 512);
	rc = buf_adds(&b, http_req_method(req));
	rc |= buf_addch(&b, '\0');
	rc |= buf_adds(&b, http_req_target(req));
	rc |= buf_addch(&b, '\0');
	rc |= buf_adds(&b, team ? team : "");
	rc |= buf_addch(&b, '\0');
	rc |= buf_add(&b, body, len);
	if (rc == 0)
		rc = sha256_hex(b.data, b.len, out);
	buf_release(&b);
	return rc ? -1 : 0;
}

static bool key_ok(const char *k)
{
	size_t n = strlen(k);

	if (n == 0 || n > CP_IDEM_KEY_MAX)
		return false;
	for (; *k; k++)
		if (*k < 0x21 || *k > 0x7e)
			return false;
	return true;
}

/* The stored answer of lookup, or NULL (absent or expired). */
static const struct json *stored(struct cp *cp, const char *lookup)
{
	const struct json *row = cp_find(cp, "idempotency", "Lookup", lookup, NULL, NULL);

	if (row && json_get_int(row, "ExpiresAtMs", 0) <= clock_now_ms())
		return NULL;
	return row;
}

static void replay(struct http_req *req, const struct json *row)
{
	const char *body = json_get_str(row, "Body");

	http_resp_header(req, "Idempotent-Replayed", "true");
	http_respond(req, (int)json_get_int(row, "Status", 500), json_get_str(row, "ContentType"), body ? body : "",
		     body ? strlen(body) : 0);
}

/* Whether body holds a JSON string that starts like one of our tokens. */
static bool has_secret(const char *body, size_t len)
{
	static const char *const prefixes[] = { "\"dak_", "\"djt_", "\"dst_", "\"dhs_", "\"ddc_" };
	const char *end = body + len;

	for (const char *p = memchr(body, '"', len); p; p = memchr(p + 1, '"', (size_t)(end - p - 1)))
		for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
			if ((size_t)(end - p) >= 5 && memcmp(p, prefixes[i], 5) == 0)
				return true;
	return false;
}

static bool keepable(int status, const char *ctype, const void *body, size_t len)
{
	if (status < 200 || status >= 500 || status == 429 || has_secret(body, len))
		return false;
	return len <= CP_IDEM_BODY_MAX && !memchr(body, '\0', len) && utf8_valid(body, len) &&
	       (!ctype || utf8_valid(ctype, strlen(ctype)));
}

struct sweep_ctx {
	struct st_txn *txn;
	int64_t now;
	size_t deleted, seen, over;	/* over: rows past the cap to drop, oldest first */
};

/* Oldest first (row ids are ULIDs): expired ones, then any past the cap. */
static int sweep_one(const char *id, const struct json *row, void *arg)
{
	struct sweep_ctx *c = arg;

	c->seen++;
	if (c->deleted < c->over || json_get_int(row, "ExpiresAtMs", 0) <= c->now) {
		st_delete(c->txn, "idempotency", id);
		c->deleted++;
	}
	return c->seen >= CP_IDEM_SWEEP_MAX + c->over;
}

/* Make room in f's scope and drop the expired row of the same key, into txn. */
static void make_room(struct cp *cp, struct st_txn *txn, const struct cp_idem *f)
{
	size_t n = st_count(cp->db, "idempotency", "Scope", f->scope);
	size_t max = (size_t)cp->cfg.idem_max;
	struct sweep_ctx c = { txn, clock_now_ms(), 0, 0, n >= max ? n - max + 1 : 0 };
	const struct json *old = cp_find(cp, "idempotency", "Lookup", f->lookup, NULL, NULL);
	struct err e;

	if (old)
		st_delete(txn, "idempotency", json_get_str(old, "ID"));
	if (st_scan(cp->db, "idempotency", "Scope", f->scope, NULL, sweep_one, &c, &e) < 0)
		log_error("cp", "idempotency: %s", e.msg);
}

static void kept(int status, struct err *e, void *arg)
{
	struct cp_idem *f = arg;

	if (status != 0)
		log_error("cp", "idempotency: key not kept: %s", e ? e->msg : "commit failed");
	flight_unlink(f->cp, f);
	/* The work is done either way: its answer goes out. */
	http_respond(f->req, f->status, f->ctype, f->body, f->len);
	flight_free(f);
}

static bool on_answer(struct http_req *req, int status, const char *ctype, const void *body, size_t len, void *arg)
{
	struct cp_idem *f = arg;
	struct cp *cp = f->cp;
	struct st_txn *txn;
	struct json *row;
	char id[ID_MAX];
	struct err e;

	if (!body || !keepable(status, ctype, body, len)) {
		flight_unlink(cp, f);
		flight_free(f);
		return false;
	}
	f->status = status;
	f->ctype = ctype ? xstrdup(ctype) : NULL;
	f->body = xmemdup(body, len);
	f->len = len;
	id_new("idk", id);
	row = cp_obj("ID", json_new_str(id), "Scope", json_new_str(f->scope), "Lookup", json_new_str(f->lookup),
		     "Key", json_new_str(f->key), "Fingerprint", json_new_str(f->fingerprint), "Method",
		     json_new_str(http_req_method(req)), "Target", json_new_str(http_req_target(req)), "Status",
		     json_new_int(status), "ContentType", ctype ? json_new_str(ctype) : json_new_null(), "Body",
		     json_new_strn(f->body, len), "CreatedAt", cp_now_json(), "ExpiresAtMs",
		     json_new_int(clock_now_ms() + cp->cfg.idem_ttl_ms), NULL);
	txn = st_begin(cp->db);
	make_room(cp, txn, f);
	st_put(txn, "idempotency", id, row);
	if (st_commit(txn, kept, f, &e) < 0) {
		log_error("cp", "idempotency: key not kept: %s", e.msg);
		flight_unlink(cp, f);
		flight_free(f);
		return false;
	}
	return true;
}

int cp_idem_begin(struct cp *cp, struct http_req *req)
{
	const char *key = http_req_header(req, "Idempotency-Key");
	char scope[ID_MAX + 8], buf[ID_MAX + 8 + CP_IDEM_KEY_MAX + 2], lookup[SHA256_HEX_LEN + 1];
	char fp[SHA256_HEX_LEN + 1];
	const struct json *row;
	struct cp_idem *f;

	if (!key || !str_eq(http_req_method(req), "POST") || !str_has_prefix(http_req_path(req), "/v1/"))
		return 0;
	if (!key_ok(key)) {
		cp_fail(req, 400, "Idempotency-Key must be 1 to %d printable ASCII characters", CP_IDEM_KEY_MAX);
		return 1;
	}
	if (scope_of(cp, req, scope, sizeof(scope)) < 0)
		return 0;	/* no live credential: the route refuses it */
	snprintf(buf, sizeof(buf), "%s\n%s", scope, key);
	if (sha256_hex(buf, strlen(buf), lookup) < 0 || fingerprint(req, fp) < 0) {
		http_respond_error(req, 500, "cannot hash the Idempotency-Key");
		return 1;
	}
	for (f = cp->idem; f; f = f->next) {
		if (!str_eq(f->lookup, lookup))
			continue;
		if (!str_eq(f->fingerprint, fp))
			break;
		http_resp_header(req, "Retry-After", CP_IDEM_RETRY_AFTER);
		cp_fail(req, 409, "Idempotency-Key \"%s\" is in use by a request still in progress; retry later", key);
		return 1;
	}
	row = f ? NULL : stored(cp, lookup);
	if (f || (row && !str_eq(json_get_str(row, "Fingerprint"), fp))) {
		cp_fail(req, 422, "Idempotency-Key \"%s\" was used with a different request", key);
		return 1;
	}
	if (row) {
		replay(req, row);
		return 1;
	}
	f = xcalloc(1, sizeof(*f));
	f->cp = cp;
	f->req = req;
	str_copy(f->lookup, sizeof(f->lookup), lookup);
	str_copy(f->scope, sizeof(f->scope), scope);
	str_copy(f->fingerprint, sizeof(f->fingerprint), fp);
	str_copy(f->key, sizeof(f->key), key);
	f->next = cp->idem;
	cp->idem = f;
	http_req_on_respond(req, on_answer, f);
	http_req_quiet_gone(req);
	return 0;
}

static int expired_one(const char *id, const struct json *row, void *arg)
{
	struct sweep_ctx *c = arg;

	if (json_get_int(row, "ExpiresAtMs", 0) <= c->now) {
		st_delete(c->txn, "idempotency", id);
		c->deleted++;
	}
	return 0;
}

void cp_idem_sweep(struct cp *cp)
{
	struct sweep_ctx c = { st_begin(cp->db), clock_now_ms(), 0, 0, 0 };
	struct err e;

	if (st_scan(cp->db, "idempotency", NULL, NULL, NULL, expired_one, &c, &e) < 0)
		log_error("cp", "idempotency: %s", e.msg);
	if (c.deleted)
		log_info("cp", "idempotency: %zu expired answers deleted", c.deleted);
	cp_commit_quiet(c.txn, "idempotency sweep");
}

void cp_idem_free_all(struct cp *cp)
{
	/* Requests still waiting for their commit are answered by it (st_flush
	 * runs first at exit); what is left is only freed. */
	while (cp->idem) {
		struct cp_idem *f = cp->idem;

		cp->idem = f->next;
		http_req_on_respond(f->req, NULL, NULL);
		flight_free(f);
	}
}
