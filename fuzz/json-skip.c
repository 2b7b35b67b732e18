/*
 * fuzz/json-skip.c: json_skip against json_parse, the parser it must agree
 * with. For any input:
 *  - if json_parse accepts it (at some depth limit), json_skip accepts it
 *    at the same limit and the value ends where the text's trailing
 *    whitespace begins;
 *  - if json_skip accepts it, json_parse of the span it reports either
 *    accepts (and then the whole input parses iff only whitespace follows)
 *    or refuses for one of the two things json_skip does not check:
 *    a duplicate key or a number out of range;
 *  - if json_check accepts it, json_skip accepts it with the same end and
 *    json_parse accepts that span;
 *  - json_skip never reads past the input (ASan, input copied to its own
 *    allocation) and never reports an end beyond it.
 * The first byte picks the depth limit (1..JSON_SKIP_DEPTH_MAX).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();	/* the fuzzer's way to report a finding */
}

static int is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned depth;
	char *text;
	size_t len, end = 0, cend = 0, tail;
	struct json_limits lim;
	struct json *v = NULL, *w = NULL;
	struct err e;
	int prc, src;

	if (size < 1)
		return 0;
	depth = 1 + data[0] % JSON_SKIP_DEPTH_MAX;
	len = size - 1;
	text = malloc(len ? len : 1);
	must(text != NULL);
	memcpy(text, data + 1, len);
	lim.max_depth = depth;
	lim.max_size = 0;

	prc = json_parse(text, len, &lim, &v, &e);
	src = json_skip(text, len, depth, &end);
	if (json_check(text, len, depth, &cend) == 0) {
		must(src == 0 && cend == end);
		must(json_parse(text, end, &lim, &w, &e) == 0);
		json_free(w);
		w = NULL;
	}
	if (src == 0) {
		must(end <= len && end > 0);
		for (tail = end; tail < len && is_ws(text[tail]); tail++)
			;
		if (prc == 0)
			must(tail == len);
		if (json_parse(text, end, &lim, &w, &e) < 0) {
			/* Only what json_skip leaves unchecked may differ. */
			must(strstr(e.msg, "duplicate") != NULL || strstr(e.msg, "out of range") != NULL);
			must(prc < 0);
		} else if (tail == len) {
			must(prc == 0 && json_equal(v, w));
		}
	} else {
		must(prc < 0);
	}
	json_free(v);
	json_free(w);
	free(text);
	return 0;
}
