/*
 * http.h: HTTP/1.1 for denv: an incremental allocation-free message parser,
 * a server with a router on the event loop (keep-alive, pipelining, chunked
 * bodies, limits, timeouts, parked and streamed responses, graceful
 * shutdown, optional TLS), and two clients: a blocking one for the CLI and
 * an asynchronous one on the loop for the sidecar and the control plane.
 * Connections are struct stream (stream.h), plain or TLS.
 */
#ifndef DENV_HTTP_H
#define DENV_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/ev.h"
#include "http/stream.h"

struct json;

/* ---- limits: every bound the server and clients enforce ---- */

#define HTTP_MAX_REQUEST_LINE 8192		/* method + target + version; over it: 414 */
#define HTTP_MAX_HEADER_BYTES 65536		/* whole head incl. request line; over it: 431 */
#define HTTP_MAX_HEADERS 100			/* header fields in one head; over it: 431 */
#define HTTP_MAX_BODY_DEFAULT ((size_t)1 << 20)	/* route body limit when the route gives 0 */
#define HTTP_FIRST_BYTE_TIMEOUT_MS 3000	/* accept (or TLS handshake) to a new connection's first byte */
#define HTTP_HEADER_TIMEOUT_MS 5000		/* first byte of a request to end of its head; TLS handshake */
#define HTTP_IDLE_TIMEOUT_MS 60000		/* keep-alive connection with no request */
#define HTTP_BODY_TIMEOUT_MS 30000		/* no body bytes for this long: drop */
#define HTTP_WRITE_TIMEOUT_MS 30000		/* peer reads nothing of our output for this long: drop */
#define HTTP_MAX_CONNECTIONS 1024		/* main pool; full: a waiting one goes (see below) */
#define HTTP_MAX_CONNS_PER_ADDR 64		/* per address (IPv6: /64); over: its own waiting one goes, or 429 */
#define HTTP_RESERVE_CONNS 64			/* extra slots for reserved routes only */
#define HTTP_RETRY_AFTER_S 2			/* Retry-After of the 429 and 503 refusals */
#define HTTP_WRITE_BUF_MAX ((size_t)64 << 20)	/* queued output per connection */
#define HTTP_MAX_PATH_PARAMS 8			/* {name} segments in one route */
#define HTTP_MAX_PATH_SEGMENTS 32		/* segments in a route pattern */
#define HTTP_MAX_CHUNK_LINE 1024		/* chunk-size line with extensions */
#define HTTP_MAX_TRAILER_BYTES 8192		/* trailer section of a chunked body */
#define HTTP_READ_CHUNK 16384			/* bytes asked of one read */
#define HTTP_SHUTDOWN_GRACE_DEFAULT_MS 10000
#define HTTP_CLIENT_TIMEOUT_DEFAULT_MS 30000
#define HTTP_CLIENT_MAX_IDLE 8			/* idle keep-alive connections a client keeps */
#define HTTP_CLIENT_IDLE_MS 30000		/* ... for at most this long */
#define HTTP_MAX_URL 8192

/* ---- parsing (views into the caller's buffer; nothing allocated) ---- */

enum {
	HTTP_PARSE_NEED_MORE = 0,
	HTTP_PARSE_BAD = -1,	/* malformed */
	HTTP_PARSE_TOO_BIG = -2	/* a limit above was passed */
};

struct http_header {
	const char *name;
	size_t name_len;
	const char *value;	/* surrounding spaces and tabs removed */
	size_t value_len;
};

struct http_request_head {
	const char *method;
	size_t method_len;
	const char *target;
	size_t target_len;
	int minor_version;	/* HTTP/1.<minor> */
	size_t nheaders;
	struct http_header headers[HTTP_MAX_HEADERS];
};

struct http_response_head {
	int status;
	int minor_version;
	const char *reason;
	size_t reason_len;
	size_t nheaders;
	struct http_header headers[HTTP_MAX_HEADERS];
};

/* Parse a request head (request line, header fields, empty line) at the start
 * of buf. Returns the bytes it spans (> 0), HTTP_PARSE_NEED_MORE, HTTP_PARSE_BAD,
 * or HTTP_PARSE_TOO_BIG (request line, head or header count over the limits).
 * Lines end in CRLF; obsolete line folding is refused. */
int http_parse_request_head(const char *buf, size_t len, struct http_request_head *out);

/* Parse a response head. Returns bytes consumed (> 0), 0 (need more) or -1 (bad,
 * including over HTTP_MAX_HEADER_BYTES or HTTP_MAX_HEADERS). Accepts CRLF or
 * bare LF line ends (servers in the wild send both). */
int http_parse_response_head(const char *buf, size_t len, struct http_response_head *out);

/* The first header called name (case-insensitive), or NULL. */
const struct http_header *http_header_find(const struct http_header *h, size_t n, const char *name);
/* Whether a comma-separated header value holds token (case-insensitive),
 * e.g. Connection: "keep-alive, Upgrade" has "upgrade". */
bool http_token_has(const char *value, size_t len, const char *token);

/* Incremental chunked-body decoder (RFC 9112 7.1), chunk extensions ignored,
 * trailers read and dropped. Zero it (HTTP_CHUNKED_INIT) before the body. */
struct http_chunked {
	int state;
	uint64_t left;		/* data bytes left in the current chunk */
	size_t line;		/* bytes of the current size / trailer line so far */
	size_t trailer;		/* trailer bytes so far */
	bool digits;		/* the size line had at least one hex digit */
	bool done;		/* the whole body (and trailers) were read */
};
#define HTTP_CHUNKED_INIT { 0, 0, 0, 0, false, false }

/* Decode in[0..len), appending data to out. Returns the bytes of in consumed
 * (stops right after the body ends, so what follows is the next message),
 * HTTP_PARSE_BAD, or HTTP_PARSE_TOO_BIG when out's cap would be passed. */
ssize_t http_chunked_decode(struct http_chunked *c, const char *in, size_t len, struct buf *out);

/* Percent-decode s[0..len) into out (appending); '+' becomes space if plus.
 * -1 on a bad escape or a decoded NUL. */
int http_pct_decode(const char *s, size_t len, bool plus, struct buf *out);
/* Percent-encode s onto out: all but RFC 3986's unreserved characters and
 * those in keep ("" for a query or form value, "/" for a path). 0, or -1
 * when out is full. */
int http_pct_encode(struct buf *out, const char *s, const char *keep);

const char *http_status_text(int status);

/* ---- server ---- */

struct http_server;
struct http_req;

struct http_server_opts {
	const char *listen;		/* "127.0.0.1:8080", "[::1]:0", ":8080" (all); port 0: ephemeral */
	const char *tls_cert;		/* PEM chain; with tls_key, serve HTTPS */
	const char *tls_key;
	int header_timeout_ms;		/* 0: the defaults above */
	int idle_timeout_ms;
	int body_timeout_ms;
	int write_timeout_ms;
	int first_byte_timeout_ms;
	int max_conns;
	int max_conns_per_addr;		/* < 0: no per-address cap */
	int reserve_conns;		/* < 0: no reserve */
	size_t max_body_default;
};

/*
 * Connection limits (0 in the options above: the defaults). Every
 * connection counts against its client address: one address never holds
 * more than max_conns_per_addr. A connection is "waiting" while it has no
 * request in progress: just accepted (or in its TLS handshake), trickling
 * a head, or idle between keep-alive requests. Waiting connections are
 * cheap to lose, so when a new connection finds its address at its cap, it
 * evicts that address's longest-waiting connection; when it finds the main
 * pool (max_conns) full, it evicts the pool's longest-waiting one (in both
 * cases one that never sent a complete request first). Only when every slot
 * is busy (a request being read, handled, parked, streamed or written) is
 * the connection placed in the reserve (reserve_conns more slots, evicting
 * within the reserve the same way); a reserve connection may make one
 * request, and only to a route added with HTTP_ROUTE_RESERVED (the
 * control plane's host stream); any other request there is answered 503.
 * Refusals carry Retry-After: 429 when the address is at its cap with
 * every one of its connections busy, 503 when the main pool and the
 * reserve are both full of busy connections: the real limit.
 */
struct http_server_stats {
	uint64_t accepted;		/* connections taken in */
	uint64_t evicted;		/* waiting connections closed to make room */
	uint64_t refused_addr;		/* 429: the address's connections all busy */
	uint64_t refused_full;		/* 503 at accept: every slot busy */
	uint64_t refused_reserve;	/* 503: a reserve connection asked for another route */
	size_t reserve;			/* connections now in the reserve */
	size_t waiting;			/* connections now waiting (evictable) */
};
void http_server_stats(const struct http_server *srv, struct http_server_stats *out);

typedef void (*http_handler_fn)(struct http_req *req, void *arg);
typedef void (*http_server_done_fn)(struct http_server *srv, void *arg);
typedef void (*http_req_fn)(struct http_req *req, void *arg);

struct http_server *http_server_new(struct ev *ev, const struct http_server_opts *opts, struct err *e);
/* The bound port (useful with port 0). */
int http_server_port(const struct http_server *srv);
/* Open connections now. */
size_t http_server_conns(const struct http_server *srv);
/* Close every connection and the listener, and free. Requests still parked
 * become gone (their owners must still answer them, which frees them). */
void http_server_free(struct http_server *srv);

/* Add a route. method "GET", "POST", ...; pattern "/v1/envs/{env}/fork": literal
 * segments and {name} segments matching one non-empty segment (percent-decoded).
 * A final "{name...}" matches the rest of the path. A pattern ending in "/"
 * ("/app/device/") matches only a path that ends in "/". max_body 0: the default.
 * -1 on a bad pattern. Routes match in the order added. Method mismatch on a
 * path some route matches: 405 with Allow; no route: 404. HEAD is served by
 * the GET route with the body left off. */
int http_route(struct http_server *srv, const char *method, const char *pattern,
	       size_t max_body, http_handler_fn fn, void *arg);
/* http_route with flags: HTTP_ROUTE_RESERVED lets connections in the reserve
 * (see the connection limits above) reach the route; keep it for routes that
 * answer or take the connection over (http_req_detach) at once. */
#define HTTP_ROUTE_RESERVED 1u
int http_route_flags(struct http_server *srv, const char *method, const char *pattern,
		     size_t max_body, unsigned flags, http_handler_fn fn, void *arg);

/* Stop accepting, close idle connections, let requests in flight finish for up to
 * grace_ms (<= 0: HTTP_SHUTDOWN_GRACE_DEFAULT_MS), then close the rest. done is
 * called once (from the loop) when no connection is left. */
void http_server_shutdown(struct http_server *srv, int grace_ms, http_server_done_fn done, void *arg);

/* Request accessors. Strings live as long as the req. */
const char *http_req_method(const struct http_req *req);
const char *http_req_target(const struct http_req *req);	/* raw, with query */
const char *http_req_path(const struct http_req *req);		/* raw path, no query */
const char *http_req_header(const struct http_req *req, const char *name);	/* NULL if absent */
/* Iterate headers: i from 0 while it returns true. */
bool http_req_header_at(const struct http_req *req, size_t i, const char **name, const char **value);
const char *http_req_param(const struct http_req *req, const char *name);	/* {name} in the route */
const char *http_req_query(const struct http_req *req, const char *name);	/* decoded; NULL if absent */
const char *http_req_body(const struct http_req *req, size_t *len);		/* never NULL */
const char *http_req_peer(const struct http_req *req);	/* "127.0.0.1:53124" */
int http_req_minor_version(const struct http_req *req);
struct http_server *http_req_server(const struct http_req *req);
/* Whether the client went away while the request was parked or streaming. */
bool http_req_gone(const struct http_req *req);
/* Call fn once if the client goes away before the request is answered. */
void http_req_on_gone(struct http_req *req, http_req_fn fn, void *arg);
/*
 * A hook on the answer (the control plane's Idempotency-Key): fn is called
 * once, with the status, content type and body of the first http_respond*
 * (even when the client is gone), or with status 0 and body NULL when the
 * request ends otherwise (streamed, detached, freed unanswered). Returning
 * true from an answer takes it over: nothing is written, the gone callback
 * is dropped, and fn's owner must answer later with http_respond (the hook
 * is gone by then). The return is ignored for status 0.
 */
typedef bool (*http_resp_hook_fn)(struct http_req *req, int status, const char *ctype, const void *body,
				  size_t len, void *arg);
void http_req_on_respond(struct http_req *req, http_resp_hook_fn fn, void *arg);
/* Never call the on_gone callback of req: its handler goes on and answers
 * when its work ends (into the response hook; the client is gone). */
void http_req_quiet_gone(struct http_req *req);

/*
 * Responding. A handler answers before returning, or returns without answering:
 * the request is parked and answered later (from a timer, a child exit, ...).
 * http_respond* and http_stream_end complete the request: the req is freed and
 * must not be used after. Answering a gone req just frees it (returns 0).
 * They return -1 (e filled nowhere: misuse is a bug, logged) when the request
 * was already answered or the arguments are invalid.
 */
/* Add a response header (before the response starts). -1 on CR/LF or a bad name. */
int http_resp_header(struct http_req *req, const char *name, const char *value);
int http_respond(struct http_req *req, int status, const char *content_type, const void *body, size_t len);
int http_respond_json(struct http_req *req, int status, const struct json *v);
/* {"error":"message"} with status. */
int http_respond_error(struct http_req *req, int status, const char *msg);

/* Streamed response: chunked on HTTP/1.1, until-close on HTTP/1.0. */
int http_stream_begin(struct http_req *req, int status, const char *content_type);
/* -1 if the client is gone or more than HTTP_WRITE_BUF_MAX would be queued. */
int http_stream_write(struct http_req *req, const void *data, size_t len);
int http_stream_end(struct http_req *req);
/* Bytes queued for the client and not yet written (backpressure). */
size_t http_stream_queued(const struct http_req *req);
/* Call fn whenever the queue drains to empty (to resume producing). */
void http_stream_on_drain(struct http_req *req, http_req_fn fn, void *arg);

/*
 * Take the connection out of the server (for a WebSocket upgrade): the server
 * forgets the fd, its timers and state; the req is freed. Bytes already read
 * past this request are appended to leftover. Only before responding, and
 * only for a request without a body still being read. 0 / -1.
 */
int http_req_detach(struct http_req *req, struct stream **out, struct buf *leftover, struct err *e);

/* ---- HTML forms and cookies (form.c), for the few pages a server renders ---- */

/* The value of field name in an application/x-www-form-urlencoded body
 * (body[0..len), '+' as space), appended to out, whose cap bounds it. The
 * first field of that name counts. 1 found, 0 absent, -1 a bad escape, a
 * decoded NUL, or over out's cap. */
int http_form_field(const char *body, size_t len, const char *name, struct buf *out);
/* The value of cookie name in a Cookie header ("a=1; b=2"), copied into out
 * (size n). 1 found, 0 absent or not fitting in n (a cookie we did not set). */
int http_cookie(const char *header /* may be NULL */, const char *name, char *out, size_t n);
/* Append s with & < > " ' as character references, so that any text is
 * safe inside an element or a quoted attribute. */
int http_html_escape(struct buf *out, const char *s /* NULL: nothing */);

/* ---- clients ---- */

struct http_client_req {
	const char *method;		/* NULL: GET */
	const char *url;		/* http://host[:port]/path?query, https://..., [v6] literals */
	const char *const *headers;	/* "Name: value" strings, NULL-terminated; may be NULL */
	const void *body;
	size_t body_len;
	int timeout_ms;			/* whole exchange; <= 0: HTTP_CLIENT_TIMEOUT_DEFAULT_MS */
	const char *unix_socket;	/* blocking client only: connect to this Unix socket
					 * path instead; the URL still gives Host and path */
};

struct http_client_resp {
	int status;
	struct buf head;	/* header fields as "name\0value\0" pairs (names lower-cased) */
	size_t nheaders;
	struct buf body;	/* set a cap with buf_init(&resp.body, max) before the call */
};
#define HTTP_CLIENT_RESP_INIT { 0, BUF_INIT, 0, BUF_INIT }

/* A response header value (case-insensitive name), or NULL. */
const char *http_client_resp_header(const struct http_client_resp *r, const char *name);
/* The message of a JSON error body ({"error": "..."}) in out (of size n,
 * cut to fit: it is for a person to read). 1 when the body had a non-empty
 * one, 0 when not (out is then ""). */
int http_client_resp_error(const struct http_client_resp *r, char *out, size_t n);
void http_client_resp_release(struct http_client_resp *r);

/* Blocking client. Keeps idle keep-alive connections per scheme://host:port.
 * Redirects are not followed: a 3xx is returned like any status. */
struct http_client;
struct http_client *http_client_new(void);
void http_client_free(struct http_client *c);
/* 0 with resp filled (any status), or -1 with e: "connect 127.0.0.1:1: Connection
 * refused", "timeout after 5000 ms reading response from 127.0.0.1:8080"... */
int http_client_do(struct http_client *c, const struct http_client_req *req,
		   struct http_client_resp *resp, struct err *e);
/* Connections dialled so far (tests check keep-alive reuse with it). */
size_t http_client_dials(const struct http_client *c);

/* Asynchronous client on the loop: same requests, completion by callback.
 * It never blocks the loop: host names are looked up in a resolver thread
 * (http/resolve.h), within the request's timeout ("timeout after 5000 ms
 * resolving api.example"); a failed lookup reads "resolve nosuch.invalid:
 * Name or service not known"; IP literals need no lookup. Every address of
 * the name is tried in turn. */
struct http_aclient;
struct http_acall;
/* resp is NULL on error (e set), else e is NULL. resp is valid during the call
 * only (take its buffers with buf_detach if needed). */
typedef void (*http_aclient_fn)(const struct http_client_resp *resp, const struct err *e, void *arg);

struct http_aclient *http_aclient_new(struct ev *ev);
/* Cancels calls in flight without calling their callbacks. */
void http_aclient_free(struct http_aclient *ac);
/* Start a request (the request is copied). max_body 0: HTTP_MAX_BODY_DEFAULT * 64.
 * Returns a handle valid until fn is called, or NULL with e (bad URL). fn is
 * never called from inside this function. */
struct http_acall *http_aclient_do(struct http_aclient *ac, const struct http_client_req *req,
				   size_t max_body, http_aclient_fn fn, void *arg, struct err *e);
size_t http_aclient_dials(const struct http_aclient *ac);
/* Name lookups (resolver threads) started so far: literals take none. */
size_t http_aclient_lookups(const struct http_aclient *ac);
/* Abandon a call in flight: fn will not be called. Not from inside its own fn. */
void http_acall_cancel(struct http_acall *call);

/* Split an http(s) URL. host gets the bare host (no brackets); path the path
 * and query ("/" when empty). 0 / -1 with e. */
int http_url_split(const char *url, bool *tls, char *host, size_t host_size, int *port,
		   const char **path, struct err *e);

/* ---- Connect RPC streams (connect.c), as the hosted sandboxes' agents speak them ---- */

/* A Connect streaming body is a run of envelopes: one flags byte, a 32-bit
 * big-endian length, the message. The last one carries HTTP_CONNECT_END and
 * a JSON end-of-stream message ({} or {"error": {code, message}}). */
#define HTTP_CONNECT_HEAD 5			/* flags byte and length */
#define HTTP_CONNECT_COMPRESSED 0x01		/* the message is compressed (we never ask for it) */
#define HTTP_CONNECT_END 0x02			/* the end-of-stream envelope */
#define HTTP_CONNECT_MSG_MAX ((size_t)4 << 20)	/* one message we accept, at most */
#define HTTP_CONNECT_CODE_MAX 40		/* of an error's code, in our words */

/* Append one envelope of msg[0..len) with flags to out. -1 when out's cap is hit. */
int http_connect_envelope(struct buf *out, unsigned flags, const void *msg, size_t len);

/* Called with each message of a stream before its end; nonzero stops the
 * walk (its words in why). */
typedef int (*http_connect_msg_fn)(const char *msg, size_t len, void *arg, char *why, size_t n);

/* Walk a whole Connect streaming body (body[0..len)): fn for each message,
 * each at most max bytes (0: HTTP_CONNECT_MSG_MAX). 0 when the stream ended
 * cleanly; -1 with why: cut short, a message over max, a compressed one,
 * bytes after the end, no end envelope, an end message that is not JSON, or
 * the end's error as "code: message". */
int http_connect_stream(const void *body, size_t len, size_t max, http_connect_msg_fn fn, void *arg, char *why,
			size_t n);

#endif
