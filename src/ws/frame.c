/* frame.c: frame heads in and out, masking, close codes. See ws.h. */
#include "ws/ws.h"

#include <string.h>

bool ws_close_code_valid(unsigned code)
{
	/* 1004-1006 and 1015 are reserved and must never be sent; 1012-1014
	 * are registered with IANA (restart, try again later, bad gateway). */
	if (code >= 1000 && code <= 1003)
		return true;
	if (code >= 1007 && code <= 1014)
		return true;
	return code >= 3000 && code <= 4999;
}

static ssize_t bad(uint16_t *code, const char **why, uint16_t c, const char *w)
{
	*code = c;
	*why = w;
	return WS_BAD;
}

ssize_t ws_frame_parse(const void *buf, size_t len, enum ws_role role, uint64_t max_payload,
		       struct ws_frame *f, uint16_t *code, const char **why)
{
	const uint8_t *p = buf;
	size_t need = 2;
	uint8_t len7;
	uint64_t n;

	if (len < 2)
		return WS_NEED_MORE;
	f->fin = (p[0] & 0x80) != 0;
	f->rsv = (p[0] >> 4) & 7;
	f->opcode = p[0] & 0x0F;
	f->masked = (p[1] & 0x80) != 0;
	len7 = p[1] & 0x7F;

	/* Everything decidable from the first two bytes is decided before we
	 * wait for more, so a bad peer is refused as early as possible. */
	if (f->rsv)
		return bad(code, why, WS_CLOSE_PROTOCOL, "reserved bits set without a negotiated extension");
	switch (f->opcode) {
	case WS_OP_CONT: case WS_OP_TEXT: case WS_OP_BINARY:
	case WS_OP_CLOSE: case WS_OP_PING: case WS_OP_PONG:
		break;
	default:
		return bad(code, why, WS_CLOSE_PROTOCOL, "unknown opcode");
	}
	if (f->opcode & 0x8) {
		if (!f->fin)
			return bad(code, why, WS_CLOSE_PROTOCOL, "fragmented control frame");
		if (len7 > WS_MAX_CONTROL)
			return bad(code, why, WS_CLOSE_PROTOCOL, "control frame payload over 125 bytes");
	}
	if (role == WS_SERVER && !f->masked)
		return bad(code, why, WS_CLOSE_PROTOCOL, "client frame not masked");
	if (role == WS_CLIENT && f->masked)
		return bad(code, why, WS_CLOSE_PROTOCOL, "server frame masked");

	if (len7 == 126)
		need += 2;
	else if (len7 == 127)
		need += 8;
	if (f->masked)
		need += 4;
	if (len < need)
		return WS_NEED_MORE;

	if (len7 == 126) {
		n = (uint64_t)p[2] << 8 | p[3];
	} else if (len7 == 127) {
		n = 0;
		for (int i = 0; i < 8; i++)
			n = n << 8 | p[2 + i];
		if (n >> 63)
			return bad(code, why, WS_CLOSE_PROTOCOL, "64-bit frame length with the top bit set");
	} else {
		n = len7;
	}
	f->len = n;
	if (f->masked)
		memcpy(f->mask, p + need - 4, 4);
	else
		memset(f->mask, 0, 4);
	if (!(f->opcode & 0x8) && n > max_payload)
		return bad(code, why, WS_CLOSE_TOO_BIG, "message over the size limit");
	return (ssize_t)need;
}

size_t ws_frame_head(uint8_t *out, bool fin, unsigned opcode, uint64_t len, const uint8_t mask[4])
{
	size_t n = 2;

	out[0] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0F));
	out[1] = mask ? 0x80 : 0;
	if (len < 126) {
		out[1] |= (uint8_t)len;
	} else if (len <= 0xFFFF) {
		out[1] |= 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		n = 4;
	} else {
		out[1] |= 127;
		for (int i = 0; i < 8; i++)
			out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
		n = 10;
	}
	if (mask) {
		memcpy(out + n, mask, 4);
		n += 4;
	}
	return n;
}

void ws_mask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t off)
{
	uint8_t m[4];
	size_t i = 0;

	/* Rotate the key so m[0] applies to p[0], then go word by word. */
	for (int k = 0; k < 4; k++)
		m[k] = mask[(off + (uint64_t)k) & 3];
	if (n >= 16) {
		uint64_t w, m8;
		uint8_t mm[8];
		for (int k = 0; k < 8; k++)
			mm[k] = m[k & 3];
		memcpy(&m8, mm, 8);
		for (; i + 8 <= n; i += 8) {
			memcpy(&w, p + i, 8);
			w ^= m8;
			memcpy(p + i, &w, 8);
		}
	}
	for (; i < n; i++)
		p[i] ^= m[i & 3];
}
