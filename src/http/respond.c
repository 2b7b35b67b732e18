/*
 * respond.c: what a handler calls on its request: the accessors, the
 * answers (whole, JSON, error, streamed) and taking the connection over
 * (http_req_detach). An answer only queues output and kicks the connection;
 * conn_run in server.c does the rest (see the comment atop server.c).
 */
#include "http/server_int.h"
#include "http/http_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/str.h"
#include "json/json.h"

void hs_json_error(struct buf *b, const char *msg)
{
	buf_adds(b, "{\"error\":");
	json_write_string(b, msg, strlen(msg));
	buf_adds(b, "}");
}

/* ---- request accessors ---- */

const char *http_req_method(const struct http_req *req) { return req->method; }
const char *http_req_target(const struct http_req *req) { return req->target; }
const char *http_req_path(const struct http_req *req) { return req->path; }
const char *http_req_peer(const struct http_req *req) { return req->peer; }
int http_req_minor_version(const struct http_req *req) { return req->minor; }
struct http_server *http_req_server(const struct http_req *req) { return req->srv; }

const char *http_req_header(const struct http_req *req, const char *name)
{
	for (size_t i = 0; i < req->nheaders; i++)
		if (strcasecmp(req->hnames[i], name) == 0)
			return req->hvalues[i];
	return NULL;
}

bool http_req_header_at(const struct http_req *req, size_t i, const char **name, const char **value)
{
	if (i >= req->nheaders)
		return false;
	*name = req->hnames[i];
	*value = req->hvalues[i];
	return true;
}

const char *http_req_param(const struct http_req *req, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < req->nparams; i++)
		if (req->pname_len[i] == n && memcmp(req->pnames[i], name, n) == 0)
			return req->pvals[i];
	return NULL;
}

const char *http_req_query(const struct http_req *req, const char *name)
{
	struct http_req *r = (struct http_req *)req;	/* lazily decoded cache */

	if (!r->query)
		return NULL;
	if (!r->qparsed) {
		const char *p = r->query, *end = r->query + r->query_len;
		r->qparsed = true;
		/* Decoding never lengthens, so one allocation keeps pointers stable. */
		if (buf_grow(&r->qstore, r->query_len * 2 + 2) < 0)
			return NULL;
		while (p < end) {
			const char *amp = memchr(p, '&', (size_t)(end - p));
			const char *e = amp ? amp : end;
			const char *eq = memchr(p, '=', (size_t)(e - p));
			size_t mark = r->qstore.len;
			if (e > p) {
				const char *ne = eq ? eq : e;
				if (http_pct_decode(p, (size_t)(ne - p), true, &r->qstore) < 0 ||
				    buf_addch(&r->qstore, '\0') < 0 ||
				    (eq && http_pct_decode(eq + 1, (size_t)(e - eq - 1), true, &r->qstore) < 0) ||
				    buf_addch(&r->qstore, '\0') < 0)
					buf_truncate(&r->qstore, mark);	/* drop an undecodable pair */
			}
			p = e + 1;
		}
	}
	return http_int_pair_find(r->qstore.data, r->qstore.len, SIZE_MAX, name, strcmp);
}

const char *http_int_pair_find(const char *data, size_t len, size_t max, const char *name,
			       int (*cmp)(const char *, const char *))
{
	size_t off = 0;

	for (size_t i = 0; i < max && off < len; i++) {
		const char *k = data + off;
		const char *v = k + strlen(k) + 1;

		if (cmp(k, name) == 0)
			return v;
		off = (size_t)(v - data) + strlen(v) + 1;
	}
	return NULL;
}

const char *http_req_body(const struct http_req *req, size_t *len)
{
	if (len)
		*len = req->body.len;
	return req->body.data;
}

bool http_req_gone(const struct http_req *req)
{
	return req->gone || !req->conn || req->conn->broken;
}

void http_req_on_gone(struct http_req *req, http_req_fn fn, void *arg)
{
	req->on_gone = fn;
	req->gone_arg = arg;
}

void http_req_quiet_gone(struct http_req *req)
{
	req->gone_quiet = true;
}

void http_req_on_respond(struct http_req *req, http_resp_hook_fn fn, void *arg)
{
	req->on_respond = fn;
	req->respond_arg = arg;
}

/* ---- responding ---- */

int http_resp_header(struct http_req *req, const char *name, const char *value)
{
	if (req->status || !name || !*name || !value)
		return -1;
	for (const char *p = name; *p; p++)
		if (*p <= 0x20 || *p >= 0x7f || *p == ':')
			return -1;
	for (const char *p = value; *p; p++)
		if (*p == '\r' || *p == '\n' || *p == '\0')
			return -1;
	buf_adds(&req->rhead, name);
	buf_adds(&req->rhead, ": ");
	buf_adds(&req->rhead, value);
	buf_adds(&req->rhead, "\r\n");
	return 0;
}

static bool status_has_body(int status)
{
	return !(status < 200 || status == 204 || status == 304);
}

/* The request is complete: detach it from the connection and free it. */
static void req_complete(struct http_req *req)
{
	struct conn *c = req->conn;

	hs_log_access(req);
	if (c) {
		c->req = NULL;
		if (!req->keep_alive || c->srv->shutting_down)
			c->close_after = true;
		if (!c->in_run) {
			hs_conn_flush(c);
			hs_conn_kick(c);
		}
	}
	hs_req_free(req);
}

/* Write the status line and headers (and body, unless streaming) to the connection. */
int hs_queue_response(struct http_req *req, int status, const char *ctype, const void *body,
		      size_t len, bool chunked_stream)
{
	struct conn *c = req->conn;
	struct buf *o = &c->out;
	bool close = !req->keep_alive || c->close_after || c->srv->shutting_down;
	size_t before = o->len;
	int rc = 0;

	if (status < 100 || status > 999)
		status = 500;
	req->status = status;
	if (chunked_stream && req->minor == 0)
		close = true;	/* HTTP/1.0: the body ends when we close */
	if (close)
		req->keep_alive = false;
	rc |= buf_addf(o, "HTTP/1.1 %d %s\r\n", status, http_status_text(status));
	if (ctype && status_has_body(status))
		rc |= buf_addf(o, "Content-Type: %s\r\n", ctype);
	if (chunked_stream) {
		req->stream_chunked = req->minor >= 1;
		if (req->stream_chunked)
			rc |= buf_adds(o, "Transfer-Encoding: chunked\r\n");
	} else if (status_has_body(status)) {
		rc |= buf_addf(o, "Content-Length: %zu\r\n", len);
	}
	rc |= buf_add(o, req->rhead.data, req->rhead.len);
	if (close)
		rc |= buf_adds(o, "Connection: close\r\n");
	else if (req->minor == 0)
		rc |= buf_adds(o, "Connection: keep-alive\r\n");
	rc |= buf_adds(o, "\r\n");
	if (!chunked_stream && status_has_body(status) && !req->head_only)
		rc |= buf_add(o, body, len);
	if (rc) {
		/* Over the write cap: drop what we added and the connection. */
		buf_truncate(o, before);
		log_warn("http", "%s: response of %zu bytes over the output cap; closing", req->peer, len);
		c->broken = true;
		return -1;
	}
	req->resp_bytes = o->len - before;
	if (close)
		c->close_after = true;
	if (!chunked_stream)
		req_complete(req);
	return 0;
}

/* Common checks: NULL -> freed gone req (returns 1), or misuse (-1), or go (0). */
static int respond_check(struct http_req *req, bool stream_ok)
{
	if (!req->conn || req->conn->broken) {
		if (req->conn) {
			/* The connection failed under us: let the loop clean it up. */
			req->conn->req = NULL;
			req->conn->close_after = true;
			if (!req->conn->in_run)
				hs_conn_kick(req->conn);
		}
		hs_req_free(req);
		return 1;
	}
	if (req->status && !(stream_ok && req->streaming)) {
		log_error("http", "%s %s: answered twice", req->method, req->target);
		return -1;
	}
	return 0;
}

int http_respond(struct http_req *req, int status, const char *content_type, const void *body, size_t len)
{
	http_resp_hook_fn fn = req->on_respond;
	int r;

	/* Before the gone check: an answer to a client that went away is
	 * still the answer its retry should get. */
	req->on_respond = NULL;
	if (fn && req->status) {
		fn(req, 0, NULL, NULL, 0, req->respond_arg);	/* a misuse (answered twice), reported below */
	} else if (fn && fn(req, status, content_type, body ? body : "", body ? len : 0, req->respond_arg)) {
		req->on_gone = NULL;	/* answered, as far as the handler knows */
		return 0;
	}
	r = respond_check(req, false);
	if (r)
		return r > 0 ? 0 : -1;
	if (hs_queue_response(req, status, content_type, body ? body : "", body ? len : 0, false) < 0) {
		struct conn *c = req->conn;
		c->req = NULL;
		if (!c->in_run)
			hs_conn_kick(c);
		hs_req_free(req);
		return -1;
	}
	return 0;
}

int http_respond_json(struct http_req *req, int status, const struct json *v)
{
	struct buf b = BUF_INIT;
	int r;

	json_write(&b, v, JSON_COMPACT);
	buf_addch(&b, '\n');
	r = http_respond(req, status, "application/json", b.data, b.len);
	buf_release(&b);
	return r;
}

int http_respond_error(struct http_req *req, int status, const char *msg)
{
	struct buf b = BUF_INIT;
	int r;

	hs_json_error(&b, msg ? msg : http_status_text(status));
	buf_addch(&b, '\n');
	r = http_respond(req, status, "application/json", b.data, b.len);
	buf_release(&b);
	return r;
}

int http_stream_begin(struct http_req *req, int status, const char *content_type)
{
	int r = respond_check(req, false);

	if (r)
		return r > 0 ? 0 : -1;
	req->streaming = true;
	if (hs_queue_response(req, status, content_type, NULL, 0, true) < 0)
		return -1;
	hs_conn_flush(req->conn);
	if (!req->conn->in_run)
		hs_conn_kick(req->conn);
	return 0;
}

int http_stream_write(struct http_req *req, const void *data, size_t len)
{
	struct conn *c = req->conn;
	char line[32];
	int n, rc = 0;

	if (!req->streaming || !c || c->broken)
		return -1;
	if (len == 0 || req->head_only)
		return 0;
	if (hs_out_pending(c) + len > HTTP_WRITE_BUF_MAX)
		return -1;
	if (req->stream_chunked) {
		n = snprintf(line, sizeof(line), "%zx\r\n", len);
		rc |= buf_add(&c->out, line, (size_t)n);
	}
	rc |= buf_add(&c->out, data, len);
	if (req->stream_chunked)
		rc |= buf_adds(&c->out, "\r\n");
	if (rc)
		return -1;
	req->resp_bytes += len;
	hs_conn_flush(c);
	if (hs_out_pending(c)) {
		c->drain_pending = true;
		if (!c->in_run)
			hs_conn_kick(c);	/* register for writability */
	}
	return c->broken ? -1 : 0;
}

int http_stream_end(struct http_req *req)
{
	int r = respond_check(req, true);

	if (r)
		return r > 0 ? 0 : -1;
	if (!req->streaming)
		return -1;
	if (req->stream_chunked && !req->head_only)
		buf_adds(&req->conn->out, "0\r\n\r\n");
	req_complete(req);
	return 0;
}

size_t http_stream_queued(const struct http_req *req)
{
	return req->conn ? hs_out_pending(req->conn) : 0;
}

void http_stream_on_drain(struct http_req *req, http_req_fn fn, void *arg)
{
	req->on_drain = fn;
	req->drain_arg = arg;
}

int http_req_detach(struct http_req *req, struct stream **out, struct buf *leftover, struct err *e)
{
	struct conn *c = req->conn;

	*out = NULL;
	if (!c || c->broken)
		return err_set(e, "detach: the client has gone away");
	if (req->status)
		return err_set(e, "detach: the request was already answered");
	if (c->state != C_HANDLER)
		return err_set(e, "detach: the request body is still being read");
	if (hs_out_pending(c))
		return err_set(e, "detach: earlier responses are still being written");
	if (leftover && buf_add(leftover, c->in.data, c->in.len) < 0)
		return err_set(e, "detach: %zu buffered bytes do not fit", c->in.len);
	hs_log_access(req);
	ev_timer_stop(c->srv->ev, &c->timer);
	ev_fd_del(c->srv->ev, c->fd);
	*out = c->s;
	c->s = NULL;
	c->req = NULL;
	hs_req_free(req);
	buf_release(&c->in);
	buf_release(&c->out);
	hs_conn_unlink(c);
	if (c->in_dispatch)
		c->detached = true;	/* conn_process frees it when the handler returns */
	else
		free(c);
	return 0;
}
