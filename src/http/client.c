/*
 * client.c: HTTP/1.1 clients over struct stream: a blocking one (the CLI) and
 * one on the event loop (sidecar, control plane). Both keep idle keep-alive
 * connections per scheme://host:port and retry a request once on a fresh
 * connection when a reused one turns out to have been closed by the server
 * before it answered (the usual keep-alive race). Redirects are not followed.
 *
 * The asynchronous client never blocks its loop: IP literals are converted on
 * the spot, names are looked up in a resolver thread (resolve.h) under the
 * call's deadline, and each address the name has is tried in turn. Copies of
 * a request (URL, serialized head with its credentials, body) are wiped with
 * explicit_bzero before they are freed, by both clients.
 */
#include "http/http.h"
#include "http/http_int.h"

#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/list.h"
#include "base/log.h"
#include "base/str.h"
#include "base/sys.h"
#include "http/resolve.h"
#include "json/json.h"

#define KEY_MAX (STREAM_MAX_HOST + 32)

/* ---- URLs and requests ---- */

int http_url_split(const char *url, bool *tls, char *host, size_t host_size, int *port,
		   const char **path, struct err *e)
{
	const char *p, *hs, *he, *ps = NULL;
	size_t hl;

	if (strlen(url) > HTTP_MAX_URL)
		return err_set(e, "url too long");
	if (strncasecmp(url, "http://", 7) == 0) {
		*tls = false;
		p = url + 7;
	} else if (strncasecmp(url, "https://", 8) == 0) {
		*tls = true;
		p = url + 8;
	} else {
		return err_set(e, "url %s: only http:// and https:// are supported", url);
	}
	hs = p;
	if (*p == '[') {
		he = strchr(p, ']');
		if (!he)
			return err_set(e, "url %s: unterminated [ in host", url);
		hs = p + 1;
		p = he + 1;
	} else {
		while (*p && *p != ':' && *p != '/' && *p != '?' && *p != '#')
			p++;
		he = p;
	}
	hl = (size_t)(he - hs);
	if (hl == 0 || hl >= host_size)
		return err_set(e, "url %s: bad host", url);
	memcpy(host, hs, hl);
	host[hl] = '\0';
	for (size_t i = 0; i < hl; i++)
		if ((unsigned char)host[i] <= 0x20 || host[i] == '@' || host[i] == '/')
			return err_set(e, "url %s: bad host", url);
	*port = *tls ? 443 : 80;
	if (*p == ':') {
		char num[8];
		size_t n;
		ps = ++p;
		while (*p >= '0' && *p <= '9')
			p++;
		n = (size_t)(p - ps);
		if (n == 0 || n >= sizeof(num))
			return err_set(e, "url %s: bad port", url);
		memcpy(num, ps, n);
		num[n] = '\0';
		if (str_to_int(num, port) < 0 || *port < 1 || *port > 65535)
			return err_set(e, "url %s: bad port", url);
	}
	if (*p && *p != '/' && *p != '?')
		return err_set(e, "url %s: bad host or port", url);
	*path = *p ? p : "/";
	for (const char *q = *path; *q; q++)
		if ((unsigned char)*q <= 0x20 || *q == 0x7f)
			return err_set(e, "url %s: spaces and control characters must be percent-encoded", url);
	return 0;
}

struct target {
	bool tls;
	char host[STREAM_MAX_HOST + 1];
	int port;
	const char *path;
	char key[KEY_MAX];	/* "https://host:port" */
};

static int target_parse(const char *url, struct target *t, struct err *e)
{
	if (!url)
		return err_set(e, "no url");
	if (http_url_split(url, &t->tls, t->host, sizeof(t->host), &t->port, &t->path, e) < 0)
		return -1;
	snprintf(t->key, sizeof(t->key), "%s://%s:%d", t->tls ? "https" : "http", t->host, t->port);
	return 0;
}

/* Zero a buffer's whole allocation (it may hold credentials), then free it. */
static void buf_wipe(struct buf *b)
{
	if (b->cap)
		explicit_bzero(b->data, b->cap);
	buf_release(b);
}

/* Serialize the request into out, in one allocation (sized up front, so that
 * no realloc leaves a stray copy of the headers behind: out is wiped later). */
static int build_request(const struct http_client_req *r, const struct target *t, struct buf *out, struct err *e)
{
	const char *method = r->method ? r->method : "GET";
	bool v6 = strchr(t->host, ':') != NULL;
	bool default_port = t->port == (t->tls ? 443 : 80);
	size_t need = strlen(method) + strlen(t->path) + strlen(t->host) + 96;

	for (const char *p = method; *p; p++)
		if (!isupper((unsigned char)*p) && *p != '-' && *p != '_')
			return err_set(e, "bad method %s", method);
	for (size_t i = 0; r->headers && r->headers[i]; i++)
		need += strlen(r->headers[i]) + 2;
	if (r->body_len > SIZE_MAX - need || buf_grow(out, need + r->body_len) < 0)
		return err_set(e, "request body too large");
	buf_addf(out, "%s %s HTTP/1.1\r\nHost: %s%s%s", method, t->path, v6 ? "[" : "", t->host, v6 ? "]" : "");
	if (!default_port)
		buf_addf(out, ":%d", t->port);
	buf_adds(out, "\r\n");
	for (size_t i = 0; r->headers && r->headers[i]; i++) {
		const char *h = r->headers[i];
		if (strpbrk(h, "\r\n") || !strchr(h, ':'))
			return err_set(e, "bad request header \"%s\"", h);
		buf_adds(out, h);
		buf_adds(out, "\r\n");
	}
	if (r->body_len || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
	    strcmp(method, "PATCH") == 0)
		buf_addf(out, "Content-Length: %zu\r\n", r->body_len);
	buf_adds(out, "\r\n");
	if (r->body_len && buf_add(out, r->body, r->body_len) < 0)
		return err_set(e, "request body too large");
	return 0;
}

/* ---- response reading, shared by both clients ---- */

enum { RR_HEAD, RR_LENGTH, RR_CHUNKED, RR_EOF, RR_DONE };

struct reader {
	int phase;
	struct buf in;
	uint64_t left;
	struct http_chunked ch;
	bool head_req;
	bool keep_alive;
	bool got_bytes;
	struct http_client_resp *resp;
};

static void reader_init(struct reader *rr, struct http_client_resp *resp, bool head_req)
{
	memset(rr, 0, sizeof(*rr));
	buf_init(&rr->in, HTTP_MAX_HEADER_BYTES + HTTP_READ_CHUNK);
	rr->resp = resp;
	rr->head_req = head_req;
	resp->status = 0;
	resp->nheaders = 0;
	buf_reset(&resp->head);
	buf_reset(&resp->body);
}

static void reader_release(struct reader *rr)
{
	buf_release(&rr->in);
}

static int body_too_big(struct reader *rr, struct err *e)
{
	return err_set(e, "response body larger than %zu bytes", rr->resp->body.max);
}

/* Process buffered bytes. 1 complete, 0 need more, -1 error. */
static int reader_feed(struct reader *rr, struct err *e)
{
	struct http_client_resp *resp = rr->resp;

	for (;;) {
		if (rr->phase == RR_HEAD) {
			struct http_response_head h;
			int r = http_parse_response_head(rr->in.data, rr->in.len, &h);
			const struct http_header *te, *cl, *conn;
			if (r == 0)
				return rr->in.len >= HTTP_MAX_HEADER_BYTES ? err_set(e, "response head too large") : 0;
			if (r < 0)
				return err_set(e, "malformed response");
			if (h.status >= 100 && h.status < 200 && h.status != 101) {
				buf_consume(&rr->in, (size_t)r);	/* 100 Continue and friends */
				continue;
			}
			resp->status = h.status;
			buf_reset(&resp->head);
			for (size_t i = 0; i < h.nheaders; i++) {
				for (size_t k = 0; k < h.headers[i].name_len; k++)
					buf_addch(&resp->head, (char)tolower((unsigned char)h.headers[i].name[k]));
				buf_addch(&resp->head, '\0');
				buf_add(&resp->head, h.headers[i].value, h.headers[i].value_len);
				buf_addch(&resp->head, '\0');
			}
			resp->nheaders = h.nheaders;
			te = http_header_find(h.headers, h.nheaders, "transfer-encoding");
			cl = http_header_find(h.headers, h.nheaders, "content-length");
			conn = http_header_find(h.headers, h.nheaders, "connection");
			rr->keep_alive = h.minor_version >= 1 ? !(conn && http_token_has(conn->value, conn->value_len, "close"))
							      : (conn && http_token_has(conn->value, conn->value_len, "keep-alive"));
			if (rr->head_req || h.status == 204 || h.status == 304 || h.status == 101) {
				rr->phase = RR_DONE;
				if (h.status == 101)
					rr->keep_alive = false;
			} else if (te && http_token_has(te->value, te->value_len, "chunked")) {
				rr->phase = RR_CHUNKED;
			} else if (cl) {
				uint64_t n = 0;
				for (size_t k = 0; k < cl->value_len; k++) {
					char c = cl->value[k];
					if (c < '0' || c > '9' || n > (UINT64_MAX - 9) / 10)
						return err_set(e, "bad Content-Length in response");
					n = n * 10 + (uint64_t)(c - '0');
				}
				if (cl->value_len == 0)
					return err_set(e, "bad Content-Length in response");
				if (n > resp->body.max)
					return body_too_big(rr, e);
				rr->left = n;
				rr->phase = n ? RR_LENGTH : RR_DONE;
				if (n && buf_grow(&resp->body, (size_t)n) < 0)
					return body_too_big(rr, e);
			} else {
				rr->phase = RR_EOF;
				rr->keep_alive = false;
			}
			buf_consume(&rr->in, (size_t)r);
			continue;
		}
		if (rr->phase == RR_LENGTH) {
			size_t n = rr->in.len < rr->left ? rr->in.len : (size_t)rr->left;
			if (buf_add(&resp->body, rr->in.data, n) < 0)
				return body_too_big(rr, e);
			buf_consume(&rr->in, n);
			rr->left -= n;
			if (rr->left)
				return 0;
			rr->phase = RR_DONE;
			continue;
		}
		if (rr->phase == RR_CHUNKED) {
			ssize_t r = http_chunked_decode(&rr->ch, rr->in.data, rr->in.len, &resp->body);
			if (r == HTTP_PARSE_TOO_BIG)
				return body_too_big(rr, e);
			if (r < 0)
				return err_set(e, "malformed chunked response body");
			buf_consume(&rr->in, (size_t)r);
			if (!rr->ch.done)
				return 0;
			rr->phase = RR_DONE;
			continue;
		}
		if (rr->phase == RR_EOF) {
			if (buf_add(&resp->body, rr->in.data, rr->in.len) < 0)
				return body_too_big(rr, e);
			buf_reset(&rr->in);
			return 0;
		}
		/* RR_DONE: bytes after the response mean we cannot reuse the connection. */
		if (rr->in.len)
			rr->keep_alive = false;
		return 1;
	}
}

/* The peer closed. 1 if that completes the response, else -1 with e. */
static int reader_eof(struct reader *rr, const char *peer, struct err *e)
{
	if (rr->phase == RR_EOF) {
		rr->phase = RR_DONE;
		return 1;
	}
	if (!rr->got_bytes)
		return err_set(e, "connection closed by %s before any response", peer);
	return err_set(e, "connection closed by %s before the response was complete", peer);
}

int http_client_resp_error(const struct http_client_resp *r, char *out, size_t n)
{
	struct json *doc = NULL;
	struct err ignore;
	const char *msg = NULL;
	int found;

	if (n)
		out[0] = '\0';
	if (json_parse(r->body.data, r->body.len, NULL, &doc, &ignore) == 0)
		msg = json_get_str(doc, "error");
	found = msg && *msg;
	if (found && n)
		snprintf(out, n, "%s", msg);
	json_free(doc);
	return found;
}

const char *http_client_resp_header(const struct http_client_resp *r, const char *name)
{
	return http_int_pair_find(r->head.data, r->head.len, r->nheaders, name, strcasecmp);
}

void http_client_resp_release(struct http_client_resp *r)
{
	buf_release(&r->head);
	buf_release(&r->body);
	r->status = 0;
	r->nheaders = 0;
}

/* ---- idle connection pools ---- */

struct idle {
	char key[KEY_MAX];
	struct stream *s;
	int64_t since;
};

struct pool {
	struct idle idle[HTTP_CLIENT_MAX_IDLE];
	size_t n;
};

static struct stream *pool_take(struct pool *p, const char *key)
{
	int64_t now = ev_mono_ms();

	for (size_t i = 0; i < p->n;) {
		struct idle *d = &p->idle[i];
		if (now - d->since > HTTP_CLIENT_IDLE_MS) {
			stream_free(d->s);
			*d = p->idle[--p->n];
			continue;
		}
		if (strcmp(d->key, key) == 0) {
			struct stream *s = d->s;
			*d = p->idle[--p->n];
			return s;
		}
		i++;
	}
	return NULL;
}

static void pool_put(struct pool *p, const char *key, struct stream *s)
{
	if (p->n == HTTP_CLIENT_MAX_IDLE) {
		/* Drop the oldest. */
		size_t old = 0;
		for (size_t i = 1; i < p->n; i++)
			if (p->idle[i].since < p->idle[old].since)
				old = i;
		stream_free(p->idle[old].s);
		p->idle[old] = p->idle[--p->n];
	}
	str_copy(p->idle[p->n].key, KEY_MAX, key);
	p->idle[p->n].s = s;
	p->idle[p->n].since = ev_mono_ms();
	p->n++;
}

static void pool_release(struct pool *p)
{
	for (size_t i = 0; i < p->n; i++)
		stream_free(p->idle[i].s);
	p->n = 0;
}

/* ---- blocking client ---- */

struct http_client {
	struct pool pool;
	size_t dials;
};

size_t http_client_dials(const struct http_client *c)
{
	return c->dials;
}

struct http_client *http_client_new(void)
{
	return xcalloc(1, sizeof(struct http_client));
}

void http_client_free(struct http_client *c)
{
	if (!c)
		return;
	pool_release(&c->pool);
	free(c);
}


/* One attempt on stream s. Returns 0 done, -1 failed (e), -2 failed on a
 * reused connection before any response byte (retry on a fresh one). */
static int attempt(struct stream *s, bool reused, const struct buf *reqb, struct reader *rr,
		   const char *peer, int timeout_ms, int64_t deadline, struct err *e)
{
	size_t off = 0;

	while (off < reqb->len) {
		ssize_t w = stream_write(s, reqb->data + off, reqb->len - off);
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (errno == EAGAIN) {
			if (!ev_wait_fd(stream_fd(s), stream_wants(s), deadline))
				return err_set(e, "timeout after %d ms sending request to %s", timeout_ms, peer);
			continue;
		}
		if (reused)
			return -2;
		return err_errno(e, "sending request to %s", peer);
	}
	for (;;) {
		int r = reader_feed(rr, e);
		ssize_t n;
		if (r != 0)
			return r > 0 ? 0 : -1;
		if (buf_grow(&rr->in, HTTP_READ_CHUNK) < 0)
			return err_set(e, "response head too large");
		n = stream_read(s, rr->in.data + rr->in.len, HTTP_READ_CHUNK);
		if (n > 0) {
			rr->got_bytes = true;
			buf_setlen(&rr->in, rr->in.len + (size_t)n);
			continue;
		}
		if (n == 0) {
			if (reused && !rr->got_bytes)
				return -2;
			return reader_eof(rr, peer, e) > 0 ? 0 : -1;
		}
		if (errno == EAGAIN) {
			if (!ev_wait_fd(stream_fd(s), stream_wants(s), deadline))
				return err_set(e, "timeout after %d ms reading response from %s", timeout_ms, peer);
			continue;
		}
		if (reused && !rr->got_bytes)
			return -2;
		return err_errno(e, "reading response from %s", peer);
	}
}

int http_client_do(struct http_client *c, const struct http_client_req *req,
		   struct http_client_resp *resp, struct err *e)
{
	struct target t;
	struct buf reqb = BUF_INIT;
	struct reader rr;
	int timeout = req->timeout_ms > 0 ? req->timeout_ms : HTTP_CLIENT_TIMEOUT_DEFAULT_MS;
	int64_t deadline = ev_mono_ms() + timeout;
	char peer[STREAM_MAX_HOST + 16];
	bool head_req = req->method && strcmp(req->method, "HEAD") == 0;
	int r = -1;

	if (target_parse(req->url, &t, e) < 0 || build_request(req, &t, &reqb, e) < 0) {
		buf_wipe(&reqb);
		return -1;
	}
	if (req->unix_socket) {
		if (t.tls) {
			buf_wipe(&reqb);
			return err_set(e, "https over a Unix socket is not supported");
		}
		snprintf(peer, sizeof(peer), "unix:%.*s", STREAM_MAX_HOST, req->unix_socket);
		snprintf(t.key, sizeof(t.key), "%s", peer);
	} else {
		snprintf(peer, sizeof(peer), strchr(t.host, ':') ? "[%s]:%d" : "%s:%d", t.host, t.port);
	}
	for (int round = 0; round < 2; round++) {
		struct stream *s = round == 0 ? pool_take(&c->pool, t.key) : NULL;
		bool reused = s != NULL;
		if (!s) {
			int64_t left = deadline - ev_mono_ms();
			if (left <= 0) {
				err_set(e, "timeout after %d ms connecting to %s", timeout, peer);
				break;
			}
			c->dials++;
			if ((req->unix_socket ? stream_dial_unix(req->unix_socket, (int)left, &s, e)
					      : stream_dial(t.host, t.port, t.tls, (int)left, &s, e)) < 0)
				break;
		}
		reader_init(&rr, resp, head_req);
		r = attempt(s, reused, &reqb, &rr, peer, timeout, deadline, e);
		if (r == 0 && rr.keep_alive)
			pool_put(&c->pool, t.key, s);
		else
			stream_free(s);
		reader_release(&rr);
		if (r != -2)
			break;
		r = -1;
		log_debug("http", "%s: kept-alive connection was closed; retrying on a new one", peer);
		if (round == 1)
			err_set(e, "connection closed by %s before any response", peer);
	}
	buf_wipe(&reqb);
	return r == 0 ? 0 : -1;
}

/* ---- asynchronous client ---- */

enum { A_START, A_RESOLVING, A_CONNECTING, A_HANDSHAKE, A_WRITING, A_READING };

struct http_acall {
	struct http_aclient *ac;
	struct http_acall *prev, *next;
	struct target t;
	char *url;
	char peer[STREAM_MAX_HOST + 16];
	struct buf reqb;
	size_t written;
	int fd;			/* watched fd, or -1 */
	struct resolve_req *lookup;	/* name lookup in flight, or NULL */
	struct addrinfo *addrs;	/* the host's addresses (owned) */
	const struct addrinfo *ai;	/* the one being tried */
	struct stream *s;
	int phase;
	bool reused, retried, head_req;
	struct reader rr;
	struct http_client_resp resp;
	struct ev_timer timer;	/* start kick, then the deadline */
	int timeout_ms;
	int64_t deadline;
	http_aclient_fn fn;
	void *arg;
};

struct http_aclient {
	struct ev *ev;
	struct http_acall *calls;
	struct pool pool;
	struct resolver *resolver;
	size_t dials;
};

size_t http_aclient_dials(const struct http_aclient *ac)
{
	return ac->dials;
}

size_t http_aclient_lookups(const struct http_aclient *ac)
{
	return resolver_threads(ac->resolver);
}

struct http_aclient *http_aclient_new(struct ev *ev)
{
	struct http_aclient *ac = xcalloc(1, sizeof(*ac));

	ac->ev = ev;
	ac->resolver = resolver_new(ev);
	return ac;
}

static void acall_drop_conn(struct http_acall *call)
{
	if (call->fd >= 0)
		ev_fd_del(call->ac->ev, call->fd);
	if (call->s)
		stream_free(call->s);
	else if (call->fd >= 0)
		sys_close(call->fd);
	call->s = NULL;
	call->fd = -1;
}

static void acall_unlink(struct http_acall *call)
{
	struct http_aclient *ac = call->ac;

	ev_timer_stop(ac->ev, &call->timer);
	resolve_cancel(call->lookup);	/* its thread drops the answer */
	call->lookup = NULL;
	acall_drop_conn(call);
	DLIST_UNLINK(ac->calls, call);
}

static void acall_release(struct http_acall *call)
{
	reader_release(&call->rr);
	http_client_resp_release(&call->resp);
	if (call->addrs)
		freeaddrinfo(call->addrs);
	buf_wipe(&call->reqb);
	explicit_bzero(call->url, strlen(call->url));
	free(call->url);
	explicit_bzero(call, sizeof(*call));
	free(call);
}

static void acall_free(struct http_acall *call)
{
	acall_unlink(call);
	acall_release(call);
}

void http_acall_cancel(struct http_acall *call)
{
	if (call)
		acall_free(call);
}

void http_aclient_free(struct http_aclient *ac)
{
	if (!ac)
		return;
	while (ac->calls)
		acall_free(ac->calls);
	pool_release(&ac->pool);
	resolver_free(ac->resolver);
	free(ac);
}

static void acall_finish(struct http_acall *call, const struct err *e)
{
	http_aclient_fn fn = call->fn;
	void *arg = call->arg;

	if (!e && call->rr.keep_alive && call->s) {
		ev_fd_del(call->ac->ev, call->fd);
		pool_put(&call->ac->pool, call->t.key, call->s);
		call->s = NULL;
		call->fd = -1;
	}
	/* Unlink before calling out: the callback may start new calls or free the client. */
	acall_unlink(call);
	fn(e ? NULL : &call->resp, e, arg);
	acall_release(call);
}

static void acall_fail(struct http_acall *call, struct err *e)
{
	acall_finish(call, e);
}

static void acall_on_fd(struct ev *ev, int fd, int revents, void *arg);
static void acall_on_timer(struct ev *ev, void *arg);

static void acall_watch(struct http_acall *call, int events)
{
	ev_fd_set(call->ac->ev, call->fd, events);
}

/* Dial call->ai, then the addresses after it, until a connect is under way. */
static void acall_dial(struct http_acall *call)
{
	struct err e;

	err_set(&e, "connect %s: no address", call->peer);
	for (; call->ai; call->ai = call->ai->ai_next) {
		int fd = stream_connect_addr(call->ai, call->t.host, call->t.port, &e);
		if (fd < 0)
			continue;
		call->fd = fd;
		call->phase = A_CONNECTING;
		ev_fd_add(call->ac->ev, call->fd, EV_WRITE, acall_on_fd, call);
		return;
	}
	acall_fail(call, &e);
}

static void acall_on_resolved(struct addrinfo *res, const struct err *re, void *arg)
{
	struct http_acall *call = arg;
	struct err e;

	call->lookup = NULL;
	if (!res) {
		e = *re;
		acall_fail(call, &e);
		return;
	}
	call->addrs = res;
	call->ai = res;
	acall_dial(call);
}

/* Start (or restart) the connection. */
static void acall_connect(struct http_acall *call)
{
	struct err e;
	int lit;

	call->s = pool_take(&call->ac->pool, call->t.key);
	call->reused = call->s != NULL;
	call->written = 0;
	reader_release(&call->rr);
	reader_init(&call->rr, &call->resp, call->head_req);
	if (call->s) {
		call->fd = stream_fd(call->s);
		call->phase = A_WRITING;
		ev_fd_add(call->ac->ev, call->fd, EV_WRITE, acall_on_fd, call);
		return;
	}
	call->ac->dials++;
	if (call->addrs) {
		freeaddrinfo(call->addrs);
		call->addrs = NULL;
		call->ai = NULL;
	}
	lit = resolve_numeric(call->t.host, call->t.port, &call->addrs, &e);
	if (lit < 0) {
		acall_fail(call, &e);
		return;
	}
	if (lit == 0) {
		/* A name: look it up off the loop; acall_on_resolved goes on. */
		call->phase = A_RESOLVING;
		call->lookup = resolve_start(call->ac->resolver, call->t.host, call->t.port, acall_on_resolved,
					     call, &e);
		if (!call->lookup)
			acall_fail(call, &e);
		return;
	}
	call->ai = call->addrs;
	acall_dial(call);
}

/* A reused connection died before answering: once, try a fresh one. */
static bool acall_retry(struct http_acall *call)
{
	if (!call->reused || call->retried || call->rr.got_bytes)
		return false;
	call->retried = true;
	acall_drop_conn(call);
	log_debug("http", "%s: kept-alive connection was closed; retrying on a new one", call->peer);
	acall_connect(call);
	return true;
}

static void acall_step(struct http_acall *call)
{
	struct err e;

	if (call->phase == A_CONNECTING) {
		if (stream_connect_finish(call->fd, call->t.host, call->t.port, &e) < 0) {
			if (call->ai && call->ai->ai_next) {
				/* localhost may be ::1 then 127.0.0.1: try the next one */
				log_debug("http", "%s; trying the next address", e.msg);
				acall_drop_conn(call);
				call->ai = call->ai->ai_next;
				acall_dial(call);
				return;
			}
			acall_fail(call, &e);
			return;
		}
		if (call->t.tls) {
			call->s = stream_new_tls_connect(call->fd, call->t.host, &e);
			if (!call->s) {
				acall_fail(call, &e);
				return;
			}
			call->phase = A_HANDSHAKE;
		} else {
			call->s = stream_new_plain(call->fd);
			call->phase = A_WRITING;
		}
	}
	if (call->phase == A_HANDSHAKE) {
		int r = stream_handshake(call->s, &e);
		if (r < 0) {
			char why[ERR_MSG_MAX];
			const char *m = e.msg;
			if (str_has_prefix(m, "tls handshake: "))
				m += strlen("tls handshake: ");
			str_copy(why, sizeof(why), m);
			err_set(&e, "tls handshake with %s: %s", call->peer, why);
			acall_fail(call, &e);
			return;
		}
		if (r == 0) {
			acall_watch(call, stream_wants(call->s));
			return;
		}
		call->phase = A_WRITING;
	}
	if (call->phase == A_WRITING) {
		while (call->written < call->reqb.len) {
			ssize_t w = stream_write(call->s, call->reqb.data + call->written, call->reqb.len - call->written);
			if (w > 0) {
				call->written += (size_t)w;
				continue;
			}
			if (errno == EAGAIN) {
				acall_watch(call, stream_wants(call->s));
				return;
			}
			if (acall_retry(call))
				return;
			err_errno(&e, "sending request to %s", call->peer);
			acall_fail(call, &e);
			return;
		}
		call->phase = A_READING;
	}
	/* A_READING */
	for (;;) {
		int r = reader_feed(&call->rr, &e);
		ssize_t n;
		if (r > 0) {
			acall_finish(call, NULL);
			return;
		}
		if (r < 0) {
			acall_fail(call, &e);
			return;
		}
		if (buf_grow(&call->rr.in, HTTP_READ_CHUNK) < 0) {
			err_set(&e, "response head too large");
			acall_fail(call, &e);
			return;
		}
		n = stream_read(call->s, call->rr.in.data + call->rr.in.len, HTTP_READ_CHUNK);
		if (n > 0) {
			call->rr.got_bytes = true;
			buf_setlen(&call->rr.in, call->rr.in.len + (size_t)n);
			continue;
		}
		if (n < 0 && errno == EAGAIN) {
			acall_watch(call, stream_wants(call->s));
			return;
		}
		if (acall_retry(call))
			return;
		if (n == 0) {
			if (reader_eof(&call->rr, call->peer, &e) > 0)
				acall_finish(call, NULL);
			else
				acall_fail(call, &e);
			return;
		}
		err_errno(&e, "reading response from %s", call->peer);
		acall_fail(call, &e);
		return;
	}
}

static void acall_on_fd(struct ev *ev, int fd, int revents, void *arg)
{
	acall_step(arg);
}

static void acall_on_timer(struct ev *ev, void *arg)
{
	struct http_acall *call = arg;
	struct err e;

	if (call->phase == A_START) {
		ev_timer_start(ev, &call->timer, call->deadline - ev_mono_ms(), acall_on_timer, call);
		acall_connect(call);
		return;
	}
	if (call->phase == A_RESOLVING) {
		err_set(&e, "timeout after %d ms resolving %s", call->timeout_ms, call->t.host);
		acall_fail(call, &e);
		return;
	}
	err_set(&e, "timeout after %d ms %s %s", call->timeout_ms,
		call->phase == A_CONNECTING ? "connecting to" :
		call->phase == A_HANDSHAKE ? "in the TLS handshake with" :
		call->phase == A_WRITING ? "sending request to" : "reading response from", call->peer);
	acall_fail(call, &e);
}

struct http_acall *http_aclient_do(struct http_aclient *ac, const struct http_client_req *req,
				   size_t max_body, http_aclient_fn fn, void *arg, struct err *e)
{
	struct http_acall *call = xcalloc(1, sizeof(*call));

	call->ac = ac;
	call->fd = -1;
	call->reqb = (struct buf)BUF_INIT;
	call->resp = (struct http_client_resp)HTTP_CLIENT_RESP_INIT;
	buf_init(&call->resp.body, max_body ? max_body : HTTP_MAX_BODY_DEFAULT * 64);
	call->url = xstrdup(req->url ? req->url : "");
	if ((req->unix_socket && err_set(e, "the asynchronous client does not dial Unix sockets") < 0) ||
	    target_parse(call->url, &call->t, e) < 0 || build_request(req, &call->t, &call->reqb, e) < 0) {
		buf_wipe(&call->reqb);
		buf_release(&call->resp.body);
		explicit_bzero(call->url, strlen(call->url));
		free(call->url);
		free(call);
		return NULL;
	}
	snprintf(call->peer, sizeof(call->peer), strchr(call->t.host, ':') ? "[%s]:%d" : "%s:%d",
		 call->t.host, call->t.port);
	buf_init(&call->rr.in, HTTP_MAX_HEADER_BYTES + HTTP_READ_CHUNK);
	call->timeout_ms = req->timeout_ms > 0 ? req->timeout_ms : HTTP_CLIENT_TIMEOUT_DEFAULT_MS;
	call->deadline = ev_mono_ms() + call->timeout_ms;
	call->fn = fn;
	call->arg = arg;
	call->head_req = req->method && strcmp(req->method, "HEAD") == 0;
	call->phase = A_START;
	DLIST_PUSH(ac->calls, call);
	ev_timer_start(ac->ev, &call->timer, 0, acall_on_timer, call);
	return call;
}

/* ---- test hook (http_int.h) ---- */

int http_int_read_response(const char *data, size_t len, const size_t *steps, size_t nsteps,
			   bool head_req, struct http_client_resp *resp, struct err *e)
{
	struct reader rr;
	size_t off = 0, k = 0;
	int r = 0;

	reader_init(&rr, resp, head_req);
	while (off < len) {
		size_t n = nsteps ? steps[k++ % nsteps] : len;
		if (n == 0)
			n = 1;
		if (n > len - off)
			n = len - off;
		if (buf_add(&rr.in, data + off, n) < 0) {
			r = err_set(e, "response head too large");
			goto out;
		}
		off += n;
		rr.got_bytes = true;
		r = reader_feed(&rr, e);
		if (r != 0)
			goto out;
	}
	r = reader_eof(&rr, "peer", e);
	if (r < 0)
		r = rr.phase == RR_DONE ? 1 : -1;
out:
	reader_release(&rr);
	return r;
}
