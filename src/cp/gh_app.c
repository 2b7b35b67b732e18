/*
 * gh_app.c: denv-cp as a GitHub App (config.md, "GitHub App"): the App's
 * JWT signed with its private key (RS256, libcrypto), installation access
 * tokens (POST /app/installations/{id}/access_tokens) kept until shortly
 * before they expire, and calls to GitHub's API as an installation. Every
 * call goes through the loop's asynchronous client; a token is never logged.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/enc.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

#define GH_ACCEPT "Accept: application/vnd.github+json"
#define GH_API_VERSION "X-GitHub-Api-Version: 2022-11-28"
#define GH_USER_AGENT "User-Agent: denv-cp"
#define GH_SAYS_MAX 200		/* of GitHub's message, in ours */
#define AUTH_MAX (CP_GH_JWT_MAX + 32)

struct cp_gh_token {
	int64_t installation;
	char token[CP_GH_TOKEN_MAX];
	int64_t expires_s;
	struct cp_gh_token *next;
};

enum call_step { CALL_TOKEN, CALL_API, CALL_HOP };

struct cp_gh_call {
	struct cp *cp;
	int64_t installation;
	char method[8];
	char url[HTTP_MAX_URL];
	struct buf body;
	size_t max_body;
	int timeout_ms;
	enum call_step step;
	int hops;
	struct http_acall *call;
	cp_gh_fn fn;
	void *arg;
	char error[ERR_MSG_MAX];
	struct ev_timer later;	/* a failure before any request is answered from the loop */
	struct cp_gh_call *next;
};

/* ---- the key and the JWT ---- */

int cp_gh_app_start(struct cp *cp, struct err *e)
{
	const char *k = cp->cfg.gh_app_key;
	struct buf pem = BUF_INIT;
	BIO *bio;

	if (!cp->cfg.gh_app_id || !k)
		return 0;
	if (str_has_prefix(k, "-----BEGIN")) {
		buf_adds(&pem, k);
	} else if (fs_read_file(k, &pem, CP_GH_KEY_MAX, e) < 0) {
		return err_set(e, "DENV_GITHUB_APP_PRIVATE_KEY: %.200s", e->msg);
	}
	bio = BIO_new_mem_buf(pem.data, (int)pem.len);
	cp->gh_key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
	BIO_free(bio);
	memset(pem.data, 0, pem.len);
	buf_release(&pem);
	if (!cp->gh_key || EVP_PKEY_get_base_id(cp->gh_key) != EVP_PKEY_RSA) {
		EVP_PKEY_free(cp->gh_key);
		cp->gh_key = NULL;
		return err_set(e, "DENV_GITHUB_APP_PRIVATE_KEY is not an RSA private key in PEM");
	}
	return 0;
}

/* Unpadded base64url of p into out. */
static void b64url(struct buf *out, const void *p, size_t n)
{
	enc_base64_encode(out, p, n, ENC_BASE64URL);
}

int cp_gh_jwt(struct evp_pkey_st *key, const char *app_id, int64_t now_s, char *out, size_t n, struct err *e)
{
	static const char header[] = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";
	struct buf jwt = BUF_INIT, claims = BUF_INIT;
	unsigned char sig[2048];
	size_t siglen = sizeof(sig);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	struct json *c = json_new_object();
	int rc = -1;

	/* iss is the App's id as a number when it is one (GitHub's examples), else its client id. */
	json_object_set_int(c, "iat", now_s - CP_GH_JWT_SKEW_S);
	json_object_set_int(c, "exp", now_s + CP_GH_JWT_TTL_S);
	if (*app_id && strspn(app_id, "0123456789") == strlen(app_id) && strlen(app_id) < 19)
		json_object_set_int(c, "iss", strtoll(app_id, NULL, 10));
	else
		json_object_set_str(c, "iss", app_id);
	json_write(&claims, c, 0);
	b64url(&jwt, header, strlen(header));
	buf_addch(&jwt, '.');
	b64url(&jwt, claims.data, claims.len);
	if (!md || !key || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
	    EVP_DigestSign(md, sig, &siglen, (const unsigned char *)jwt.data, jwt.len) != 1) {
		err_set(e, "cannot sign the GitHub App's JWT");
		goto out;
	}
	buf_addch(&jwt, '.');
	b64url(&jwt, sig, siglen);
	if (jwt.len >= n) {
		err_set(e, "the GitHub App's JWT is longer than %zu bytes", n - 1);
		goto out;
	}
	memcpy(out, jwt.data, jwt.len + 1);
	rc = 0;
out:
	EVP_MD_CTX_free(md);
	json_free(c);
	buf_release(&claims);
	buf_release(&jwt);
	return rc;
}

/* ---- GitHub's answers ---- */

void cp_gh_says(const struct http_client_resp *resp, char *out, size_t n)
{
	struct json *doc = NULL;
	struct err pe;
	const char *msg;
	size_t len;

	if (resp->body.len && json_parse(resp->body.data, resp->body.len, NULL, &doc, &pe) < 0)
		doc = NULL;
	msg = json_get_str(doc, "message");
	len = msg ? strcspn(msg, "\r\n") : 0;
	snprintf(out, n, "HTTP %d%s%.*s", resp->status, len ? ": " : "", (int)(len < GH_SAYS_MAX ? len : GH_SAYS_MAX),
		 msg ? msg : "");
	json_free(doc);
}

int cp_gh_install_token_answer(int status, const char *body, size_t len, char token[CP_GH_TOKEN_MAX],
			       int64_t *expires_s, struct err *e)
{
	struct http_client_resp r = { .status = status };
	struct json *doc = NULL;
	const char *tok, *exp;
	int64_t ns = 0;
	char says[GH_SAYS_MAX + 32];
	struct err pe;
	int rc = -1;

	r.body.data = (char *)body;
	r.body.len = len;
	if (status != 201 && status != 200) {
		cp_gh_says(&r, says, sizeof(says));
		return err_set(e, "GitHub refused the installation token: %s", says);
	}
	if (!len || json_parse(body, len, NULL, &doc, &pe) < 0 || doc->type != JSON_OBJECT) {
		err_set(e, "GitHub's installation token answer is not a JSON object");
		goto out;
	}
	tok = json_get_str(doc, "token");
	exp = json_get_str(doc, "expires_at");
	if (!tok || !*tok || strlen(tok) >= CP_GH_TOKEN_MAX || strspn(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.") != strlen(tok)) {
		err_set(e, "GitHub's installation token answer has no usable token");
		goto out;
	}
	if (!exp || clock_parse_rfc3339(exp, &ns) < 0) {
		err_set(e, "GitHub's installation token answer has no usable expires_at");
		goto out;
	}
	str_copy(token, CP_GH_TOKEN_MAX, tok);
	*expires_s = ns / 1000000000;
	rc = 0;
out:
	json_free(doc);
	return rc;
}

/* ---- the token cache ---- */

static struct cp_gh_token *token_of(struct cp *cp, int64_t installation)
{
	int64_t now = clock_now_ms() / 1000;

	for (struct cp_gh_token **p = &cp->gh_tokens; *p;) {
		struct cp_gh_token *t = *p;

		if (t->expires_s - CP_GH_TOKEN_MARGIN_S <= now) {
			*p = t->next;
			memset(t, 0, sizeof(*t));
			free(t);
			cp->ngh_tokens--;
			continue;
		}
		if (t->installation == installation)
			return t;
		p = &t->next;
	}
	return NULL;
}

static void token_keep(struct cp *cp, int64_t installation, const char *token, int64_t expires_s)
{
	struct cp_gh_token *t;

	if (cp->ngh_tokens >= CP_GH_TOKENS_MAX)
		return;	/* used once and asked for again next time */
	t = xcalloc(1, sizeof(*t));
	t->installation = installation;
	str_copy(t->token, sizeof(t->token), token);
	t->expires_s = expires_s;
	t->next = cp->gh_tokens;
	cp->gh_tokens = t;
	cp->ngh_tokens++;
}

/* ---- calls ---- */

static void call_unlink(struct cp_gh_call *c)
{
	for (struct cp_gh_call **p = &c->cp->gh_calls; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
}

static void call_free(struct cp_gh_call *c)
{
	if (c->call)
		http_acall_cancel(c->call);
	ev_timer_stop(c->cp->ev, &c->later);
	call_unlink(c);
	buf_release(&c->body);
	free(c);
}

void cp_gh_call_cancel(struct cp *cp, struct cp_gh_call *c)
{
	(void)cp;
	if (c)
		call_free(c);
}

/* c is done: freed, then fn hears the outcome. */
static void call_end(struct cp_gh_call *c, const struct http_client_resp *resp, const char *error)
{
	cp_gh_fn fn = c->fn;
	void *arg = c->arg;
	struct cp *cp = c->cp;
	char why[ERR_MSG_MAX];

	str_copy(why, sizeof(why), error ? error : "");
	c->call = NULL;
	call_free(c);
	fn(cp, resp, error ? why : NULL, arg);
}

static void failed_later(struct ev *ev, void *arg)
{
	struct cp_gh_call *c = arg;

	(void)ev;
	call_end(c, NULL, c->error);
}

/* Fail from the loop: fn is never called from inside cp_gh_call. */
static void call_fail(struct cp_gh_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void call_fail(struct cp_gh_call *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->error, sizeof(c->error), fmt, ap);
	va_end(ap);
	ev_timer_start(c->cp->ev, &c->later, 0, failed_later, c);
}

static void answered(const struct http_client_resp *resp, const struct err *e, void *arg);

/* One request of c: url with auth (NULL: none) and, for the API step, the body. */
static int call_send(struct cp_gh_call *c, const char *method, const char *url, const char *auth,
		     const struct buf *body)
{
	const char *headers[] = { GH_ACCEPT, GH_API_VERSION, GH_USER_AGENT, "Content-Type: application/json",
				  auth, NULL };
	struct http_client_req r = { 0 };
	struct err e;

	r.method = method;
	r.url = url;
	r.headers = headers;
	r.body = body ? body->data : NULL;
	r.body_len = body ? body->len : 0;
	r.timeout_ms = c->timeout_ms;
	c->call = http_aclient_do(cp_aclient(c->cp), &r, c->step == CALL_TOKEN ? CP_GITHUB_BODY_MAX : c->max_body,
				  answered, c, &e);
	if (!c->call) {
		call_fail(c, "GitHub could not be reached: %.400s", e.msg);
		return -1;
	}
	return 0;
}

static void send_api(struct cp_gh_call *c, const char *token)
{
	char auth[CP_GH_TOKEN_MAX + 32];

	c->step = CALL_API;
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	call_send(c, c->method, c->url, auth, c->body.len ? &c->body : NULL);
	memset(auth, 0, sizeof(auth));
}

static void send_token_request(struct cp_gh_call *c)
{
	char url[HTTP_MAX_URL], jwt[CP_GH_JWT_MAX], auth[AUTH_MAX];
	struct err e;

	c->step = CALL_TOKEN;
	if (cp_gh_jwt(c->cp->gh_key, c->cp->cfg.gh_app_id, clock_now_ms() / 1000, jwt, sizeof(jwt), &e) < 0) {
		call_fail(c, "%s", e.msg);
		return;
	}
	snprintf(url, sizeof(url), "%s/app/installations/%" PRId64 "/access_tokens", c->cp->cfg.gh_api_url,
		 c->installation);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", jwt);
	call_send(c, "POST", url, auth, NULL);
	memset(auth, 0, sizeof(auth));
	memset(jwt, 0, sizeof(jwt));
}

static bool is_redirect(int status)
{
	return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/* Follow resp's Location (absolute, or a path on the same origin). */
static void hop(struct cp_gh_call *c, const struct http_client_resp *resp)
{
	const char *loc = http_client_resp_header(resp, "location");
	char next[HTTP_MAX_URL];

	if (!loc || !*loc || strlen(loc) >= sizeof(next) - strlen(c->url)) {
		call_end(c, resp, NULL);
		return;
	}
	if (++c->hops > CP_GH_REDIRECTS_MAX) {
		call_end(c, NULL, "GitHub redirected too many times");
		return;
	}
	if (loc[0] == '/') {
		const char *p = strstr(c->url, "://");
		size_t origin = p ? (size_t)(strchr(p + 3, '/') ? strchr(p + 3, '/') - c->url : (long)strlen(c->url)) : 0;

		snprintf(next, sizeof(next), "%.*s%s", (int)origin, c->url, loc);
	} else if (str_has_prefix(loc, "http://") || str_has_prefix(loc, "https://")) {
		str_copy(next, sizeof(next), loc);
	} else {
		call_end(c, NULL, "GitHub redirected to a URL that is not http(s)");
		return;
	}
	str_copy(c->url, sizeof(c->url), next);
	c->step = CALL_HOP;
	/* The token stays with GitHub's API: the next host gets its own in the URL. */
	call_send(c, "GET", c->url, NULL, NULL);
}

static void answered(const struct http_client_resp *resp, const struct err *e, void *arg)
{
	struct cp_gh_call *c = arg;
	char token[CP_GH_TOKEN_MAX], msg[ERR_MSG_MAX];
	int64_t expires = 0;
	struct err te;

	c->call = NULL;
	if (!resp) {
		snprintf(msg, sizeof(msg), "GitHub could not be reached: %.400s", e ? e->msg : "request failed");
		call_end(c, NULL, msg);
		return;
	}
	if (c->step == CALL_TOKEN) {
		if (cp_gh_install_token_answer(resp->status, resp->body.data, resp->body.len, token, &expires,
					       &te) < 0) {
			log_info("cp", "github installation %" PRId64 ": %s", c->installation, te.msg);
			call_end(c, NULL, te.msg);
			return;
		}
		token_keep(c->cp, c->installation, token, expires);
		send_api(c, token);
		memset(token, 0, sizeof(token));
		return;
	}
	if (is_redirect(resp->status) && !str_eq(c->method, "POST") && !str_eq(c->method, "PATCH")) {
		hop(c, resp);
		return;
	}
	call_end(c, resp, NULL);
}

struct cp_gh_call *cp_gh_call(struct cp *cp, int64_t installation, const char *method, const char *path,
			      const struct json *body, size_t max_body, int timeout_ms, cp_gh_fn fn, void *arg)
{
	struct cp_gh_call *c = xcalloc(1, sizeof(*c));
	const struct cp_gh_token *t;

	c->cp = cp;
	c->installation = installation;
	str_copy(c->method, sizeof(c->method), method ? method : "GET");
	snprintf(c->url, sizeof(c->url), "%s%s", cp->cfg.gh_api_url, path);
	buf_init(&c->body, CP_GITHUB_BODY_MAX);	/* calloc's zero would cap it at nothing */
	if (body)
		json_write(&c->body, body, 0);
	c->max_body = max_body ? max_body : CP_GITHUB_BODY_MAX;
	c->timeout_ms = timeout_ms > 0 ? timeout_ms : CP_GITHUB_TIMEOUT_MS;
	c->fn = fn;
	c->arg = arg;
	c->next = cp->gh_calls;
	cp->gh_calls = c;
	if (!cp->gh_key)
		call_fail(c, "the GitHub App is not configured on this server");
	else if ((t = token_of(cp, installation)))
		send_api(c, t->token);
	else
		send_token_request(c);
	return c;
}

void cp_gh_app_free(struct cp *cp)
{
	cp_gh_flows_free(cp);
	while (cp->gh_calls)
		call_free(cp->gh_calls);
	while (cp->gh_tokens) {
		struct cp_gh_token *t = cp->gh_tokens;

		cp->gh_tokens = t->next;
		memset(t, 0, sizeof(*t));
		free(t);
	}
	cp->ngh_tokens = 0;
	EVP_PKEY_free(cp->gh_key);
	cp->gh_key = NULL;
}
