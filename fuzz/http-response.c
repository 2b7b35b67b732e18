/*
 * Fuzz target: the clients' response reader (status line, headers,
 * Content-Length / chunked / until-close bodies) and the response-head parser
 * the WebSocket client uses, with bytes arriving in pieces of sizes taken
 * from the first input bytes; plus the URL splitter on the same bytes.
 * Checks: the body never passes its cap; the reader gives the same verdict
 * whatever the piece sizes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "http/http_int.h"

#define BODY_CAP 8192

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t steps[3];
	const char *in;
	size_t len;
	struct err e;
	int r1, r2;

	if (size < 4)
		return 0;
	steps[0] = data[0] ? data[0] : 1;
	steps[1] = data[1] ? data[1] : 1;
	steps[2] = (size_t)data[2] * 37 + 1;
	in = (const char *)data + 4;
	len = size - 4;
	{
		char *copy = malloc(len ? len : 1);
		struct http_response_head h;
		memcpy(copy, in, len);
		(void)http_parse_response_head(copy, len, &h);
		free(copy);
	}
	struct http_client_resp a = HTTP_CLIENT_RESP_INIT, b = HTTP_CLIENT_RESP_INIT;
	buf_init(&a.body, BODY_CAP);
	buf_init(&b.body, BODY_CAP);
	if (len > HTTP_MAX_HEADER_BYTES)
		len = HTTP_MAX_HEADER_BYTES;	/* keep both runs under the head cap */
	r1 = http_int_read_response(in, len, steps, 3, data[3] & 1, &a, &e);
	r2 = http_int_read_response(in, len, NULL, 0, data[3] & 1, &b, &e);
	if (a.body.len > BODY_CAP || b.body.len > BODY_CAP)
		abort();
	if (r1 != r2 || (r1 == 1 && (a.status != b.status || a.body.len != b.body.len ||
				     memcmp(a.body.data, b.body.data, a.body.len) != 0)))
		abort();
	if (r1 == 1)
		(void)http_client_resp_header(&a, "content-type");
	http_client_resp_release(&a);
	http_client_resp_release(&b);
	{
		char *url = malloc(len + 1);
		bool tls;
		char host[256];
		int port;
		const char *path;
		memcpy(url, in, len);
		url[len] = '\0';
		(void)http_url_split(url, &tls, host, sizeof(host), &port, &path, &e);
		free(url);
	}
	return 0;
}
