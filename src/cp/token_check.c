/*
 * token_check.c: a cloud's token is tried against its provider before the
 * cloud is stored (POST /v1/clouds, POST /v1/targets/connect), so that a
 * wrong token is refused at connect and not at the first deploy. Each
 * provider gets its cheapest authenticated read, with the header and path
 * its own SDK uses:
 *
 *   hetzner  GET {api}/servers?per_page=1   Authorization: Bearer <token>
 *   e2b      GET {api}/v2/sandboxes?limit=1 X-API-KEY: <token>
 *   daytona  GET {api}/sandbox?limit=1      Authorization: Bearer <token>
 *   prime    GET {api}/sandbox?page=1&per_page=1  Authorization: Bearer <token>
 *   aws      POST {ec2}/ Action=DescribeRegions, signed with SigV4 (cloud_aws.c)
 *
 * A 2xx is accepted; a 401 or 403 is the provider refusing the token (the
 * caller answers 400 with the provider's own words); anything else, and a
 * provider that cannot be reached, is a 502. The token travels only in the
 * request header and is wiped from our copy once the request is queued.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "cp/cloud.h"

#define CHECK_AUTH_MAX 600	/* the auth header and the token */
#define CHECK_MESSAGE_MAX 200	/* of the provider's error message, in ours */

struct cp_check {
	struct cp *cp;
	char provider[16];
	char what[160];		/* "GET <url>" without the token, for errors */
	struct http_acall *call;
	cp_check_fn fn;
	void *arg;
	void (*arg_free)(void *arg);
	struct cp_check *next;
};

static const struct probe {
	const char *provider;
	const char *path;
	const char *auth;	/* header name and prefix, the token follows */
} probes[] = {
	{ "hetzner", "/servers?per_page=1", "Authorization: Bearer " },
	{ "e2b", "/v2/sandboxes?limit=1", "X-API-KEY: " },
	{ "daytona", "/sandbox?limit=1", "Authorization: Bearer " },
	{ "prime", "/sandbox?page=1&per_page=1", "Authorization: Bearer " },
};

static const struct probe *probe_of(const char *provider)
{
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
		if (str_eq(probes[i].provider, provider))
			return &probes[i];
	return NULL;
}

bool cp_token_checkable(const char *provider)
{
	return probe_of(provider) != NULL || str_eq(provider, "aws");
}

static const char *api_base(const struct cp *cp, const char *provider)
{
	if (str_eq(provider, "e2b"))
		return cp->cfg.e2b_api_url;
	if (str_eq(provider, "daytona"))
		return cp->cfg.daytona_api_url;
	if (str_eq(provider, "prime"))
		return cp->cfg.prime_api_url;
	return cp->cfg.hetzner_api_url;
}

static void unlink_check(struct cp_check *c)
{
	for (struct cp_check **p = &c->cp->checks; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			return;
		}
}

/* The provider's own words from its error body: Hetzner's {error: {message}},
 * E2B's {code, message}, Daytona's {statusCode, message, error}, Prime's
 * (FastAPI's) {detail}. */
static const char *provider_message(const struct json *doc)
{
	const struct json *err = json_get(doc, "error");
	const char *m = json_get_str(err, "message");

	if (m && *m)
		return m;
	m = json_get_str(doc, "message");
	if (m && *m)
		return m;
	m = json_get_str(doc, "detail");
	if (m && *m)
		return m;
	m = err && err->type == JSON_STRING ? err->u.str.s : NULL;
	return m && *m ? m : NULL;
}

int cp_token_verdict(const char *provider, const char *what, int status, const char *body, size_t len, char *out,
		     size_t n)
{
	struct json *doc = NULL;
	struct err pe;
	const char *msg;
	char clean[CHECK_MESSAGE_MAX + 1];
	bool refused = status == 401 || status == 403;

	if (len && json_parse(body, len, NULL, &doc, &pe) < 0)
		doc = NULL;
	msg = provider_message(doc);
	/* EC2 answers XML: <Response><Errors><Error><Code/><Message/>. */
	if (!msg && str_eq(provider, "aws") && cp_ec2_error(body, len, clean, sizeof(clean)) == 0)
		msg = clean;
	if (msg && msg != clean) {
		/* Their words go into a log line and a one-line error: no control characters. */
		str_copy(clean, sizeof(clean), msg);
		for (char *q = clean; *q; q++)
			if ((unsigned char)*q < 0x20 || *q == 0x7f)
				*q = ' ';
		msg = clean;
	}
	if (refused)
		snprintf(out, n, "%s: token refused (%d %s%s%.*s)", provider, status, http_status_text(status),
			 msg ? ": " : "", CHECK_MESSAGE_MAX, msg ? msg : "");
	else
		snprintf(out, n, "%s: cannot check the token: %s answered %d %s%s%.*s", provider, what, status,
			 http_status_text(status), msg ? ": " : "", CHECK_MESSAGE_MAX, msg ? msg : "");
	json_free(doc);
	return refused ? 400 : 502;
}

static void answered(const struct http_client_resp *resp, const struct err *e, void *arg)
{
	struct cp_check *c = arg;
	char why[ERR_MSG_MAX];
	int status = 0;

	c->call = NULL;
	why[0] = '\0';
	if (!resp) {
		snprintf(why, sizeof(why), "%s: cannot reach the API to check the token (%s): %.200s", c->provider,
			 c->what, e ? e->msg : "request failed");
		status = 502;
	} else if (resp->status < 200 || resp->status > 299) {
		status = cp_token_verdict(c->provider, c->what, resp->status, resp->body.data, resp->body.len, why,
					  sizeof(why));
	}
	if (status)
		log_info("cloud", "%s", why);
	else
		log_info("cloud", "%s: token accepted", c->provider);
	unlink_check(c);
	c->fn(c->cp, status, status ? why : NULL, c->arg);
	free(c);
}

/* NULL with e set to the message and code, the status to answer. */
static struct cp_check *no_check(struct err *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static struct cp_check *no_check(struct err *e, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	e->code = code;
	return NULL;
}

static struct cp_check *check_new(struct cp *cp, const char *provider, cp_check_fn fn, void *arg,
				  void (*arg_free)(void *arg))
{
	struct cp_check *c = xcalloc(1, sizeof(*c));

	c->cp = cp;
	str_copy(c->provider, sizeof(c->provider), provider);
	c->fn = fn;
	c->arg = arg;
	c->arg_free = arg_free;
	return c;
}

/* c, listed, once its call is in flight; else NULL with e (a 502 unless the
 * config was refused: our side cannot make the call). */
static struct cp_check *check_started(struct cp_check *c, struct err *e)
{
	if (!c->call) {
		char provider[sizeof(c->provider)];

		str_copy(provider, sizeof(provider), c->provider);
		free(c);
		if (e->code != 400) {
			err_prefix(e, "%s: cannot check the token", provider);
			e->code = 502;
		}
		return NULL;
	}
	c->next = c->cp->checks;
	c->cp->checks = c;
	return c;
}

/* AWS: DescribeRegions, the cheapest signed EC2 call, with the cloud's keys. */
static struct cp_check *aws_check(struct cp *cp, const struct json *config, cp_check_fn fn, void *arg,
				  void (*arg_free)(void *arg), struct err *e)
{
	struct cp_check *c = check_new(cp, "aws", fn, arg, arg_free);

	e->code = 0;
	c->call = cp_ec2_call(cp, config, "Action=DescribeRegions&Version=" CP_EC2_API_VERSION,
			      CP_TOKEN_CHECK_TIMEOUT_MS, answered, c, c->what, sizeof(c->what), e);
	return check_started(c, e);
}

struct cp_check *cp_token_check(struct cp *cp, const char *provider, const struct json *config, cp_check_fn fn,
				void *arg, void (*arg_free)(void *arg), struct err *e)
{
	const struct probe *p = probe_of(provider);
	const char *token = json_get_str(config, "token");
	char url[1024], auth[CHECK_AUTH_MAX];
	const char *headers[] = { auth, "Accept: application/json", "User-Agent: denv-cp", NULL };
	struct http_client_req req = { 0 };
	struct cp_check *c;

	if (str_eq(provider, "aws"))
		return aws_check(cp, config, fn, arg, arg_free, e);
	if (!p)
		return no_check(e, 500, "%.15s: no token check for this provider", provider);
	if (!token || !*token)
		return no_check(e, 400, "%s: config.token is required", p->provider);
	if (strcspn(token, "\r\n") != strlen(token) || strlen(token) + strlen(p->auth) >= sizeof(auth))
		return no_check(e, 400, "%s: the token is not a usable API token", p->provider);
	snprintf(url, sizeof(url), "%s%s", api_base(cp, provider), p->path);
	snprintf(auth, sizeof(auth), "%s%s", p->auth, token);
	req.method = "GET";
	req.url = url;
	req.headers = headers;
	req.timeout_ms = CP_TOKEN_CHECK_TIMEOUT_MS;
	c = check_new(cp, p->provider, fn, arg, arg_free);
	snprintf(c->what, sizeof(c->what), "GET %.150s", url);
	c->call = http_aclient_do(cp_aclient(cp), &req, CP_PROVIDER_BODY_MAX, answered, c, e);
	memset(auth, 0, sizeof(auth));
	return check_started(c, e);
}

void cp_token_checks_free_all(struct cp *cp)
{
	while (cp->checks) {
		struct cp_check *c = cp->checks;

		cp->checks = c->next;
		if (c->call)
			http_acall_cancel(c->call);
		if (c->arg_free)
			c->arg_free(c->arg);
		free(c);
	}
}
