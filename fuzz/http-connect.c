/*
 * Fuzz target: the Connect stream walk (http/connect.c). Byte 0 picks the
 * message bound (bits 0-2); the rest is a response body as a gateway might
 * send it. Checks the walk's promises: every message it hands over lies
 * inside the body and within the bound, a refusal always has words, and a
 * clean end means the whole body was envelopes ending in the end one.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const size_t bounds[8] = { 0, 1, 2, 7, 64, 255, 256, 65536 };

struct walk {
	const uint8_t *lo, *hi;
	size_t max, seen;
};

static int check(const char *msg, size_t len, void *arg, char *why, size_t n)
{
	struct walk *w = arg;

	if (len > w->max || (len && ((const uint8_t *)msg < w->lo || (const uint8_t *)msg + len > w->hi)))
		abort();
	if (len)
		(void)*(volatile const char *)(msg + len - 1);
	w->seen += HTTP_CONNECT_HEAD + len;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct walk w;
	uint8_t *body;
	char why[256];
	size_t len;
	int rc;

	if (size < 1)
		return 0;
	len = size - 1;
	body = malloc(len ? len : 1);	/* exact size, so ASan sees any over-read */
	memcpy(body, data + 1, len);
	w.lo = body;
	w.hi = body + len;
	w.max = bounds[data[0] & 7] ? bounds[data[0] & 7] : HTTP_CONNECT_MSG_MAX;
	w.seen = 0;
	why[0] = '\0';
	rc = http_connect_stream(body, len, bounds[data[0] & 7], check, &w, why, sizeof(why));
	if (rc != 0 && (rc != -1 || !why[0]))
		abort();
	if (rc == 0 && (w.seen + HTTP_CONNECT_HEAD > len || !(body[w.seen] & HTTP_CONNECT_END)))
		abort();
	free(body);
	return 0;
}
