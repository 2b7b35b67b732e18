/*
 * server.c: the HTTP/1.1 server on the event loop.
 *
 * One struct conn per connection, driven by conn_run(), the only function
 * that parses, calls handlers and decides to close. Everything a handler or a
 * later event calls (http_respond, http_stream_*) only queues output, tries a
 * write and, when the connection has more to do, kicks conn_run through the
 * connection's timer at 0 ms; so no user callback ever runs nested inside
 * another user call, and a connection is never freed under a caller's feet.
 *
 * Requests are answered strictly in order: the next pipelined request is not
 * parsed until the current one is answered (parked requests hold the line).
 * A request owns a copy of its head, so it outlives its connection: a parked
 * request whose client went away stays valid (gone) until answered.
 *
 * Admission (the policy is in http.h, "Connection limits"): each connection
 * belongs to a struct peer (its client address) and to a pool (main or
 * reserve). While it waits (no request in progress) it sits in two FIFO
 * queues, its pool's and its peer's, so the longest-waiting connection to
 * evict is found at a queue's head, not by scanning every connection.
 *
 * What this buys under a flood, and what it does not: silent or trickling
 * connections, from one address or many, never lock anyone out: they die at
 * the first-byte or header deadline, and before that each new connection
 * pushes the oldest of them out, so a client whose head arrives within the
 * time the flood takes to open max_conns more connections is served. One
 * address cannot even do that to others: at its cap it only evicts its own.
 * Busy connections (complete heads with bodies trickled within the body
 * timeout, slow readers of responses) from max_conns / max_conns_per_addr
 * addresses or more can fill the main pool; then other clients get 503 with
 * Retry-After, and the reserve still lets sidecars reach their stream.
 */
#include "http/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/list.h"
#include "base/log.h"
#include "base/str.h"
#include "base/sys.h"
#include "json/json.h"
#include "http/server_int.h"

#define LISTEN_BACKLOG 1024
/* Stop parsing pipelined requests while this much output waits for the peer. */
#define PIPELINE_OUT_HIGH (256 * 1024)
/* Accept at most this many connections per readiness of the listener, so
 * that a connection flood cannot starve the connections we already have. */
#define ACCEPT_BATCH 64
/* Waiting connections looked at to choose one to evict (preferring one that
 * never completed a request); bounds the work a flood makes per accept. */
#define EVICT_SCAN_MAX 32
/* Buckets of the table of client addresses (a power of two). The hash is
 * not keyed: chosen addresses can share a bucket, but a chain is never
 * longer than the connections open (max_conns + reserve_conns). */
#define PEER_BUCKETS 1024
/* Out of file descriptors (EMFILE): stop accepting for this long, rather
 * than spin on a listener that stays readable. */
#define ACCEPT_PAUSE_MS 100
/* At most one warning per this many ms that limits are being hit. */
#define PRESSURE_LOG_MS 10000

static void conn_run(struct conn *c);
static void conn_destroy(struct conn *c);
static void conn_on_fd(struct ev *ev, int fd, int revents, void *arg);
static void conn_on_timer(struct ev *ev, void *arg);

/* ---- small helpers ---- */

/* The response hook, if still set, hears that no ordinary answer comes. */
static void req_hook_none(struct http_req *req)
{
	http_resp_hook_fn fn = req->on_respond;

	req->on_respond = NULL;
	if (fn)
		fn(req, 0, NULL, NULL, 0, req->respond_arg);
}

void hs_req_free(struct http_req *req)
{
	if (!req)
		return;
	req_hook_none(req);
	free(req->head);
	free(req->path_owned);
	free(req->hnames);
	for (size_t i = 0; i < req->nparams; i++)
		free(req->pvals[i]);
	buf_release(&req->qstore);
	buf_release(&req->body);
	buf_release(&req->rhead);
	free(req);
}

/* Write what we can of out. Never calls user code. */
void hs_conn_flush(struct conn *c)
{
	while (!c->broken && c->s && c->out_off < c->out.len) {
		ssize_t w = stream_write(c->s, c->out.data + c->out_off, c->out.len - c->out_off);
		if (w < 0) {
			if (errno == EAGAIN) {
				c->wr_want = stream_wants(c->s);
				return;
			}
			c->broken = true;
			return;
		}
		c->out_off += (size_t)w;
		if (c->tkind == T_WRITE)
			c->tkind = T_NONE;	/* progress: settle re-arms the write timeout */
	}
	if (c->out_off == c->out.len && c->out.len) {
		/* Keep the allocation for the next response unless it grew large. */
		if (c->out.cap > 4 * HTTP_READ_CHUNK)
			buf_release(&c->out);
		else
			buf_reset(&c->out);
		c->out_off = 0;
	}
}

size_t hs_out_pending(const struct conn *c)
{
	return c->out.len - c->out_off;
}

void hs_conn_kick(struct conn *c)
{
	c->tkind = T_KICK;
	ev_timer_start(c->srv->ev, &c->timer, 0, conn_on_timer, c);
}

void hs_log_access(const struct http_req *req)
{
	if (log_get_level() > LOG_DEBUG)
		return;
	log_debug("http", "%s \"%s %s HTTP/1.%d\" %d %zu %lldms", req->peer, req->method, req->target,
		  req->minor, req->status, req->resp_bytes, (long long)(ev_mono_ms() - req->started));
}

/*
 * Answer a request the server refuses itself (400, 404, 413, ...) on connection
 * c, outside any handler. close: close after it (body not read, or bad input).
 */
static void conn_error(struct conn *c, struct http_req *req, int status, const char *msg, bool close)
{
	char tmp[ERR_MSG_MAX + 32];
	struct buf body;
	size_t blen;

	body = (struct buf)BUF_INIT;
	hs_json_error(&body, msg);
	blen = body.len;
	if (close)
		c->close_after = true;
	if (req) {
		req->keep_alive = req->keep_alive && !close;
		c->req = req;
		hs_queue_response(req, status, "application/json", body.data, blen, false);
	} else {
		/* No request object: the head itself was refused. */
		int n = snprintf(tmp, sizeof(tmp),
				 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
				 "Connection: close\r\n\r\n", status, http_status_text(status), blen);
		buf_add(&c->out, tmp, (size_t)n);
		buf_add(&c->out, body.data, blen);
		c->close_after = true;
		log_debug("http", "%s refused: %d %s", c->peer, status, msg);
	}
	buf_release(&body);
}

/* ---- admission: client addresses, waiting queues, eviction ---- */

static struct clink *qlink(struct conn *c, bool peer)
{
	return peer ? &c->lpeer : &c->lpool;
}

static void q_push(struct cqueue *q, struct conn *c, bool peer)
{
	struct clink *l = qlink(c, peer);

	l->prev = q->tail;
	l->next = NULL;
	if (q->tail)
		qlink(q->tail, peer)->next = c;
	else
		q->head = c;
	q->tail = c;
	q->n++;
}

static void q_remove(struct cqueue *q, struct conn *c, bool peer)
{
	struct clink *l = qlink(c, peer);

	if (l->prev)
		qlink(l->prev, peer)->next = l->next;
	else
		q->head = l->next;
	if (l->next)
		qlink(l->next, peer)->prev = l->prev;
	else
		q->tail = l->prev;
	l->prev = l->next = NULL;
	q->n--;
}

static struct cqueue *pool_queue(struct conn *c)
{
	return c->reserve ? &c->srv->waiting_reserve : &c->srv->waiting_main;
}

/* The connection has no request in progress: it may be evicted. Entering
 * again (after each request) puts it at the tails: oldest first. */
static void wait_enter(struct conn *c)
{
	if (c->waiting)
		return;
	q_push(pool_queue(c), c, false);
	q_push(&c->addr->waiting, c, true);
	c->waiting = true;
}

static void wait_leave(struct conn *c)
{
	if (!c->waiting)
		return;
	q_remove(pool_queue(c), c, false);
	q_remove(&c->addr->waiting, c, true);
	c->waiting = false;
}

/* The key of a client address: IPv4 (also when mapped into IPv6), or the
 * /64 of an IPv6 address, which one client is usually given whole. */
static void peer_key(const struct sockaddr_storage *ss, unsigned char key[PEER_KEY_LEN])
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	memset(key, 0, PEER_KEY_LEN);
	if (ss->ss_family == AF_INET) {
		key[0] = 4;
		memcpy(key + 1, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		const unsigned char *a = ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
		if (memcmp(a, mapped, sizeof(mapped)) == 0) {
			key[0] = 4;
			memcpy(key + 1, a + 12, 4);
		} else {
			key[0] = 6;
			memcpy(key + 1, a, 8);
		}
	}
}

static size_t peer_bucket(const unsigned char key[PEER_KEY_LEN])
{
	uint32_t h = 2166136261u;	/* FNV-1a */

	for (size_t i = 0; i < PEER_KEY_LEN; i++)
		h = (h ^ key[i]) * 16777619u;
	return h & (PEER_BUCKETS - 1);
}

static struct peer *peer_find(struct http_server *srv, const unsigned char key[PEER_KEY_LEN])
{
	for (struct peer *p = srv->peers[peer_bucket(key)]; p; p = p->next)
		if (memcmp(p->key, key, PEER_KEY_LEN) == 0)
			return p;
	return NULL;
}

static struct peer *peer_get(struct http_server *srv, const unsigned char key[PEER_KEY_LEN])
{
	struct peer *p = peer_find(srv, key);
	size_t b;

	if (p)
		return p;
	b = peer_bucket(key);
	p = xcalloc(1, sizeof(*p));
	memcpy(p->key, key, PEER_KEY_LEN);
	p->next = srv->peers[b];
	srv->peers[b] = p;
	return p;
}

/* A connection of p closed: forget the address with its last one. */
static void peer_put(struct http_server *srv, struct peer *p)
{
	struct peer **pp;

	if (--p->nconns > 0)
		return;
	for (pp = &srv->peers[peer_bucket(p->key)]; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	free(p);
}

/* The connection to evict from q: the longest-waiting one that never
 * completed a request, else the longest-waiting one; never one still
 * writing a response. NULL when none of the first EVICT_SCAN_MAX will do. */
static struct conn *q_victim(struct cqueue *q, bool peer)
{
	struct conn *idle = NULL;
	size_t n = 0;

	for (struct conn *c = q->head; c && n < EVICT_SCAN_MAX; c = qlink(c, peer)->next, n++) {
		if (hs_out_pending(c) || c->in_run)
			continue;
		if (c->fresh || c->state == C_HANDSHAKE)
			return c;
		if (!idle)
			idle = c;
	}
	return idle;
}

static void pressure_log(struct http_server *srv);

static void evict(struct conn *c, const char *why)
{
	log_debug("http", "%s: evicted (%s, waiting %lld ms)", c->peer, why,
		  (long long)(ev_mono_ms() - c->ready_at));
	c->srv->stats.evicted++;
	pressure_log(c->srv);
	conn_destroy(c);
}

/* Warn, at most every PRESSURE_LOG_MS, while limits are being hit, with the
 * counts since the last warning (the debug log has each connection). */
static void pressure_log(struct http_server *srv)
{
	struct http_server_stats *s = &srv->stats, *l = &srv->logged;
	int64_t now = ev_mono_ms();

	if (srv->pressure_logged_at && now - srv->pressure_logged_at < PRESSURE_LOG_MS)
		return;
	srv->pressure_logged_at = now;
	log_warn("http", "connection limits: %llu evicted, %llu refused per address, %llu refused at the limit, "
		 "%llu refused in the reserve (open %zu, reserve %zu)",
		 (unsigned long long)(s->evicted - l->evicted),
		 (unsigned long long)(s->refused_addr - l->refused_addr),
		 (unsigned long long)(s->refused_full - l->refused_full),
		 (unsigned long long)(s->refused_reserve - l->refused_reserve), srv->nconns, srv->nreserve);
	*l = *s;
}

/*
 * Make room for a new connection from key (the policy is in http.h).
 * Returns 0 with *reserve telling the pool, or the status to refuse with:
 * 429 (the address's connections all busy) or 503 (every slot busy).
 */
static int admit(struct http_server *srv, const unsigned char key[PEER_KEY_LEN], bool *reserve)
{
	struct peer *p = peer_find(srv, key);
	struct conn *v;

	if (srv->max_per_addr && p && p->nconns >= srv->max_per_addr) {
		if (!(v = q_victim(&p->waiting, true))) {
			srv->stats.refused_addr++;
			return 429;
		}
		evict(v, "address at its cap");
	}
	*reserve = false;
	if (srv->nconns - srv->nreserve < srv->max_conns)
		return 0;
	if ((v = q_victim(&srv->waiting_main, false))) {
		evict(v, "connections at the limit");
		return 0;
	}
	*reserve = true;
	if (srv->nreserve < srv->reserve_conns)
		return 0;
	if ((v = q_victim(&srv->waiting_reserve, false))) {
		evict(v, "reserve full");
		return 0;
	}
	srv->stats.refused_full++;
	return 503;
}

/* Refuse a connection at accept: a short answer on plain HTTP (TLS would
 * need a handshake we will not spend), then close. */
static void refuse_at_accept(struct http_server *srv, int cfd, int status)
{
	char msg[256];
	const char *why = status == 429 ? "too many connections from this address" : "too many connections";
	char body[96];
	int bn = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", why);
	int n = snprintf(msg, sizeof(msg),
			 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
			 "Retry-After: %d\r\nConnection: close\r\n\r\n%s",
			 status, http_status_text(status), bn, HTTP_RETRY_AFTER_S, body);

	if (!srv->tls && n > 0 && (size_t)n < sizeof(msg))
		(void)!send(cfd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
	sys_close(cfd);
	pressure_log(srv);
}

void http_server_stats(const struct http_server *srv, struct http_server_stats *out)
{
	*out = srv->stats;
	out->reserve = srv->nreserve;
	out->waiting = srv->waiting_main.n + srv->waiting_reserve.n;
}

/* ---- request construction ---- */

/* Parse a Content-Length value: digits only, no overflow. */
static int parse_length(const char *v, uint64_t *out)
{
	uint64_t n = 0;

	if (!*v)
		return -1;
	for (; *v; v++) {
		if (*v < '0' || *v > '9')
			return -1;
		if (n > (UINT64_MAX - 9) / 10)
			return -1;
		n = n * 10 + (uint64_t)(*v - '0');
	}
	*out = n;
	return 0;
}

/* Copy the parsed head into a new req, NUL-terminating the pieces in place. */
static struct http_req *req_new(struct conn *c, const char *buf, size_t n, const struct http_request_head *h)
{
	struct http_req *req = xcalloc(1, sizeof(*req));
	char *copy = xmemdup(buf, n + 1);
	const char *q;

	copy[n] = '\0';
#define REBASE(p) (copy + ((p) - buf))
	req->srv = c->srv;
	req->conn = c;
	req->head = copy;
	req->method = REBASE(h->method);
	copy[h->method - buf + h->method_len] = '\0';
	req->target = REBASE(h->target);
	copy[h->target - buf + h->target_len] = '\0';
	req->minor = h->minor_version;
	req->nheaders = h->nheaders;
	req->hnames = xmalloc((h->nheaders + 1) * 2 * sizeof(char *));
	req->hvalues = req->hnames + h->nheaders + 1;
	for (size_t i = 0; i < h->nheaders; i++) {
		req->hnames[i] = REBASE(h->headers[i].name);
		copy[h->headers[i].name - buf + h->headers[i].name_len] = '\0';
		req->hvalues[i] = REBASE(h->headers[i].value);
		copy[h->headers[i].value - buf + h->headers[i].value_len] = '\0';
	}
#undef REBASE
	q = strchr(req->target, '?');
	if (q) {
		req->path_owned = xstrndup(req->target, (size_t)(q - req->target));
		req->path = req->path_owned;
		req->query = q + 1;
		req->query_len = strlen(q + 1);
	} else {
		req->path = req->target;
	}
	req->body = (struct buf)BUF_INIT;
	req->rhead = (struct buf)BUF_INIT;
	req->qstore = (struct buf)BUF_INIT;
	req->started = ev_mono_ms();
	req->head_only = strcmp(req->method, "HEAD") == 0;
	memcpy(req->peer, c->peer, sizeof(req->peer));
	return req;
}

/* Look at the head of req and decide routing and body framing. Returns 0 to
 * go on (state set), -1 when an error response was queued. */
static int req_start(struct conn *c, struct http_req *req)
{
	struct http_server *srv = c->srv;
	const char *conn_h = NULL, *te = NULL, *cl = NULL, *expect = NULL;
	int nhost = 0;
	uint64_t len = 0;
	char msg[256];
	int status;
	struct buf allow = BUF_INIT;

	for (size_t i = 0; i < req->nheaders; i++) {
		const char *n = req->hnames[i], *v = req->hvalues[i];
		switch (n[0] | 0x20) {
		case 'c':
			if (strcasecmp(n, "connection") == 0) {
				conn_h = v;
			} else if (strcasecmp(n, "content-length") == 0) {
				uint64_t l;
				if (parse_length(v, &l) < 0 || (cl && l != len)) {
					conn_error(c, req, 400, "invalid Content-Length", true);
					return -1;
				}
				cl = v;
				len = l;
			}
			break;
		case 't':
			if (strcasecmp(n, "transfer-encoding") == 0) {
				if (te) {
					conn_error(c, req, 400, "more than one Transfer-Encoding header", true);
					return -1;
				}
				te = v;
			}
			break;
		case 'h':
			if (strcasecmp(n, "host") == 0)
				nhost++;
			break;
		case 'e':
			if (strcasecmp(n, "expect") == 0)
				expect = v;
			break;
		}
	}
	req->keep_alive = req->minor >= 1 ? !(conn_h && http_token_has(conn_h, strlen(conn_h), "close"))
					  : (conn_h && http_token_has(conn_h, strlen(conn_h), "keep-alive"));
	if (c->reserve)
		req->keep_alive = false;	/* a reserve slot serves one request */
	if (te && cl) {
		conn_error(c, req, 400, "both Transfer-Encoding and Content-Length", true);
		return -1;
	}
	if (te) {
		if (req->minor == 0) {
			conn_error(c, req, 400, "Transfer-Encoding in an HTTP/1.0 request", true);
			return -1;
		}
		if (strcasecmp(te, "chunked") != 0) {
			conn_error(c, req, 501, "unsupported Transfer-Encoding (only chunked)", true);
			return -1;
		}
		req->chunked = true;
	}
	req->body_left = len;
	if ((req->minor >= 1 && nhost != 1) || nhost > 1) {
		conn_error(c, req, 400, nhost ? "more than one Host header" : "missing Host header", true);
		return -1;
	}
	if (req->target[0] != '/') {
		conn_error(c, req, 400, "request target must be an absolute path", true);
		return -1;
	}
	if (hs_route_find(srv, req, &status, msg, sizeof(msg), &allow) < 0) {
		bool has_body = req->chunked || len > 0;
		if (status == 405)
			http_resp_header(req, "Allow", allow.data);
		buf_release(&allow);
		/* A body we did not read would be taken for the next request: skip it if
		 * it is all here, else close after answering. */
		if (has_body && !req->chunked && len <= c->in.len) {
			buf_consume(&c->in, (size_t)len);
			has_body = false;
		}
		conn_error(c, req, status, msg, has_body);
		return -1;
	}
	buf_release(&allow);
	if (c->reserve && !(req->route->flags & HTTP_ROUTE_RESERVED)) {
		char ra[16];

		srv->stats.refused_reserve++;
		pressure_log(srv);
		snprintf(ra, sizeof(ra), "%d", HTTP_RETRY_AFTER_S);
		http_resp_header(req, "Retry-After", ra);
		conn_error(c, req, 503, "too many connections", true);
		return -1;
	}
	buf_init(&req->body, req->route->max_body);
	if (len > req->route->max_body) {
		conn_error(c, req, 413, "request body too large", true);
		return -1;
	}
	if (expect) {
		if (strcasecmp(expect, "100-continue") != 0) {
			conn_error(c, req, 417, "unsupported Expect", true);
			return -1;
		}
		/* Ask for the body only if it is not already on its way. */
		if (req->minor >= 1 && (req->chunked || len > 0) && c->in.len == 0)
			buf_adds(&c->out, "HTTP/1.1 100 Continue\r\n\r\n");
	}
	if (len > 0 && (size_t)len > HTTP_READ_CHUNK)
		buf_grow(&req->body, (size_t)len);	/* one allocation for a known size */
	c->state = (req->chunked || len > 0) ? C_BODY : C_HANDLER;
	c->tkind = T_NONE;
	return 0;
}

/* Move body bytes from c->in to the req. 1 complete, 0 need more, -1 refused (queued). */
static int read_body(struct conn *c, struct http_req *req)
{
	if (req->chunked) {
		ssize_t r = http_chunked_decode(&req->ch, c->in.data, c->in.len, &req->body);
		if (r == HTTP_PARSE_TOO_BIG) {
			conn_error(c, req, 413, "request body too large", true);
			return -1;
		}
		if (r < 0) {
			conn_error(c, req, 400, "malformed chunked body", true);
			return -1;
		}
		buf_consume(&c->in, (size_t)r);
		return req->ch.done ? 1 : 0;
	}
	size_t n = c->in.len < req->body_left ? c->in.len : (size_t)req->body_left;
	if (buf_add(&req->body, c->in.data, n) < 0) {
		conn_error(c, req, 413, "request body too large", true);
		return -1;
	}
	buf_consume(&c->in, n);
	req->body_left -= n;
	return req->body_left == 0;
}

/* ---- the connection engine ---- */

static void conn_read(struct conn *c)
{
	for (;;) {
		size_t room = c->in.max - c->in.len;
		ssize_t r;
		if (room == 0)
			return;
		if (room > HTTP_READ_CHUNK)
			room = HTTP_READ_CHUNK;
		if (buf_grow(&c->in, room) < 0)
			return;
		r = stream_read(c->s, c->in.data + c->in.len, room);
		if (r > 0) {
			buf_setlen(&c->in, c->in.len + (size_t)r);
			if (c->state == C_BODY)
				c->tkind = T_NONE;	/* progress: restart the body clock */
			if ((size_t)r < room && !stream_pending(c->s))
				return;	/* drained the socket: skip the EAGAIN round trip */
			continue;
		}
		if (r == 0) {
			c->read_eof = true;
			return;
		}
		if (errno == EAGAIN) {
			c->rd_want = stream_wants(c->s);
			return;
		}
		c->broken = true;
		return;
	}
}

/* Find the end of the head without rescanning: O(n) over a slow trickle. */
static bool head_complete(struct conn *c)
{
	size_t from = c->scanned > 3 ? c->scanned - 3 : 0;
	bool found = c->in.len >= 4 && memmem(c->in.data + from, c->in.len - from, "\r\n\r\n", 4) != NULL;

	c->scanned = c->in.len;
	return found;
}

static void dispatch(struct conn *c, struct http_req *req)
{
	c->req = req;
	req->dispatched = true;
	c->in_dispatch = true;
	req->route->fn(req, req->route->arg);
	c->in_dispatch = false;
}

/* Parse and dispatch while we can. Returns -1 if the connection was detached (c freed). */
static int conn_process(struct conn *c)
{
	struct http_request_head h;

	while (!c->broken && !c->close_after) {
		if (c->state == C_HANDLER) {
			if (c->req)
				return 0;	/* parked or streaming: hold the line */
			c->state = C_HEAD;
			c->rearm_idle = true;
			c->fresh = false;
			wait_enter(c);
			c->head_started = 0;
			c->scanned = 0;
			c->line_checked = false;
		}
		if (c->state == C_HEAD) {
			int r;
			if (c->in.len == 0 || hs_out_pending(c) > PIPELINE_OUT_HIGH)
				return 0;
			if (!c->head_started) {
				c->head_started = ev_now(c->srv->ev);
				c->tkind = T_NONE;
			}
			/* Run the parser when the head is complete, or on the first bytes
			 * (so garbage is refused at once), but not on every byte of a trickle. */
			bool complete = head_complete(c);
			if (!complete && c->line_checked) {
				if (c->in.len >= HTTP_MAX_HEADER_BYTES)
					conn_error(c, NULL, 431, "request header too large", true);
				return 0;
			}
			r = http_parse_request_head(c->in.data, c->in.len, &h);
			if (r == HTTP_PARSE_NEED_MORE) {
				if (memchr(c->in.data, '\n', c->in.len))
					c->line_checked = true;
				if (c->in.len >= HTTP_MAX_HEADER_BYTES)
					conn_error(c, NULL, 431, "request header too large", true);
				return 0;
			}
			if (r == HTTP_PARSE_BAD) {
				conn_error(c, NULL, 400, "malformed request", true);
				return 0;
			}
			if (r == HTTP_PARSE_TOO_BIG) {
				bool line = !memchr(c->in.data, '\n', c->in.len < HTTP_MAX_REQUEST_LINE ? c->in.len : HTTP_MAX_REQUEST_LINE);
				conn_error(c, NULL, line ? 414 : 431,
					   line ? "request line too long" : "request header too large", true);
				return 0;
			}
			struct http_req *req = req_new(c, c->in.data, (size_t)r, &h);
			wait_leave(c);
			buf_consume(&c->in, (size_t)r);
			c->scanned = 0;
			c->req = req;
			if (req_start(c, req) < 0) {
				c->state = C_HANDLER;	/* answered: the top of the loop moves on */
				continue;
			}
		}
		if (c->state == C_BODY) {
			int r = read_body(c, c->req);
			if (r < 0)
				continue;
			if (r == 0)
				return 0;
			c->state = C_HANDLER;
			c->tkind = T_NONE;
		}
		if (c->state == C_HANDLER && c->req && !c->req->dispatched) {
			dispatch(c, c->req);
			if (c->detached) {
				free(c);
				return -1;
			}
		}
	}
	return 0;
}

static void conn_settle_timer(struct conn *c)
{
	struct http_server *srv = c->srv;
	enum timer_kind want;
	int64_t ms;

	if (c->state == C_HANDSHAKE)
		return;		/* armed once at accept */
	if (hs_out_pending(c)) {
		want = T_WRITE;
		ms = srv->write_timeout;
	} else if (c->state == C_HEAD && c->in.len == 0 && c->fresh) {
		want = T_FIRST;
		ms = c->ready_at + srv->first_byte_timeout - ev_mono_ms();
	} else if (c->state == C_HEAD && c->in.len == 0) {
		want = T_IDLE;
		ms = srv->idle_timeout;
		if (c->rearm_idle)
			c->tkind = T_NONE;
	} else if (c->state == C_HEAD) {
		want = T_HEADER;
		if (!c->head_started)
			c->head_started = ev_now(srv->ev);
		ms = c->head_started + srv->header_timeout - ev_mono_ms();
	} else if (c->state == C_BODY) {
		want = T_BODY;
		ms = srv->body_timeout;
	} else {
		want = T_NONE;
		ms = 0;
	}
	c->rearm_idle = false;
	/* tkind = T_NONE elsewhere means "re-arm at the next settle"; when that
	 * settle wants no timer (a request in its handler, parked for as long as
	 * it takes), the header or body timer still armed must go too. */
	if (want == T_NONE) {
		c->tkind = T_NONE;
		ev_timer_stop(srv->ev, &c->timer);
		return;
	}
	if (want == c->tkind)
		return;
	c->tkind = want;
	ev_timer_start(srv->ev, &c->timer, ms, conn_on_timer, c);
}

static void conn_settle_events(struct conn *c)
{
	int ev = 0;

	/* Read in every state while there is room: in a handler that is how we
	 * notice the client leaving (and we buffer pipelined requests). */
	if (c->in.len < c->in.max && !c->read_eof)
		ev |= c->rd_want ? c->rd_want : EV_READ;
	if (hs_out_pending(c))
		ev |= c->wr_want ? c->wr_want : EV_WRITE;
	if (ev != c->events) {
		c->events = ev;
		ev_fd_set(c->srv->ev, c->fd, ev);
	}
}

static void conn_run_inner(struct conn *c);

static void conn_run(struct conn *c)
{
	c->in_run = true;
	conn_run_inner(c);	/* may free c */
}

/* Clear in_run before every return that keeps c. */
#define RUN_DONE(c) ((c)->in_run = false)

static void conn_run_inner(struct conn *c)
{
	struct err e;

	if (c->state == C_HANDSHAKE) {
		int r = stream_handshake(c->s, &e);
		if (r < 0) {
			log_debug("http", "%s: %s", c->peer, e.msg);
			conn_destroy(c);
			return;
		}
		if (r == 0) {
			c->rd_want = stream_wants(c->s);
			int ev = c->rd_want;
			if (ev != c->events) {
				c->events = ev;
				ev_fd_set(c->srv->ev, c->fd, ev);
			}
			RUN_DONE(c);
			return;
		}
		c->state = C_HEAD;
		c->fresh = true;
		c->head_started = 0;
		c->ready_at = ev_mono_ms();
		c->tkind = T_NONE;
	}
	if (hs_out_pending(c)) {
		c->wr_want = 0;
		hs_conn_flush(c);
		if (!hs_out_pending(c) && c->drain_pending && c->req && c->req->on_drain && !c->broken) {
			c->drain_pending = false;
			c->in_dispatch = true;
			c->req->on_drain(c->req, c->req->drain_arg);
			c->in_dispatch = false;
			if (c->detached) {
				free(c);
				return;
			}
		}
	}
	c->rd_want = 0;
	if (c->in.len < c->in.max && !c->read_eof && !c->broken)
		conn_read(c);
	if (conn_process(c) < 0)
		return;
	if (hs_out_pending(c))
		hs_conn_flush(c);
	if (c->broken || (c->close_after && !hs_out_pending(c))) {
		conn_destroy(c);
		return;
	}
	if (c->read_eof) {
		/* The client finished sending. A request a handler holds has lost
		 * its client; otherwise finish writing what is queued, then close. */
		if (c->state == C_HANDLER && c->req) {
			conn_destroy(c);
			return;
		}
		c->close_after = true;
		if (!hs_out_pending(c)) {
			conn_destroy(c);
			return;
		}
	}
	if (c->srv->shutting_down && c->state == C_HEAD && c->in.len == 0 && !hs_out_pending(c)) {
		conn_destroy(c);
		return;
	}
	conn_settle_events(c);
	conn_settle_timer(c);
	RUN_DONE(c);
}

static void conn_on_fd(struct ev *ev, int fd, int revents, void *arg)
{
	conn_run(arg);
}

static void conn_on_timer(struct ev *ev, void *arg)
{
	struct conn *c = arg;
	enum timer_kind k = c->tkind;

	c->tkind = T_NONE;
	if (k == T_KICK) {
		conn_run(c);
		return;
	}
	log_debug("http", "%s: closing: %s timeout", c->peer,
		  k == T_IDLE ? "idle" : k == T_FIRST ? "first byte" : k == T_HEADER ? "header" : k == T_BODY ? "body" :
		  k == T_WRITE ? "write" : "handshake");
	conn_destroy(c);
}

static void server_check_done(struct http_server *srv);

void hs_conn_unlink(struct conn *c)
{
	struct http_server *srv = c->srv;

	DLIST_UNLINK(srv->conns, c);
	wait_leave(c);
	if (c->reserve)
		srv->nreserve--;
	peer_put(srv, c->addr);
	c->addr = NULL;
	srv->nconns--;
	server_check_done(srv);
}

static void conn_destroy(struct conn *c)
{
	struct http_req *req = c->req;

	ev_timer_stop(c->srv->ev, &c->timer);
	ev_fd_del(c->srv->ev, c->fd);
	stream_free(c->s);
	buf_release(&c->in);
	buf_release(&c->out);
	hs_conn_unlink(c);
	free(c);
	if (req) {
		if (!req->dispatched) {
			hs_req_free(req);	/* never reached a handler: nobody else has it */
		} else {
			req->conn = NULL;
			req->gone = true;
			if (req->on_gone && !req->gone_quiet)
				req->on_gone(req, req->gone_arg);	/* may answer (free) req */
		}
	}
}

/* ---- server ---- */

static void server_done_fire(struct ev *ev, void *arg)
{
	struct http_server *srv = arg;

	if (!srv->done_called && srv->done_fn) {
		srv->done_called = true;
		srv->done_fn(srv, srv->done_arg);
	}
}

static void server_check_done(struct http_server *srv)
{
	if (srv->shutting_down && srv->nconns == 0 && !srv->done_called && srv->done_fn)
		ev_timer_start(srv->ev, &srv->done_timer, 0, server_done_fire, srv);
}

static void format_peer(const struct sockaddr_storage *ss, char *out, size_t n)
{
	char host[INET6_ADDRSTRLEN] = "?";

	snprintf(out, n, "?");
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		snprintf(out, n, "%s:%d", host, ntohs(a->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		snprintf(out, n, "[%s]:%d", host, ntohs(a->sin6_port));
	}
}

/* Take in an accepted socket: admit it (maybe evicting), or refuse it. */
static void conn_accept(struct http_server *srv, int cfd, const struct sockaddr_storage *ss)
{
	unsigned char key[PEER_KEY_LEN];
	bool reserve;
	int one = 1, status;
	struct conn *c;
	struct err e;

	peer_key(ss, key);
	status = admit(srv, key, &reserve);
	if (status) {
		refuse_at_accept(srv, cfd, status);
		return;
	}
	setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c = xcalloc(1, sizeof(*c));
	c->srv = srv;
	c->fd = cfd;
	c->in = (struct buf)BUF_INIT;
	c->in.max = HTTP_MAX_HEADER_BYTES + HTTP_READ_CHUNK;
	c->out = (struct buf)BUF_INIT;
	c->out.max = HTTP_WRITE_BUF_MAX + HTTP_MAX_HEADER_BYTES;
	c->ready_at = ev_mono_ms();
	format_peer(ss, c->peer, sizeof(c->peer));
	if (srv->tls) {
		c->s = stream_new_tls_accept(cfd, srv->tls, &e);
		if (!c->s) {
			log_warn("http", "%s: %s", c->peer, e.msg);
			sys_close(cfd);
			free(c);
			return;
		}
		c->state = C_HANDSHAKE;
		ev_timer_start(srv->ev, &c->timer, srv->header_timeout, conn_on_timer, c);
		c->tkind = T_HANDSHAKE;
	} else {
		c->s = stream_new_plain(cfd);
		c->state = C_HEAD;
		c->fresh = true;
	}
	DLIST_PUSH(srv->conns, c);
	srv->nconns++;
	srv->stats.accepted++;
	c->reserve = reserve;
	if (reserve)
		srv->nreserve++;
	c->addr = peer_get(srv, key);
	c->addr->nconns++;
	wait_enter(c);
	c->events = EV_READ;
	ev_fd_add(srv->ev, cfd, EV_READ, conn_on_fd, c);
	/* Data usually follows the connect at once; the loop will tell us. */
	if (!srv->tls)
		conn_settle_timer(c);
}

static void accept_resume(struct ev *ev, void *arg)
{
	struct http_server *srv = arg;

	if (srv->lfd >= 0)
		ev_fd_set(ev, srv->lfd, EV_READ);
}

static void on_accept(struct ev *ev, int fd, int revents, void *arg)
{
	struct http_server *srv = arg;

	for (int i = 0; i < ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int cfd = accept4(srv->lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (cfd < 0) {
			if (errno == EMFILE || errno == ENFILE) {
				int64_t now = ev_mono_ms();

				if (!srv->emfile_logged_at || now - srv->emfile_logged_at >= PRESSURE_LOG_MS) {
					srv->emfile_logged_at = now;
					log_warn("http", "accept: %s (%zu connections open); pausing %d ms at a time",
						 strerror(errno), srv->nconns, ACCEPT_PAUSE_MS);
				}
				ev_fd_set(ev, srv->lfd, 0);
				ev_timer_start(ev, &srv->accept_timer, ACCEPT_PAUSE_MS, accept_resume, srv);
			} else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
				log_warn("http", "accept: %s", strerror(errno));
			}
			return;
		}
		conn_accept(srv, cfd, &ss);
	}
}

/* Split "host:port", "[v6]:port", ":port" into host (maybe empty) and port. */
static int split_listen(const char *spec, char *host, size_t hn, int *port, struct err *e)
{
	const char *colon = strrchr(spec, ':');
	const char *h = spec;
	size_t hl;

	if (!colon)
		return err_set(e, "listen address %s: expected host:port", spec);
	hl = (size_t)(colon - spec);
	if (hl >= 2 && spec[0] == '[' && spec[hl - 1] == ']') {
		h++;
		hl -= 2;
	}
	if (hl >= hn)
		return err_set(e, "listen address %s: host too long", spec);
	memcpy(host, h, hl);
	host[hl] = '\0';
	if (str_to_int(colon + 1, port) < 0 || *port < 0 || *port > 65535)
		return err_set(e, "listen address %s: bad port", spec);
	return 0;
}

struct http_server *http_server_new(struct ev *ev, const struct http_server_opts *opts, struct err *e)
{
	struct http_server *srv;
	char host[256];
	int port, one = 1, fd = -1, r;
	struct addrinfo hints, *res = NULL;
	char portstr[16];
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (split_listen(opts->listen ? opts->listen : "127.0.0.1:0", host, sizeof(host), &port, e) < 0)
		return NULL;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(portstr, sizeof(portstr), "%d", port);
	r = getaddrinfo(host[0] ? host : NULL, portstr, &hints, &res);
	if (r != 0) {
		err_set(e, "listen %s: %s", opts->listen, gai_strerror(r));
		return NULL;
	}
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		err_errno(e, "listen %s: socket", opts->listen);
		freeaddrinfo(res);
		return NULL;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
		err_errno(e, "listen %s", opts->listen);
		freeaddrinfo(res);
		sys_close(fd);
		return NULL;
	}
	freeaddrinfo(res);
	srv = xcalloc(1, sizeof(*srv));
	srv->ev = ev;
	srv->lfd = fd;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		srv->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
							   : ((struct sockaddr_in *)&ss)->sin_port);
	srv->header_timeout = opts->header_timeout_ms > 0 ? opts->header_timeout_ms : HTTP_HEADER_TIMEOUT_MS;
	srv->idle_timeout = opts->idle_timeout_ms > 0 ? opts->idle_timeout_ms : HTTP_IDLE_TIMEOUT_MS;
	srv->body_timeout = opts->body_timeout_ms > 0 ? opts->body_timeout_ms : HTTP_BODY_TIMEOUT_MS;
	srv->write_timeout = opts->write_timeout_ms > 0 ? opts->write_timeout_ms : HTTP_WRITE_TIMEOUT_MS;
	srv->first_byte_timeout = opts->first_byte_timeout_ms > 0 ? opts->first_byte_timeout_ms
								  : HTTP_FIRST_BYTE_TIMEOUT_MS;
	srv->max_conns = opts->max_conns > 0 ? (size_t)opts->max_conns : HTTP_MAX_CONNECTIONS;
	srv->max_per_addr = opts->max_conns_per_addr < 0 ? 0
			    : opts->max_conns_per_addr > 0 ? (size_t)opts->max_conns_per_addr
							   : HTTP_MAX_CONNS_PER_ADDR;
	srv->reserve_conns = opts->reserve_conns < 0 ? 0
			     : opts->reserve_conns > 0 ? (size_t)opts->reserve_conns : HTTP_RESERVE_CONNS;
	srv->peers = xcalloc(PEER_BUCKETS, sizeof(*srv->peers));
	srv->max_body_default = opts->max_body_default ? opts->max_body_default : HTTP_MAX_BODY_DEFAULT;
	if (opts->tls_cert || opts->tls_key) {
		if (!opts->tls_cert || !opts->tls_key) {
			err_set(e, "tls needs both a certificate and a key");
			goto fail;
		}
		if (stream_tls_server_new(opts->tls_cert, opts->tls_key, &srv->tls, e) < 0)
			goto fail;
	}
	if (ev_fd_add(ev, fd, EV_READ, on_accept, srv) < 0) {
		err_errno(e, "listen %s: watch", opts->listen);
		goto fail;
	}
	return srv;
fail:
	stream_tls_server_free(srv->tls);
	sys_close(fd);
	free(srv->peers);
	free(srv);
	return NULL;
}

int http_server_port(const struct http_server *srv)
{
	return srv->port;
}

size_t http_server_conns(const struct http_server *srv)
{
	return srv->nconns;
}

static void close_listener(struct http_server *srv)
{
	ev_timer_stop(srv->ev, &srv->accept_timer);
	if (srv->lfd >= 0) {
		ev_fd_del(srv->ev, srv->lfd);
		sys_close(srv->lfd);
		srv->lfd = -1;
	}
}

static void grace_over(struct ev *ev, void *arg)
{
	struct http_server *srv = arg;

	if (srv->nconns)
		log_info("http", "shutdown: closing %zu connection(s) still busy", srv->nconns);
	while (srv->conns)
		conn_destroy(srv->conns);
}

void http_server_shutdown(struct http_server *srv, int grace_ms, http_server_done_fn done, void *arg)
{
	struct conn *c, *next;

	if (srv->shutting_down)
		return;
	srv->shutting_down = true;
	srv->done_fn = done;
	srv->done_arg = arg;
	close_listener(srv);
	for (c = srv->conns; c; c = next) {
		next = c->next;
		if ((c->state == C_HEAD || c->state == C_HANDSHAKE) && c->in.len == 0 && !hs_out_pending(c))
			conn_destroy(c);
	}
	ev_timer_start(srv->ev, &srv->grace_timer, grace_ms > 0 ? grace_ms : HTTP_SHUTDOWN_GRACE_DEFAULT_MS,
		       grace_over, srv);
	server_check_done(srv);
}

void http_server_free(struct http_server *srv)
{
	if (!srv)
		return;
	srv->done_fn = NULL;
	while (srv->conns)
		conn_destroy(srv->conns);
	close_listener(srv);
	ev_timer_stop(srv->ev, &srv->grace_timer);
	ev_timer_stop(srv->ev, &srv->done_timer);
	ev_timer_stop(srv->ev, &srv->accept_timer);
	hs_routes_free(srv);
	stream_tls_server_free(srv->tls);
	free(srv->peers);	/* each peer went with its last connection */
	free(srv);
}

