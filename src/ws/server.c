/* server.c: upgrade a request of src/http's server to a WebSocket. See ws.h. */
#include "ws/ws.h"

#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "http/http.h"

static bool header_has(struct http_req *req, const char *name, const char *token)
{
	const char *v = http_req_header(req, name);

	return v && http_token_has(v, strlen(v), token);
}

/* Answer a refused upgrade and fail with the same message. */
static int refuse(struct http_req *req, int status, const char *msg, struct err *e)
{
	err_set(e, "websocket upgrade refused: %s", msg);
	e->code = status;
	if (status == 426) {
		/* RFC 6455 4.4: say which version we speak. */
		http_resp_header(req, "Sec-WebSocket-Version", "13");
	}
	http_respond_error(req, status, msg);
	return -1;
}

int ws_accept(struct ev *ev, struct http_req *req, const struct ws_opts *o,
	      struct ws_conn **out, struct err *e)
{
	const char *key = http_req_header(req, "Sec-WebSocket-Key");
	const char *version = http_req_header(req, "Sec-WebSocket-Version");
	char accept[WS_ACCEPT_LEN + 1];
	char head[256];
	struct buf leftover;
	struct stream *s = NULL;
	int n, rc;

	*out = NULL;
	if (strcmp(http_req_method(req), "GET") != 0)
		return refuse(req, 400, "a WebSocket upgrade must be a GET", e);
	if (http_req_minor_version(req) < 1)
		return refuse(req, 400, "a WebSocket upgrade needs HTTP/1.1", e);
	if (!header_has(req, "Upgrade", "websocket"))
		return refuse(req, 400, "missing \"Upgrade: websocket\" (this endpoint is a WebSocket)", e);
	if (!header_has(req, "Connection", "upgrade"))
		return refuse(req, 400, "missing \"Connection: Upgrade\"", e);
	if (!version || strcmp(version, "13") != 0)
		return refuse(req, 426, "unsupported Sec-WebSocket-Version (want 13)", e);
	if (!ws_key_valid(key))
		return refuse(req, 400, "missing or malformed Sec-WebSocket-Key", e);
	if (ws_accept_for_key(key, accept, e) < 0) {
		http_respond_error(req, 500, e->msg);
		return -1;
	}
	n = snprintf(head, sizeof(head),
		     "HTTP/1.1 101 Switching Protocols\r\n"
		     "Upgrade: websocket\r\n"
		     "Connection: Upgrade\r\n"
		     "Sec-WebSocket-Accept: %s\r\n\r\n", accept);
	buf_init(&leftover, 0);
	if (http_req_detach(req, &s, &leftover, e) < 0) {
		err_prefix(e, "websocket upgrade");
		/* Still the server's request: answer it so it is freed. */
		http_respond_error(req, 500, e->msg);
		buf_release(&leftover);
		return -1;
	}
	rc = ws_conn_open(ev, &ws_stream_transport, s, WS_SERVER, o, head, (size_t)n,
			  leftover.data, leftover.len, out, e);
	buf_release(&leftover);
	return rc;
}
