/*
 * fuzz/spec-compose.c: a compose file into a Spec (spec_parse_compose).
 * Whatever the input: a refusal returns no Spec and a "compose: " message;
 * a Spec always has its warnings list within bounds (SPEC_MAX_WARNINGS lines
 * and one that counts the rest), each line shorter than SPEC_WARNING_MAX and
 * printable ASCII (the CLI prints them to a terminal), and the same input
 * always gives the same Spec.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"
#include "spec/spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();	/* the fuzzer's way to report a finding */
}

static int printable(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			return 0;
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json *spec = (struct json *)1, *again = NULL;
	const struct json *w;
	struct err e;

	if (spec_parse_compose((const char *)data, size, &spec, &e) < 0) {
		must(spec == (struct json *)1 || spec == NULL);
		must(!strncmp(e.msg, "compose: ", 9));
		return 0;
	}
	w = json_get(spec, "warnings");
	must(w && w->type == JSON_ARRAY && json_len(w) <= SPEC_MAX_WARNINGS + 1);
	for (size_t i = 0; i < json_len(w); i++) {
		const struct json *line = json_at(w, i);
		must(line->type == JSON_STRING && line->u.str.len < SPEC_WARNING_MAX);
		must(printable(line->u.str.s, line->u.str.len));
	}
	must(spec_parse_compose((const char *)data, size, &again, &e) == 0 && json_equal(spec, again));
	json_free(again);
	json_free(spec);
	return 0;
}
