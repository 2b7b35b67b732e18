/*
 * fuzz/cli-mcp.c: mcp_handle, denv mcp's message dispatch, on any bytes.
 * Whatever arrives, it answers nothing (a notification or a response) or
 * exactly one JSON-RPC 2.0 message: valid JSON, "jsonrpc":"2.0", an id
 * member, and either a result or an error with an integer code. With no
 * API client every tool call is a tool error, so nothing leaves the
 * process.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/mcp.h"
#include "json/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();	/* the fuzzer's way to report a finding */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mcp m = { .version = "fuzz" };
	struct buf out = BUF_INIT;
	struct json *doc = NULL;
	char *msg = malloc(size ? size : 1);	/* its own allocation: ASan sees overreads */
	struct err e;
	int k;

	if (!msg)
		return 0;
	memcpy(msg, data, size);
	k = mcp_handle(&m, msg, size, &out);
	must(k == 0 || k == 1);
	if (k == 1) {
		must(json_parse(out.data, out.len, NULL, &doc, &e) == 0);
		must(json_get_str(doc, "jsonrpc") && !strcmp(json_get_str(doc, "jsonrpc"), "2.0"));
		must(json_get(doc, "id") != NULL);
		must((json_get(doc, "result") != NULL) != (json_get(doc, "error") != NULL));
		if (json_get(doc, "error"))
			must(json_get(json_get(doc, "error"), "code")->type == JSON_INT);
	} else {
		must(out.len == 0);
	}
	json_free(doc);
	buf_release(&out);
	free(msg);
	return 0;
}
