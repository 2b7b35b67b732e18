/*
 * auth_github.c: signing in with GitHub, the web flow of a GitHub OAuth app
 * (api.md, /auth/github/start and /auth/github/callback).
 *
 * start: a state value, kept in memory for CP_OAUTH_STATE_TTL_S (tests:
 * DENV_OAUTH_STATE_TTL_SEC) and good for one callback, bound to the
 * browser: the cookie denv_oauth holds a random value whose hash the state
 * keeps, so a callback carried to another browser (a login CSRF) is
 * refused. Then a redirect to
 * {DENV_GITHUB_URL}/login/oauth/authorize.
 *
 * callback: the code is exchanged at {DENV_GITHUB_URL}/login/oauth/access_token,
 * the user read from {DENV_GITHUB_API_URL}/user, and from /user/emails when
 * the profile's address is private; every call goes through the loop's
 * asynchronous client. The user is found by GitHub id (or created, with a
 * personal team named after the login), a dst_ session is minted, and the
 * browser goes back: to the device page through web_device.c, which sets
 * its cookie; anywhere else with #token=dst_... (api.md). The access token
 * serves these two reads only: it is never stored or logged.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/crypto.h"
#include "base/enc.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

#define BROWSER_COOKIE "denv_oauth"
#define BROWSER_BYTES 32
#define BROWSER_HEX (2 * BROWSER_BYTES)
#define AUTH_HEADER_MAX (CP_GH_TOKEN_MAX + 32)
#define GH_MESSAGE_MAX 200	/* of GitHub's own words, in ours */
#define GH_API_VERSION "X-GitHub-Api-Version: 2022-11-28"
#define USER_AGENT "User-Agent: denv-cp"

static const char not_configured[] = "GitHub sign-in is not configured on this server";

static bool configured(const struct cp *cp)
{
	return cp->cfg.gh_client_id && cp->cfg.gh_client_secret;
}

static struct http_aclient *aclient(struct cp *cp)
{
	if (!cp->aclient)
		cp->aclient = http_aclient_new(cp->ev);
	return cp->aclient;
}

/* -1 with e: the message and an HTTP status (err_set would clear the code). */
static int fail_code(struct err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail_code(struct err *e, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	e->code = code;
	return -1;
}

/* ---- GitHub's answers (pure: unit-tested in t/unit/cp-github.c) ---- */

/* Printable ASCII without spaces, shorter than max: safe in a header. */
static bool token_chars_ok(const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n >= max)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

/* s cut to GH_MESSAGE_MAX bytes and to one line, for our messages. */
static const char *short_text(const char *s, char out[GH_MESSAGE_MAX + 1])
{
	size_t n = s ? strcspn(s, "\r\n") : 0;

	snprintf(out, GH_MESSAGE_MAX + 1, "%.*s", (int)(n < GH_MESSAGE_MAX ? n : GH_MESSAGE_MAX), s ? s : "");
	return out;
}

static struct json *parse_answer(const char *body, size_t len)
{
	struct json *doc = NULL;
	struct err pe;

	if (!len || json_parse(body, len, NULL, &doc, &pe) < 0)
		return NULL;
	return doc;
}

int cp_gh_token_answer(int status, const char *body, size_t len, char token[CP_GH_TOKEN_MAX], struct err *e)
{
	struct json *doc = parse_answer(body, len);
	const char *error = json_get_str(doc, "error"), *desc = json_get_str(doc, "error_description");
	const char *tok = json_get_str(doc, "access_token");
	char a[GH_MESSAGE_MAX + 1], b[GH_MESSAGE_MAX + 1];
	int rc = 0;

	if (status != 200) {
		rc = fail_code(e, 502, "GitHub answered HTTP %d to the code exchange: %s", status,
			       short_text(json_get_str(doc, "message") ? json_get_str(doc, "message") : "no message", a));
	} else if (!doc || doc->type != JSON_OBJECT) {
		rc = fail_code(e, 502, "GitHub's answer to the code exchange is not JSON");
	} else if (error) {
		/* A code that is wrong, used or expired is the person's to retry;
		 * the app's id, secret or callback URL being wrong is ours. */
		rc = fail_code(e, str_eq(error, "bad_verification_code") ? 400 : 502, "GitHub refused the sign-in: %s (%s)",
			       short_text(desc && *desc ? desc : error, a), short_text(error, b));
	} else if (!token_chars_ok(tok, CP_GH_TOKEN_MAX)) {
		rc = fail_code(e, 502, "GitHub's answer to the code exchange has no usable access_token");
	} else {
		str_copy(token, CP_GH_TOKEN_MAX, tok);
	}
	json_free(doc);
	return rc;
}

/* A GitHub login: 1 to 39 letters, digits and dashes. */
static bool login_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	return n > 0 && n <= CP_GH_LOGIN_MAX &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") == n;
}

int cp_gh_user_answer(int status, const char *body, size_t len, struct cp_gh_user *u, struct err *e)
{
	struct json *doc = parse_answer(body, len);
	const struct json *idv = json_get(doc, "id");
	const char *login = json_get_str(doc, "login"), *name = json_get_str(doc, "name");
	const char *email = json_get_str(doc, "email");
	char a[GH_MESSAGE_MAX + 1];
	int rc = 0;

	memset(u, 0, sizeof(*u));
	if (status != 200) {
		rc = fail_code(e, 502, "GitHub answered HTTP %d to GET /user: %s", status,
			       short_text(json_get_str(doc, "message") ? json_get_str(doc, "message") : "no message", a));
	} else if (!idv || idv->type != JSON_INT || json_get_int(doc, "id", 0) <= 0 || !login_ok(login)) {
		rc = fail_code(e, 502, "GitHub's answer to GET /user has no user id and login");
	} else {
		snprintf(u->id, sizeof(u->id), "%lld", (long long)json_get_int(doc, "id", 0));
		str_copy(u->login, sizeof(u->login), login);
		if (name && strlen(name) <= CP_GH_NAME_MAX)
			str_copy(u->name, sizeof(u->name), name);
		if (email && cp_valid_email(email))
			str_copy(u->email, sizeof(u->email), email);
	}
	json_free(doc);
	return rc;
}

void cp_gh_email_pick(int status, const char *body, size_t len, char email[CP_EMAIL_MAX + 1])
{
	struct json *doc = status == 200 ? parse_answer(body, len) : NULL;
	const char *first = NULL;

	email[0] = '\0';
	for (size_t i = 0; doc && doc->type == JSON_ARRAY && i < json_len(doc); i++) {
		const struct json *m = json_at(doc, i);
		const char *addr = json_get_str(m, "email");

		if (!json_get_bool(m, "verified", false) || !addr || !cp_valid_email(addr))
			continue;
		if (json_get_bool(m, "primary", false)) {
			first = addr;
			break;
		}
		if (!first)
			first = addr;
	}
	if (first)
		str_copy(email, CP_EMAIL_MAX + 1, first);
	json_free(doc);
}

bool cp_gh_return_allowed(const struct cp *cp, const char *ret)
{
	static const char *const loopback[] = { "http://localhost:", "http://127.0.0.1:", "http://localhost/",
						"http://127.0.0.1/", NULL };
	const char *console = cp->cfg.console_url;

	if (strcspn(ret, "\r\n\\") != strlen(ret))
		return false;
	if (ret[0] == '/' && ret[1] != '/')
		return true;
	if (console && str_has_prefix(ret, console) &&
	    (ret[strlen(console)] == '\0' || ret[strlen(console)] == '/'))
		return true;
	for (const char *const *p = loopback; *p; p++)
		if (str_has_prefix(ret, *p))
			return true;
	return false;
}

/* ---- states ---- */

static void state_free(struct cp_oauth_state *s)
{
	free(s->ret);
	free(s);
}

static void oauth_prune(struct cp *cp)
{
	int64_t now = clock_now_ms();

	for (struct cp_oauth_state **p = &cp->oauth; *p;) {
		struct cp_oauth_state *s = *p;

		if (s->expires_ms > now) {
			p = &s->next;
			continue;
		}
		*p = s->next;
		state_free(s);
		cp->noauth--;
	}
}

/* Take the state named by value out of the list (it is good once): NULL
 * when unknown or expired. */
static struct cp_oauth_state *state_take(struct cp *cp, const char *value)
{
	struct cp_oauth_state **p, *s;

	oauth_prune(cp);
	if (!value)
		return NULL;
	for (p = &cp->oauth; *p && !str_eq((*p)->state, value); p = &(*p)->next)
		;
	s = *p;
	if (s) {
		*p = s->next;
		cp->noauth--;
	}
	return s;
}

/* The browser's denv_oauth value: the one it has, else a new one set now.
 * hash gets its SHA-256. */
static int browser_binding(const struct cp *cp, struct http_req *req, char hash[SHA256_HEX_LEN + 1], struct err *e)
{
	char value[BROWSER_HEX + 1], raw[BROWSER_BYTES], c[BROWSER_HEX + 160];
	bool secure = cp->cfg.tls_cert || str_has_prefix(cp->cfg.public_url, "https://");

	if (http_cookie(http_req_header(req, "Cookie"), BROWSER_COOKIE, value, sizeof(value)) != 1 ||
	    strlen(value) != BROWSER_HEX || strspn(value, "0123456789abcdef") != BROWSER_HEX) {
		if (crypto_random(raw, sizeof(raw), e) < 0)
			return -1;
		enc_hex_write(value, raw, sizeof(raw));
		value[BROWSER_HEX] = '\0';
		/* Lax, not Strict: it must come back on GitHub's redirect to the callback. */
		snprintf(c, sizeof(c), BROWSER_COOKIE "=%s; Path=/auth/github/; Max-Age=%lld; HttpOnly; SameSite=Lax%s",
			 value, (long long)(cp->cfg.oauth_ttl_ms / 1000), secure ? "; Secure" : "");
		http_resp_header(req, "Set-Cookie", c);
	}
	if (sha256_hex(value, BROWSER_HEX, hash) < 0)
		return err_set(e, "cannot hash the sign-in cookie");
	memset(value, 0, sizeof(value));
	return 0;
}

/* Whether this request comes from the browser the state was made for. */
static bool same_browser(struct http_req *req, const struct cp_oauth_state *s)
{
	char value[BROWSER_HEX + 1], hash[SHA256_HEX_LEN + 1];
	bool ok;

	if (http_cookie(http_req_header(req, "Cookie"), BROWSER_COOKIE, value, sizeof(value)) != 1 ||
	    strlen(value) != BROWSER_HEX || sha256_hex(value, BROWSER_HEX, hash) < 0)
		return false;
	ok = crypto_equal(hash, s->browser, SHA256_HEX_LEN);
	memset(value, 0, sizeof(value));
	return ok;
}

/* ---- GET /auth/github/start ---- */

static void h_start(struct cp *cp, struct http_req *req)
{
	const char *ret = http_req_query(req, "return");
	char dflt[600];
	struct cp_oauth_state *s;
	struct buf url = BUF_INIT;
	struct err e;

	if (!configured(cp)) {
		http_respond_error(req, 503, not_configured);
		return;
	}
	snprintf(dflt, sizeof(dflt), "%s/app/", cp->cfg.console_url ? cp->cfg.console_url : "");
	if (!ret || !*ret)
		ret = dflt;
	if (!cp_gh_return_allowed(cp, ret)) {
		http_respond_error(req, 400, "return must be the console's origin or a loopback URL");
		return;
	}
	oauth_prune(cp);
	if (cp->noauth >= CP_OAUTH_STATE_MAX) {
		http_respond_error(req, 503, "too many sign-ins in progress; try again in a few minutes");
		return;
	}
	s = xcalloc(1, sizeof(*s));
	if (crypto_token("st", 24, s->state, sizeof(s->state), &e) < 0 || browser_binding(cp, req, s->browser, &e) < 0) {
		free(s);
		cp_fail(req, 500, "%s", e.msg);
		return;
	}
	s->ret = xstrdup(ret);
	s->expires_ms = clock_now_ms() + cp->cfg.oauth_ttl_ms;
	s->next = cp->oauth;
	cp->oauth = s;
	cp->noauth++;

	buf_adds(&url, cp->cfg.gh_url);
	buf_adds(&url, "/login/oauth/authorize?client_id=");
	http_pct_encode(&url, cp->cfg.gh_client_id, "");
	buf_adds(&url, "&redirect_uri=");
	http_pct_encode(&url, cp->cfg.public_url, "");
	http_pct_encode(&url, "/auth/github/callback", "");
	buf_adds(&url, "&scope=read%3Auser%20user%3Aemail&state=");
	http_pct_encode(&url, s->state, "");
	http_resp_header(req, "Location", url.data);
	http_respond(req, 302, NULL, NULL, 0);
	buf_release(&url);
}

/* ---- GET /auth/github/callback ---- */

enum step { STEP_TOKEN, STEP_USER, STEP_EMAILS };

/* One callback between GitHub's redirect and our answer. */
struct signin {
	struct cp *cp;
	struct http_req *req;
	struct http_acall *call;
	enum step step;
	char *ret;			/* where the browser goes afterwards */
	bool page;			/* ret is the device page: answer as a page */
	char access[CP_GH_TOKEN_MAX];	/* GitHub's token, wiped when done */
	struct cp_gh_user user;
	char session[CRYPTO_TOKEN_MAX];
};

static void signin_free(struct signin *s)
{
	if (s->call)
		http_acall_cancel(s->call);
	memset(s->access, 0, sizeof(s->access));
	memset(s->session, 0, sizeof(s->session));
	free(s->ret);
	free(s);
}

/* Answer a failed sign-in (a page for the device page's browser, else
 * api.md's JSON error) and free s. */
static void signin_fail(struct signin *s, int status, const char *msg)
{
	log_info("cp", "github sign-in refused (%d): %s", status, msg);
	http_req_on_gone(s->req, NULL, NULL);
	if (s->page)
		cp_web_signin_failed(s->cp, s->req, status, msg, s->ret);
	else
		http_respond_error(s->req, status, msg);
	signin_free(s);
}

static void signin_gone(struct http_req *req, void *arg)
{
	struct signin *s = arg;

	http_respond_error(req, 504, "client went away");
	signin_free(s);
}

static void answered(const struct http_client_resp *resp, const struct err *e, void *arg);

/* GET {api}path with the user's access token. */
static int api_get(struct signin *s, const char *path, struct err *e)
{
	char url[HTTP_MAX_URL], auth[AUTH_HEADER_MAX];
	const char *headers[] = { auth, "Accept: application/vnd.github+json", GH_API_VERSION, USER_AGENT, NULL };
	struct http_client_req r = { 0 };

	snprintf(url, sizeof(url), "%s%s", s->cp->cfg.gh_api_url, path);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", s->access);
	r.url = url;
	r.headers = headers;
	r.timeout_ms = CP_GITHUB_TIMEOUT_MS;
	/* The request is copied: wipe our copy of the header at once. */
	s->call = http_aclient_do(aclient(s->cp), &r, CP_GITHUB_BODY_MAX, answered, s, e);
	memset(auth, 0, sizeof(auth));
	return s->call ? 0 : -1;
}

/* POST the code to {github}/login/oauth/access_token, as a form, asking for JSON. */
static int exchange(struct signin *s, const char *code, struct err *e)
{
	struct cp *cp = s->cp;
	char url[HTTP_MAX_URL];
	const char *headers[] = { "Accept: application/json", "Content-Type: application/x-www-form-urlencoded",
				  USER_AGENT, NULL };
	struct http_client_req r = { 0 };
	struct buf body = BUF_INIT;

	snprintf(url, sizeof(url), "%s/login/oauth/access_token", cp->cfg.gh_url);
	buf_adds(&body, "client_id=");
	http_pct_encode(&body, cp->cfg.gh_client_id, "");
	buf_adds(&body, "&client_secret=");
	http_pct_encode(&body, cp->cfg.gh_client_secret, "");
	buf_adds(&body, "&code=");
	http_pct_encode(&body, code, "");
	/* The same redirect_uri as the authorize step: GitHub checks they match. */
	buf_adds(&body, "&redirect_uri=");
	http_pct_encode(&body, cp->cfg.public_url, "");
	http_pct_encode(&body, "/auth/github/callback", "");
	r.method = "POST";
	r.url = url;
	r.headers = headers;
	r.body = body.data;
	r.body_len = body.len;
	r.timeout_ms = CP_GITHUB_TIMEOUT_MS;
	s->step = STEP_TOKEN;
	s->call = http_aclient_do(aclient(cp), &r, CP_GITHUB_BODY_MAX, answered, s, e);
	memset(body.data, 0, body.len);	/* it holds the client secret */
	buf_release(&body);
	return s->call ? 0 : -1;
}

static void committed(int status, struct err *e, void *arg)
{
	struct signin *s = arg;
	struct buf loc = BUF_INIT;

	if (status != 0) {
		log_error("cp", "github sign-in: %s", e ? e->msg : "commit failed");
		signin_fail(s, 500, "The server could not save the session.");
		return;
	}
	log_info("cp", "github sign-in: %s (GitHub id %s)", s->user.login, s->user.id);
	if (s->page) {
		cp_web_signed_in(s->cp, s->req, s->session, s->ret);
	} else {
		/* api.md: the session goes in the fragment, which no server sees. */
		buf_init(&loc, HTTP_MAX_URL + CRYPTO_TOKEN_MAX + 8);
		buf_add(&loc, s->ret, strcspn(s->ret, "#"));
		buf_adds(&loc, "#token=");
		buf_adds(&loc, s->session);
		http_resp_header(s->req, "Cache-Control", "no-store");
		http_resp_header(s->req, "Referrer-Policy", "no-referrer");
		if (http_resp_header(s->req, "Location", loc.data) < 0)
			http_respond_error(s->req, 500, "cannot build the redirect");
		else
			http_respond(s->req, 302, NULL, NULL, 0);
		memset(loc.data, 0, loc.len);
		buf_release(&loc);
	}
	signin_free(s);
}

/* The user is known: find or create it, mint a session, commit. */
static void finish(struct signin *s)
{
	struct cp *cp = s->cp;
	const struct json *found = cp_find(cp, "users", "GitHubID", s->user.id, NULL, NULL);
	/* Our own copy: the store's row is not ours to keep across calls. */
	struct json *u = found ? json_dup(found) : NULL;
	struct st_txn *txn;
	char uid[ID_MAX];
	struct err e;

	memset(s->access, 0, sizeof(s->access));
	/* A private address we could not read keeps the one we had. */
	if (!*s->user.email && u && json_get_str(u, "Email"))
		str_copy(s->user.email, sizeof(s->user.email), json_get_str(u, "Email"));
	txn = st_begin(cp->db);
	if (u) {
		str_copy(uid, sizeof(uid), json_get_str(u, "ID") ? json_get_str(u, "ID") : "");
	} else {
		u = json_new_object();
		id_new("user", uid);
		json_object_set_str(u, "ID", uid);
		json_object_set(u, "CreatedAt", cp_now_json());
		/* A first sign-in gets a personal team named after the login. */
		json_free(cp_team_create(txn, s->user.login, uid));
	}
	json_object_set_str(u, "Email", s->user.email);
	json_object_set_str(u, "Name", *s->user.name ? s->user.name : s->user.login);
	json_object_set_str(u, "Login", s->user.login);
	json_object_set_str(u, "GitHubID", s->user.id);
	st_put(txn, "users", uid, u);
	if (cp_session_new(txn, uid, s->session, &e) < 0) {
		st_abort(txn);
		log_error("cp", "github sign-in: %s", e.msg);
		signin_fail(s, 500, "The server could not make a session.");
		return;
	}
	/* From here the commit answers; a browser that leaves just frees req then. */
	http_req_on_gone(s->req, NULL, NULL);
	if (st_commit(txn, committed, s, &e) < 0) {
		log_error("cp", "github sign-in: %s", e.msg);
		signin_fail(s, 500, "The server could not save the session.");
	}
}

static void answered(const struct http_client_resp *resp, const struct err *e, void *arg)
{
	struct signin *s = arg;
	const char *body = resp ? resp->body.data : NULL;
	size_t len = resp ? resp->body.len : 0;
	char why[ERR_MSG_MAX];
	struct err pe;

	s->call = NULL;
	if (!resp) {
		snprintf(why, sizeof(why), "GitHub could not be reached: %.400s", e ? e->msg : "request failed");
		signin_fail(s, 502, why);
		return;
	}
	switch (s->step) {
	case STEP_TOKEN:
		if (cp_gh_token_answer(resp->status, body, len, s->access, &pe) < 0)
			break;
		s->step = STEP_USER;
		if (api_get(s, "/user", &pe) < 0)
			pe.code = 502;
		else
			return;
		break;
	case STEP_USER:
		if (cp_gh_user_answer(resp->status, body, len, &s->user, &pe) < 0)
			break;
		if (*s->user.email) {
			finish(s);
			return;
		}
		/* The address is private: ask for the verified ones (scope user:email). */
		s->step = STEP_EMAILS;
		if (api_get(s, "/user/emails", &pe) < 0)
			pe.code = 502;
		else
			return;
		break;
	case STEP_EMAILS:
		cp_gh_email_pick(resp->status, body, len, s->user.email);
		finish(s);
		return;
	}
	signin_fail(s, pe.code ? pe.code : 502, pe.msg);
}

/* A code as GitHub sends it: URL-safe characters, bounded. */
static bool code_ok(const char *c)
{
	size_t n = c ? strlen(c) : 0;

	return n > 0 && n <= CP_GH_CODE_MAX &&
	       strspn(c, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~") == n;
}

/* A callback refused before anything starts: as a page when the state said
 * the device page (or a browser asks for HTML), else JSON. */
static void refuse(struct cp *cp, struct http_req *req, int status, const char *msg, const char *ret)
{
	const char *accept = http_req_header(req, "Accept");

	log_info("cp", "github sign-in refused (%d): %s", status, msg);
	if ((ret && cp_web_is_page(ret)) || (accept && strstr(accept, "text/html")))
		cp_web_signin_failed(cp, req, status, msg, ret);
	else
		http_respond_error(req, status, msg);
}

static void h_callback(struct cp *cp, struct http_req *req)
{
	const char *code = http_req_query(req, "code"), *error = http_req_query(req, "error");
	const char *desc = http_req_query(req, "error_description");
	struct cp_oauth_state *st;
	struct signin *s;
	char msg[ERR_MSG_MAX], a[GH_MESSAGE_MAX + 1], b[GH_MESSAGE_MAX + 1];
	struct err e;

	if (!configured(cp)) {
		http_respond_error(req, 503, not_configured);
		return;
	}
	st = state_take(cp, http_req_query(req, "state"));
	if (!st) {
		refuse(cp, req, 400, "unknown or expired state", NULL);
		return;
	}
	if (!same_browser(req, st)) {
		refuse(cp, req, 400, "this sign-in was started in another browser (or its cookie expired): start again",
		       st->ret);
	} else if (error) {
		/* The person said no on GitHub, or GitHub refused the app. */
		snprintf(msg, sizeof(msg), "GitHub did not sign you in: %s (%s)",
			 short_text(desc && *desc ? desc : error, a), short_text(error, b));
		refuse(cp, req, 400, msg, st->ret);
	} else if (!code_ok(code)) {
		refuse(cp, req, 400, "GitHub's redirect has no usable code", st->ret);
	} else {
		s = xcalloc(1, sizeof(*s));
		s->cp = cp;
		s->req = req;
		s->ret = st->ret;
		st->ret = NULL;
		s->page = cp_web_is_page(s->ret);
		if (exchange(s, code, &e) < 0) {
			snprintf(msg, sizeof(msg), "GitHub could not be reached: %.400s", e.msg);
			signin_fail(s, 502, msg);
		} else {
			http_req_on_gone(req, signin_gone, s);
		}
	}
	state_free(st);
}

int cp_auth_github(struct cp *cp)
{
	if (cp_route(cp, "GET", "/auth/github/start", 0, h_start) < 0 ||
	    cp_route(cp, "GET", "/auth/github/callback", 0, h_callback) < 0)
		return -1;
	return 0;
}
