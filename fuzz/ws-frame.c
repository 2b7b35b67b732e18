/*
 * Fuzz target: the WebSocket frame parser and message assembler.
 * Input byte 0 picks the role (bit 0) and the message limit (bits 1-3);
 * byte 1 seeds the chunk sizes; the rest is the byte stream from the peer,
 * fed in pseudo-random chunks. Checks the assembler's promises: it always
 * makes progress, never consumes more than given, delivers only valid UTF-8
 * text within the limit, and control payloads of at most 125 bytes.
 * With bit 4 of byte 0 set, the same bytes also go through a whole struct
 * ws_conn over a socketpair (echoing every message, closing from inside
 * callbacks), to exercise the connection's state machine; it must end with
 * exactly one on_close once the peer's bytes run out.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/ev.h"

#include "base/utf8.h"
#include "ws/ws.h"

static const size_t limits[8] = { 0, 1, 16, 125, 126, 1000, 65536, 70000 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct conn_state {
	struct ws_conn *c;
	int closes, messages;
	uint8_t mode;
};

static void c_message(struct ws_conn *c, bool is_binary, const void *d, size_t len, void *arg)
{
	struct conn_state *st = arg;
	struct err e;

	if (st->closes)
		abort();	/* no callback after on_close */
	st->messages++;
	if (!is_binary && !utf8_valid(d, len))
		abort();
	if (is_binary)
		ws_send_binary(c, d, len, &e);
	else
		ws_send_text(c, d, len, &e);
	if ((st->mode & 0x20) && st->messages == 2)
		ws_close(c, 4000, "enough");
	if ((st->mode & 0x40) && st->messages == 3) {
		ws_conn_free(c);
		st->c = NULL;
	}
}

static void c_close(struct ws_conn *c, int code, const char *reason, void *arg)
{
	struct conn_state *st = arg;

	if (st->closes++)
		abort();	/* exactly once */
	if (code < 1000 || code > 4999)
		abort();
}

static void run_conn(enum ws_role role, size_t max, uint8_t mode, const uint8_t *data, size_t size)
{
	struct conn_state st;
	struct ws_opts o;
	struct ev *ev = ev_new();
	struct err e;
	int sv[2];
	size_t off = 0;

	memset(&st, 0, sizeof(st));
	memset(&o, 0, sizeof(o));
	st.mode = mode;
	o.max_message = max;
	o.close_timeout_ms = 50;
	o.on_message = c_message;
	o.on_close = c_close;
	o.arg = &st;
	if (!ev || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
		abort();
	if (ws_conn_open_fd(ev, sv[0], role, &o, &st.c, &e) < 0)
		abort();
	/* Feed the peer's bytes, then EOF; the peer never reads, so the
	 * connection's writes pile up in the socket (and in its queue). */
	for (int turn = 0; turn < 2000 && !st.closes && st.c; turn++) {
		if (off < size) {
			ssize_t n = write(sv[1], data + off, size - off);
			if (n > 0)
				off += (size_t)n;
		} else if (off == size) {
			shutdown(sv[1], SHUT_WR);
			off++;
		}
		/* Drain what the connection wrote so it never stalls on a full socket. */
		char sink[65536];
		while (read(sv[1], sink, sizeof(sink)) > 0)
			;
		ev_run_once(ev, 5);
	}
	if (st.c && !st.closes)
		abort();	/* EOF must always end the connection */
	ws_conn_free(st.c);
	close(sv[1]);
	ev_free(ev);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum ws_role role;
	size_t max, off = 2;
	uint32_t seed;
	struct ws_rx *rx;
	int closed = 0;

	if (size < 2)
		return 0;
	role = (data[0] & 1) ? WS_CLIENT : WS_SERVER;
	max = limits[(data[0] >> 1) & 7];
	seed = data[1] * 2654435761u + 1;

	/* The head parser on its own, at every prefix of the stream start. */
	for (size_t k = 0; k <= WS_MAX_FRAME_HEAD && off + k <= size; k++) {
		struct ws_frame f;
		uint16_t code = 0;
		const char *why = NULL;
		ssize_t r = ws_frame_parse(data + off, k, role, max ? max : UINT64_MAX, &f, &code, &why);
		if (r > (ssize_t)k || (r == WS_BAD && (!why || (code != 1002 && code != 1009))))
			abort();
	}

	rx = ws_rx_new(role, max);
	if (max == 0)
		max = WS_MAX_MESSAGE_DEFAULT;
	while (off < size) {
		size_t n;
		seed = seed * 1103515245u + 12345u;
		n = 1 + (seed >> 16) % 97;
		if (n > size - off)
			n = size - off;
		/* A fresh copy of exactly n bytes, so ASan sees any over-read. */
		uint8_t *chunk = malloc(n);
		memcpy(chunk, data + off, n);
		size_t pos = 0;
		while (pos < n) {
			struct ws_rx_event ev;
			size_t used = ws_rx_feed(rx, chunk + pos, n - pos, &ev);
			if (used > n - pos)
				abort();
			if (used == 0 && ev.kind == WS_RX_NONE)
				abort();	/* no progress: a caller would spin */
			pos += used;
			switch (ev.kind) {
			case WS_RX_TEXT:
				if (!utf8_valid(ev.data, ev.len))
					abort();
				/* fall through */
			case WS_RX_BINARY:
				if (ev.len > max || closed)
					abort();
				if (ev.len)
					(void)*(volatile const uint8_t *)(ev.data + ev.len - 1);
				break;
			case WS_RX_PING:
			case WS_RX_PONG:
				if (ev.len > WS_MAX_CONTROL)
					abort();
				break;
			case WS_RX_CLOSE:
				if (closed || ev.len > WS_MAX_CLOSE_REASON || !utf8_valid(ev.data, ev.len) ||
				    (ev.code != 1005 && !ws_close_code_valid(ev.code)))
					abort();
				closed = 1;
				break;
			case WS_RX_ERROR:
				if (ev.code != 1002 && ev.code != 1007 && ev.code != 1009)
					abort();
				break;
			case WS_RX_NONE:
				break;
			}
		}
		free(chunk);
		off += n;
	}
	ws_rx_free(rx);
	if (data[0] & 0x10)
		run_conn(role, max == WS_MAX_MESSAGE_DEFAULT ? 0 : max, data[0], data + 2, size - 2);
	return 0;
}
