/* Unit tests: WebSocket frame codec, message assembly (every protocol
 * violation and the close code it earns), handshake keys, URLs. */
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "ws/ws.h"
#include "tap.h"

static const uint8_t key[4] = { 0x37, 0xfa, 0x21, 0x3d };

/* Append one frame to b. lenenc: 0 minimal, 2 or 8 forces that encoding. */
static void frame(struct buf *b, int fin, int rsv, int op, int masked, const void *data, size_t len, int lenenc)
{
	uint8_t h[14];
	size_t n = 2;
	size_t start;

	h[0] = (uint8_t)((fin ? 0x80 : 0) | (rsv << 4) | op);
	h[1] = masked ? 0x80 : 0;
	if (lenenc == 0 && len < 126) {
		h[1] |= (uint8_t)len;
	} else if ((lenenc == 0 && len <= 0xFFFF) || lenenc == 2) {
		h[1] |= 126;
		h[2] = (uint8_t)(len >> 8);
		h[3] = (uint8_t)len;
		n = 4;
	} else {
		h[1] |= 127;
		for (int i = 0; i < 8; i++)
			h[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
		n = 10;
	}
	if (masked) {
		memcpy(h + n, key, 4);
		n += 4;
	}
	buf_add(b, h, n);
	start = b->len;
	buf_add(b, data, len);
	if (masked)
		ws_mask((uint8_t *)b->data + start, len, key, 0);
}

/* ---- collecting rx events over a given chunking ---- */

struct got {
	int n;
	int kind[16];
	int code[16];
	char data[16][128];
	size_t len[16];
};

static void collect(enum ws_role role, size_t max, const struct buf *in, size_t chunk, struct got *g)
{
	struct ws_rx *rx = ws_rx_new(role, max);
	size_t off = 0;

	memset(g, 0, sizeof(*g));
	while (off < in->len) {
		size_t n = in->len - off;
		if (chunk && n > chunk)
			n = chunk;
		size_t pos = 0;
		while (pos < n) {
			struct ws_rx_event ev;
			size_t used = ws_rx_feed(rx, in->data + off + pos, n - pos, &ev);
			if (used == 0 && ev.kind == WS_RX_NONE)
				break;	/* must not happen: would loop */
			pos += used;
			if (ev.kind != WS_RX_NONE && g->n < 16) {
				g->kind[g->n] = ev.kind;
				g->code[g->n] = ev.code;
				g->len[g->n] = ev.len;
				if (ev.len)
					memcpy(g->data[g->n], ev.data, ev.len < 127 ? ev.len : 127);
				g->n++;
			}
		}
		off += n;
	}
	ws_rx_free(rx);
}

/* Same events for every chunk size, else a failure naming the size. */
static void expect(const char *name, enum ws_role role, size_t max, const struct buf *in,
		   int n, const int *kinds, const int *codes)
{
	static const size_t chunks[] = { 0, 1, 2, 3, 5, 13, 64 };
	int good = 1;

	for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
		struct got g;
		collect(role, max, in, chunks[c], &g);
		if (g.n != n) {
			tap_diag("%s: chunk %zu: %d events, want %d", name, chunks[c], g.n, n);
			good = 0;
			continue;
		}
		for (int i = 0; i < n; i++) {
			if (g.kind[i] != kinds[i] || (codes && g.code[i] != codes[i])) {
				tap_diag("%s: chunk %zu: event %d is kind %d code %d, want %d %d", name,
					 chunks[c], i, g.kind[i], g.code[i], kinds[i], codes ? codes[i] : -1);
				good = 0;
			}
		}
	}
	ok(good, "%s", name);
}

static void test_head_codec(void)
{
	static const uint64_t lens[] = { 0, 1, 125, 126, 127, 65535, 65536, 1u << 24, (uint64_t)1 << 40 };
	static const size_t heads[] = { 2, 2, 2, 4, 4, 4, 10, 10, 10 };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		for (int m = 0; m < 2; m++) {
			uint8_t h[WS_MAX_FRAME_HEAD];
			struct ws_frame f;
			uint16_t code = 0;
			const char *why = NULL;
			size_t hl = ws_frame_head(h, true, WS_OP_BINARY, lens[i], m ? key : NULL);
			ssize_t r = ws_frame_parse(h, hl, m ? WS_SERVER : WS_CLIENT, UINT64_MAX >> 1, &f, &code, &why);
			ok(hl == heads[i] + (m ? 4 : 0) && r == (ssize_t)hl && f.len == lens[i] && f.fin &&
			   f.opcode == WS_OP_BINARY && f.masked == m && (!m || memcmp(f.mask, key, 4) == 0),
			   "length %llu %s: head %zu bytes, parses back", (unsigned long long)lens[i],
			   m ? "masked" : "unmasked", hl);
			int more = 1;
			for (size_t k = 0; k < hl; k++)
				if (ws_frame_parse(h, k, m ? WS_SERVER : WS_CLIENT, UINT64_MAX >> 1, &f, &code, &why) != WS_NEED_MORE)
					more = 0;
			ok(more, "length %llu %s: every prefix needs more", (unsigned long long)lens[i], m ? "masked" : "unmasked");
		}
	}

	/* A 16-bit encoding of a small length is accepted (liberal). */
	{
		uint8_t h[] = { 0x82, 0xFE, 0x00, 0x05, 1, 2, 3, 4 };
		struct ws_frame f;
		uint16_t code;
		const char *why;
		ok(ws_frame_parse(h, sizeof(h), WS_SERVER, 100, &f, &code, &why) == 8 && f.len == 5,
		   "non-minimal 16-bit length accepted");
	}

	/* Masking is its own inverse at any offset and length. */
	{
		uint8_t a[100], b[100];
		for (int i = 0; i < 100; i++)
			a[i] = b[i] = (uint8_t)(i * 7);
		ws_mask(a, 100, key, 0);
		ws_mask(a, 33, key, 0);
		ws_mask(a + 33, 67, key, 33);
		ok(memcmp(a, b, 100) == 0, "mask in pieces at offsets undoes a whole mask");
		ws_mask(a, 3, key, 0);
		ok(a[0] == (b[0] ^ key[0]) && a[2] == (b[2] ^ key[2]), "mask bytes line up with the key");
	}
}

struct violation {
	const char *name;
	enum ws_role role;
	uint8_t bytes[14];
	size_t len;
	uint64_t max;
	int code;
};

static void test_head_violations(void)
{
	static const struct violation v[] = {
		{ "RSV1 set", WS_SERVER, { 0xC1, 0x80, 1, 2, 3, 4 }, 6, 100, 1002 },
		{ "RSV2 set", WS_SERVER, { 0xA1, 0x80, 1, 2, 3, 4 }, 6, 100, 1002 },
		{ "RSV3 set", WS_CLIENT, { 0x91, 0x00 }, 2, 100, 1002 },
		{ "opcode 3", WS_SERVER, { 0x83, 0x80 }, 2, 100, 1002 },
		{ "opcode 7", WS_SERVER, { 0x87, 0x80 }, 2, 100, 1002 },
		{ "opcode 0xB", WS_CLIENT, { 0x8B, 0x00 }, 2, 100, 1002 },
		{ "opcode 0xF", WS_CLIENT, { 0x8F, 0x00 }, 2, 100, 1002 },
		{ "fragmented ping", WS_SERVER, { 0x09, 0x80 }, 2, 100, 1002 },
		{ "fragmented close", WS_CLIENT, { 0x08, 0x00 }, 2, 100, 1002 },
		{ "ping of 126 bytes", WS_SERVER, { 0x89, 0xFE, 0, 126 }, 4, 100, 1002 },
		{ "close with 127 length form", WS_CLIENT, { 0x88, 0x7F }, 2, 100, 1002 },
		{ "unmasked frame to a server", WS_SERVER, { 0x81, 0x05 }, 2, 100, 1002 },
		{ "masked frame to a client", WS_CLIENT, { 0x81, 0x85 }, 2, 100, 1002 },
		{ "64-bit length with top bit", WS_CLIENT, { 0x82, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 1 }, 10, UINT64_MAX, 1002 },
		{ "data frame over the limit (7-bit)", WS_CLIENT, { 0x82, 101 }, 2, 100, 1009 },
		{ "data frame over the limit (16-bit)", WS_SERVER, { 0x81, 0xFE, 0x10, 0x00, 1, 2, 3, 4 }, 8, 4095, 1009 },
		{ "data frame over the limit (64-bit)", WS_CLIENT, { 0x82, 0x7F, 0, 0, 0, 1, 0, 0, 0, 0 }, 10, (uint64_t)1 << 31, 1009 },
	};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct ws_frame f;
		uint16_t code = 0;
		const char *why = NULL;
		ssize_t r = ws_frame_parse(v[i].bytes, v[i].len, v[i].role, v[i].max, &f, &code, &why);
		ok(r == WS_BAD && code == v[i].code && why && *why, "%s -> %d (%s)", v[i].name, v[i].code, why ? why : "-");
	}
	/* The limit is inclusive. */
	{
		uint8_t h[] = { 0x82, 100 };
		struct ws_frame f;
		uint16_t code;
		const char *why;
		ok(ws_frame_parse(h, 2, WS_CLIENT, 100, &f, &code, &why) == 2, "data frame at exactly the limit is fine");
	}
}

static void test_rx(void)
{
	struct buf b = BUF_INIT;
	char big[70000];

	frame(&b, 1, 0, WS_OP_TEXT, 1, "hello", 5, 0);
	expect("masked text to a server", WS_SERVER, 0, &b, 1, (int[]){ WS_RX_TEXT }, NULL);
	{
		struct got g;
		collect(WS_SERVER, 0, &b, 1, &g);
		ok(g.len[0] == 5 && memcmp(g.data[0], "hello", 5) == 0, "payload unmasked byte by byte");
	}
	buf_reset(&b);
	frame(&b, 1, 0, WS_OP_TEXT, 0, "hello", 5, 0);
	expect("unmasked text to a server -> 1002", WS_SERVER, 0, &b, 1, (int[]){ WS_RX_ERROR }, (int[]){ 1002 });
	expect("unmasked text to a client", WS_CLIENT, 0, &b, 1, (int[]){ WS_RX_TEXT }, NULL);

	/* Fragments with control frames between them. */
	buf_reset(&b);
	frame(&b, 0, 0, WS_OP_TEXT, 1, "Hel", 3, 0);
	frame(&b, 1, 0, WS_OP_PING, 1, "p1", 2, 0);
	frame(&b, 0, 0, WS_OP_CONT, 1, "lo, ", 4, 0);
	frame(&b, 1, 0, WS_OP_PONG, 1, "", 0, 0);
	frame(&b, 0, 0, WS_OP_CONT, 1, "", 0, 0);
	frame(&b, 1, 0, WS_OP_CONT, 1, "world", 5, 2);
	frame(&b, 1, 0, WS_OP_BINARY, 1, "\x00\xff", 2, 8);
	expect("fragments with ping/pong between them", WS_SERVER, 0, &b, 4,
	       (int[]){ WS_RX_PING, WS_RX_PONG, WS_RX_TEXT, WS_RX_BINARY }, NULL);
	{
		struct got g;
		collect(WS_SERVER, 0, &b, 2, &g);
		ok(g.len[2] == 12 && memcmp(g.data[2], "Hello, world", 12) == 0, "fragments assembled in order");
		ok(g.len[0] == 2 && memcmp(g.data[0], "p1", 2) == 0, "ping payload delivered");
		ok(g.len[3] == 2 && memcmp(g.data[3], "\x00\xff", 2) == 0, "binary after text");
	}

	/* UTF-8 across fragment boundaries: U+00E9 (C3 A9) and U+1F600 (F0 9F 98 80). */
	buf_reset(&b);
	frame(&b, 0, 0, WS_OP_TEXT, 1, "caf\xC3", 4, 0);
	frame(&b, 0, 0, WS_OP_CONT, 1, "\xA9 \xF0\x9F", 4, 0);
	frame(&b, 0, 0, WS_OP_CONT, 1, "\x98", 1, 0);
	frame(&b, 1, 0, WS_OP_CONT, 1, "\x80", 1, 0);
	expect("UTF-8 sequences split across fragments", WS_SERVER, 0, &b, 1, (int[]){ WS_RX_TEXT }, NULL);
	buf_reset(&b);
	frame(&b, 0, 0, WS_OP_TEXT, 1, "ok \xC3", 4, 0);
	frame(&b, 1, 0, WS_OP_CONT, 1, "\x28", 1, 0);
	frame(&b, 1, 0, WS_OP_CLOSE, 1, "\x03\xef", 2, 0);
	expect("bad continuation byte in the next fragment -> 1007, then the close is still seen",
	       WS_SERVER, 0, &b, 2, (int[]){ WS_RX_ERROR, WS_RX_CLOSE }, (int[]){ 1007, 1007 });
	buf_reset(&b);
	frame(&b, 0, 0, WS_OP_TEXT, 1, "\xED\xA0", 2, 0);
	expect("surrogate refused in the first fragment -> 1007", WS_SERVER, 0, &b, 1, (int[]){ WS_RX_ERROR }, (int[]){ 1007 });
	buf_reset(&b);
	frame(&b, 1, 0, WS_OP_TEXT, 1, "abc\xE2\x82", 5, 0);
	expect("text ending inside a sequence -> 1007", WS_SERVER, 0, &b, 1, (int[]){ WS_RX_ERROR }, (int[]){ 1007 });
	buf_reset(&b);
	frame(&b, 1, 0, WS_OP_BINARY, 1, "abc\xE2\x82", 5, 0);
	expect("binary is not checked for UTF-8", WS_SERVER, 0, &b, 1, (int[]){ WS_RX_BINARY }, NULL);

	/* Ordering violations. */
	buf_reset(&b);
	frame(&b, 0, 0, WS_OP_TEXT, 1, "a", 1, 0);
	frame(&b, 1, 0, WS_OP_TEXT, 1, "b", 1, 0);
	frame(&b, 1, 0, WS_OP_TEXT, 1, "c", 1, 0);
	expect("new data frame mid-message -> 1002, rest ignored", WS_SERVER, 0, &b, 1, (int[]){ WS_RX_ERROR }, (int[]){ 1002 });
	buf_reset(&b);
	frame(&b, 1, 0, WS_OP_CONT, 1, "a", 1, 0);
	expect("continuation with nothing to continue -> 1002", WS_SERVER, 0, &b, 1, (int[]){ WS_RX_ERROR }, (int[]){ 1002 });
	buf_reset(&b);
	frame(&b, 0, 0, WS_OP_BINARY, 1, "a", 1, 0);
	frame(&b, 1, 0, WS_OP_CLOSE, 1, "\x03\xe8", 2, 0);
	frame(&b, 1, 0, WS_OP_TEXT, 1, "x", 1, 0);
	expect("close mid-message is honoured and ends input", WS_SERVER, 0, &b, 1, (int[]){ WS_RX_CLOSE }, (int[]){ 1000 });

	/* Close payloads. */
	static const struct { const char *name; const char *p; size_t n; int kind; int code; } closes[] = {
		{ "empty close -> 1005", "", 0, WS_RX_CLOSE, 1005 },
		{ "close 1000 with reason", "\x03\xe8" "bye", 5, WS_RX_CLOSE, 1000 },
		{ "close 1008", "\x03\xf0" "policy", 8, WS_RX_CLOSE, 1008 },
		{ "close 1014", "\x03\xf6", 2, WS_RX_CLOSE, 1014 },
		{ "close 3000", "\x0b\xb8", 2, WS_RX_CLOSE, 3000 },
		{ "close 4999", "\x13\x87", 2, WS_RX_CLOSE, 4999 },
		{ "1-byte close payload -> 1002", "\x03", 1, WS_RX_ERROR, 1002 },
		{ "close 999 -> 1002", "\x03\xe7", 2, WS_RX_ERROR, 1002 },
		{ "close 1004 -> 1002", "\x03\xec", 2, WS_RX_ERROR, 1002 },
		{ "close 1005 -> 1002", "\x03\xed", 2, WS_RX_ERROR, 1002 },
		{ "close 1006 -> 1002", "\x03\xee", 2, WS_RX_ERROR, 1002 },
		{ "close 1015 -> 1002", "\x03\xf7", 2, WS_RX_ERROR, 1002 },
		{ "close 2999 -> 1002", "\x0b\xb7", 2, WS_RX_ERROR, 1002 },
		{ "close 5000 -> 1002", "\x13\x88", 2, WS_RX_ERROR, 1002 },
		{ "close 0 -> 1002", "\x00\x00", 2, WS_RX_ERROR, 1002 },
		{ "close reason not UTF-8 -> 1007", "\x03\xe8\xff", 3, WS_RX_ERROR, 1007 },
	};
	for (size_t i = 0; i < sizeof(closes) / sizeof(closes[0]); i++) {
		buf_reset(&b);
		frame(&b, 1, 0, WS_OP_CLOSE, 1, closes[i].p, closes[i].n, 0);
		expect(closes[i].name, WS_SERVER, 0, &b, 1, (int[]){ closes[i].kind }, (int[]){ closes[i].code });
	}
	buf_reset(&b);
	frame(&b, 1, 0, WS_OP_CLOSE, 0, "\x03\xe8" "bye", 5, 0);
	{
		struct got g;
		collect(WS_CLIENT, 0, &b, 1, &g);
		ok(g.n == 1 && g.len[0] == 3 && memcmp(g.data[0], "bye", 3) == 0, "close reason delivered");
	}

	/* The message limit, checked per frame head before buffering. */
	buf_reset(&b);
	memset(big, 'x', sizeof(big));
	frame(&b, 0, 0, WS_OP_BINARY, 1, big, 40, 0);
	frame(&b, 1, 0, WS_OP_CONT, 1, big, 40, 0);
	frame(&b, 1, 0, WS_OP_PING, 1, "", 0, 0);
	frame(&b, 1, 0, WS_OP_BINARY, 1, big, 10, 0);
	frame(&b, 1, 0, WS_OP_CLOSE, 1, "\x03\xe8", 2, 0);
	expect("second fragment passes a 64-byte limit -> 1009; the close after it is still found",
	       WS_SERVER, 64, &b, 2, (int[]){ WS_RX_ERROR, WS_RX_CLOSE }, (int[]){ 1009, 1000 });
	buf_reset(&b);
	frame(&b, 1, 0, WS_OP_BINARY, 1, big, 64, 0);
	expect("message at exactly the limit", WS_SERVER, 64, &b, 1, (int[]){ WS_RX_BINARY }, NULL);
	buf_reset(&b);
	frame(&b, 1, 0, WS_OP_BINARY, 1, big, sizeof(big), 0);
	frame(&b, 1, 0, WS_OP_TEXT, 1, big, 126, 8);
	expect("70000-byte binary (64-bit length) and a text in 64-bit form", WS_SERVER, 0, &b, 2,
	       (int[]){ WS_RX_BINARY, WS_RX_TEXT }, NULL);
	{
		struct ws_rx *rx = ws_rx_new(WS_SERVER, 0);
		struct ws_rx_event ev;
		size_t used = ws_rx_feed(rx, b.data, b.len, &ev);
		ok(ev.kind == WS_RX_BINARY && ev.len == sizeof(big) && memcmp(ev.data, big, sizeof(big)) == 0,
		   "big payload intact");
		ok(ev.data[ev.len] == '\0', "message data is NUL-terminated");
		used += ws_rx_feed(rx, b.data + used, b.len - used, &ev);
		ok(ev.kind == WS_RX_TEXT && ev.len == 126 && used == b.len, "then the next message, all input consumed");
		ws_rx_free(rx);
	}
	buf_release(&b);
}

static void test_handshake(void)
{
	char acc[WS_ACCEPT_LEN + 1], k1[WS_KEY_LEN + 1], k2[WS_KEY_LEN + 1];
	struct err e;
	struct ws_url u;

	/* The example in RFC 6455 section 1.3. */
	ok(ws_accept_for_key("dGhlIHNhbXBsZSBub25jZQ==", acc, &e) == 0, "accept computed");
	is_str(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "RFC 6455 example accept value");
	ok(ws_key_valid("dGhlIHNhbXBsZSBub25jZQ=="), "RFC key valid");
	ok(!ws_key_valid("dGhlIHNhbXBsZSBub25jZQ="), "short key refused");
	ok(!ws_key_valid("dGhlIHNhbXBsZSBub25jZQ=x"), "bad padding refused");
	ok(!ws_key_valid("dGhlIHNhbXBsZSBub25j*Q=="), "non-base64 refused");
	ok(!ws_key_valid("aGVsbG8gd29ybGQgaGVsbG8gd29ybGQ="), "a key of 20 bytes refused");
	ok(ws_make_key(k1, &e) == 0 && ws_make_key(k2, &e) == 0 && ws_key_valid(k1) && strcmp(k1, k2) != 0,
	   "random keys are valid and differ");

	ok(ws_parse_url("ws://127.0.0.1:8080/v1/hosts/stream?x=1", &u, &e) == 0 && !u.tls &&
	   strcmp(u.host, "127.0.0.1") == 0 && u.port == 8080 && strcmp(u.path, "/v1/hosts/stream?x=1") == 0,
	   "ws URL with port, path and query");
	ok(ws_parse_url("wss://cp.example.org", &u, &e) == 0 && u.tls && u.port == 443 && strcmp(u.path, "/") == 0,
	   "wss URL defaults");
	ok(ws_parse_url("ws://[::1]:9/a", &u, &e) == 0 && strcmp(u.host, "::1") == 0 && u.port == 9,
	   "IPv6 literal");
	ok(ws_parse_url("ws://h?q", &u, &e) == 0 && strcmp(u.path, "/?q") == 0 && u.port == 80, "query without a path");
	ok(ws_parse_url("http://h/", &u, &e) == -1 && strstr(e.msg, "ws://"), "http scheme refused: %s", e.msg);
	ok(ws_parse_url("ws://h:0/", &u, &e) == -1, "port 0 refused");
	ok(ws_parse_url("ws://h:99999/", &u, &e) == -1, "port out of range refused");
	ok(ws_parse_url("ws://:80/", &u, &e) == -1, "empty host refused");
	ok(ws_parse_url("ws://u@h/", &u, &e) == -1, "user info refused");
	ok(ws_parse_url("ws://h/a b", &u, &e) == -1, "space in path refused");

	ok(ws_close_code_valid(1000) && ws_close_code_valid(1011) && ws_close_code_valid(4000) &&
	   !ws_close_code_valid(1005) && !ws_close_code_valid(1006) && !ws_close_code_valid(1015) &&
	   !ws_close_code_valid(1016) && !ws_close_code_valid(2000) && !ws_close_code_valid(5000),
	   "close code ranges");
}

int main(void)
{
	test_head_codec();
	test_head_violations();
	test_rx();
	test_handshake();
	return tap_done();
}
