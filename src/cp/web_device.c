/*
 * web_device.c: the device-approval page at /app/device/, the address the
 * device flow prints, so that `denv login` can be approved from a browser on
 * a control plane that has no console in front of it.
 *
 * Server-rendered HTML with no script and one stylesheet of our own; the
 * Content-Security-Policy allows nothing else. Signing in (dev login, or
 * GitHub through auth_github.c) sets an HttpOnly, SameSite=Strict cookie
 * holding the dst_ session. Forms are CSRF-safe three ways: the cookie is
 * not sent by other sites, every form carries a token (an HMAC of the
 * session; for the sign-in form a random value that is also a cookie), and a
 * POST whose Origin or Sec-Fetch-Site names another site is refused. Every
 * value that came from outside is HTML-escaped; every field is bounded.
 */
#include <ctype.h>
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

#define PAGE "/app/device/"
#define SESSION_COOKIE "denv_session"
#define CSRF_COOKIE "denv_csrf"
#define CSRF_BYTES 32
#define CSRF_HEX (2 * CSRF_BYTES)
#define FORM_TOKEN_LABEL "denv device approval form"

static const char csp[] = "default-src 'none'; style-src 'self'; form-action 'self'; "
			  "frame-ancestors 'none'; base-uri 'none'";

static const char style[] =
	"body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}\n"
	"main{max-width:30em;margin:3em auto;padding:2em;background:#fff;border-radius:8px;"
	"box-shadow:0 1px 4px #0002}\n"
	"h1{font-size:1.4em;margin-top:0}\n"
	"label{display:block;margin-top:1em;font-weight:600}\n"
	"input,select{font:inherit;width:100%;box-sizing:border-box;padding:.4em;margin-top:.3em;"
	"border:1px solid #9aa3b2;border-radius:4px}\n"
	"#code{font-family:ui-monospace,monospace;letter-spacing:.15em;text-transform:uppercase}\n"
	"button{font:inherit;margin-top:1.5em;padding:.5em 1.5em;border:0;border-radius:4px;"
	"background:#2456d6;color:#fff;cursor:pointer}\n"
	".error{background:#fdecec;color:#8a1111;padding:.6em .8em;border-radius:4px}\n"
	".notice{background:#eaf4ea;color:#1b5e20;padding:.6em .8em;border-radius:4px}\n"
	".hint{color:#5b6475;font-size:.9em}\n"
	"code,strong.code{font-family:ui-monospace,monospace}\n";

/* ---- small parts ---- */

static void security_headers(struct http_req *req)
{
	http_resp_header(req, "Content-Security-Policy", csp);
	http_resp_header(req, "X-Content-Type-Options", "nosniff");
	http_resp_header(req, "X-Frame-Options", "DENY");
	/* The code is in the URL: do not hand it to another site. Not
	 * no-referrer: with it browsers send "Origin: null" on our own forms. */
	http_resp_header(req, "Referrer-Policy", "same-origin");
	http_resp_header(req, "Cache-Control", "no-store");
}

static void page_begin(struct buf *b, const char *title)
{
	buf_adds(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
		    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>");
	http_html_escape(b, title);
	buf_adds(b, " - denv</title><link rel=\"stylesheet\" href=\"" PAGE "style.css\"></head>\n<body><main>\n<h1>");
	http_html_escape(b, title);
	buf_adds(b, "</h1>\n");
}

/* Send the page in b (released). */
static void page_send(struct http_req *req, int status, struct buf *b)
{
	buf_adds(b, "</main></body></html>\n");
	security_headers(req);
	http_respond(req, status, "text/html; charset=utf-8", b->data, b->len);
	buf_release(b);
}

/* <p id=ID class=ID>text</p>; nothing when text is NULL. */
static void para(struct buf *b, const char *id, const char *text)
{
	if (!text)
		return;
	buf_addf(b, "<p id=\"%s\" class=\"%s\">", id, id);
	http_html_escape(b, text);
	buf_adds(b, "</p>\n");
}

static void hidden(struct buf *b, const char *name, const char *value)
{
	buf_addf(b, "<input type=\"hidden\" name=\"%s\" value=\"", name);
	http_html_escape(b, value);
	buf_adds(b, "\">\n");
}

static void set_cookie(const struct cp *cp, struct http_req *req, const char *name, const char *value, int64_t max_age)
{
	char c[CRYPTO_TOKEN_MAX + 160];
	bool secure = cp->cfg.tls_cert || str_has_prefix(cp->cfg.public_url, "https://");

	snprintf(c, sizeof(c), "%s=%s; Path=" PAGE "; Max-Age=%lld; HttpOnly; SameSite=Strict%s", name, value,
		 (long long)max_age, secure ? "; Secure" : "");
	http_resp_header(req, "Set-Cookie", c);
}

/* A user code as a person may type it: letters, digits and dashes, bounded.
 * Returns out (upper-cased) or NULL for anything else. */
static const char *clean_code(const char *in, char out[CP_WEB_CODE_MAX + 1])
{
	size_t n = in ? strlen(in) : 0;

	if (n == 0 || n > CP_WEB_CODE_MAX)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (!isalnum((unsigned char)in[i]) && in[i] != '-')
			return NULL;
		out[i] = (char)toupper((unsigned char)in[i]);
	}
	out[n] = '\0';
	return out;
}

/* The signed-in user, from the session cookie. */
static bool signed_in(struct cp *cp, struct http_req *req, char token[CRYPTO_TOKEN_MAX], char user_id[ID_MAX])
{
	if (http_cookie(http_req_header(req, "Cookie"), SESSION_COOKIE, token, CRYPTO_TOKEN_MAX) != 1)
		return false;
	return cp_session_user(cp, token, user_id) == 0;
}

/* The approval form's token: an HMAC of the session, so that it needs no
 * state here and is worthless without the cookie it belongs to. */
static int form_token(const char *session, char out[SHA256_HEX_LEN + 1])
{
	uint8_t mac[SHA256_LEN];

	if (hmac_sha256(session, strlen(session), FORM_TOKEN_LABEL, strlen(FORM_TOKEN_LABEL), mac) < 0)
		return -1;
	enc_hex_write(out, mac, sizeof(mac));
	out[SHA256_HEX_LEN] = '\0';
	return 0;
}

static bool token_equal(const char *want, const char *got)
{
	return want && got && strlen(want) == strlen(got) && crypto_equal(want, got, strlen(want));
}

/* The scheme://host[:port] of url, into out. */
static void origin_of(const char *url, char *out, size_t n)
{
	const char *host = strstr(url, "://");
	size_t len = host ? (size_t)(host + 3 - url) + strcspn(host + 3, "/?#") : 0;

	snprintf(out, n, "%.*s", (int)len, url);
}

/* A browser says where a POST came from: refuse one from another site. */
static bool same_origin(const struct cp *cp, struct http_req *req)
{
	const char *site = http_req_header(req, "Sec-Fetch-Site");
	const char *origin = http_req_header(req, "Origin");
	const char *host = http_req_header(req, "Host");
	char own[HTTP_MAX_URL];

	if (site && !str_eq(site, "same-origin") && !str_eq(site, "none"))
		return false;
	if (!origin)
		return true; /* not a browser (or an old one): the form token must still match */
	if (host) {
		snprintf(own, sizeof(own), "%s://%s", cp->cfg.tls_cert ? "https" : "http", host);
		if (str_eq(origin, own))
			return true;
	}
	/* Behind a proxy the Host we see may not be the one the browser used. */
	origin_of(cp->cfg.public_url, own, sizeof(own));
	return str_eq(origin, own);
}

/* One bounded field of the request's form; "" when absent. -1 when malformed
 * or over max bytes. out is released by the caller. */
static int field(struct http_req *req, const char *name, size_t max, struct buf *out)
{
	size_t len;
	const char *body = http_req_body(req, &len);

	buf_init(out, max);
	return http_form_field(body, len, name, out) < 0 ? -1 : 0;
}

/* ---- the pages ---- */

/* Sign-in page: how to sign in on this server, with the code carried along. */
static void render_signin(struct cp *cp, struct http_req *req, int status, const char *code, const char *error)
{
	char csrf[CSRF_HEX + 1], raw[CSRF_BYTES];
	struct buf b = BUF_INIT;
	bool github = cp->cfg.gh_client_id && cp->cfg.gh_client_secret;
	struct err e;

	/* The sign-in form's token doubles as a cookie (there is no session yet). */
	if (http_cookie(http_req_header(req, "Cookie"), CSRF_COOKIE, csrf, sizeof(csrf)) != 1 ||
	    strlen(csrf) != CSRF_HEX) {
		if (crypto_random(raw, sizeof(raw), &e) < 0) {
			log_error("cp", "device page: %s", e.msg);
			http_respond(req, 500, "text/plain", "no randomness\n", 14);
			return;
		}
		enc_hex_write(csrf, raw, sizeof(raw));
		csrf[CSRF_HEX] = '\0';
		set_cookie(cp, req, CSRF_COOKIE, csrf, cp->cfg.device_ttl_ms / 1000);
	}
	page_begin(&b, "Sign in to approve a CLI login");
	para(&b, "error", error);
	buf_adds(&b, "<p>A <code>denv login</code> waits for approval");
	if (code) {
		buf_adds(&b, " with the code <strong class=\"code\">");
		http_html_escape(&b, code);
		buf_adds(&b, "</strong>");
	}
	buf_adds(&b, ". Sign in first.</p>\n");
	if (cp->cfg.dev_login) {
		buf_adds(&b, "<form id=\"signin\" method=\"post\" action=\"" PAGE "login\">\n"
			     "<label for=\"email\">Email</label>\n");
		buf_addf(&b, "<input id=\"email\" name=\"email\" type=\"email\" maxlength=\"%d\" required "
			     "autocomplete=\"email\">\n", CP_EMAIL_MAX);
		hidden(&b, "code", code ? code : "");
		hidden(&b, "csrf", csrf);
		buf_adds(&b, "<button id=\"signin-button\" type=\"submit\">Sign in</button>\n</form>\n"
			     "<p class=\"hint\">Dev login is on (DENV_DEV_LOGIN=1): anyone who can reach this "
			     "server can sign in as any address. Use it on your own machine only.</p>\n");
	}
	if (github) {
		/* The code is letters, digits and dashes: nothing in it needs escaping. */
		buf_adds(&b, "<p><a id=\"github\" href=\"/auth/github/start?return=%2Fapp%2Fdevice%2F");
		if (code)
			buf_addf(&b, "%%3Fcode%%3D%s", code);
		buf_adds(&b, "\">Sign in with GitHub</a></p>\n");
	}
	if (!cp->cfg.dev_login && !github)
		para(&b, "no-signin",
		     "This server offers no browser sign-in. Start denv-cp with DENV_DEV_LOGIN=1 (on your own "
		     "machine only) or configure GitHub sign-in (DENV_GITHUB_CLIENT_ID and "
		     "DENV_GITHUB_CLIENT_SECRET), or approve from a shell with a session token: "
		     "POST /v1/device/approve (see denv-cp(8)).");
	page_send(req, status, &b);
}

struct team_opts {
	struct cp *cp;
	struct buf *b;
	const char *selected;
	size_t n;
};

static int team_option(const char *id, const struct json *row, void *arg)
{
	struct team_opts *t = arg;
	const char *team_id = json_get_str(row, "TeamID");
	const struct json *team = st_get(t->cp->db, "teams", team_id);

	if (!team)
		return 0;
	buf_adds(t->b, "<option value=\"");
	http_html_escape(t->b, team_id);
	buf_adds(t->b, str_eq(team_id, t->selected) ? "\" selected>" : "\">");
	http_html_escape(t->b, json_get_str(team, "Name"));
	buf_adds(t->b, "</option>\n");
	return ++t->n >= CP_WEB_TEAMS_MAX;
}

struct form_state {
	const char *code;	/* prefilled; may be NULL */
	const char *team_id;	/* selected; may be NULL */
	const char *name;	/* key name; may be NULL */
	const char *error;
	const char *notice;
};

/* The approval form for a signed-in user. */
static void render_form(struct cp *cp, struct http_req *req, int status, const char *session, const char *user_id,
			const struct form_state *f)
{
	char csrf[SHA256_HEX_LEN + 1];
	const struct json *user = st_get(cp->db, "users", user_id);
	const char *who = json_get_str(user, "Email") ? json_get_str(user, "Email") : json_get_str(user, "Login");
	struct buf b = BUF_INIT, opts = BUF_INIT;
	struct team_opts t = { cp, &opts, f->team_id, 0 };
	struct err e;

	if (form_token(session, csrf) < 0 ||
	    st_scan(cp->db, "members", "UserID", user_id, NULL, team_option, &t, &e) < 0) {
		log_error("cp", "device page: cannot list the teams of %s", user_id);
		buf_release(&opts);
		http_respond(req, 500, "text/plain", "cannot list your teams\n", 23);
		return;
	}
	page_begin(&b, "Approve a CLI login");
	para(&b, "error", f->error);
	para(&b, "notice", f->notice);
	buf_adds(&b, "<p>Signed in as <strong id=\"user\">");
	http_html_escape(&b, who ? who : user_id);
	buf_adds(&b, "</strong>.</p>\n");
	if (t.n == 0) {
		para(&b, "no-team", "You are not a member of any team, so there is no team to approve for. "
				    "Create one with POST /v1/teams, then reload this page.");
		buf_release(&opts);
		page_send(req, status, &b);
		return;
	}
	buf_adds(&b, "<form id=\"approve\" method=\"post\" action=\"" PAGE "approve\">\n"
		     "<label for=\"code\">Code shown by denv login</label>\n"
		     "<input id=\"code\" name=\"user_code\" value=\"");
	http_html_escape(&b, f->code ? f->code : "");
	buf_addf(&b, "\" maxlength=\"%d\" required autocomplete=\"off\" spellcheck=\"false\" "
		     "placeholder=\"BCDF-GHJK\">\n", CP_WEB_CODE_MAX);
	buf_adds(&b, "<label for=\"team\">Team the new API key belongs to</label>\n"
		     "<select id=\"team\" name=\"team_id\">\n");
	buf_add(&b, opts.data, opts.len);
	buf_adds(&b, "</select>\n<label for=\"name\">Key name</label>\n<input id=\"name\" name=\"name\" value=\"");
	http_html_escape(&b, f->name && *f->name ? f->name : "cli");
	buf_addf(&b, "\" maxlength=\"%d\">\n", CP_NAME_MAX);
	hidden(&b, "csrf", csrf);
	buf_adds(&b, "<button id=\"approve-button\" type=\"submit\">Approve</button>\n</form>\n"
		     "<p class=\"hint\">Approve only a login you started yourself: the terminal that shows "
		     "this code receives an API key for the team.</p>\n");
	buf_release(&opts);
	page_send(req, status, &b);
}

/* ---- GET /app/device/ ---- */

static void h_page(struct cp *cp, struct http_req *req)
{
	const char *raw = http_req_query(req, "code");
	char cbuf[CP_WEB_CODE_MAX + 1], token[CRYPTO_TOKEN_MAX], uid[ID_MAX], note[160];
	const char *code = raw && *raw ? clean_code(raw, cbuf) : NULL;
	const char *bad = raw && *raw && !code ? "That is not a code from denv login: it looks like BCDF-GHJK." : NULL;
	struct form_state f = { code, NULL, NULL, bad, NULL };
	const struct cp_device *d;
	int status = bad ? 400 : 200;

	if (!signed_in(cp, req, token, uid)) {
		render_signin(cp, req, status, code, bad);
		return;
	}
	if (code) {
		d = cp_device_find(cp, code);
		if (!d) {
			f.error = "This code is unknown or has expired (codes last 15 minutes). Run denv login "
				  "again and enter the code it prints.";
			status = 404;
		} else if (d->state != CP_DEVICE_PENDING) {
			f.notice = "This code was already approved: the CLI has its key. You can close this page.";
			status = 409;
		} else {
			snprintf(note, sizeof(note), "A CLI login waits for this code; it expires in %lld min.",
				 (long long)((d->expires_ms - clock_now_ms()) / 60000 + 1));
			f.notice = note;
		}
	}
	render_form(cp, req, status, token, uid, &f);
	memset(token, 0, sizeof(token));
}

/* /app/device without the slash: the page is a directory, so relative links work. */
static void h_redirect(struct cp *cp, struct http_req *req)
{
	const char *q = strchr(http_req_target(req), '?');
	char loc[HTTP_MAX_URL];

	snprintf(loc, sizeof(loc), PAGE "%s", q ? q : "");
	if (http_resp_header(req, "Location", loc) < 0)
		http_resp_header(req, "Location", PAGE);
	http_respond(req, 308, NULL, NULL, 0);
}

static void h_style(struct cp *cp, struct http_req *req)
{
	http_resp_header(req, "X-Content-Type-Options", "nosniff");
	http_resp_header(req, "Cache-Control", "max-age=3600");
	http_respond(req, 200, "text/css; charset=utf-8", style, sizeof(style) - 1);
}

/* Both forms: our content type, from our own origin. Answers when not. */
static bool form_ok(struct cp *cp, struct http_req *req)
{
	const char *ct = http_req_header(req, "Content-Type");
	struct buf b = BUF_INIT;

	if (!ct || !str_has_prefix(ct, "application/x-www-form-urlencoded")) {
		page_begin(&b, "Not a form");
		para(&b, "error", "This address takes the device page's form only.");
		page_send(req, 415, &b);
		return false;
	}
	if (!same_origin(cp, req)) {
		log_debug("cp", "device page: refused a form from origin %.100s (Sec-Fetch-Site %.20s)",
			  http_req_header(req, "Origin") ? http_req_header(req, "Origin") : "-",
			  http_req_header(req, "Sec-Fetch-Site") ? http_req_header(req, "Sec-Fetch-Site") : "-");
		page_begin(&b, "Refused");
		para(&b, "error", "This form was sent from another site. Open " PAGE " on this server and try again.");
		page_send(req, 403, &b);
		return false;
	}
	return true;
}

/* ---- POST /app/device/login: dev sign-in from the page ---- */

struct signin {
	struct cp *cp;
	struct http_req *req;
	char token[CRYPTO_TOKEN_MAX];
	char code[CP_WEB_CODE_MAX + 1];
};

static void signin_done(int status, struct err *e, void *arg)
{
	struct signin *s = arg;
	char loc[sizeof(PAGE) + 8 + CP_WEB_CODE_MAX];

	if (status == 0) {
		set_cookie(s->cp, s->req, SESSION_COOKIE, s->token, CP_SESSION_TTL_S);
		snprintf(loc, sizeof(loc), PAGE "%s%s", *s->code ? "?code=" : "", s->code);
		http_resp_header(s->req, "Location", loc);
		http_respond(s->req, 303, NULL, NULL, 0);
	} else {
		log_error("cp", "device page sign-in: %s", e ? e->msg : "commit failed");
		render_signin(s->cp, s->req, 500, *s->code ? s->code : NULL, "The server could not save the session.");
	}
	memset(s->token, 0, sizeof(s->token));
	free(s);
}

static void h_login(struct cp *cp, struct http_req *req)
{
	char cbuf[CP_WEB_CODE_MAX + 1], cookie[CSRF_HEX + 1];
	struct buf email = BUF_INIT, code = BUF_INIT, csrf = BUF_INIT;
	const char *c = NULL;
	struct signin *s;
	struct st_txn *txn;
	struct err e;

	if (!cp->cfg.dev_login) {
		render_signin(cp, req, 404, NULL, "Dev sign-in is off on this server.");
		return;
	}
	if (!form_ok(cp, req))
		return;
	if (field(req, "email", CP_EMAIL_MAX, &email) < 0 || field(req, "code", CP_WEB_CODE_MAX, &code) < 0 ||
	    field(req, "csrf", CSRF_HEX, &csrf) < 0) {
		render_signin(cp, req, 400, NULL, "The form was malformed or a field was too long.");
		goto out;
	}
	if (code.len)
		c = clean_code(code.data, cbuf);
	if (http_cookie(http_req_header(req, "Cookie"), CSRF_COOKIE, cookie, sizeof(cookie)) != 1 ||
	    strlen(cookie) != CSRF_HEX || !token_equal(cookie, csrf.data)) {
		render_signin(cp, req, 403, c, "The sign-in form expired or came from elsewhere; sign in again.");
		goto out;
	}
	s = xcalloc(1, sizeof(*s));
	txn = st_begin(cp->db);
	if (cp_dev_signin(cp, txn, email.data, NULL, s->token, &e) < 0) {
		st_abort(txn);
		free(s);
		render_signin(cp, req, e.code == 400 ? 400 : 500, c, e.msg);
		goto out;
	}
	s->cp = cp;
	s->req = req;
	str_copy(s->code, sizeof(s->code), c ? c : "");
	if (st_commit(txn, signin_done, s, &e) < 0) {
		log_error("cp", "device page sign-in: %s", e.msg);
		memset(s->token, 0, sizeof(s->token));
		free(s);
		render_signin(cp, req, 500, c, "The server could not save the session.");
	}
out:
	buf_release(&email);
	buf_release(&code);
	buf_release(&csrf);
}

/* ---- POST /app/device/approve ---- */

struct approving {
	struct cp *cp;
	struct http_req *req;
	struct cp_approval ap;
	char code[CP_WEB_CODE_MAX + 1];
	char team_id[ID_MAX];
};

static void approve_committed(int status, struct err *e, void *arg)
{
	struct approving *a = arg;
	const struct json *team;
	struct buf b = BUF_INIT;

	a->ap.done(a->cp, status == 0, a->ap.done_arg);
	if (status != 0) {
		log_error("cp", "device page approval: %s", e ? e->msg : "commit failed");
		page_begin(&b, "Not approved");
		para(&b, "error", "The server could not save the new key. Try again.");
		page_send(a->req, 500, &b);
		free(a);
		return;
	}
	team = st_get(a->cp->db, "teams", a->team_id);
	page_begin(&b, "CLI login approved");
	buf_adds(&b, "<p id=\"approved\" class=\"notice\">The CLI that showed <strong class=\"code\">");
	http_html_escape(&b, a->code);
	buf_adds(&b, "</strong> now has an API key for the team <strong id=\"team-name\">");
	http_html_escape(&b, json_get_str(team, "Name") ? json_get_str(team, "Name") : a->team_id);
	buf_adds(&b, "</strong>. Return to your terminal; you can close this page.</p>\n");
	page_send(a->req, 200, &b);
	free(a);
}

/* What the page says for cp_device_approve's refusals. */
static const char *refusal(int code)
{
	switch (code) {
	case 404:
		return "This code is unknown or has expired (codes last 15 minutes). Run denv login again and "
		       "enter the code it prints.";
	case 409:
		return "This code was already approved: the CLI has its key.";
	case 403:
		return "You are not a member of that team.";
	default:
		return "The server could not approve the code. Try again.";
	}
}

static void h_approve(struct cp *cp, struct http_req *req)
{
	char token[CRYPTO_TOKEN_MAX] = "", uid[ID_MAX], want[SHA256_HEX_LEN + 1], cbuf[CP_WEB_CODE_MAX + 1];
	struct buf code = BUF_INIT, team = BUF_INIT, name = BUF_INIT, csrf = BUF_INIT;
	struct form_state f = { NULL, NULL, NULL, NULL, NULL };
	struct approving *a;
	int status = 400;
	struct err e;

	if (!form_ok(cp, req))
		return;
	if (!signed_in(cp, req, token, uid)) {
		render_signin(cp, req, 401, NULL, "Your session has ended: sign in again, then approve.");
		return;
	}
	if (field(req, "user_code", CP_WEB_CODE_MAX, &code) < 0 || field(req, "team_id", ID_MAX, &team) < 0 ||
	    field(req, "name", CP_NAME_MAX, &name) < 0 || field(req, "csrf", SHA256_HEX_LEN, &csrf) < 0) {
		f.error = "The form was malformed or a field was too long.";
		goto refuse;
	}
	f.code = code.data;
	f.team_id = team.data;
	f.name = name.data;
	if (form_token(token, want) < 0 || !token_equal(want, csrf.data)) {
		f.error = "This form expired or came from elsewhere: check the code and approve again.";
		status = 403;
		goto refuse;
	}
	if (!clean_code(code.data, cbuf)) {
		f.error = "Enter the code that denv login printed (it looks like BCDF-GHJK).";
		goto refuse;
	}
	f.code = cbuf;
	if (name.len && !cp_valid_name(name.data)) {
		f.error = "A key name is 1 to 63 letters, digits, dots, dashes or underscores.";
		goto refuse;
	}
	a = xcalloc(1, sizeof(*a));
	if (cp_device_approve(cp, uid, cbuf, team.data, name.data, &a->ap, &e) < 0) {
		free(a);
		f.error = refusal(e.code);
		status = e.code ? e.code : 500;
		goto refuse;
	}
	a->cp = cp;
	a->req = req;
	str_copy(a->code, sizeof(a->code), cbuf);
	str_copy(a->team_id, sizeof(a->team_id), team.data);
	if (st_commit(a->ap.txn, approve_committed, a, &e) < 0) {
		log_error("cp", "device page approval: %s", e.msg);
		a->ap.done(cp, false, a->ap.done_arg);
		free(a);
		f.error = refusal(500);
		status = 500;
		goto refuse;
	}
	goto out;
refuse:
	render_form(cp, req, status, token, uid, &f);
out:
	memset(token, 0, sizeof(token));
	buf_release(&code);
	buf_release(&team);
	buf_release(&name);
	buf_release(&csrf);
}

/* ---- the end of a GitHub sign-in (auth_github.c) ---- */

bool cp_web_is_page(const char *ret)
{
	char cbuf[CP_WEB_CODE_MAX + 1];

	if (!ret)
		return false;
	if (str_eq(ret, PAGE))
		return true;
	return str_has_prefix(ret, PAGE "?code=") && clean_code(ret + strlen(PAGE "?code="), cbuf) != NULL;
}

/*
 * GitHub's redirect to the callback is a cross-site navigation, and so is
 * every redirect that follows it: a browser does not send a SameSite=Strict
 * cookie on any of them. So the cookie is set here and the browser goes on
 * from a page of ours (a meta refresh, which CSP does not govern, and a
 * link): that navigation is same-site and carries the cookie.
 */
void cp_web_signed_in(struct cp *cp, struct http_req *req, const char *session, const char *ret)
{
	struct buf b = BUF_INIT;
	const char *to = cp_web_is_page(ret) ? ret : PAGE;

	set_cookie(cp, req, SESSION_COOKIE, session, CP_SESSION_TTL_S);
	page_begin(&b, "Signed in");
	/* In <body>: browsers follow a refresh there as they do in <head>. */
	buf_adds(&b, "<meta http-equiv=\"refresh\" content=\"0;url=");
	http_html_escape(&b, to);
	buf_adds(&b, "\">\n<p id=\"signed-in\" class=\"notice\">You are signed in with GitHub. "
		     "<a id=\"continue\" href=\"");
	http_html_escape(&b, to);
	buf_adds(&b, "\">Continue to the approval page</a>.</p>\n");
	page_send(req, 200, &b);
}

void cp_web_signin_failed(struct cp *cp, struct http_req *req, int status, const char *msg, const char *ret)
{
	struct buf b = BUF_INIT;
	const char *to = cp_web_is_page(ret) ? ret : PAGE;

	page_begin(&b, "Sign-in failed");
	para(&b, "error", msg);
	buf_adds(&b, "<p><a id=\"again\" href=\"");
	http_html_escape(&b, to);
	buf_adds(&b, "\">Back to the sign-in page</a> to try again.</p>\n");
	page_send(req, status, &b);
}

int cp_web_device(struct cp *cp)
{
	if (cp_route(cp, "GET", PAGE, 0, h_page) < 0 || cp_route(cp, "GET", "/app/device", 0, h_redirect) < 0 ||
	    cp_route(cp, "GET", PAGE "style.css", 0, h_style) < 0 ||
	    cp_route(cp, "POST", PAGE "login", CP_WEB_FORM_MAX, h_login) < 0 ||
	    cp_route(cp, "POST", PAGE "approve", CP_WEB_FORM_MAX, h_approve) < 0)
		return -1;
	return 0;
}
