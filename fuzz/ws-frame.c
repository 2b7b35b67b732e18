/*
 * Fuzz target: the WebSocket frame parser and message assembler.
 * Input byte 0 picks the role (bit 0) and the message limit (bits 1-3);
 * byte 1 seeds the chunk sizes; the rest is the byte stream from the peer,
 * fed in pseudo-random chunks. Checks the assembler's promises: it always
 * makes progress, never consumes more than given, delivers only valid UTF-8
 * text within the limit, and control payloads of at most 125 bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "ws/ws.h"

static const size_t limits[8] = { 0, 1, 16, 125, 126, 1000, 65536, 70000 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
	return 0;
}
