/* client.c: ws_dial: blocking connect and handshake, then the loop. See ws.h. */
#include "ws/ws.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "http/http.h"

/* Wait for what the stream asked for, until the deadline. 0, or -1 with e. */
static int wait_stream(struct stream *s, int64_t deadline, const char *what, const char *url, struct err *e)
{
	if (!ev_wait_fd(stream_fd(s), stream_wants(s), deadline))
		return err_set(e, "websocket %s: timed out %s", url, what);
	return 0;
}

/* Header lines from the caller: "Name: value\r\n"..., nothing that could
 * end the head early or smuggle a second request. */
static int check_extra(const char *h, struct err *e)
{
	size_t n = strlen(h);
	const char *line = h;

	if (n > WS_MAX_EXTRA_HEADERS)
		return err_set(e, "websocket dial: extra headers over %d bytes", WS_MAX_EXTRA_HEADERS);
	while (*line) {
		const char *end = strstr(line, "\r\n");
		const char *colon;
		if (!end)
			return err_set(e, "websocket dial: extra header lines must each end in CRLF");
		colon = memchr(line, ':', (size_t)(end - line));
		if (!colon || colon == line)
			return err_set(e, "websocket dial: extra header \"%.*s\" has no name", (int)(end - line), line);
		for (const char *c = line; c < end; c++)
			if (*c == '\r' || *c == '\n' || *c == '\0')
				return err_set(e, "websocket dial: stray CR or LF in extra headers");
		line = end + 2;
	}
	return 0;
}

/* Printable start of a refused handshake's body, for the error message. */
static void snippet(const char *p, size_t n, char *out, size_t outsz)
{
	size_t k = 0;

	if (n > WS_ERROR_BODY_SNIPPET)
		n = WS_ERROR_BODY_SNIPPET;
	for (size_t i = 0; i < n && k + 1 < outsz; i++) {
		unsigned char ch = (unsigned char)p[i];
		out[k++] = (ch < 0x20 || ch == 0x7F) ? ' ' : (char)ch;
	}
	while (k > 0 && out[k - 1] == ' ')
		k--;
	out[k] = '\0';
}

static bool resp_has(const struct http_response_head *h, const char *name, const char *token)
{
	const struct http_header *f = http_header_find(h->headers, h->nheaders, name);

	return f && http_token_has(f->value, f->value_len, token);
}

static bool resp_value_is(const struct http_response_head *h, const char *name, const char *want)
{
	const struct http_header *f = http_header_find(h->headers, h->nheaders, name);

	return f && f->value_len == strlen(want) && memcmp(f->value, want, f->value_len) == 0;
}

/* Sends the upgrade request, all of it, before the deadline. */
static int send_request(struct stream *s, const struct ws_url *u, const char *key, const char *extra,
			int64_t deadline, const char *url, struct err *e)
{
	struct buf req = BUF_INIT;
	size_t off = 0;
	int rc = 0;

	buf_addf(&req, "GET %s HTTP/1.1\r\nHost: %s%s%s", u->path,
		 strchr(u->host, ':') ? "[" : "", u->host, strchr(u->host, ':') ? "]" : "");
	if (u->port != (u->tls ? 443 : 80))
		buf_addf(&req, ":%u", (unsigned)u->port);
	buf_addf(&req, "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		 "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s\r\n",
		 key, extra ? extra : "");
	while (rc == 0 && off < req.len) {
		ssize_t n = stream_write(s, req.data + off, req.len - off);
		if (n > 0)
			off += (size_t)n;
		else if (n < 0 && (errno == EAGAIN || errno == EINTR))
			rc = wait_stream(s, deadline, "sending the handshake", url, e);
		else
			rc = err_errno(e, "websocket %s: sending the handshake", url);
	}
	buf_release(&req);
	return rc;
}

/* Reads until the response head is complete: its length (what follows in
 * `in` is the server's first frames or a refusal's body), or -1 with e. */
static int read_head(struct stream *s, struct buf *in, struct http_response_head *head,
		     int64_t deadline, const char *url, struct err *e)
{
	for (;;) {
		ssize_t n;
		if (in->len) {
			int hl = http_parse_response_head(in->data, in->len, head);
			if (hl < 0)
				return err_set(e, "websocket %s: the server's answer is not an HTTP response", url);
			if (hl > 0)
				return hl;
			if (in->len >= WS_MAX_HANDSHAKE)
				return err_set(e, "websocket %s: handshake response head over %d bytes", url,
					       WS_MAX_HANDSHAKE);
		}
		if (buf_grow(in, WS_READ_CHUNK) < 0)
			return err_set(e, "websocket %s: handshake response too big", url);
		n = stream_read(s, in->data + in->len, WS_READ_CHUNK);
		if (n > 0)
			buf_setlen(in, in->len + (size_t)n);
		else if (n == 0)
			return err_set(e, "websocket %s: the server closed the connection during the handshake", url);
		else if (errno != EAGAIN && errno != EINTR)
			return err_errno(e, "websocket %s: reading the handshake response", url);
		else if (wait_stream(s, deadline, "waiting for the handshake response", url, e) < 0)
			return -1;
	}
}

/* A refused upgrade: the error quotes the start of the body, since that is
 * where the server says why (a 401 "invalid token", a 404 for a wrong path).
 * Always -1, with e->code the HTTP status. */
static int refused(struct stream *s, struct buf *in, int hl, const struct http_response_head *head,
		   int64_t deadline, const char *url, struct err *e)
{
	const struct http_header *cl = http_header_find(head->headers, head->nheaders, "Content-Length");
	size_t want_body = WS_ERROR_BODY_SNIPPET;
	char body[WS_ERROR_BODY_SNIPPET + 1];

	if (cl) {
		size_t v = 0, i;
		for (i = 0; i < cl->value_len && cl->value[i] >= '0' && cl->value[i] <= '9' && v < 1000000; i++)
			v = v * 10 + (size_t)(cl->value[i] - '0');
		if (v < want_body)
			want_body = v;
	}
	while (in->len - (size_t)hl < want_body && buf_grow(in, WS_READ_CHUNK) == 0) {
		ssize_t n = stream_read(s, in->data + in->len, WS_READ_CHUNK);
		if (n > 0)
			buf_setlen(in, in->len + (size_t)n);
		else if (n == 0 || (errno != EAGAIN && errno != EINTR))
			break;
		else if (wait_stream(s, deadline, "", url, e) < 0 || ev_mono_ms() >= deadline)
			break;
	}
	snippet(in->data + hl, in->len - (size_t)hl, body, sizeof(body));
	err_set(e, "websocket %s: the server answered HTTP %d %.*s%s%s", url, head->status,
		(int)head->reason_len, head->reason, body[0] ? ": " : "", body);
	e->code = head->status;
	return -1;
}

/* A 101 must upgrade to websocket with our key's accept value and take no
 * extension or subprotocol we did not offer. */
static int check_upgrade(const struct http_response_head *head, const char *want, const char *url, struct err *e)
{
	if (!resp_has(head, "Upgrade", "websocket") || !resp_has(head, "Connection", "upgrade"))
		return err_set(e, "websocket %s: 101 response without Upgrade: websocket / Connection: Upgrade", url);
	if (!resp_value_is(head, "Sec-WebSocket-Accept", want))
		return err_set(e, "websocket %s: wrong Sec-WebSocket-Accept in the server's answer", url);
	if (http_header_find(head->headers, head->nheaders, "Sec-WebSocket-Extensions") ||
	    http_header_find(head->headers, head->nheaders, "Sec-WebSocket-Protocol"))
		return err_set(e, "websocket %s: the server chose an extension or subprotocol we did not offer", url);
	return 0;
}

int ws_dial(struct ev *ev, const char *url, const char *extra_headers,
	    const struct ws_opts *o, struct ws_conn **out, struct err *e)
{
	struct ws_url u;
	struct stream *s = NULL;
	struct buf in;
	char key[WS_KEY_LEN + 1], want[WS_ACCEPT_LEN + 1];
	struct http_response_head *head = NULL;
	int64_t timeout = o->dial_timeout_ms > 0 ? o->dial_timeout_ms : WS_DIAL_TIMEOUT_MS_DEFAULT;
	int64_t deadline = ev_mono_ms() + timeout;
	int hl, rc = -1;

	*out = NULL;
	buf_init(&in, WS_MAX_HANDSHAKE + WS_READ_CHUNK);
	if (ws_parse_url(url, &u, e) < 0)
		goto out;
	if (extra_headers && check_extra(extra_headers, e) < 0)
		goto out;
	if (ws_make_key(key, e) < 0 || ws_accept_for_key(key, want, e) < 0)
		goto out;
	if (stream_dial(u.host, u.port, u.tls, (int)timeout, &s, e) < 0) {
		err_prefix(e, "websocket %s", url);
		goto out;
	}
	if (send_request(s, &u, key, extra_headers, deadline, url, e) < 0)
		goto out;
	head = xmalloc(sizeof(*head));
	if ((hl = read_head(s, &in, head, deadline, url, e)) < 0)
		goto out;
	if (head->status != 101) {
		refused(s, &in, hl, head, deadline, url, e);
		goto out;
	}
	if (check_upgrade(head, want, url, e) < 0)
		goto out;
	rc = ws_conn_open(ev, &ws_stream_transport, s, WS_CLIENT, o, NULL, 0,
			  in.data + hl, in.len - (size_t)hl, out, e);
	s = NULL;	/* the connection owns it now, even on failure */
out:
	stream_free(s);
	free(head);
	buf_release(&in);
	return rc;
}
