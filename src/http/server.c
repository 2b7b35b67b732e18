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

#include "base/log.h"
#include "base/str.h"
#include "base/sys.h"
#include "json/json.h"

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

struct route {
	char *method;
	char **segs;		/* pattern segments; "{name}" or "{name...}" for params */
	size_t nsegs;
	bool rest;		/* last segment is {name...} */
	bool slash;		/* the pattern ends in "/": so must the path */
	size_t max_body;
	unsigned flags;		/* HTTP_ROUTE_* */
	http_handler_fn fn;
	void *arg;
};

enum conn_state { C_HANDSHAKE, C_HEAD, C_BODY, C_HANDLER };
enum timer_kind { T_NONE, T_KICK, T_HANDSHAKE, T_FIRST, T_IDLE, T_HEADER, T_BODY, T_WRITE };

struct conn;

/* Links of a connection in one FIFO queue of waiting connections. */
struct clink {
	struct conn *prev, *next;
};

struct cqueue {
	struct conn *head, *tail;
	size_t n;
};

/* One client address (IPv4, or an IPv6 /64) with connections open. */
#define PEER_KEY_LEN 17		/* family byte + 16 address bytes */
struct peer {
	unsigned char key[PEER_KEY_LEN];
	size_t nconns;
	struct cqueue waiting;	/* its waiting connections, oldest first */
	struct peer *next;	/* hash chain */
};

struct conn {
	struct http_server *srv;
	struct stream *s;
	int fd;
	struct conn *prev, *next;
	enum conn_state state;
	struct buf in;
	size_t scanned;		/* bytes of in searched for the end of the head */
	struct buf out;
	size_t out_off;		/* bytes of out already written */
	struct ev_timer timer;
	enum timer_kind tkind;
	int64_t head_started;	/* when the first byte of the current head arrived */
	int64_t ready_at;	/* accepted, or its TLS handshake done: the first-byte clock */
	struct peer *addr;	/* its client address's entry */
	struct clink lpool, lpeer;	/* in the pool's and the peer's waiting queues */
	bool waiting;		/* in those queues: no request in progress */
	bool reserve;		/* in the reserve pool: one request, reserved routes only */
	struct http_req *req;	/* being read, in a handler, parked or streaming */
	int rd_want, wr_want;	/* what the stream asked for after EAGAIN */
	int events;		/* registered with the loop */
	bool read_eof;
	bool broken;		/* I/O failed: destroy at the next conn_run */
	bool close_after;	/* close once out is flushed */
	bool in_run;		/* inside conn_run: it will flush and settle */
	bool in_dispatch;	/* inside a handler called by conn_run */
	bool line_checked;	/* the request line of the current head was validated */
	bool fresh;		/* no request completed yet: the header timeout applies */
	bool detached;		/* taken over by http_req_detach during dispatch */
	bool rearm_idle;	/* a request just completed: restart the idle clock */
	bool drain_pending;	/* output was queued for a streaming req with on_drain */
	char peer[64];
};

struct http_req {
	struct http_server *srv;
	struct conn *conn;	/* NULL once the connection is gone */
	char *head;		/* our copy of the head; the strings below point into it */
	const char *method, *target, *path;
	char *path_owned;	/* path when the target has a query */
	const char *query;	/* after '?', or NULL */
	size_t query_len;
	int minor;
	size_t nheaders;
	const char **hnames, **hvalues;
	const struct route *route;
	const char *pnames[HTTP_MAX_PATH_PARAMS];
	size_t pname_len[HTTP_MAX_PATH_PARAMS];
	char *pvals[HTTP_MAX_PATH_PARAMS];
	size_t nparams;
	struct buf qstore;	/* decoded query pairs "name\0value\0" */
	bool qparsed;
	/* body */
	struct buf body;
	uint64_t body_left;	/* Content-Length bytes still to read */
	bool chunked;
	struct http_chunked ch;
	/* response */
	struct buf rhead;	/* extra response headers */
	bool head_only;		/* HEAD request */
	bool dispatched;	/* handed to a handler: the handler's code owns it */
	bool keep_alive;
	bool streaming;
	bool stream_chunked;
	bool gone;
	int status;
	size_t resp_bytes;
	int64_t started;
	http_req_fn on_gone, on_drain;
	void *gone_arg, *drain_arg;
	bool gone_quiet;		/* http_req_quiet_gone: on_gone is never called */
	http_resp_hook_fn on_respond;	/* one-shot: cleared before it is called */
	void *respond_arg;
	char peer[64];
};

struct http_server {
	struct ev *ev;
	int lfd;
	int port;
	struct stream_tls_server *tls;
	struct route *routes;
	size_t nroutes;
	struct conn *conns;
	size_t nconns;		/* both pools */
	size_t nreserve;	/* in the reserve pool */
	int header_timeout, idle_timeout, body_timeout, write_timeout, first_byte_timeout;
	size_t max_conns;
	size_t max_per_addr;	/* 0: no per-address cap */
	size_t reserve_conns;
	struct peer **peers;	/* PEER_BUCKETS chains */
	struct cqueue waiting_main, waiting_reserve;
	struct http_server_stats stats;
	struct http_server_stats logged;	/* stats at the last pressure warning */
	int64_t pressure_logged_at;
	int64_t emfile_logged_at;	/* the last "out of file descriptors" warning */
	size_t max_body_default;
	bool shutting_down;
	struct ev_timer grace_timer, done_timer, accept_timer;
	http_server_done_fn done_fn;
	void *done_arg;
	bool done_called;
};

static void conn_run(struct conn *c);
static void conn_destroy(struct conn *c);
static void conn_on_fd(struct ev *ev, int fd, int revents, void *arg);
static void conn_on_timer(struct ev *ev, void *arg);
static int queue_response(struct http_req *req, int status, const char *ctype, const void *body,
			  size_t len, bool chunked_stream);

/* ---- small helpers ---- */

/* The response hook, if still set, hears that no ordinary answer comes. */
static void req_hook_none(struct http_req *req)
{
	http_resp_hook_fn fn = req->on_respond;

	req->on_respond = NULL;
	if (fn)
		fn(req, 0, NULL, NULL, 0, req->respond_arg);
}

static void req_free(struct http_req *req)
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
static void conn_flush(struct conn *c)
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

static size_t out_pending(const struct conn *c)
{
	return c->out.len - c->out_off;
}

static void conn_kick(struct conn *c)
{
	c->tkind = T_KICK;
	ev_timer_start(c->srv->ev, &c->timer, 0, conn_on_timer, c);
}

static void log_access(const struct http_req *req)
{
	if (log_get_level() > LOG_DEBUG)
		return;
	log_debug("http", "%s \"%s %s HTTP/1.%d\" %d %zu %lldms", req->peer, req->method, req->target,
		  req->minor, req->status, req->resp_bytes, (long long)(ev_mono_ms() - req->started));
}

static void add_json_error(struct buf *b, const char *msg)
{
	buf_adds(b, "{\"error\":");
	json_write_string(b, msg, strlen(msg));
	buf_adds(b, "}");
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
	add_json_error(&body, msg);
	blen = body.len;
	if (close)
		c->close_after = true;
	if (req) {
		req->keep_alive = req->keep_alive && !close;
		c->req = req;
		queue_response(req, status, "application/json", body.data, blen, false);
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
		if (out_pending(c) || c->in_run)
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

/* ---- routing ---- */

static bool seg_is_param(const char *seg)
{
	size_t n = strlen(seg);
	return n >= 3 && seg[0] == '{' && seg[n - 1] == '}';
}

int http_route(struct http_server *srv, const char *method, const char *pattern,
	       size_t max_body, http_handler_fn fn, void *arg)
{
	return http_route_flags(srv, method, pattern, max_body, 0, fn, arg);
}

int http_route_flags(struct http_server *srv, const char *method, const char *pattern,
		     size_t max_body, unsigned flags, http_handler_fn fn, void *arg)
{
	struct route r;
	size_t nparams = 0;

	memset(&r, 0, sizeof(r));
	if (!method || !*method || !pattern || pattern[0] != '/' || !fn) {
		log_error("http", "route %s %s: invalid", method ? method : "?", pattern ? pattern : "?");
		return -1;
	}
	r.segs = str_split(pattern, "/", &r.nsegs);
	if (r.nsegs > HTTP_MAX_PATH_SEGMENTS)
		goto bad;
	for (size_t i = 0; i < r.nsegs; i++) {
		if (!seg_is_param(r.segs[i]))
			continue;
		if (++nparams > HTTP_MAX_PATH_PARAMS)
			goto bad;
		if (str_has_suffix(r.segs[i], "...}")) {
			if (i != r.nsegs - 1 || strlen(r.segs[i]) < 6)
				goto bad;
			r.rest = true;
		}
	}
	r.slash = r.nsegs > 0 && !r.rest && pattern[strlen(pattern) - 1] == '/';
	r.method = xstrdup(method);
	r.max_body = max_body ? max_body : srv->max_body_default;
	r.flags = flags;
	r.fn = fn;
	r.arg = arg;
	srv->routes = xrealloc(srv->routes, (srv->nroutes + 1) * sizeof(*srv->routes));
	srv->routes[srv->nroutes++] = r;
	return 0;
bad:
	log_error("http", "route %s %s: invalid pattern", method, pattern);
	str_list_free(r.segs);
	return -1;
}

/* Match path against r: 1 (params filled into req), 0 (no), -1 (bad escape). */
static int route_match(const struct route *r, const char *path, struct http_req *req)
{
	const char *p = path;
	size_t np = 0;

	for (size_t i = 0; i < r->nsegs; i++) {
		const char *seg = r->segs[i];
		const char *s, *e;
		if (*p != '/')
			return 0;
		s = ++p;
		e = (r->rest && i == r->nsegs - 1) ? s + strlen(s) : strchrnul(s, '/');
		if (!seg_is_param(seg)) {
			size_t n = strlen(seg);
			if ((size_t)(e - s) != n || memcmp(s, seg, n) != 0)
				return 0;
		} else {
			if (e == s)
				return 0;
			if (req) {
				struct buf v = BUF_INIT;
				if (http_pct_decode(s, (size_t)(e - s), false, &v) < 0) {
					buf_release(&v);
					return -1;
				}
				req->pnames[np] = seg + 1;
				req->pname_len[np] = strlen(seg) - 2 - (r->rest && i == r->nsegs - 1 ? 3 : 0);
				req->pvals[np] = buf_detach(&v, NULL);
				req->nparams = ++np;
			}
		}
		p = e;
	}
	/* The root pattern "/" has no segments. */
	if (r->nsegs == 0)
		return strcmp(path, "/") == 0;
	if (r->slash)
		return strcmp(p, "/") == 0;
	return *p == '\0';
}

static void req_clear_params(struct http_req *req)
{
	for (size_t i = 0; i < req->nparams; i++)
		free(req->pvals[i]);
	req->nparams = 0;
}

/* Find the route for req. 0 found; else fills status/msg for the refusal. */
static int route_find(struct http_server *srv, struct http_req *req, int *status, char *msg, size_t msgn,
		      struct buf *allow)
{
	bool path_found = false;
	const char *m = req->method;

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < srv->nroutes; i++) {
			const struct route *r = &srv->routes[i];
			int mr;
			bool same = strcmp(r->method, m) == 0;
			if (pass == 1 && !same)
				continue;
			mr = route_match(r, req->path, same ? req : NULL);
			if (mr < 0) {
				req_clear_params(req);
				*status = 400;
				snprintf(msg, msgn, "bad percent-encoding in path");
				return -1;
			}
			if (!mr) {
				req_clear_params(req);
				continue;
			}
			if (same) {
				req->route = r;
				return 0;
			}
			path_found = true;
			if (pass == 0 && !http_token_has(allow->data, allow->len, r->method)) {
				if (allow->len)
					buf_adds(allow, ", ");
				buf_adds(allow, r->method);
			}
		}
		/* HEAD falls back to GET routes. */
		if (pass == 0 && strcmp(req->method, "HEAD") == 0)
			m = "GET";
		else
			break;
	}
	if (path_found) {
		*status = 405;
		snprintf(msg, msgn, "method %s not allowed", req->method);
	} else {
		*status = 404;
		snprintf(msg, msgn, "not found");
	}
	return -1;
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
	if (route_find(srv, req, &status, msg, sizeof(msg), &allow) < 0) {
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
			if (c->in.len == 0 || out_pending(c) > PIPELINE_OUT_HIGH)
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
	if (out_pending(c)) {
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
	if (out_pending(c))
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
	if (out_pending(c)) {
		c->wr_want = 0;
		conn_flush(c);
		if (!out_pending(c) && c->drain_pending && c->req && c->req->on_drain && !c->broken) {
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
	if (out_pending(c))
		conn_flush(c);
	if (c->broken || (c->close_after && !out_pending(c))) {
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
		if (!out_pending(c)) {
			conn_destroy(c);
			return;
		}
	}
	if (c->srv->shutting_down && c->state == C_HEAD && c->in.len == 0 && !out_pending(c)) {
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

static void conn_unlink(struct conn *c)
{
	struct http_server *srv = c->srv;

	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
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
	conn_unlink(c);
	free(c);
	if (req) {
		if (!req->dispatched) {
			req_free(req);	/* never reached a handler: nobody else has it */
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
	c->next = srv->conns;
	if (c->next)
		c->next->prev = c;
	srv->conns = c;
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
		if ((c->state == C_HEAD || c->state == C_HANDSHAKE) && c->in.len == 0 && !out_pending(c))
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
	for (size_t i = 0; i < srv->nroutes; i++) {
		free(srv->routes[i].method);
		str_list_free(srv->routes[i].segs);
	}
	free(srv->routes);
	stream_tls_server_free(srv->tls);
	free(srv->peers);	/* each peer went with its last connection */
	free(srv);
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
	size_t off = 0;

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
	while (off < r->qstore.len) {
		const char *k = r->qstore.data + off;
		const char *v = k + strlen(k) + 1;
		if (strcmp(k, name) == 0)
			return v;
		off = (size_t)(v - r->qstore.data) + strlen(v) + 1;
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

	log_access(req);
	if (c) {
		c->req = NULL;
		if (!req->keep_alive || c->srv->shutting_down)
			c->close_after = true;
		if (!c->in_run) {
			conn_flush(c);
			conn_kick(c);
		}
	}
	req_free(req);
}

/* Write the status line and headers (and body, unless streaming) to the connection. */
static int queue_response(struct http_req *req, int status, const char *ctype, const void *body,
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
				conn_kick(req->conn);
		}
		req_free(req);
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
	if (queue_response(req, status, content_type, body ? body : "", body ? len : 0, false) < 0) {
		struct conn *c = req->conn;
		c->req = NULL;
		if (!c->in_run)
			conn_kick(c);
		req_free(req);
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

	add_json_error(&b, msg ? msg : http_status_text(status));
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
	if (queue_response(req, status, content_type, NULL, 0, true) < 0)
		return -1;
	conn_flush(req->conn);
	if (!req->conn->in_run)
		conn_kick(req->conn);
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
	if (out_pending(c) + len > HTTP_WRITE_BUF_MAX)
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
	conn_flush(c);
	if (out_pending(c)) {
		c->drain_pending = true;
		if (!c->in_run)
			conn_kick(c);	/* register for writability */
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
	return req->conn ? out_pending(req->conn) : 0;
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
	if (out_pending(c))
		return err_set(e, "detach: earlier responses are still being written");
	if (leftover && buf_add(leftover, c->in.data, c->in.len) < 0)
		return err_set(e, "detach: %zu buffered bytes do not fit", c->in.len);
	log_access(req);
	ev_timer_stop(c->srv->ev, &c->timer);
	ev_fd_del(c->srv->ev, c->fd);
	*out = c->s;
	c->s = NULL;
	c->req = NULL;
	req_free(req);
	buf_release(&c->in);
	buf_release(&c->out);
	conn_unlink(c);
	if (c->in_dispatch)
		c->detached = true;	/* conn_process frees it when the handler returns */
	else
		free(c);
	return 0;
}
