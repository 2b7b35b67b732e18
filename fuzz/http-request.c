/*
 * Fuzz target: the request-head parser and the chunked decoder, the way the
 * server drives them: bytes arrive in pieces of random sizes (taken from the
 * first input bytes), the parser is re-run on the growing buffer, and a
 * head is followed by its body (Content-Length or chunked) and then the next
 * pipelined request. Every call sees an exact-size heap copy, so ASan
 * reports any read past the end. Checks: a prefix of a head the parser
 * accepts is never refused, and the count it returns never changes as more
 * bytes arrive.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/http.h"

#define MAX_REQUESTS 16
#define BODY_CAP 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Parse an exact-size copy; *keep (if not NULL) receives it (h points into it). */
static int parse_copy(const char *p, size_t n, struct http_request_head *h, char **keep)
{
	char *c = malloc(n ? n : 1);
	int r;

	memcpy(c, p, n);
	r = http_parse_request_head(c, n, h);
	if (keep) {
		free(*keep);
		*keep = c;
	} else {
		free(c);
	}
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t steps[4] = { 1, 7, 64, 255 };
	size_t k = 0, off = 0;
	const char *in;
	size_t len;
	static struct http_request_head h, h2;

	if (size < 4)
		return 0;
	memcpy(steps, data, 4);
	in = (const char *)data + 4;
	len = size - 4;

	for (int nreq = 0; nreq < MAX_REQUESTS && off < len; nreq++) {
		size_t have = 0;
		int r = HTTP_PARSE_NEED_MORE;
		char *cur = NULL;
		/* Grow the visible window piece by piece until the head parses. */
		while (r == HTTP_PARSE_NEED_MORE && have < len - off) {
			size_t step = steps[k++ % 4] ? steps[(k - 1) % 4] : 1;
			have = have + step > len - off ? len - off : have + step;
			r = parse_copy(in + off, have, &h, &cur);
		}
		if (r <= 0) {
			free(cur);
			return 0;
		}
		/* The whole input must give the same count. */
		if (parse_copy(in + off, len - off, &h2, NULL) != r)
			abort();
		/* Query decoding of the target (h points into cur). */
		{
			struct buf q = BUF_INIT;
			(void)http_pct_decode(h.target, h.target_len, true, &q);
			buf_release(&q);
		}
		const struct http_header *te = http_header_find(h.headers, h.nheaders, "transfer-encoding");
		const struct http_header *cl = http_header_find(h.headers, h.nheaders, "content-length");
		bool chunked = te && http_token_has(te->value, te->value_len, "chunked");
		uint64_t clen = 0;
		if (cl)
			for (size_t i = 0; i < cl->value_len && i < 6; i++)
				clen = clen * 10 + (uint64_t)(cl->value[i] >= '0' && cl->value[i] <= '9' ? cl->value[i] - '0' : 0);
		free(cur);
		off += (size_t)r;
		if (chunked) {
			struct http_chunked c = HTTP_CHUNKED_INIT;
			struct buf body;
			buf_init(&body, BODY_CAP);
			while (off < len && !c.done) {
				size_t step = steps[k++ % 4] ? steps[(k - 1) % 4] : 1;
				size_t n = step > len - off ? len - off : step;
				char *piece = malloc(n);
				memcpy(piece, in + off, n);
				ssize_t d = http_chunked_decode(&c, piece, n, &body);
				free(piece);
				if (d < 0) {
					buf_release(&body);
					return 0;
				}
				if ((size_t)d > n || ((size_t)d < n && !c.done))
					abort();
				off += (size_t)d;
			}
			if (body.len > BODY_CAP)
				abort();
			buf_release(&body);
			if (!c.done)
				return 0;
		} else {
			off += clen > len - off ? len - off : (size_t)clen;
		}
	}
	return 0;
}
