/* rx.c: the receive side: frames in arbitrary chunks -> messages and control
 * events. See ws.h. */
#include "ws/ws.h"

#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/utf8.h"

enum rx_mode {
	RX_OK,		/* normal */
	RX_SKIP,	/* failed with intact framing: parse heads, skip data, look for close */
	RX_DEAD,	/* framing lost, or close received: discard everything */
};

struct ws_rx {
	enum ws_role role;
	size_t max_message;
	enum rx_mode mode;

	/* the frame head being gathered, then the frame being read */
	uint8_t head[WS_MAX_FRAME_HEAD];
	size_t head_len;
	bool in_frame;
	struct ws_frame f;
	uint64_t done;			/* payload bytes of f consumed */

	/* the data message being assembled */
	bool in_message;
	uint8_t msg_op;
	uint32_t utf8;
	struct buf msg;
	bool delivered;			/* msg was handed out: reset on next feed */

	/* the control frame being read (may arrive between fragments) */
	uint8_t ctl[WS_MAX_CONTROL];
};

struct ws_rx *ws_rx_new(enum ws_role role, size_t max_message)
{
	struct ws_rx *rx = xcalloc(1, sizeof(*rx));

	rx->role = role;
	rx->max_message = max_message ? max_message : WS_MAX_MESSAGE_DEFAULT;
	buf_init(&rx->msg, rx->max_message);
	return rx;
}

void ws_rx_free(struct ws_rx *rx)
{
	if (!rx)
		return;
	buf_release(&rx->msg);
	free(rx);
}

static size_t fail(struct ws_rx *rx, struct ws_rx_event *ev, size_t consumed,
		   uint16_t code, const char *why)
{
	ev->kind = WS_RX_ERROR;
	ev->code = code;
	ev->why = why;
	/* Content errors leave the framing intact, so we can still find the
	 * peer's close frame; anything else leaves nothing to trust. */
	rx->mode = (code == WS_CLOSE_INVALID_DATA || code == WS_CLOSE_TOO_BIG) ? RX_SKIP : RX_DEAD;
	rx->in_message = false;
	buf_reset(&rx->msg);
	return consumed;
}

/* A close payload: empty, or a valid code and a UTF-8 reason. */
static size_t close_frame(struct ws_rx *rx, struct ws_rx_event *ev, size_t consumed)
{
	size_t n = (size_t)rx->f.len;

	if (n == 1)
		return fail(rx, ev, consumed, WS_CLOSE_PROTOCOL, "close frame with a 1-byte payload");
	ev->code = WS_CLOSE_NO_STATUS;
	ev->data = rx->ctl;
	ev->len = 0;
	if (n >= 2) {
		unsigned code = (unsigned)rx->ctl[0] << 8 | rx->ctl[1];
		if (!ws_close_code_valid(code))
			return fail(rx, ev, consumed, WS_CLOSE_PROTOCOL, "invalid close code");
		if (!utf8_valid(rx->ctl + 2, n - 2))
			return fail(rx, ev, consumed, WS_CLOSE_INVALID_DATA, "close reason is not valid UTF-8");
		ev->code = (uint16_t)code;
		ev->data = rx->ctl + 2;
		ev->len = n - 2;
	}
	ev->kind = WS_RX_CLOSE;
	rx->mode = RX_DEAD;
	return consumed;
}

/* The current frame's payload is complete. Returns true if ev is set. */
static bool frame_end(struct ws_rx *rx, struct ws_rx_event *ev, size_t consumed, size_t *ret)
{
	rx->in_frame = false;
	if (rx->f.opcode & 0x8) {
		if (rx->f.opcode == WS_OP_CLOSE) {
			*ret = close_frame(rx, ev, consumed);
			return true;
		}
		if (rx->mode == RX_SKIP)
			return false;	/* we are closing: pings need no answer */
		ev->kind = rx->f.opcode == WS_OP_PING ? WS_RX_PING : WS_RX_PONG;
		ev->data = rx->ctl;
		ev->len = (size_t)rx->f.len;
		*ret = consumed;
		return true;
	}
	if (rx->mode == RX_SKIP || !rx->f.fin)
		return false;
	if (rx->msg_op == WS_OP_TEXT && rx->utf8 != 0) {
		*ret = fail(rx, ev, consumed, WS_CLOSE_INVALID_DATA, "text message ends inside a UTF-8 sequence");
		return true;
	}
	rx->in_message = false;
	rx->delivered = true;
	ev->kind = rx->msg_op == WS_OP_TEXT ? WS_RX_TEXT : WS_RX_BINARY;
	ev->data = (const uint8_t *)rx->msg.data;
	ev->len = rx->msg.len;
	*ret = consumed;
	return true;
}

/* A frame head was parsed into rx->f: check it against the message state. */
static bool frame_start(struct ws_rx *rx, struct ws_rx_event *ev, size_t consumed, size_t *ret)
{
	uint8_t op = rx->f.opcode;

	rx->in_frame = true;
	rx->done = 0;
	if (rx->mode == RX_SKIP || (op & 0x8))
		return false;
	if (op == WS_OP_CONT && !rx->in_message) {
		*ret = fail(rx, ev, consumed, WS_CLOSE_PROTOCOL, "continuation frame without a message to continue");
		return true;
	}
	if (op != WS_OP_CONT && rx->in_message) {
		*ret = fail(rx, ev, consumed, WS_CLOSE_PROTOCOL, "new data frame inside a fragmented message");
		return true;
	}
	if (op != WS_OP_CONT) {
		rx->in_message = true;
		rx->msg_op = op;
		rx->utf8 = 0;
		buf_reset(&rx->msg);
	}
	/* The parser checked f.len against what is left of the limit; reserve
	 * it now so the copy below never fails. */
	if (buf_grow(&rx->msg, (size_t)rx->f.len) < 0) {
		*ret = fail(rx, ev, consumed, WS_CLOSE_TOO_BIG, "message over the size limit");
		return true;
	}
	return false;
}

/* Length of a complete, parsed frame head. */
static size_t head_size(const uint8_t *h)
{
	size_t n = 2;
	uint8_t len7 = h[1] & 0x7F;

	if (len7 == 126)
		n += 2;
	else if (len7 == 127)
		n += 8;
	if (h[1] & 0x80)
		n += 4;
	return n;
}

size_t ws_rx_feed(struct ws_rx *rx, const void *buf, size_t len, struct ws_rx_event *ev)
{
	const uint8_t *p = buf;
	size_t consumed = 0, ret;

	ev->kind = WS_RX_NONE;
	ev->data = NULL;
	ev->len = 0;
	ev->code = 0;
	ev->why = NULL;
	if (rx->delivered) {
		rx->delivered = false;
		if (rx->msg.cap > WS_KEEP_BUFFER)
			buf_release(&rx->msg);
		else
			buf_reset(&rx->msg);
	}
	if (rx->mode == RX_DEAD)
		return len;

	while (consumed < len) {
		if (!rx->in_frame) {
			size_t take = WS_MAX_FRAME_HEAD - rx->head_len, old = rx->head_len;
			uint64_t room = rx->max_message - (rx->in_message ? rx->msg.len : 0);
			uint16_t code = 0;
			const char *why = NULL;
			ssize_t r;

			if (take > len - consumed)
				take = len - consumed;
			memcpy(rx->head + old, p + consumed, take);
			if (rx->mode == RX_SKIP)
				room = UINT64_MAX;
			r = ws_frame_parse(rx->head, old + take, rx->role, room, &rx->f, &code, &why);
			if (r == WS_NEED_MORE) {
				rx->head_len += take;
				consumed += take;
				continue;
			}
			rx->head_len = 0;
			if (r == WS_BAD) {
				if (code == WS_CLOSE_TOO_BIG) {
					/* Framing is fine: skip this frame's payload and
					 * keep looking for the peer's close. */
					consumed += head_size(rx->head) - old;
					fail(rx, ev, consumed, code, why);
					rx->in_frame = true;
					rx->done = 0;
					return consumed;
				}
				return fail(rx, ev, len, code, why);
			}
			consumed += (size_t)r - old;
			if (frame_start(rx, ev, consumed, &ret))
				return ret;
			if (rx->f.len == 0 && frame_end(rx, ev, consumed, &ret))
				return ret;
			continue;
		}

		uint64_t left = rx->f.len - rx->done;
		size_t take = len - consumed;
		if ((uint64_t)take > left)
			take = (size_t)left;
		if (rx->f.opcode & 0x8) {
			memcpy(rx->ctl + rx->done, p + consumed, take);
			if (rx->f.masked)
				ws_mask(rx->ctl + rx->done, take, rx->f.mask, rx->done);
		} else if (rx->mode != RX_SKIP) {
			uint8_t *dst = (uint8_t *)rx->msg.data + rx->msg.len;
			memcpy(dst, p + consumed, take);
			if (rx->f.masked)
				ws_mask(dst, take, rx->f.mask, rx->done);
			buf_setlen(&rx->msg, rx->msg.len + take);
			if (rx->msg_op == WS_OP_TEXT && !utf8_feed(&rx->utf8, dst, take)) {
				rx->done += take;
				consumed += take;
				fail(rx, ev, consumed, WS_CLOSE_INVALID_DATA, "text message is not valid UTF-8");
				return consumed;
			}
		}
		rx->done += take;
		consumed += take;
		if (rx->done == rx->f.len && frame_end(rx, ev, consumed, &ret))
			return ret;
	}
	return consumed;
}
