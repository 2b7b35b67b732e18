/* connect.c: the envelopes of Connect RPC streams (connectrpc.com's
 * protocol, as E2B's envd and Prime's sandbox gateway answer a command),
 * written and read within bounds. See http.h for each function's rules.
 * The walk reads a whole body the client already holds, so a message
 * cannot be longer than what arrived: a length past the end is a cut
 * stream, never a read past the buffer. */
#include <stdio.h>
#include <string.h>

#include "http/http.h"
#include "json/json.h"

int http_connect_envelope(struct buf *out, unsigned flags, const void *msg, size_t len)
{
	unsigned char head[HTTP_CONNECT_HEAD];

	if (len > UINT32_MAX)
		return -1;
	head[0] = (unsigned char)flags;
	head[1] = (unsigned char)(len >> 24);
	head[2] = (unsigned char)(len >> 16);
	head[3] = (unsigned char)(len >> 8);
	head[4] = (unsigned char)len;
	if (buf_add(out, head, sizeof(head)) < 0)
		return -1;
	return len ? buf_add(out, msg, len) : 0;
}

/* The end-of-stream message: 0 for {} (or one without an error), -1 with why. */
static int end_message(const char *msg, size_t len, char *why, size_t n)
{
	struct json *doc = NULL;
	const struct json *er;
	const char *code, *text;
	struct err pe;
	int rc = 0;

	if (json_parse(msg, len, NULL, &doc, &pe) < 0 || doc->type != JSON_OBJECT) {
		snprintf(why, n, "the stream's end message is not a JSON object");
		json_free(doc);
		return -1;
	}
	er = json_get(doc, "error");
	if (er && er->type != JSON_NULL) {
		code = json_get_str(er, "code");
		text = json_get_str(er, "message");
		snprintf(why, n, "%.*s: %.300s", HTTP_CONNECT_CODE_MAX, code && *code ? code : "unknown",
			 text ? text : "");
		/* their words go into one error line */
		for (char *q = why; *q; q++)
			if ((unsigned char)*q < 0x20)
				*q = ' ';
		rc = -1;
	}
	json_free(doc);
	return rc;
}

int http_connect_stream(const void *body, size_t len, size_t max, http_connect_msg_fn fn, void *arg, char *why,
			size_t n)
{
	const unsigned char *p = body;
	size_t off = 0, mlen;
	unsigned flags;

	if (!max)
		max = HTTP_CONNECT_MSG_MAX;
	while (off < len) {
		if (len - off < HTTP_CONNECT_HEAD) {
			snprintf(why, n, "the stream was cut in an envelope's head");
			return -1;
		}
		flags = p[off];
		mlen = ((size_t)p[off + 1] << 24) | ((size_t)p[off + 2] << 16) | ((size_t)p[off + 3] << 8) | p[off + 4];
		off += HTTP_CONNECT_HEAD;
		if (mlen > max) {
			snprintf(why, n, "a stream message of %zu bytes (at most %zu)", mlen, max);
			return -1;
		}
		if (mlen > len - off) {
			snprintf(why, n, "the stream was cut in a message");
			return -1;
		}
		if (flags & HTTP_CONNECT_COMPRESSED) {
			snprintf(why, n, "a compressed stream message (none was asked for)");
			return -1;
		}
		if (flags & HTTP_CONNECT_END) {
			if (off + mlen != len) {
				snprintf(why, n, "bytes after the stream's end");
				return -1;
			}
			return end_message((const char *)p + off, mlen, why, n);
		}
		if (fn(mlen ? (const char *)p + off : "", mlen, arg, why, n) != 0)
			return -1;
		off += mlen;
	}
	snprintf(why, n, "the stream ended without its end message");
	return -1;
}
