/*
 * ws.h: RFC 6455 WebSocket: frame codec, message assembly, a connection on
 * the event loop, the server upgrade and the client dial.
 *
 * Layers, lowest first (each usable on its own, which is how the tests and
 * the fuzzer drive them):
 *  - ws_frame_parse / ws_frame_head: one frame head in, one frame head out;
 *    (buf, len) in, head length / need-more / error out; no allocation.
 *  - struct ws_rx: the receive side. Fed arbitrary chunks of bytes, it hands
 *    back one event at a time (a whole message, a ping, a pong, a close, or a
 *    protocol error with the close code to send). It enforces every receive
 *    rule: masking by role, RSV bits, opcodes, control frame size and
 *    fragmentation, continuation order, incremental UTF-8 (1007), the message
 *    limit as frames arrive (1009), close payloads.
 *  - struct ws_conn: one connection on the loop over a byte transport (a
 *    struct stream from src/http, or any fd): answers pings, runs the close
 *    handshake with a timeout, keeps the send queue with a cap, optional
 *    keepalive pings.
 *  - ws_accept (server upgrade from the HTTP server) and ws_dial (client).
 *
 * Callback rules: callbacks run from the loop only, never from inside a
 * ws_send_* / ws_ping / ws_close call. Any callback may call any ws_conn
 * function on any connection, including ws_conn_free on its own connection.
 * on_close is called exactly once per connection that was opened, after which
 * no callback runs again; the owner still calls ws_conn_free (inside on_close
 * is fine).
 */
#ifndef DENV_WS_H
#define DENV_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "base/ev.h"

/* ---- limits (all in one place) ---- */

/* Largest message we assemble unless ws_opts says otherwise (protocol.md: 16 MiB). */
#define WS_MAX_MESSAGE_DEFAULT ((size_t)16 << 20)
/* Control frame payload (RFC 6455 5.5). */
#define WS_MAX_CONTROL 125
/* Close reason: control payload minus the 2-byte code. */
#define WS_MAX_CLOSE_REASON 123
/* Longest frame head: 2 + 8 (64-bit length) + 4 (mask). */
#define WS_MAX_FRAME_HEAD 14
/* Bytes of outgoing frames a connection may hold before ws_send_* refuses;
 * big enough for one maximum message plus control traffic. */
#define WS_MAX_QUEUED_DEFAULT ((size_t)40 << 20)
/* How long we wait for the peer's half of the close handshake (and, for a
 * client, for the server to drop TCP) before we drop it ourselves. */
#define WS_CLOSE_TIMEOUT_MS_DEFAULT 5000
/* Connect + TLS + handshake budget of ws_dial. */
#define WS_DIAL_TIMEOUT_MS_DEFAULT 10000
/* The handshake response head a client accepts (status line + headers). */
#define WS_MAX_HANDSHAKE 16384
/* Bytes of a refused handshake's body quoted in the error. */
#define WS_ERROR_BODY_SNIPPET 200
/* Longest ws:// URL, host name, and extra request headers for ws_dial. */
#define WS_MAX_URL 4096
#define WS_MAX_HOST 255
#define WS_MAX_EXTRA_HEADERS 8192
/* One read from the transport. */
#define WS_READ_CHUNK 65536
/* A received message buffer bigger than this is freed once delivered, so an
 * idle connection does not keep a 16 MiB buffer. */
#define WS_KEEP_BUFFER 65536
/* Length of a Sec-WebSocket-Key (base64 of 16 bytes) and -Accept (of 20). */
#define WS_KEY_LEN 24
#define WS_ACCEPT_LEN 28

/* ---- protocol constants ---- */

enum ws_role { WS_SERVER, WS_CLIENT };

enum ws_opcode {
	WS_OP_CONT = 0x0,
	WS_OP_TEXT = 0x1,
	WS_OP_BINARY = 0x2,
	WS_OP_CLOSE = 0x8,
	WS_OP_PING = 0x9,
	WS_OP_PONG = 0xA,
};

enum ws_close_code {
	WS_CLOSE_NORMAL = 1000,
	WS_CLOSE_GOING_AWAY = 1001,
	WS_CLOSE_PROTOCOL = 1002,
	WS_CLOSE_UNSUPPORTED = 1003,
	WS_CLOSE_NO_STATUS = 1005,	/* never on the wire: "the close frame had no code" */
	WS_CLOSE_ABNORMAL = 1006,	/* never on the wire: "TCP went away without a close" */
	WS_CLOSE_INVALID_DATA = 1007,
	WS_CLOSE_POLICY = 1008,
	WS_CLOSE_TOO_BIG = 1009,
	WS_CLOSE_INTERNAL = 1011,
};

/* True if code may appear in a close frame: 1000-1003, 1007-1014, 3000-4999. */
bool ws_close_code_valid(unsigned code);

/* ---- frame codec ---- */

struct ws_frame {
	bool fin;
	uint8_t rsv;		/* RSV1..3 as bits 2..0 */
	uint8_t opcode;
	bool masked;
	uint8_t mask[4];
	uint64_t len;		/* payload bytes */
};

#define WS_NEED_MORE (-2)
#define WS_BAD (-1)

/*
 * Parse the frame head at buf[0..len). role is the receiver's: a server
 * requires masked frames, a client unmasked ones. max_payload bounds a data
 * frame's length.
 * Returns the head length (2..14), WS_NEED_MORE, or WS_BAD with *code the
 * close code to send and *why a static explanation:
 *   1002: RSV bits set, unknown opcode, fragmented or >125-byte control
 *         frame, wrong masking for the role, 64-bit length with the top bit set;
 *   1009: data frame longer than max_payload; *f is complete in that case, so
 *         the caller may skip the payload and keep reading frames.
 * Lengths in a longer encoding than needed are accepted (be liberal).
 */
ssize_t ws_frame_parse(const void *buf, size_t len, enum ws_role role, uint64_t max_payload,
		       struct ws_frame *f, uint16_t *code, const char **why);

/* Write a frame head into out (WS_MAX_FRAME_HEAD bytes); mask NULL for
 * unmasked. Returns the head length. */
size_t ws_frame_head(uint8_t *out, bool fin, unsigned opcode, uint64_t len, const uint8_t mask[4]);

/* XOR n bytes with mask, as if they start at payload offset off. */
void ws_mask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t off);

/* ---- receive side: message assembly ---- */

struct ws_rx;

enum ws_rx_kind {
	WS_RX_NONE,	/* all bytes consumed, nothing complete yet */
	WS_RX_TEXT,	/* a whole message (valid UTF-8) */
	WS_RX_BINARY,
	WS_RX_PING,
	WS_RX_PONG,
	WS_RX_CLOSE,	/* the peer's close: code (1005 if none) and reason */
	WS_RX_ERROR,	/* protocol violation: send a close with code and why */
};

struct ws_rx_event {
	enum ws_rx_kind kind;
	const uint8_t *data;	/* message / ping / pong payload, close reason */
	size_t len;		/* valid until the next ws_rx_feed */
	uint16_t code;		/* CLOSE: the peer's code; ERROR: the code to send */
	const char *why;	/* ERROR: static text */
};

struct ws_rx *ws_rx_new(enum ws_role role, size_t max_message);	/* 0: default */
void ws_rx_free(struct ws_rx *rx);

/*
 * Consume bytes until one event completes or the input runs out. Returns the
 * bytes consumed; ev->kind is WS_RX_NONE when they all went into a partial
 * frame. Call again with the rest after an event.
 * After an ERROR, the rx only looks for the peer's close frame: when the
 * framing is intact (1007, 1009) it keeps parsing frame heads and skips data;
 * after a 1002 it discards everything. After a CLOSE it discards everything.
 */
size_t ws_rx_feed(struct ws_rx *rx, const void *buf, size_t len, struct ws_rx_event *ev);

/* ---- handshake pieces ---- */

/* True if key is a well-formed Sec-WebSocket-Key (base64 of 16 bytes). */
bool ws_key_valid(const char *key);
/* out = base64(SHA-1(key "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")), NUL-terminated. */
int ws_accept_for_key(const char *key, char out[WS_ACCEPT_LEN + 1], struct err *e);
/* A fresh random Sec-WebSocket-Key, NUL-terminated. */
int ws_make_key(char out[WS_KEY_LEN + 1], struct err *e);

struct ws_url {
	bool tls;			/* wss:// */
	char host[WS_MAX_HOST + 1];	/* without brackets for IPv6 literals */
	uint16_t port;			/* 80 / 443 unless given */
	char path[WS_MAX_URL];		/* path and query, "/" if none */
};
/* Parse "ws://host[:port][/path][?query]" or "wss://...". */
int ws_parse_url(const char *url, struct ws_url *u, struct err *e);

/* ---- connection ---- */

struct ws_conn;

/* A complete message. data is ours and valid during the call only;
 * data[len] is a NUL byte, so text can be handed to a C-string parser (a text
 * message may itself contain NULs: use len). */
typedef void (*ws_message_fn)(struct ws_conn *c, bool is_binary, const void *data, size_t len, void *arg);
/*
 * The connection is over (TCP closed). code/reason:
 *  - the peer's close frame when the handshake completed (1005 if it had no code);
 *  - the code we sent when we failed the connection (1002, 1007, 1009, ...);
 *  - 1006 when TCP went away without a close handshake, the close handshake
 *    timed out, or the keepalive got no pong; reason says which.
 */
typedef void (*ws_close_fn)(struct ws_conn *c, int code, const char *reason, void *arg);
/* The send queue became empty after ws_send_* left bytes queued. */
typedef void (*ws_drain_fn)(struct ws_conn *c, void *arg);

struct ws_opts {
	size_t max_message;		/* 0: WS_MAX_MESSAGE_DEFAULT; over it: close 1009 */
	size_t max_queued;		/* 0: WS_MAX_QUEUED_DEFAULT */
	int64_t close_timeout_ms;	/* 0: WS_CLOSE_TIMEOUT_MS_DEFAULT */
	int64_t ping_interval_ms;	/* 0: no keepalive; else ping every interval and
					 * drop a peer whose pong has not come by the next one */
	int64_t dial_timeout_ms;	/* ws_dial: 0: WS_DIAL_TIMEOUT_MS_DEFAULT */
	ws_message_fn on_message;
	ws_close_fn on_close;
	ws_drain_fn on_drain;		/* optional */
	void *arg;
};

/*
 * A byte transport (src/http's struct stream, or a plain fd): read and write
 * return bytes, 0 for EOF (read), -1 with errno (EAGAIN: wait for
 * wants()). free closes it.
 */
struct ws_transport {
	ssize_t (*read)(void *ctx, void *buf, size_t n);
	ssize_t (*write)(void *ctx, const void *buf, size_t n);
	int (*wants)(void *ctx);
	int (*fd)(void *ctx);
	void (*free)(void *ctx);
};

/* src/http's struct stream as a transport (ctx is the struct stream *). */
extern const struct ws_transport ws_stream_transport;

/*
 * Run a connection whose handshake is done, over transport t with context ctx
 * (owned by the connection from now on, even on failure). preamble: bytes to
 * write before any frame (the server's 101 response; NULL for none).
 * leftover: bytes already read past the handshake, processed as frames.
 */
int ws_conn_open(struct ev *ev, const struct ws_transport *t, void *ctx, enum ws_role role,
		 const struct ws_opts *o, const void *preamble, size_t preamble_len,
		 const void *leftover, size_t leftover_len, struct ws_conn **out, struct err *e);
/* The same over a connected socket fd (made non-blocking; closed by the connection). */
int ws_conn_open_fd(struct ev *ev, int fd, enum ws_role role, const struct ws_opts *o,
		    struct ws_conn **out, struct err *e);

/* Queue one message as a single frame. -1 if the connection is closing or
 * closed, the queue would pass max_queued (e->code EAGAIN: wait for on_drain),
 * or text is not valid UTF-8. */
int ws_send_text(struct ws_conn *c, const void *data, size_t len, struct err *e);
int ws_send_binary(struct ws_conn *c, const void *data, size_t len, struct err *e);
/* Send a ping (payload <= 125 bytes); the pong is answered silently. */
int ws_ping(struct ws_conn *c, const void *data, size_t len, struct err *e);
/*
 * Start the close handshake with code (0: a close frame without a code) and
 * reason (may be NULL; cut to 123 bytes at a character boundary). on_close
 * follows when the peer answers or the close timeout passes. -1 if code is
 * not valid to send or the connection is already closing.
 */
int ws_close(struct ws_conn *c, int code, const char *reason);
/* Bytes queued and not yet written: the sender's backpressure signal. */
size_t ws_queued(const struct ws_conn *c);
/* True until the close handshake starts (either side) or the connection drops. */
bool ws_is_open(const struct ws_conn *c);
/* Drop the connection (no close handshake if it is still open: call
 * ws_close first for a clean end) and free it. No callback runs after. */
void ws_conn_free(struct ws_conn *c);

/* ---- server and client ---- */

struct http_req;

/*
 * Upgrade an HTTP request to a WebSocket: checks GET, Upgrade: websocket,
 * Connection: upgrade, Sec-WebSocket-Version: 13, a valid Sec-WebSocket-Key.
 * Invalid: answers 400 (426 with Sec-WebSocket-Version: 13 for a wrong
 * version) through the HTTP server and returns -1. Valid: takes the
 * connection from the HTTP server, writes the 101 and runs it.
 */
int ws_accept(struct ev *ev, struct http_req *req, const struct ws_opts *o,
	      struct ws_conn **out, struct err *e);

/*
 * Connect to url (ws:// or wss://), blocking up to o->dial_timeout_ms for
 * connect, TLS and the handshake; then run non-blocking on ev.
 * extra_headers: NULL or complete header lines, each ending in "\r\n"
 * (e.g. "Authorization: Bearer ...\r\n"). A refusal (status other than 101)
 * fails with the status and the start of the body in e (e->code = status).
 */
int ws_dial(struct ev *ev, const char *url, const char *extra_headers,
	    const struct ws_opts *o, struct ws_conn **out, struct err *e);

#endif
