/*
 * http_int.h: internals of the http module that its tests and fuzz targets
 * reach; not for other modules.
 */
#ifndef DENV_HTTP_INT_H
#define DENV_HTTP_INT_H

#include "http/http.h"

/* Run the clients' response reader over data fed in pieces of the sizes
 * steps[0..nsteps) (cycled), as if read from a socket that then reaches EOF.
 * 1 response complete, -1 error (e), 0 incomplete at EOF. */
int http_int_read_response(const char *data, size_t len, const size_t *steps, size_t nsteps,
			   bool head_req, struct http_client_resp *resp, struct err *e);

/* Stand in for getaddrinfo in the resolver's lookup threads (resolve.c), so
 * that tests can make a lookup slow or fail on purpose. fn runs on a lookup
 * thread; its result is freed with freeaddrinfo. NULL restores getaddrinfo.
 * Set it before starting lookups, from the loop's thread. */
struct addrinfo;
typedef int (*http_int_gai_fn)(const char *node, const char *service, const struct addrinfo *hints,
			       struct addrinfo **res);
void http_int_resolve_hook(http_int_gai_fn fn);

/* In a run of "name\0value\0" pairs (len bytes of data, at most max pairs),
 * the value of the first pair whose name cmp finds equal to name (cmp is
 * strcmp or strcasecmp); NULL if none. Headers and decoded queries are kept
 * so. */
const char *http_int_pair_find(const char *data, size_t len, size_t max, const char *name,
			       int (*cmp)(const char *, const char *));

#endif
