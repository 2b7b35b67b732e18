/*
 * ws-echo: a WebSocket echo server for the integration tests: the project's
 * HTTP server with one route, GET /ws, upgraded with ws_accept.
 *
 *   ws-echo [-max BYTES] [-ping-interval MS] [-close-timeout MS] [-listen ADDR]
 *
 * Prints "port N" once listening, then one line per event:
 *   "close CODE REASON" when a connection ends, "refused MESSAGE" for a
 * refused upgrade. Echoes every message with its type. A text message
 * "close:CODE:REASON" makes the server start the close instead, and
 * "ping:DATA" makes it send a ping. Runs until SIGTERM or SIGINT.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/ev.h"
#include "base/str.h"
#include "http/http.h"
#include "ws/ws.h"

#define MAX_CONNS 64

struct echo {
	struct ev *ev;
	struct ws_opts opts;
	struct ws_conn *conns[MAX_CONNS];
};

static void on_message(struct ws_conn *c, bool is_binary, const void *data, size_t len, void *arg)
{
	struct err e;
	char tmp[200];

	if (!is_binary && len < sizeof(tmp) && len > 6 && memcmp(data, "close:", 6) == 0) {
		int code = 0;
		char *colon;
		memcpy(tmp, data, len);
		tmp[len] = '\0';
		colon = strchr(tmp + 6, ':');
		if (colon)
			*colon = '\0';
		if (str_to_int(tmp + 6, &code) == 0)
			ws_close(c, code, colon ? colon + 1 : "");
		return;
	}
	if (!is_binary && len >= 5 && memcmp(data, "ping:", 5) == 0) {
		if (ws_ping(c, (const char *)data + 5, len - 5, &e) < 0)
			printf("error %s\n", e.msg);
		fflush(stdout);
		return;
	}
	if ((is_binary ? ws_send_binary(c, data, len, &e) : ws_send_text(c, data, len, &e)) < 0) {
		printf("error %s\n", e.msg);
		fflush(stdout);
	}
}

static void on_close(struct ws_conn *c, int code, const char *reason, void *arg)
{
	struct echo *s = arg;

	printf("close %d %s\n", code, reason);
	fflush(stdout);
	for (int i = 0; i < MAX_CONNS; i++)
		if (s->conns[i] == c)
			s->conns[i] = NULL;
	ws_conn_free(c);
}

static void on_upgrade(struct http_req *req, void *arg)
{
	struct echo *s = arg;
	struct ws_conn *c;
	struct err e;
	int slot = -1;

	for (int i = 0; i < MAX_CONNS && slot < 0; i++)
		if (!s->conns[i])
			slot = i;
	if (slot < 0) {
		http_respond_error(req, 503, "too many connections");
		return;
	}
	if (ws_accept(s->ev, req, &s->opts, &c, &e) < 0) {
		printf("refused %s\n", e.msg);
		fflush(stdout);
		return;
	}
	s->conns[slot] = c;
}

static void on_signal(struct ev *ev, int signo, void *arg)
{
	ev_stop(ev);
}

static int num(const char *flag, const char *v, int64_t *out)
{
	if (!v || str_to_i64(v, out) < 0 || *out < 0) {
		fprintf(stderr, "ws-echo: %s needs a number\n", flag);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct echo s;
	struct http_server_opts ho;
	struct http_server *srv;
	struct err e;
	int64_t v;

	memset(&s, 0, sizeof(s));
	memset(&ho, 0, sizeof(ho));
	ho.listen = "127.0.0.1:0";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(a, "-max") == 0 && num(a, val, &v) == 0)
			s.opts.max_message = (size_t)v;
		else if (strcmp(a, "-ping-interval") == 0 && num(a, val, &v) == 0)
			s.opts.ping_interval_ms = v;
		else if (strcmp(a, "-close-timeout") == 0 && num(a, val, &v) == 0)
			s.opts.close_timeout_ms = v;
		else if (strcmp(a, "-listen") == 0 && val)
			ho.listen = val;
		else {
			fprintf(stderr, "usage: ws-echo [-max BYTES] [-ping-interval MS] [-close-timeout MS] [-listen ADDR]\n");
			return 2;
		}
		i++;
	}
	s.opts.on_message = on_message;
	s.opts.on_close = on_close;
	s.opts.arg = &s;
	s.ev = ev_new();
	srv = http_server_new(s.ev, &ho, &e);
	if (!srv) {
		fprintf(stderr, "ws-echo: %s\n", e.msg);
		return 1;
	}
	http_route(srv, "GET", "/ws", 0, on_upgrade, &s);
	ev_signal_add(s.ev, SIGTERM, on_signal, NULL);
	ev_signal_add(s.ev, SIGINT, on_signal, NULL);
	printf("port %d\n", http_server_port(srv));
	fflush(stdout);
	ev_run(s.ev);
	for (int i = 0; i < MAX_CONNS; i++)
		ws_conn_free(s.conns[i]);
	http_server_free(srv);
	ev_free(s.ev);
	return 0;
}
