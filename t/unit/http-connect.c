/* Unit tests: Connect stream envelopes (http/connect.c): written as the
 * protocol lays them out, read back message by message, and every way a
 * stream can be wrong refused with words (cut head, cut message, a message
 * over the bound, compressed, bytes after the end, no end, an end that is
 * not JSON, an end carrying the server's error). Each stream is copied into
 * an exact-size allocation so ASan catches a read past its end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "tap.h"

struct seen {
	int count;
	struct buf all;		/* the messages, each followed by '|' */
	int stop_at;		/* the callback refuses this message (1-based), 0: never */
};

static int collect(const char *msg, size_t len, void *arg, char *why, size_t n)
{
	struct seen *s = arg;

	s->count++;
	buf_add(&s->all, msg, len);
	buf_addch(&s->all, '|');
	if (s->count == s->stop_at) {
		snprintf(why, n, "refused message %d", s->count);
		return 1;
	}
	return 0;
}

/* Walk b's bytes from an exact copy; the count and messages land in s. */
static int walk(const struct buf *b, size_t max, struct seen *s, char *why, size_t n)
{
	char *copy = malloc(b->len ? b->len : 1);
	int rc;

	memcpy(copy, b->data, b->len);
	buf_init(&s->all, 0);
	s->count = 0;
	why[0] = '\0';
	rc = http_connect_stream(copy, b->len, max, collect, s, why, n);
	free(copy);
	return rc;
}

static void test_envelope(void)
{
	struct buf b = BUF_INIT, small;

	buf_init(&b, 0);
	ok(http_connect_envelope(&b, 0, "{}", 2) == 0 && b.len == 7 && !memcmp(b.data, "\0\0\0\0\2{}", 7),
	   "an envelope: flags, big-endian length, the message");
	buf_reset(&b);
	http_connect_envelope(&b, HTTP_CONNECT_END, NULL, 0);
	ok(b.len == 5 && !memcmp(b.data, "\2\0\0\0\0", 5), "an empty end envelope is its head alone");
	buf_reset(&b);
	{
		static char big[300];

		memset(big, 'x', sizeof(big));
		http_connect_envelope(&b, 0, big, sizeof(big));
		ok(b.len == 305 && (unsigned char)b.data[3] == 1 && (unsigned char)b.data[4] == 44,
		   "a length over 255 spans the bytes");
	}
	buf_release(&b);
	buf_init(&small, 6);
	ok(http_connect_envelope(&small, 0, "{}", 2) < 0, "over the buffer's cap: -1");
	buf_release(&small);
}

static void test_walk(void)
{
	struct buf b = BUF_INIT;
	struct seen s = { 0 };
	char why[256];

	buf_init(&b, 0);
	http_connect_envelope(&b, 0, "{\"a\":1}", 7);
	http_connect_envelope(&b, 0, "", 0);
	http_connect_envelope(&b, 0, "{\"b\":2}", 7);
	http_connect_envelope(&b, HTTP_CONNECT_END, "{}", 2);
	ok(walk(&b, 0, &s, why, sizeof(why)) == 0 && s.count == 3, "a clean stream: 0, each message once");
	is_str(s.all.data, "{\"a\":1}||{\"b\":2}|", "the messages in order, an empty one too");
	buf_release(&s.all);

	s.stop_at = 2;
	ok(walk(&b, 0, &s, why, sizeof(why)) < 0 && s.count == 2, "the callback stops the walk");
	is_str(why, "refused message 2", "with its words");
	buf_release(&s.all);
	s.stop_at = 0;

	ok(walk(&b, 6, &s, why, sizeof(why)) < 0 && s.count == 0, "a message over max: refused before the callback");
	is_str(why, "a stream message of 7 bytes (at most 6)", "saying its size and the bound");
	buf_release(&s.all);

	buf_setlen(&b, b.len - 1);
	ok(walk(&b, 0, &s, why, sizeof(why)) < 0, "cut in the end message");
	is_str(why, "the stream was cut in a message", "said so");
	buf_release(&s.all);

	buf_setlen(&b, 12 + 5 + 3);	/* into the third envelope's head */
	ok(walk(&b, 0, &s, why, sizeof(why)) < 0, "cut in a head");
	is_str(why, "the stream was cut in an envelope's head", "said so");
	buf_release(&s.all);

	buf_setlen(&b, 12 + 5 + 12);	/* the three messages, no end */
	ok(walk(&b, 0, &s, why, sizeof(why)) < 0 && s.count == 3, "no end envelope");
	is_str(why, "the stream ended without its end message", "said so");
	buf_release(&s.all);

	buf_reset(&b);
	ok(walk(&b, 0, &s, why, sizeof(why)) < 0 && s.count == 0, "an empty body has no end either");
	buf_release(&s.all);
	buf_release(&b);
}

static void test_end(void)
{
	struct buf b = BUF_INIT;
	struct seen s = { 0 };
	char why[256];
	const char *err = "{\"error\":{\"code\":\"deadline_exceeded\",\"message\":\"timed\\nout\"}}";

	buf_init(&b, 0);
	http_connect_envelope(&b, 0, "{}", 2);
	http_connect_envelope(&b, HTTP_CONNECT_END, err, strlen(err));
	ok(walk(&b, 0, &s, why, sizeof(why)) < 0 && s.count == 1, "an end with an error: -1 after the messages");
	is_str(why, "deadline_exceeded: timed out", "code: message, on one line");
	buf_release(&s.all);

	buf_reset(&b);
	http_connect_envelope(&b, HTTP_CONNECT_END, "{\"error\":{}}", 12);
	ok(walk(&b, 0, &s, why, sizeof(why)) < 0, "an error without a code");
	is_str(why, "unknown: ", "named unknown");
	buf_release(&s.all);

	buf_reset(&b);
	http_connect_envelope(&b, HTTP_CONNECT_END, "{\"metadata\":{\"x\":[\"1\"]},\"error\":null}", 37);
	ok(walk(&b, 0, &s, why, sizeof(why)) == 0, "trailing metadata and a null error: a clean end");
	buf_release(&s.all);

	buf_reset(&b);
	http_connect_envelope(&b, HTTP_CONNECT_END, "[]", 2);
	ok(walk(&b, 0, &s, why, sizeof(why)) < 0, "an end that is not an object");
	is_str(why, "the stream's end message is not a JSON object", "said so");
	buf_release(&s.all);

	buf_reset(&b);
	http_connect_envelope(&b, HTTP_CONNECT_END, "{}", 2);
	http_connect_envelope(&b, 0, "{}", 2);
	ok(walk(&b, 0, &s, why, sizeof(why)) < 0, "bytes after the end");
	is_str(why, "bytes after the stream's end", "said so");
	buf_release(&s.all);

	buf_reset(&b);
	http_connect_envelope(&b, HTTP_CONNECT_COMPRESSED, "x", 1);
	http_connect_envelope(&b, HTTP_CONNECT_END, "{}", 2);
	ok(walk(&b, 0, &s, why, sizeof(why)) < 0 && s.count == 0, "a compressed message is refused");
	is_str(why, "a compressed stream message (none was asked for)", "said so");
	buf_release(&s.all);
	buf_release(&b);
}

int main(void)
{
	test_envelope();
	test_walk();
	test_end();
	return tap_done();
}
