/*
 * http-testserver: the server the integration tests and the benchmark drive.
 *
 *   http-testserver [-listen ADDR] [-tls-cert F -tls-key F] [-header-timeout MS]
 *                   [-idle-timeout MS] [-first-byte-timeout MS] [-max-conns N]
 *                   [-max-conns-per-addr N (-1: none)] [-reserve-conns N (-1: none)] [-v]
 *
 * Prints "port N" on stdout once listening; SIGTERM/SIGINT shut it down
 * gracefully (in-flight requests finish, 3 s grace), then it prints "bye".
 * Routes:
 *   GET  /hello             small JSON (the benchmark's request)
 *   POST /echo              body echoed with the request's Content-Type (1 MiB max)
 *   POST /small             16-byte body limit (413 tests)
 *   GET  /park?ms=N         parked, answered by a timer after N ms
 *   GET  /stream?n=N&ms=M   N chunks "chunk i\n", one every M ms, streamed
 *   POST /envs/{env}/fork   {"env": param, "q": query "q"}
 *   GET  /files/{path...}   {"path": param}
 *   GET  /headers           {"x-test": header X-Test}
 *   GET  /reserved          small JSON, a reserved route (reachable from the reserve)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ev.h"
#include "base/log.h"
#include "base/str.h"
#include "http/http.h"
#include "json/json.h"

#define MAX_PARKED 4096

struct parked {
	struct ev_timer t;
	struct http_req *req;
	int left;		/* stream chunks left; -1: park */
	int n, ms;
	struct parked **slot;
};

static struct ev *loop;
static struct parked *parked[MAX_PARKED];

static void parked_free(struct parked *p)
{
	ev_timer_stop(loop, &p->t);
	*p->slot = NULL;
	free(p);
}

static struct parked *parked_new(struct http_req *req)
{
	for (size_t i = 0; i < MAX_PARKED; i++) {
		if (!parked[i]) {
			struct parked *p = calloc(1, sizeof(*p));
			p->req = req;
			p->slot = &parked[i];
			parked[i] = p;
			return p;
		}
	}
	return NULL;
}

static void h_hello(struct http_req *req, void *arg)
{
	static const char body[] = "{\"hello\":\"world\",\"n\":42}\n";

	http_respond(req, 200, "application/json", body, sizeof(body) - 1);
}

static void h_echo(struct http_req *req, void *arg)
{
	size_t len;
	const char *body = http_req_body(req, &len);
	const char *ct = http_req_header(req, "Content-Type");

	http_resp_header(req, "X-Body-Length", "yes");
	http_respond(req, 200, ct ? ct : "application/octet-stream", body, len);
}

static void park_fire(struct ev *ev, void *arg)
{
	struct parked *p = arg;
	struct json *o = json_new_object();

	json_object_set_bool(o, "parked", true);
	json_object_set_bool(o, "gone", http_req_gone(p->req));
	json_object_set_int(o, "ms", p->ms);
	http_respond_json(p->req, 200, o);
	json_free(o);
	parked_free(p);
}

static int query_int(struct http_req *req, const char *name, int dflt)
{
	const char *v = http_req_query(req, name);
	int n;

	if (!v || str_to_int(v, &n) < 0)
		return dflt;
	return n;
}

static void h_park(struct http_req *req, void *arg)
{
	struct parked *p = parked_new(req);

	if (!p) {
		http_respond_error(req, 503, "too many parked requests");
		return;
	}
	p->ms = query_int(req, "ms", 100);
	ev_timer_start(loop, &p->t, p->ms, park_fire, p);
}

static void stream_tick(struct ev *ev, void *arg)
{
	struct parked *p = arg;
	char line[64];

	if (p->left == 0 || http_req_gone(p->req)) {
		http_stream_end(p->req);
		parked_free(p);
		return;
	}
	snprintf(line, sizeof(line), "chunk %d\n", p->n - p->left);
	http_stream_write(p->req, line, strlen(line));
	p->left--;
	ev_timer_start(loop, &p->t, p->ms, stream_tick, p);
}

static void h_stream(struct http_req *req, void *arg)
{
	struct parked *p = parked_new(req);

	if (!p) {
		http_respond_error(req, 503, "too many parked requests");
		return;
	}
	p->n = p->left = query_int(req, "n", 3);
	p->ms = query_int(req, "ms", 50);
	http_stream_begin(req, 200, "text/plain");
	ev_timer_start(loop, &p->t, 0, stream_tick, p);
}

static void h_fork(struct http_req *req, void *arg)
{
	struct json *o = json_new_object();

	json_object_set_str(o, "env", http_req_param(req, "env"));
	json_object_set_str(o, "q", http_req_query(req, "q"));
	http_respond_json(req, 202, o);
	json_free(o);
}

static void h_files(struct http_req *req, void *arg)
{
	struct json *o = json_new_object();

	json_object_set_str(o, "path", http_req_param(req, "path"));
	http_respond_json(req, 200, o);
	json_free(o);
}

static void h_headers(struct http_req *req, void *arg)
{
	struct json *o = json_new_object();

	json_object_set_str(o, "x-test", http_req_header(req, "x-test"));
	http_respond_json(req, 200, o);
	json_free(o);
}

static void on_done(struct http_server *srv, void *arg)
{
	ev_stop(loop);
}

static void on_signal(struct ev *ev, int signo, void *arg)
{
	http_server_shutdown(arg, 3000, on_done, NULL);
}

int main(int argc, char **argv)
{
	struct http_server_opts o = { .listen = "127.0.0.1:0" };
	struct http_server *srv;
	struct err e;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "-v") == 0) {
			log_set_level(LOG_DEBUG);
			continue;
		}
		if (!v) {
			fprintf(stderr, "usage: http-testserver [-listen ADDR] [-tls-cert F -tls-key F] ...\n");
			return 2;
		}
		i++;
		if (strcmp(a, "-listen") == 0)
			o.listen = v;
		else if (strcmp(a, "-tls-cert") == 0)
			o.tls_cert = v;
		else if (strcmp(a, "-tls-key") == 0)
			o.tls_key = v;
		else if (strcmp(a, "-header-timeout") == 0)
			str_to_int(v, &o.header_timeout_ms);
		else if (strcmp(a, "-idle-timeout") == 0)
			str_to_int(v, &o.idle_timeout_ms);
		else if (strcmp(a, "-first-byte-timeout") == 0)
			str_to_int(v, &o.first_byte_timeout_ms);
		else if (strcmp(a, "-max-conns") == 0)
			str_to_int(v, &o.max_conns);
		else if (strcmp(a, "-max-conns-per-addr") == 0)
			str_to_int(v, &o.max_conns_per_addr);
		else if (strcmp(a, "-reserve-conns") == 0)
			str_to_int(v, &o.reserve_conns);
		else {
			fprintf(stderr, "http-testserver: unknown flag %s\n", a);
			return 2;
		}
	}
	loop = ev_new();
	srv = http_server_new(loop, &o, &e);
	if (!srv) {
		fprintf(stderr, "http-testserver: %s\n", e.msg);
		return 1;
	}
	http_route(srv, "GET", "/hello", 0, h_hello, NULL);
	http_route(srv, "POST", "/echo", 0, h_echo, NULL);
	http_route(srv, "PUT", "/echo", 0, h_echo, NULL);
	http_route(srv, "POST", "/small", 16, h_echo, NULL);
	http_route(srv, "GET", "/park", 0, h_park, NULL);
	http_route(srv, "GET", "/stream", 0, h_stream, NULL);
	http_route(srv, "POST", "/envs/{env}/fork", 0, h_fork, NULL);
	http_route(srv, "GET", "/files/{path...}", 0, h_files, NULL);
	http_route(srv, "GET", "/headers", 0, h_headers, NULL);
	http_route_flags(srv, "GET", "/reserved", 0, HTTP_ROUTE_RESERVED, h_hello, NULL);
	ev_signal_add(loop, SIGTERM, on_signal, srv);
	ev_signal_add(loop, SIGINT, on_signal, srv);
	printf("port %d\n", http_server_port(srv));
	fflush(stdout);
	ev_run(loop);
	/* Anything still parked after the grace period: answer (frees it). */
	for (size_t i = 0; i < MAX_PARKED; i++) {
		if (parked[i]) {
			struct parked *p = parked[i];
			if (p->left >= 0 && p->n)
				http_stream_end(p->req);
			else
				http_respond_error(p->req, 503, "shutting down");
			parked_free(p);
		}
	}
	http_server_free(srv);
	ev_free(loop);
	printf("bye\n");
	return 0;
}
