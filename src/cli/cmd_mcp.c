/*
 * cmd_mcp.c: denv mcp, the MCP server's transports. stdio: one JSON-RPC
 * message per line on stdin, answers one per line on stdout (logs go to
 * stderr). --http ADDR: streamable HTTP, one message per POST /mcp answered
 * as application/json, sessions named by the Mcp-Session-Id header issued
 * at initialize. Tool calls block the loop: one client's calls run one at
 * a time, which is what an agent driving one sandbox does.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "base/crypto.h"
#include "base/ev.h"
#include "base/str.h"
#include "cli/cli.h"
#include "cli/mcp.h"
#include "http/http.h"
#include "json/json.h"

#define MCP_SESSIONS_MAX 64		/* live HTTP sessions; the oldest is dropped for a new one */
#define MCP_SESSION_ID_MAX 64
#define MCP_SESSION_BYTES 16		/* random bytes in a session id */

/* ---- stdio ---- */

/* Read one line (without its newline) into line; 1, 0 at the end of input,
 * or 2 for a line over MCP_MESSAGE_MAX (its rest is skipped). */
static int read_line(FILE *in, struct buf *line)
{
	int ch;
	bool over = false;

	buf_reset(line);
	while ((ch = getc(in)) != EOF && ch != '\n') {
		if (line->len >= MCP_MESSAGE_MAX)
			over = true;
		else
			buf_addch(line, (char)ch);
	}
	if (ch == EOF && line->len == 0)
		return 0;
	return over ? 2 : 1;
}

static void write_answer(FILE *out, struct mcp *m, const char *msg, size_t len)
{
	struct buf ans = BUF_INIT;

	if (mcp_handle(m, msg, len, &ans) > 0) {
		fwrite(ans.data, 1, ans.len, out);
		fputc('\n', out);
		fflush(out);
	}
	buf_release(&ans);
}

static int serve_stdio(struct mcp *m)
{
	struct buf line;
	int k;

	buf_init(&line, MCP_MESSAGE_MAX + 1);
	while ((k = read_line(stdin, &line)) > 0) {
		if (k == 2) {
			static const char too_long[] = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,"
						       "\"message\":\"message over the size limit\"}}";
			write_answer(stdout, m, too_long, strlen(too_long));
			continue;
		}
		if (line.len && line.data[line.len - 1] == '\r')
			line.len--;
		if (line.len)
			write_answer(stdout, m, line.data, line.len);
	}
	buf_release(&line);
	return 0;
}

/* ---- streamable HTTP ---- */

struct http_mcp {
	struct mcp m;
	struct ev *ev;
	char sessions[MCP_SESSIONS_MAX][MCP_SESSION_ID_MAX];
	size_t next;		/* the slot the next session takes */
};

static bool session_known(const struct http_mcp *h, const char *id)
{
	for (size_t i = 0; id && *id && i < MCP_SESSIONS_MAX; i++)
		if (str_eq(h->sessions[i], id))
			return true;
	return false;
}

static int session_new(struct http_mcp *h, char out[MCP_SESSION_ID_MAX], struct err *e)
{
	if (crypto_token("mcp", MCP_SESSION_BYTES, out, MCP_SESSION_ID_MAX, e) < 0)
		return -1;
	str_copy(h->sessions[h->next], MCP_SESSION_ID_MAX, out);
	h->next = (h->next + 1) % MCP_SESSIONS_MAX;
	return 0;
}

/* A browser page elsewhere must not reach a loopback server that holds our
 * key (DNS rebinding): a request with an Origin must come from loopback. */
static bool origin_ok(const char *origin)
{
	static const char *const loopback[] = { "localhost", "127.0.0.1", "[::1]", NULL };
	const char *host = origin ? strstr(origin, "://") : NULL;
	size_t n;

	if (!origin)
		return true;	/* not a browser */
	if (!host)
		return false;
	host += 3;
	n = host[0] == '[' ? strcspn(host, "]") + 1 : strcspn(host, ":/");
	for (int i = 0; loopback[i]; i++)
		if (strlen(loopback[i]) == n && !strncmp(host, loopback[i], n))
			return true;
	return false;
}

static void on_post(struct http_req *req, void *arg)
{
	struct http_mcp *h = arg;
	size_t len;
	const char *body = http_req_body(req, &len);
	const char *sid = http_req_header(req, "Mcp-Session-Id");
	char fresh[MCP_SESSION_ID_MAX];
	struct buf ans = BUF_INIT;
	struct err e;
	int k;

	if (!origin_ok(http_req_header(req, "Origin"))) {
		http_respond_error(req, 403, "requests from a web page must come from a loopback origin");
		return;
	}
	if (mcp_is_initialize(body, len)) {
		if (session_new(h, fresh, &e) < 0) {
			http_respond_error(req, 500, e.msg);
			return;
		}
		http_resp_header(req, "Mcp-Session-Id", fresh);
	} else if (!sid) {
		http_respond_error(req, 400, "Mcp-Session-Id is required after initialize");
		return;
	} else if (!session_known(h, sid)) {
		http_respond_error(req, 404, "unknown or ended session: initialize again");
		return;
	}
	k = mcp_handle(&h->m, body, len, &ans);
	if (k > 0)
		http_respond(req, 200, "application/json", ans.data, ans.len);
	else if (k == 0)
		http_respond(req, 202, NULL, "", 0);
	else
		http_respond_error(req, 500, "answer over the size limit");
	buf_release(&ans);
}

static void on_get(struct http_req *req, void *arg)
{
	(void)arg;
	/* No server-initiated messages: no SSE stream to offer. */
	http_resp_header(req, "Allow", "POST, DELETE");
	http_respond_error(req, 405, "this server sends no messages of its own: POST /mcp");
}

static void on_delete(struct http_req *req, void *arg)
{
	struct http_mcp *h = arg;
	const char *sid = http_req_header(req, "Mcp-Session-Id");

	for (size_t i = 0; sid && i < MCP_SESSIONS_MAX; i++)
		if (str_eq(h->sessions[i], sid)) {
			h->sessions[i][0] = '\0';
			http_respond(req, 200, NULL, "", 0);
			return;
		}
	http_respond_error(req, 404, "unknown session");
}

static void on_signal(struct ev *ev, int signo, void *arg)
{
	(void)signo;
	(void)arg;
	ev_stop(ev);
}

static int serve_http(struct mcp *m, const char *addr, struct err *e)
{
	struct http_server_opts o = { .listen = addr, .max_body_default = MCP_MESSAGE_MAX };
	static struct http_mcp h;	/* the sessions table is big for a stack */
	struct http_server *srv;
	int rc = -1;

	memset(&h, 0, sizeof(h));
	h.m = *m;
	h.ev = ev_new();
	if (!h.ev)
		return err_set(e, "mcp: no event loop");
	srv = http_server_new(h.ev, &o, e);
	if (srv && http_route(srv, "POST", "/mcp", MCP_MESSAGE_MAX, on_post, &h) == 0 &&
	    http_route(srv, "GET", "/mcp", 0, on_get, &h) == 0 &&
	    http_route(srv, "DELETE", "/mcp", 0, on_delete, &h) == 0) {
		ev_signal_add(h.ev, SIGINT, on_signal, NULL);
		ev_signal_add(h.ev, SIGTERM, on_signal, NULL);
		/* The port line lets a caller that asked for port 0 find us. */
		fprintf(stderr, "denv mcp: listening on port %d (POST /mcp)\n", http_server_port(srv));
		rc = ev_run(h.ev) < 0 ? err_set(e, "mcp: event loop failed") : 0;
	} else if (srv) {
		err_set(e, "mcp: bad route");
	}
	if (srv)
		http_server_free(srv);
	ev_free(h.ev);
	return rc;
}

static int run_mcp(struct cli *c, const struct cli_args *a, struct err *e)
{
	struct mcp m = { .c = c, .version = cli_version() };
	const char *addr = cli_flag_str(a, "http");

	if (addr)
		return serve_http(&m, addr, e);
	return serve_stdio(&m);
}

static const struct cli_flag mcp_flags[] = {
	{ "http", 0, CLI_STR, "ADDR", "serve streamable HTTP on ADDR (127.0.0.1:8765; port 0 picks one) instead of stdio; no auth of its own: keep it on loopback" },
	{ 0 },
};

const struct cli_cmd cli_cmd_mcp = {
	.name = "mcp",
	.summary = "serve the sandbox API as Model Context Protocol tools (stdio, or --http)",
	.notes = "Tools: create, exec, files_put, files_get, snapshot, fork, verify, destroy, get, logs.\n"
		 "On stdio, one JSON-RPC message per line; with --http, POST /mcp. See denv(1), MCP.\n",
	.flags = mcp_flags,
	.min_pos = 0,
	.max_pos = 0,
	.run = run_mcp,
};
