/*
 * fuzz/yaml.c: the YAML parser. For any input, under tight limits: parse;
 * on success the tree must write as valid UTF-8 JSON that parses back to an
 * equal tree; on failure nothing is returned and the message reads
 * "line:col: reason". Tighter limits may only refuse more, never give a
 * different tree.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "json/json.h"
#include "yaml/yaml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
	if (!cond)
		abort();	/* the fuzzer's way to report a finding */
}

/* "12:3: ..." */
static int has_position(const char *m)
{
	size_t i = 0;

	for (int part = 0; part < 2; part++) {
		size_t st = i;
		while (m[i] >= '0' && m[i] <= '9')
			i++;
		if (i == st || m[st] == '0' || m[i] != ':')
			return 0;
		i++;
	}
	return m[i] == ' ' && m[i + 1] != '\0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct yaml_limits lim = { 1 << 16, 32, 5000, 1 << 14 };
	struct yaml_limits tight = { 1 << 16, 6, 200, 64 };
	struct json *v = (struct json *)1, *t = NULL, *w = NULL;
	struct err e, e2;
	struct buf b = BUF_INIT;
	int rc = yaml_parse((const char *)data, size, &lim, &v, &e);

	if (rc < 0) {
		must(v == NULL);
		must(size > lim.max_size || has_position(e.msg));
	} else {
		must(json_write(&b, v, JSON_COMPACT) == 0);
		must(utf8_valid(b.data, b.len));
		must(json_parse(b.data, b.len, NULL, &w, &e2) == 0);
		must(json_equal(v, w));
		json_free(w);
		buf_release(&b);
	}
	if (yaml_parse((const char *)data, size, &tight, &t, &e2) == 0)
		must(rc == 0 && json_equal(v, t));
	else
		must(t == NULL);
	json_free(t);
	if (rc == 0)
		json_free(v);
	return 0;
}
