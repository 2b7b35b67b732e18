/* cors.c: the route trampoline and CORS for the console (config.md):
 * only when DENV_CONSOLE_URL is set, only under /v1/ and /auth/, and only
 * for the console's origin or a loopback origin on any port. */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

struct cp_route {
	struct cp *cp;
	cp_handler_fn fn;
	struct cp_route *next;
};

bool cp_cors_path(const char *path)
{
	return str_has_prefix(path, "/v1/") || str_has_prefix(path, "/auth/");
}

/* "http://localhost:<port>" or "http://127.0.0.1:<port>", port all digits. */
static bool loopback_origin(const char *o)
{
	const char *p = NULL;

	if (str_has_prefix(o, "http://localhost:"))
		p = o + strlen("http://localhost:");
	else if (str_has_prefix(o, "http://127.0.0.1:"))
		p = o + strlen("http://127.0.0.1:");
	if (!p || !*p || strlen(p) > 5)
		return false;
	for (; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

void cp_cors_headers(struct cp *cp, struct http_req *req)
{
	const char *origin = http_req_header(req, "Origin");

	if (!cp->cfg.console_url || !cp_cors_path(http_req_path(req)) || !origin)
		return;
	if (!str_eq(origin, cp->cfg.console_url) && !loopback_origin(origin))
		return;
	http_resp_header(req, "Access-Control-Allow-Origin", origin);
	http_resp_header(req, "Access-Control-Allow-Headers", "Authorization, Content-Type, X-Denv-Team");
	http_resp_header(req, "Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS");
	http_resp_header(req, "Access-Control-Max-Age", "600");
	http_resp_header(req, "Vary", "Origin");
}

static void trampoline(struct http_req *req, void *arg)
{
	struct cp_route *r = arg;

	cp_cors_headers(r->cp, req);
	if (cp_idem_begin(r->cp, req) != 0)
		return;	/* replayed or refused */
	r->fn(r->cp, req);
}

int cp_route(struct cp *cp, const char *method, const char *pattern, size_t max_body, cp_handler_fn fn)
{
	return cp_route_flags(cp, method, pattern, max_body, 0, fn);
}

int cp_route_flags(struct cp *cp, const char *method, const char *pattern, size_t max_body, unsigned flags,
		   cp_handler_fn fn)
{
	struct cp_route *r = xcalloc(1, sizeof(*r));

	r->cp = cp;
	r->fn = fn;
	r->next = cp->routes;
	cp->routes = r;
	if (http_route_flags(cp->srv, method, pattern, max_body, flags, trampoline, r) < 0) {
		log_error("cp", "bad route %s %s", method, pattern);
		return -1;
	}
	return 0;
}

void cp_routes_free(struct cp *cp)
{
	while (cp->routes) {
		struct cp_route *r = cp->routes;

		cp->routes = r->next;
		free(r);
	}
}

static void preflight(struct cp *cp, struct http_req *req)
{
	http_respond(req, 204, NULL, NULL, 0);
}

static void unknown(struct cp *cp, struct http_req *req)
{
	http_respond_error(req, 404, "not found");
}

/*
 * Registered after every other route, and only when CORS is on. A preflight
 * route on /v1/{rest...} would turn every unknown path under it into a 405
 * (the path matches, the method does not), so catch-alls for the other
 * methods keep unknown paths a JSON 404 with CORS headers. Without CORS the
 * router's own 404 and 405 answers stand.
 */
int cp_cors_routes(struct cp *cp)
{
	static const char *const methods[] = { "OPTIONS", "GET", "POST", "PUT", "DELETE", NULL };
	static const char *const prefixes[] = { "/v1/{rest...}", "/auth/{rest...}", NULL };

	if (!cp->cfg.console_url)
		return 0;
	for (const char *const *p = prefixes; *p; p++)
		for (const char *const *m = methods; *m; m++)
			if (cp_route(cp, *m, *p, 0, str_eq(*m, "OPTIONS") ? preflight : unknown) < 0)
				return -1;
	return 0;
}
