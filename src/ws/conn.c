/* conn.c: one WebSocket connection on the event loop over a byte transport:
 * the read pump, the send queue, ping/pong, the close handshake, keepalive.
 * See ws.h. */
#include "ws/ws.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/sys.h"
#include "base/utf8.h"

struct ws_conn {
	struct ev *ev;
	const struct ws_transport *t;
	void *ctx;
	int fd;
	enum ws_role role;
	struct ws_opts o;
	struct ws_rx *rx;

	uint8_t *rbuf;			/* bytes read and not yet fed to rx */
	size_t rcap, rpos, rlen;
	struct buf out;			/* frames queued; out.data[out_off..] unwritten */
	size_t out_off;
	int read_wants, write_wants;	/* what the transport's last EAGAIN waits for */
	int write_errno;		/* a write failed: the connection is broken */

	bool sent_close, got_close;
	bool failed;			/* we sent a close because the peer broke a rule */
	bool fail_dead;			/* ... and its framing cannot be followed any more */
	uint16_t fail_code, peer_code;
	char fail_reason[WS_MAX_CLOSE_REASON + 1];
	char peer_reason[WS_MAX_CLOSE_REASON + 1];
	bool done;			/* transport closed, on_close called (or suppressed) */

	bool awaiting_pong;
	bool drain_wanted;
	uint64_t ping_seq;

	struct ev_timer kick, close_timer, ping_timer;

	/* Callbacks may free the connection; the outermost loop entry frees it
	 * once the stack has unwound. */
	int depth;
	bool free_requested;

	uint8_t rnd[256];		/* masking keys, fetched in batches */
	size_t rnd_left;
};

static bool gone(const struct ws_conn *c)
{
	return c->done || c->free_requested;
}

static size_t queued(const struct ws_conn *c)
{
	return c->out.len - c->out_off;
}

/* ---- leaving the loop ---- */

static void teardown(struct ws_conn *c)
{
	if (c->done)
		return;
	c->done = true;
	ev_timer_stop(c->ev, &c->kick);
	ev_timer_stop(c->ev, &c->close_timer);
	ev_timer_stop(c->ev, &c->ping_timer);
	ev_fd_del(c->ev, c->fd);
	c->t->free(c->ctx);
	c->ctx = NULL;
}

static void real_free(struct ws_conn *c)
{
	ws_rx_free(c->rx);
	free(c->rbuf);
	buf_release(&c->out);
	free(c);
}

/* The connection is over: close the transport and tell the owner once. */
static void finish(struct ws_conn *c, int code, const char *reason)
{
	char why[WS_MAX_CLOSE_REASON + 64];

	if (c->done)
		return;
	snprintf(why, sizeof(why), "%s", reason ? reason : "");
	teardown(c);
	if (c->o.on_close && !c->free_requested) {
		c->depth++;
		c->o.on_close(c, code, why, c->o.arg);
		c->depth--;
	}
}

static void enter(struct ws_conn *c)
{
	c->depth++;
}

/* Returns true if c was freed. */
static bool leave(struct ws_conn *c)
{
	if (--c->depth == 0 && c->free_requested) {
		real_free(c);
		return true;
	}
	return false;
}

static void on_kick(struct ev *ev, void *arg);
static void on_close_timer(struct ev *ev, void *arg);

/* ---- the send queue ---- */

static void mask_key(struct ws_conn *c, uint8_t key[4])
{
	if (c->rnd_left < 4) {
		ssize_t n = getrandom(c->rnd, sizeof(c->rnd), GRND_NONBLOCK);
		if (n != (ssize_t)sizeof(c->rnd)) {
			/* No entropy yet (very early boot): masking only has to
			 * be unpredictable to scripts in browsers, which we do not
			 * host; a clock-seeded mix is enough for a peer's parser. */
			uint64_t x = (uint64_t)ev_mono_ms() ^ (uint64_t)(uintptr_t)c ^ c->ping_seq++;
			for (size_t i = 0; i < sizeof(c->rnd); i++) {
				x ^= x << 13;
				x ^= x >> 7;
				x ^= x << 17;
				c->rnd[i] = (uint8_t)x;
			}
		}
		c->rnd_left = sizeof(c->rnd);
	}
	memcpy(key, c->rnd + sizeof(c->rnd) - c->rnd_left, 4);
	c->rnd_left -= 4;
}

/* Append one frame. Only fails when the buffer's absolute cap is passed. */
static int queue_frame(struct ws_conn *c, unsigned opcode, const void *data, size_t len)
{
	uint8_t head[WS_MAX_FRAME_HEAD], key[4];
	size_t hl;

	if (c->role == WS_CLIENT)
		mask_key(c, key);
	hl = ws_frame_head(head, true, opcode, len, c->role == WS_CLIENT ? key : NULL);
	/* Move the unwritten tail down once the written head dominates, so the
	 * buffer does not creep upward forever under steady traffic. */
	if (c->out_off && c->out_off >= c->out.len / 2) {
		buf_consume(&c->out, c->out_off);
		c->out_off = 0;
	}
	if (buf_grow(&c->out, hl + len) < 0)
		return -1;
	buf_add(&c->out, head, hl);
	if (len) {
		uint8_t *dst = (uint8_t *)c->out.data + c->out.len;
		buf_add(&c->out, data, len);
		if (c->role == WS_CLIENT)
			ws_mask(dst, len, key, 0);
	}
	return 0;
}

static int queue_close(struct ws_conn *c, unsigned code, const char *reason, size_t rlen)
{
	uint8_t p[WS_MAX_CONTROL];
	size_t n = 0;

	if (code) {
		p[0] = (uint8_t)(code >> 8);
		p[1] = (uint8_t)code;
		if (rlen > WS_MAX_CLOSE_REASON)
			rlen = WS_MAX_CLOSE_REASON;
		/* Never cut a character in half: back up to a lead byte. */
		if (rlen < strlen(reason))
			while (rlen > 0 && ((unsigned char)reason[rlen] & 0xC0) == 0x80)
				rlen--;
		memcpy(p + 2, reason, rlen);
		n = 2 + rlen;
	}
	c->sent_close = true;
	ev_timer_start(c->ev, &c->close_timer, c->o.close_timeout_ms, on_close_timer, c);
	return queue_frame(c, WS_OP_CLOSE, p, n);
}

/* Write what we can. -1 when the transport is broken (errno kept in write_errno). */
static int flush(struct ws_conn *c)
{
	if (c->write_errno)
		return -1;
	while (queued(c) > 0) {
		ssize_t n = c->t->write(c->ctx, c->out.data + c->out_off, queued(c));
		if (n > 0) {
			c->out_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			c->write_wants = c->t->wants(c->ctx);
			return 0;
		}
		c->write_errno = n < 0 ? errno : EPIPE;
		return -1;
	}
	c->out_off = 0;
	if (c->out.cap > WS_KEEP_BUFFER)
		buf_release(&c->out);
	else
		buf_reset(&c->out);
	return 0;
}

static void update_events(struct ws_conn *c)
{
	int ev = 0;

	if (gone(c))
		return;
	if (queued(c) <= c->o.max_queued)
		ev |= c->read_wants;
	if (queued(c) > 0)
		ev |= c->write_wants;
	ev_fd_set(c->ev, c->fd, ev);
}

/* From an API call (not the loop): try to write now; report breakage from
 * the loop, never from inside the caller's call. */
static void flush_soon(struct ws_conn *c)
{
	if (flush(c) < 0 || (c->sent_close && queued(c) == 0))
		ev_timer_start(c->ev, &c->kick, 0, on_kick, c);
	update_events(c);
}

/* ---- receiving ---- */

static void fail(struct ws_conn *c, uint16_t code, const char *why)
{
	if (c->failed || c->got_close)
		return;
	c->failed = true;
	c->fail_dead = !(code == WS_CLOSE_INVALID_DATA || code == WS_CLOSE_TOO_BIG);
	c->fail_code = code;
	snprintf(c->fail_reason, sizeof(c->fail_reason), "%s", why);
	if (!c->sent_close)
		queue_close(c, code, why, strlen(why));
}

static void handle(struct ws_conn *c, const struct ws_rx_event *ev)
{
	switch (ev->kind) {
	case WS_RX_TEXT:
	case WS_RX_BINARY:
		if (c->failed || !c->o.on_message)
			return;
		c->o.on_message(c, ev->kind == WS_RX_BINARY, ev->data, ev->len, c->o.arg);
		return;
	case WS_RX_PING:
		if (!c->sent_close)
			queue_frame(c, WS_OP_PONG, ev->data, ev->len);
		return;
	case WS_RX_PONG:
		c->awaiting_pong = false;
		return;
	case WS_RX_CLOSE:
		c->got_close = true;
		c->peer_code = ev->code;
		snprintf(c->peer_reason, sizeof(c->peer_reason), "%.*s", (int)ev->len, (const char *)ev->data);
		/* Echo the code (RFC 6455 5.5.1), and the reason too, so that
		 * both ends report the same close; a close without a code gets
		 * one without a code. */
		if (!c->sent_close)
			queue_close(c, ev->code == WS_CLOSE_NO_STATUS ? 0 : ev->code, c->peer_reason,
				    strlen(c->peer_reason));
		return;
	case WS_RX_ERROR:
		fail(c, ev->code, ev->why);
		return;
	case WS_RX_NONE:
		return;
	}
}

static void handle_eof(struct ws_conn *c)
{
	if (c->got_close)
		finish(c, c->peer_code, c->peer_reason);
	else if (c->failed)
		finish(c, c->fail_code, c->fail_reason);
	else
		finish(c, WS_CLOSE_ABNORMAL, "connection closed without a close frame");
}

/* Our close is on the wire: end the connection if its handshake is over. */
static void close_progress(struct ws_conn *c)
{
	if (gone(c) || !c->sent_close || queued(c) > 0)
		return;
	if (c->failed && (c->fail_dead || c->got_close)) {
		finish(c, c->fail_code, c->fail_reason);
	} else if (c->got_close && c->role == WS_SERVER) {
		/* The server drops TCP first (RFC 6455 7.1.1), so the client's
		 * side of the socket does not linger in TIME_WAIT. */
		finish(c, c->peer_code, c->peer_reason);
	}
	/* Otherwise: waiting for the peer's close (we started), or for the
	 * server to drop TCP (we are a client); the close timer bounds both. */
}

static void after_flush(struct ws_conn *c)
{
	if (gone(c))
		return;
	if (c->drain_wanted && queued(c) == 0) {
		c->drain_wanted = false;
		if (c->o.on_drain && !c->sent_close)
			c->o.on_drain(c, c->o.arg);
		if (gone(c))
			return;
	}
	close_progress(c);
}

static void broken(struct ws_conn *c, int errnum)
{
	char why[WS_MAX_CLOSE_REASON + 1];

	snprintf(why, sizeof(why), "connection broken: %s", strerror(errnum));
	finish(c, WS_CLOSE_ABNORMAL, why);
}

/* Everything the loop does for a connection: write, read, dispatch, write. */
static void pump(struct ws_conn *c)
{
	enter(c);
	if (flush(c) < 0) {
		broken(c, c->write_errno);
		goto out;
	}
	after_flush(c);
	while (!gone(c)) {
		if (queued(c) > c->o.max_queued)
			break;	/* the peer does not read: stop reading too */
		if (c->rpos < c->rlen) {
			struct ws_rx_event ev;
			c->rpos += ws_rx_feed(c->rx, c->rbuf + c->rpos, c->rlen - c->rpos, &ev);
			if (ev.kind != WS_RX_NONE)
				handle(c, &ev);
			continue;
		}
		ssize_t n = c->t->read(c->ctx, c->rbuf, c->rcap);
		if (n > 0) {
			c->rpos = 0;
			c->rlen = (size_t)n;
			continue;
		}
		if (n == 0) {
			handle_eof(c);
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			c->read_wants = c->t->wants(c->ctx);
			break;
		}
		broken(c, errno);
	}
	if (gone(c))
		goto out;
	if (flush(c) < 0) {
		broken(c, c->write_errno);
		goto out;
	}
	after_flush(c);
	update_events(c);
out:
	leave(c);
}

static void on_fd(struct ev *ev, int fd, int revents, void *arg)
{
	pump(arg);
}

static void on_kick(struct ev *ev, void *arg)
{
	pump(arg);
}

static void on_close_timer(struct ev *ev, void *arg)
{
	struct ws_conn *c = arg;
	char why[WS_MAX_CLOSE_REASON + 1];

	enter(c);
	if (c->got_close) {
		finish(c, c->peer_code, c->peer_reason);
	} else if (c->failed) {
		finish(c, c->fail_code, c->fail_reason);
	} else {
		snprintf(why, sizeof(why), "close handshake timed out after %lld ms",
			 (long long)c->o.close_timeout_ms);
		finish(c, WS_CLOSE_ABNORMAL, why);
	}
	leave(c);
}

static void on_ping_timer(struct ev *ev, void *arg)
{
	struct ws_conn *c = arg;
	uint8_t p[8];

	enter(c);
	if (c->sent_close || c->got_close)
		goto out;
	if (c->awaiting_pong) {
		char why[WS_MAX_CLOSE_REASON + 1];
		snprintf(why, sizeof(why), "keepalive: no pong within %lld ms",
			 (long long)c->o.ping_interval_ms);
		finish(c, WS_CLOSE_ABNORMAL, why);
		goto out;
	}
	c->ping_seq++;
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(c->ping_seq >> (56 - 8 * i));
	queue_frame(c, WS_OP_PING, p, sizeof(p));
	c->awaiting_pong = true;
	ev_timer_start(c->ev, &c->ping_timer, c->o.ping_interval_ms, on_ping_timer, c);
	if (flush(c) < 0)
		broken(c, c->write_errno);
	else
		update_events(c);
out:
	leave(c);
}

/* ---- public ---- */

int ws_conn_open(struct ev *ev, const struct ws_transport *t, void *ctx, enum ws_role role,
		 const struct ws_opts *o, const void *preamble, size_t preamble_len,
		 const void *leftover, size_t leftover_len, struct ws_conn **out, struct err *e)
{
	struct ws_conn *c;

	*out = NULL;
	c = xcalloc(1, sizeof(*c));
	c->ev = ev;
	c->t = t;
	c->ctx = ctx;
	c->fd = t->fd(ctx);
	c->role = role;
	c->o = *o;
	if (!c->o.max_message)
		c->o.max_message = WS_MAX_MESSAGE_DEFAULT;
	if (!c->o.max_queued)
		c->o.max_queued = WS_MAX_QUEUED_DEFAULT;
	if (c->o.close_timeout_ms <= 0)
		c->o.close_timeout_ms = WS_CLOSE_TIMEOUT_MS_DEFAULT;
	if (c->o.ping_interval_ms < 0)
		c->o.ping_interval_ms = 0;
	c->read_wants = EV_READ;
	c->write_wants = EV_WRITE;
	buf_init(&c->out, BUF_MAX_DEFAULT);
	c->rcap = leftover_len > WS_READ_CHUNK ? leftover_len : WS_READ_CHUNK;
	c->rbuf = xmalloc(c->rcap);
	if (leftover_len)
		memcpy(c->rbuf, leftover, leftover_len);
	c->rlen = leftover_len;
	c->rx = ws_rx_new(role, c->o.max_message);
	if (preamble_len)
		buf_add(&c->out, preamble, preamble_len);
	if (ev_fd_add(ev, c->fd, EV_READ, on_fd, c) < 0) {
		err_errno(e, "websocket: watch fd %d", c->fd);
		t->free(ctx);
		ws_rx_free(c->rx);
		free(c->rbuf);
		buf_release(&c->out);
		free(c);
		return -1;
	}
	/* Leftover bytes (and TLS plaintext already decrypted) are processed on
	 * the loop, once the caller holds the connection pointer. */
	ev_timer_start(ev, &c->kick, 0, on_kick, c);
	if (c->o.ping_interval_ms > 0)
		ev_timer_start(ev, &c->ping_timer, c->o.ping_interval_ms, on_ping_timer, c);
	*out = c;
	return 0;
}

static int send_data(struct ws_conn *c, unsigned op, const void *data, size_t len, struct err *e)
{
	if (gone(c))
		return err_set(e, "websocket connection is closed");
	if (c->sent_close || c->got_close)
		return err_set(e, "websocket connection is closing");
	if (len > c->o.max_queued || queued(c) + len + WS_MAX_FRAME_HEAD > c->o.max_queued) {
		err_set(e, "websocket send queue full (%zu bytes queued, limit %zu): wait for the peer to read",
			queued(c), c->o.max_queued);
		e->code = EAGAIN;
		return -1;
	}
	if (queue_frame(c, op, data, len) < 0)
		return err_set(e, "websocket send queue full");
	flush_soon(c);
	if (queued(c) > 0)
		c->drain_wanted = true;
	return 0;
}

int ws_send_text(struct ws_conn *c, const void *data, size_t len, struct err *e)
{
	if (!utf8_valid(data, len))
		return err_set(e, "websocket: text message is not valid UTF-8 (send it as binary)");
	return send_data(c, WS_OP_TEXT, data, len, e);
}

int ws_send_binary(struct ws_conn *c, const void *data, size_t len, struct err *e)
{
	return send_data(c, WS_OP_BINARY, data, len, e);
}

int ws_ping(struct ws_conn *c, const void *data, size_t len, struct err *e)
{
	if (gone(c))
		return err_set(e, "websocket connection is closed");
	if (c->sent_close || c->got_close)
		return err_set(e, "websocket connection is closing");
	if (len > WS_MAX_CONTROL)
		return err_set(e, "websocket ping payload is %zu bytes; the limit is %d", len, WS_MAX_CONTROL);
	if (queue_frame(c, WS_OP_PING, data, len) < 0)
		return err_set(e, "websocket send queue full");
	flush_soon(c);
	return 0;
}

int ws_close(struct ws_conn *c, int code, const char *reason)
{
	if (gone(c) || c->sent_close)
		return -1;
	if (code != 0 && (code < 0 || !ws_close_code_valid((unsigned)code)))
		return -1;
	if (!reason)
		reason = "";
	queue_close(c, (unsigned)code, reason, strlen(reason));
	flush_soon(c);
	return 0;
}

size_t ws_queued(const struct ws_conn *c)
{
	return queued(c);
}

bool ws_is_open(const struct ws_conn *c)
{
	return !gone(c) && !c->sent_close && !c->got_close;
}

void ws_conn_free(struct ws_conn *c)
{
	if (!c)
		return;
	teardown(c);
	if (c->depth > 0) {
		c->free_requested = true;
		return;
	}
	real_free(c);
}

/* ---- a plain fd as transport ---- */

struct fd_io {
	int fd;
	int wants;
};

static ssize_t fd_read(void *ctx, void *buf, size_t n)
{
	struct fd_io *io = ctx;
	ssize_t r = read(io->fd, buf, n);

	if (r < 0)
		io->wants = EV_READ;
	return r;
}

static ssize_t fd_write(void *ctx, const void *buf, size_t n)
{
	struct fd_io *io = ctx;
	ssize_t r = write(io->fd, buf, n);

	if (r < 0)
		io->wants = EV_WRITE;
	return r;
}

static int fd_wants(void *ctx)
{
	return ((struct fd_io *)ctx)->wants;
}

static int fd_fd(void *ctx)
{
	return ((struct fd_io *)ctx)->fd;
}

static void fd_free(void *ctx)
{
	struct fd_io *io = ctx;

	sys_close(io->fd);
	free(io);
}

static const struct ws_transport fd_transport = { fd_read, fd_write, fd_wants, fd_fd, fd_free };

int ws_conn_open_fd(struct ev *ev, int fd, enum ws_role role, const struct ws_opts *o,
		    struct ws_conn **out, struct err *e)
{
	struct fd_io *io = xcalloc(1, sizeof(*io));

	io->fd = fd;
	io->wants = EV_READ;
	if (sys_set_nonblock(fd, 1) < 0 || sys_set_cloexec(fd) < 0) {
		err_errno(e, "websocket: set fd %d non-blocking", fd);
		fd_free(io);
		*out = NULL;
		return -1;
	}
	return ws_conn_open(ev, &fd_transport, io, role, o, NULL, 0, NULL, 0, out, e);
}
