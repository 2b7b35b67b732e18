/*
 * server_int.h: what the server's files share (server.c runs connections,
 * router.c matches routes, respond.c builds answers); not for other modules.
 */
#ifndef DENV_HTTP_SERVER_INT_H
#define DENV_HTTP_SERVER_INT_H

#include "http/http.h"

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

/* server.c */
void hs_req_free(struct http_req *req);
/* Write what we can of c's output. Never calls user code. */
void hs_conn_flush(struct conn *c);
size_t hs_out_pending(const struct conn *c);
/* Have conn_run look at c from the loop, at 0 ms. */
void hs_conn_kick(struct conn *c);
void hs_log_access(const struct http_req *req);
/* Take c out of the server's lists and counts (it is freed by the caller). */
void hs_conn_unlink(struct conn *c);

/* router.c: find the route for req. 0 found; else fills status/msg for the refusal. */
int hs_route_find(struct http_server *srv, struct http_req *req, int *status, char *msg, size_t msgn,
		  struct buf *allow);
void hs_routes_free(struct http_server *srv);

/* respond.c */
void hs_json_error(struct buf *b, const char *msg);
/* Write the status line and headers (and body, unless streaming) to req's connection. */
int hs_queue_response(struct http_req *req, int status, const char *ctype, const void *body,
		      size_t len, bool chunked_stream);

#endif
