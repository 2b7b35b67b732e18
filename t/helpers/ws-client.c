/*
 * ws-client: the project's WebSocket client for the integration tests.
 *
 *   ws-client [-H "Name: value"]... [-max BYTES] [-ping-interval MS] URL
 *
 * Dials URL (ws:// or wss://; $DENV_CA_FILE trusts a test CA), prints
 * "open", then runs commands read from stdin, one per line:
 *   text STRING | binary N (N bytes of i % 251) | ping STRING | close CODE [REASON]
 * and prints one line per event:
 *   "text LEN STRING" (STRING only when LEN <= 200), "binary LEN FNV1A32HEX",
 *   "close CODE REASON" (then exits 0), "error MESSAGE".
 * A failed dial prints "dial-error STATUS MESSAGE" and exits 1.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/ev.h"
#include "base/str.h"
#include "ws/ws.h"

struct client {
	struct ev *ev;
	struct ws_conn *c;
	struct buf line;
	int status;
};

static uint32_t fnv1a(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 16777619u;
	}
	return h;
}

static void on_message(struct ws_conn *c, bool is_binary, const void *data, size_t len, void *arg)
{
	if (is_binary)
		printf("binary %zu %08x\n", len, fnv1a(data, len));
	else if (len <= 200)
		printf("text %zu %.*s\n", len, (int)len, (const char *)data);
	else
		printf("text %zu\n", len);
	fflush(stdout);
}

static void on_close(struct ws_conn *c, int code, const char *reason, void *arg)
{
	struct client *cl = arg;

	printf("close %d %s\n", code, reason);
	fflush(stdout);
	ev_stop(cl->ev);
}

static void command(struct client *cl, char *l)
{
	struct err e;
	int rc = 0;

	if (str_has_prefix(l, "text ")) {
		rc = ws_send_text(cl->c, l + 5, strlen(l + 5), &e);
	} else if (str_has_prefix(l, "ping ")) {
		rc = ws_ping(cl->c, l + 5, strlen(l + 5), &e);
	} else if (str_has_prefix(l, "binary ")) {
		int64_t n;
		if (str_to_i64(l + 7, &n) < 0 || n < 0 || n > (1 << 28)) {
			rc = err_set(&e, "bad size");
		} else {
			uint8_t *p = xmalloc((size_t)n + 1);
			for (int64_t i = 0; i < n; i++)
				p[i] = (uint8_t)(i % 251);
			rc = ws_send_binary(cl->c, p, (size_t)n, &e);
			free(p);
		}
	} else if (str_has_prefix(l, "close ")) {
		char *sp = strchr(l + 6, ' ');
		int code;
		if (sp)
			*sp++ = '\0';
		if (str_to_int(l + 6, &code) < 0 || ws_close(cl->c, code, sp) < 0)
			rc = err_set(&e, "close refused");
	} else if (*l) {
		rc = err_set(&e, "unknown command \"%s\"", l);
	}
	if (rc < 0) {
		printf("error %s\n", e.msg);
		fflush(stdout);
	}
}

static void on_stdin(struct ev *ev, int fd, int revents, void *arg)
{
	struct client *cl = arg;
	char tmp[4096];
	ssize_t n = read(fd, tmp, sizeof(tmp));
	char *nl;

	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		ev_fd_del(ev, fd);	/* EOF: keep running until the close */
		return;
	}
	buf_add(&cl->line, tmp, (size_t)n);
	while ((nl = memchr(cl->line.data, '\n', cl->line.len))) {
		*nl = '\0';
		command(cl, cl->line.data);
		buf_consume(&cl->line, (size_t)(nl - cl->line.data) + 1);
	}
}

int main(int argc, char **argv)
{
	struct client cl;
	struct ws_opts o;
	struct buf hdrs = BUF_INIT;
	const char *url = NULL;
	struct err e;
	int64_t v;

	memset(&cl, 0, sizeof(cl));
	memset(&o, 0, sizeof(o));
	buf_init(&cl.line, 1 << 20);
	for (int i = 1; i < argc; i++) {
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(argv[i], "-H") == 0 && val) {
			buf_addf(&hdrs, "%s\r\n", val);
			i++;
		} else if (strcmp(argv[i], "-max") == 0 && val && str_to_i64(val, &v) == 0) {
			o.max_message = (size_t)v;
			i++;
		} else if (strcmp(argv[i], "-ping-interval") == 0 && val && str_to_i64(val, &v) == 0) {
			o.ping_interval_ms = v;
			i++;
		} else if (argv[i][0] != '-' && !url) {
			url = argv[i];
		} else {
			fprintf(stderr, "usage: ws-client [-H header]... [-max BYTES] [-ping-interval MS] URL\n");
			return 2;
		}
	}
	if (!url) {
		fprintf(stderr, "usage: ws-client [-H header]... [-max BYTES] [-ping-interval MS] URL\n");
		return 2;
	}
	o.on_message = on_message;
	o.on_close = on_close;
	o.arg = &cl;
	cl.ev = ev_new();
	if (ws_dial(cl.ev, url, hdrs.len ? hdrs.data : NULL, &o, &cl.c, &e) < 0) {
		printf("dial-error %d %s\n", e.code, e.msg);
		buf_release(&hdrs);
		buf_release(&cl.line);
		ev_free(cl.ev);
		return 1;
	}
	printf("open\n");
	fflush(stdout);
	ev_fd_add(cl.ev, 0, EV_READ, on_stdin, &cl);
	ev_run(cl.ev);
	ws_conn_free(cl.c);
	buf_release(&hdrs);
	buf_release(&cl.line);
	ev_free(cl.ev);
	return 0;
}
