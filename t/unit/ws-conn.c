/* Unit tests: struct ws_conn on the event loop over socketpairs: two of our
 * connections talking, and a raw peer for the faults (protocol violations,
 * silence, dropped TCP). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/ev.h"
#include "http/stream.h"
#include "ws/ws.h"
#include "tap.h"

struct side {
	struct ws_conn *c;
	int messages, closes, drains;
	bool last_binary;
	struct buf last;
	int code;
	char reason[200];
	bool free_in_message;	/* ws_conn_free from inside on_message */
	bool free_in_close;
	bool reply;		/* echo messages back */
};

static void on_message(struct ws_conn *c, bool is_binary, const void *data, size_t len, void *arg)
{
	struct side *s = arg;
	struct err e;

	s->messages++;
	s->last_binary = is_binary;
	buf_reset(&s->last);
	buf_add(&s->last, data, len);
	if (s->reply)
		(is_binary ? ws_send_binary : ws_send_text)(c, data, len, &e);
	if (s->free_in_message) {
		ws_conn_free(c);
		s->c = NULL;
	}
}

static void on_close(struct ws_conn *c, int code, const char *reason, void *arg)
{
	struct side *s = arg;

	s->closes++;
	s->code = code;
	snprintf(s->reason, sizeof(s->reason), "%s", reason);
	if (s->free_in_close) {
		ws_conn_free(c);
		s->c = NULL;
	}
}

static void on_drain(struct ws_conn *c, void *arg)
{
	((struct side *)arg)->drains++;
}

static struct ws_opts opts_for(struct side *s)
{
	struct ws_opts o;

	memset(&o, 0, sizeof(o));
	o.on_message = on_message;
	o.on_close = on_close;
	o.on_drain = on_drain;
	o.arg = s;
	return o;
}

static void side_init(struct side *s)
{
	memset(s, 0, sizeof(*s));
	buf_init(&s->last, 0);
}

static void side_release(struct side *s)
{
	ws_conn_free(s->c);
	buf_release(&s->last);
}

/* Run the loop until *counter reaches want or ms pass. */
static bool run_until(struct ev *ev, const int *counter, int want, int64_t ms)
{
	int64_t end = ev_mono_ms() + ms;

	while (*counter < want && ev_mono_ms() < end)
		ev_run_once(ev, 20);
	return *counter >= want;
}

static void pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		abort();
}

/* Read what the raw peer has within ms (appending to b). */
static void raw_read(int fd, struct buf *b, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	char tmp[65536];

	while (poll(&p, 1, ms) > 0) {
		ssize_t n = read(fd, tmp, sizeof(tmp));
		if (n <= 0)
			break;
		buf_add(b, tmp, (size_t)n);
		ms = 50;
	}
}

static void test_pair(void)
{
	struct ev *ev = ev_new();
	struct side srv, cli;
	struct ws_opts so, co;
	struct err e;
	int sv[2];
	char *big;

	side_init(&srv);
	side_init(&cli);
	srv.reply = true;
	so = opts_for(&srv);
	co = opts_for(&cli);
	pair(sv);
	ok(ws_conn_open_fd(ev, sv[0], WS_SERVER, &so, &srv.c, &e) == 0, "server side open");
	ok(ws_conn_open_fd(ev, sv[1], WS_CLIENT, &co, &cli.c, &e) == 0, "client side open");

	ok(ws_send_text(cli.c, "hello", 5, &e) == 0, "client sends text");
	ok(run_until(ev, &cli.messages, 1, 2000) && !cli.last_binary && cli.last.len == 5 &&
	   memcmp(cli.last.data, "hello", 5) == 0, "text echoed back through both sides");
	big = xmalloc(3 << 20);
	for (size_t i = 0; i < (3u << 20); i++)
		big[i] = (char)(i * 31);
	ok(ws_send_binary(cli.c, big, 3 << 20, &e) == 0, "client queues a 3 MiB binary");
	ok(ws_queued(cli.c) > 0, "part of it is still queued (socket buffer is smaller)");
	ok(run_until(ev, &cli.messages, 2, 5000) && cli.last_binary && cli.last.len == (3u << 20) &&
	   memcmp(cli.last.data, big, 3 << 20) == 0, "3 MiB echoed intact");
	ok(cli.drains >= 1, "on_drain called once the queue emptied");
	ok(ws_send_text(cli.c, "\xff", 1, &e) == -1 && strstr(e.msg, "UTF-8"), "invalid UTF-8 text refused at send: %s", e.msg);
	ok(ws_ping(cli.c, big, 126, &e) == -1, "ping payload over 125 refused");
	ok(ws_ping(cli.c, "p", 1, &e) == 0, "ping sent");
	ok(ws_close(cli.c, 1005, "x") == -1 && ws_close(cli.c, 999, NULL) == -1, "reserved close codes refused by ws_close");

	/* A 200-byte reason is cut to 123 bytes at a character boundary: 61
	 * two-byte characters (122 bytes), not 61.5. */
	{
		char reason[201];
		for (int i = 0; i < 100; i++)
			memcpy(reason + 2 * i, "\xc3\xa9", 2);
		reason[200] = '\0';
		ok(ws_close(cli.c, 1001, reason) == 0, "client starts the close (1001, long reason)");
	}
	ok(!ws_is_open(cli.c), "client no longer open once closing");
	ok(ws_send_text(cli.c, "x", 1, &e) == -1 && strstr(e.msg, "closing"), "send after close refused: %s", e.msg);
	ok(run_until(ev, &cli.closes, 1, 3000) && run_until(ev, &srv.closes, 1, 3000), "both sides report the close");
	is_int(srv.code, 1001, "server sees the client's code");
	is_int(strlen(srv.reason), 122, "reason cut to 122 bytes (whole characters)");
	is_int(cli.code, 1001, "client sees the echoed code");
	ok(strcmp(cli.reason, srv.reason) == 0, "and the echoed reason");
	ok(ws_send_text(cli.c, "x", 1, &e) == -1 && strstr(e.msg, "closed"), "send after the end refused: %s", e.msg);
	free(big);
	side_release(&srv);
	side_release(&cli);

	/* Free from inside on_message and on_close. */
	side_init(&srv);
	side_init(&cli);
	so = opts_for(&srv);
	co = opts_for(&cli);
	srv.free_in_message = true;
	cli.free_in_close = true;
	pair(sv);
	ws_conn_open_fd(ev, sv[0], WS_SERVER, &so, &srv.c, &e);
	ws_conn_open_fd(ev, sv[1], WS_CLIENT, &co, &cli.c, &e);
	ws_send_text(cli.c, "a", 1, &e);
	ws_send_text(cli.c, "b", 1, &e);
	ok(run_until(ev, &cli.closes, 1, 3000), "server freed itself in on_message; client sees the drop");
	is_int(srv.messages, 1, "no callback after the free");
	is_int(srv.closes, 0, "no on_close after ws_conn_free");
	is_int(cli.code, 1006, "client reports 1006 for a drop without a close frame");
	ok(cli.c == NULL, "client freed itself inside on_close");
	side_release(&srv);
	side_release(&cli);

	/* Send queue cap: EAGAIN, then on_drain. */
	side_init(&srv);
	side_init(&cli);
	so = opts_for(&srv);
	co = opts_for(&cli);
	co.max_queued = 100000;
	pair(sv);
	ws_conn_open_fd(ev, sv[0], WS_SERVER, &so, &srv.c, &e);
	ws_conn_open_fd(ev, sv[1], WS_CLIENT, &co, &cli.c, &e);
	{
		static char chunk[60000];
		int refused = 0, sent = 0;
		for (int i = 0; i < 50 && !refused; i++) {
			if (ws_send_binary(cli.c, chunk, sizeof(chunk), &e) == 0)
				sent++;
			else
				refused = e.code == EAGAIN;
		}
		ok(refused && ws_queued(cli.c) <= 100000, "queue cap refuses with EAGAIN after %d sends (%zu queued)",
		   sent, ws_queued(cli.c));
		ok(run_until(ev, &cli.drains, 1, 3000) && ws_queued(cli.c) == 0, "on_drain when the peer read it all");
		ok(run_until(ev, &srv.messages, sent, 3000), "all %d accepted messages arrived", sent);
	}
	ws_close(srv.c, 1000, "");
	ok(run_until(ev, &cli.closes, 1, 3000) && cli.code == 1000 && srv.closes == 1 && srv.code == 1000,
	   "server-initiated close completes on both sides");
	side_release(&srv);
	side_release(&cli);
	ev_free(ev);
}

static void test_raw_peer(void)
{
	struct ev *ev = ev_new();
	struct side s;
	struct ws_opts o;
	struct err e;
	struct buf got;
	int sv[2];

	buf_init(&got, 0);

	/* Unmasked frame to a server: close 1002 on the wire and reported. */
	side_init(&s);
	o = opts_for(&s);
	pair(sv);
	ws_conn_open_fd(ev, sv[0], WS_SERVER, &o, &s.c, &e);
	(void)!write(sv[1], "\x81\x02hi", 4);
	ok(run_until(ev, &s.closes, 1, 3000), "server ends the connection after an unmasked frame");
	is_int(s.code, 1002, "reported as 1002");
	raw_read(sv[1], &got, 500);
	ok(got.len >= 4 && (uint8_t)got.data[0] == 0x88 && got.data[2] == 0x03 && got.data[3] == (char)0xea,
	   "close frame with 1002 sent to the peer (unmasked, from a server)");
	ok(got.len >= 2 && !((uint8_t)got.data[1] & 0x80), "server frames are not masked");
	close(sv[1]);
	side_release(&s);

	/* Ping answered; EOF without close -> 1006. */
	side_init(&s);
	o = opts_for(&s);
	pair(sv);
	ws_conn_open_fd(ev, sv[0], WS_CLIENT, &o, &s.c, &e);
	(void)!write(sv[1], "\x89\x03" "abc", 5);
	buf_reset(&got);
	for (int i = 0; i < 20 && got.len < 9; i++) {
		ev_run_once(ev, 20);
		raw_read(sv[1], &got, 10);
	}
	ok(got.len == 9 && (uint8_t)got.data[0] == 0x8A && (uint8_t)got.data[1] == 0x83,
	   "client answers a ping with a masked pong");
	if (got.len == 9) {
		uint8_t p[3];
		memcpy(p, got.data + 6, 3);
		ws_mask(p, 3, (const uint8_t *)got.data + 2, 0);
		ok(memcmp(p, "abc", 3) == 0, "pong carries the ping's payload");
	} else {
		ok(0, "pong carries the ping's payload");
	}
	close(sv[1]);
	ok(run_until(ev, &s.closes, 1, 3000) && s.code == 1006, "EOF without a close frame -> 1006 (%s)", s.reason);
	side_release(&s);

	/* A silent peer: keepalive gives up; close timeout drops the socket. */
	side_init(&s);
	o = opts_for(&s);
	o.ping_interval_ms = 100;
	pair(sv);
	ws_conn_open_fd(ev, sv[0], WS_SERVER, &o, &s.c, &e);
	ok(run_until(ev, &s.closes, 1, 3000) && s.code == 1006 && strstr(s.reason, "pong"),
	   "keepalive: no pong -> 1006 (%s)", s.reason);
	close(sv[1]);
	side_release(&s);

	side_init(&s);
	o = opts_for(&s);
	o.close_timeout_ms = 150;
	pair(sv);
	ws_conn_open_fd(ev, sv[0], WS_SERVER, &o, &s.c, &e);
	ws_close(s.c, 1000, "bye");
	{
		int64_t t0 = ev_mono_ms();
		ok(run_until(ev, &s.closes, 1, 3000) && s.code == 1006 && strstr(s.reason, "timed out"),
		   "close timeout -> 1006 (%s)", s.reason);
		ok(ev_mono_ms() - t0 >= 140, "not before the timeout");
	}
	buf_reset(&got);
	raw_read(sv[1], &got, 200);
	ok(got.len == 7 && memcmp(got.data, "\x88\x05\x03\xe8" "bye", 7) == 0, "our close frame went out first");
	close(sv[1]);
	side_release(&s);

	/* Oversized message: 1009, the payload is skipped and the peer's close
	 * still completes the handshake. */
	side_init(&s);
	o = opts_for(&s);
	o.max_message = 10;
	pair(sv);
	ws_conn_open_fd(ev, sv[0], WS_CLIENT, &o, &s.c, &e);
	(void)!write(sv[1], "\x82\x0b" "01234567890" "\x88\x02\x03\xf1", 17);
	ok(run_until(ev, &s.closes, 1, 3000) && s.code == 1009, "over the limit -> 1009 (%s)", s.reason);
	is_int(s.messages, 0, "no message delivered");
	buf_reset(&got);
	raw_read(sv[1], &got, 200);
	ok(got.len >= 8 && (uint8_t)got.data[0] == 0x88 && (uint8_t)got.data[1] & 0x80, "masked close frame sent");
	if (got.len >= 8) {
		uint8_t p[2];
		memcpy(p, got.data + 6, 2);
		ws_mask(p, 2, (const uint8_t *)got.data + 2, 0);
		ok(p[0] == 0x03 && p[1] == 0xf1, "with code 1009");
	} else {
		ok(0, "with code 1009");
	}
	close(sv[1]);
	side_release(&s);

	/* Over a struct stream: the preamble goes out first, leftover bytes
	 * (read past the handshake) are processed as frames. */
	side_init(&s);
	o = opts_for(&s);
	pair(sv);
	ok(ws_conn_open(ev, &ws_stream_transport, stream_new_plain(sv[0]), WS_CLIENT, &o, "PRE", 3,
			"\x81\x03" "abc\x01\x01x", 8, &s.c, &e) == 0, "open over a stream with preamble and leftover");
	ok(run_until(ev, &s.messages, 1, 3000) && s.last.len == 3 && memcmp(s.last.data, "abc", 3) == 0,
	   "leftover frame delivered");
	buf_reset(&got);
	raw_read(sv[1], &got, 200);
	ok(got.len == 3 && memcmp(got.data, "PRE", 3) == 0, "preamble written before anything else");
	(void)!write(sv[1], "\x00\x02he\x80\x01y", 7);
	ok(run_until(ev, &s.messages, 2, 3000) && s.last.len == 4 && memcmp(s.last.data, "xhey", 4) == 0,
	   "fragmented text continued from leftover into socket reads");
	close(sv[1]);
	run_until(ev, &s.closes, 1, 3000);
	side_release(&s);

	buf_release(&got);
	ev_free(ev);
}

int main(void)
{
	test_pair();
	test_raw_peer();
	return tap_done();
}
