/*
 * Unit tests: mux.c, dockerd's multiplexed stdout/stderr framing. The same
 * stream fed whole and split at every byte gives the same output; caps cut
 * each stream on its own and mark it; empty frames and a stdin frame are
 * taken; a bad header is refused.
 */
#include <stdio.h>
#include <string.h>

#include "sidecar/sidecar.h"
#include "tap.h"

static size_t frame(char *out, int stream, const char *data)
{
	size_t n = strlen(data);

	out[0] = (char)stream;
	out[1] = out[2] = out[3] = 0;
	out[4] = (char)(n >> 24);
	out[5] = (char)(n >> 16);
	out[6] = (char)(n >> 8);
	out[7] = (char)n;
	memcpy(out + 8, data, n);
	return n + 8;
}

static bool same(const struct buf *b, const char *want)
{
	return b->len == strlen(want) && (b->len == 0 || memcmp(b->data, want, b->len) == 0);
}

int main(void)
{
	char s[256];
	size_t n = 0;
	struct mux m;
	struct err e;
	bool all = true;

	n += frame(s + n, 1, "hello ");
	n += frame(s + n, 2, "oops\n");
	n += frame(s + n, 1, "");
	n += frame(s + n, 1, "world\n");

	mux_init(&m, 1 << 20);
	ok(mux_feed(&m, s, n, &e) == 0 && same(&m.out[0], "hello world\n") && same(&m.out[1], "oops\n") &&
	   mux_complete(&m), "whole: stdout and stderr apart, an empty frame skipped");
	mux_release(&m);

	for (size_t cut = 1; cut < n; cut++) {
		mux_init(&m, 1 << 20);
		for (size_t off = 0; off < n; off += cut)
			if (mux_feed(&m, s + off, off + cut > n ? n - off : cut, &e) < 0)
				all = false;
		if (!same(&m.out[0], "hello world\n") || !same(&m.out[1], "oops\n") || !mux_complete(&m))
			all = false;
		mux_release(&m);
	}
	ok(all, "the same output fed in pieces of every size from 1 to %zu bytes", n - 1);

	mux_init(&m, 4);
	ok(mux_feed(&m, s, n, &e) == 0 && same(&m.out[0], "hell") && same(&m.out[1], "oops") &&
	   m.truncated[0] && m.truncated[1], "a cap of 4 keeps 4 bytes of each stream and marks both");
	mux_release(&m);

	mux_init(&m, 100);
	ok(mux_feed(&m, s, 11, &e) == 0 && !mux_complete(&m), "cut inside a frame: not complete");
	mux_release(&m);

	mux_init(&m, 100);
	n = frame(s, 0, "in");
	ok(mux_feed(&m, s, n, &e) == 0 && same(&m.out[0], "in"), "a stdin frame is kept as stdout");
	s[0] = 3;
	ok(mux_feed(&m, s, n, &e) < 0 && strstr(e.msg, "bad frame header"), "stream 3 is refused: %s", e.msg);
	mux_release(&m);

	mux_init(&m, 100);
	n = frame(s, 1, "x");
	s[2] = 1;
	ok(mux_feed(&m, s, n, &e) < 0, "a header with non-zero padding is refused");
	mux_release(&m);
	return tap_done();
}
