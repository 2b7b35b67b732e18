/*
 * router.c: the server's routes: patterns of literal segments and {params}
 * ({name...} takes the rest of the path), matched in the order registered.
 * A path that matches only under other methods is a 405 with Allow.
 */
#include "http/server_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"

static bool seg_is_param(const char *seg)
{
	size_t n = strlen(seg);
	return n >= 3 && seg[0] == '{' && seg[n - 1] == '}';
}

int http_route(struct http_server *srv, const char *method, const char *pattern,
	       size_t max_body, http_handler_fn fn, void *arg)
{
	return http_route_flags(srv, method, pattern, max_body, 0, fn, arg);
}

int http_route_flags(struct http_server *srv, const char *method, const char *pattern,
		     size_t max_body, unsigned flags, http_handler_fn fn, void *arg)
{
	struct route r;
	size_t nparams = 0;

	memset(&r, 0, sizeof(r));
	if (!method || !*method || !pattern || pattern[0] != '/' || !fn) {
		log_error("http", "route %s %s: invalid", method ? method : "?", pattern ? pattern : "?");
		return -1;
	}
	r.segs = str_split(pattern, "/", &r.nsegs);
	if (r.nsegs > HTTP_MAX_PATH_SEGMENTS)
		goto bad;
	for (size_t i = 0; i < r.nsegs; i++) {
		if (!seg_is_param(r.segs[i]))
			continue;
		if (++nparams > HTTP_MAX_PATH_PARAMS)
			goto bad;
		if (str_has_suffix(r.segs[i], "...}")) {
			if (i != r.nsegs - 1 || strlen(r.segs[i]) < 6)
				goto bad;
			r.rest = true;
		}
	}
	r.slash = r.nsegs > 0 && !r.rest && pattern[strlen(pattern) - 1] == '/';
	r.method = xstrdup(method);
	r.max_body = max_body ? max_body : srv->max_body_default;
	r.flags = flags;
	r.fn = fn;
	r.arg = arg;
	srv->routes = xrealloc(srv->routes, (srv->nroutes + 1) * sizeof(*srv->routes));
	srv->routes[srv->nroutes++] = r;
	return 0;
bad:
	log_error("http", "route %s %s: invalid pattern", method, pattern);
	str_list_free(r.segs);
	return -1;
}

/* Match path against r: 1 (params filled into req), 0 (no), -1 (bad escape). */
static int route_match(const struct route *r, const char *path, struct http_req *req)
{
	const char *p = path;
	size_t np = 0;

	for (size_t i = 0; i < r->nsegs; i++) {
		const char *seg = r->segs[i];
		const char *s, *e;
		if (*p != '/')
			return 0;
		s = ++p;
		e = (r->rest && i == r->nsegs - 1) ? s + strlen(s) : strchrnul(s, '/');
		if (!seg_is_param(seg)) {
			size_t n = strlen(seg);
			if ((size_t)(e - s) != n || memcmp(s, seg, n) != 0)
				return 0;
		} else {
			if (e == s)
				return 0;
			if (req) {
				struct buf v = BUF_INIT;
				if (http_pct_decode(s, (size_t)(e - s), false, &v) < 0) {
					buf_release(&v);
					return -1;
				}
				req->pnames[np] = seg + 1;
				req->pname_len[np] = strlen(seg) - 2 - (r->rest && i == r->nsegs - 1 ? 3 : 0);
				req->pvals[np] = buf_detach(&v, NULL);
				req->nparams = ++np;
			}
		}
		p = e;
	}
	/* The root pattern "/" has no segments. */
	if (r->nsegs == 0)
		return strcmp(path, "/") == 0;
	if (r->slash)
		return strcmp(p, "/") == 0;
	return *p == '\0';
}

static void req_clear_params(struct http_req *req)
{
	for (size_t i = 0; i < req->nparams; i++)
		free(req->pvals[i]);
	req->nparams = 0;
}

/* Find the route for req. 0 found; else fills status/msg for the refusal. */
int hs_route_find(struct http_server *srv, struct http_req *req, int *status, char *msg, size_t msgn,
		  struct buf *allow)
{
	bool path_found = false;
	const char *m = req->method;

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < srv->nroutes; i++) {
			const struct route *r = &srv->routes[i];
			int mr;
			bool same = strcmp(r->method, m) == 0;
			if (pass == 1 && !same)
				continue;
			mr = route_match(r, req->path, same ? req : NULL);
			if (mr < 0) {
				req_clear_params(req);
				*status = 400;
				snprintf(msg, msgn, "bad percent-encoding in path");
				return -1;
			}
			if (!mr) {
				req_clear_params(req);
				continue;
			}
			if (same) {
				req->route = r;
				return 0;
			}
			path_found = true;
			if (pass == 0 && !http_token_has(allow->data, allow->len, r->method)) {
				if (allow->len)
					buf_adds(allow, ", ");
				buf_adds(allow, r->method);
			}
		}
		/* HEAD falls back to GET routes. */
		if (pass == 0 && strcmp(req->method, "HEAD") == 0)
			m = "GET";
		else
			break;
	}
	if (path_found) {
		*status = 405;
		snprintf(msg, msgn, "method %s not allowed", req->method);
	} else {
		*status = 404;
		snprintf(msg, msgn, "not found");
	}
	return -1;
}

void hs_routes_free(struct http_server *srv)
{
	for (size_t i = 0; i < srv->nroutes; i++) {
		free(srv->routes[i].method);
		str_list_free(srv->routes[i].segs);
	}
	free(srv->routes);
	srv->routes = NULL;
	srv->nroutes = 0;
}
