/*
 * Unit tests: every t/fixtures/yaml/<name>.yaml (the compose and denv.yaml
 * examples of the reference docs, reconstructed, plus our own) parses to the
 * tree in <name>.json, written by hand and read with json_parse. Numbers are
 * compared with their types (an integer is not a double), which json_equal
 * alone would let pass.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/fs.h"
#include "base/str.h"
#include "json/json.h"
#include "tap.h"
#include "yaml/yaml.h"
#include "yaml-util.h"

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The fixtures every run must find: the spec's examples. */
static const char *const required[] = {
	"compose-xdenv-reference", "compose-example", "blog-karotte", "howto-verify", "quickstart",
	"blog-creating-an-environment", "denv-image", "denv-version", "howto-inspect-image",
	"howto-inspect-version",
};

int main(void)
{
	const char *top = getenv("DENV_TOP");
	char dir[4096], path[4200];
	DIR *d;
	struct dirent *de;
	char *names[256];
	size_t n = 0;

	snprintf(dir, sizeof(dir), "%s/t/fixtures/yaml", top && *top ? top : ".");
	d = opendir(dir);
	if (!ok(d != NULL, "open %s", dir))
		return tap_done();
	while ((de = readdir(d)) && n < sizeof(names) / sizeof(names[0]))
		if (str_has_suffix(de->d_name, ".yaml"))
			names[n++] = xstrndup(de->d_name, strlen(de->d_name) - 5);
	closedir(d);
	qsort(names, n, sizeof(names[0]), cmp_names);

	for (size_t r = 0; r < sizeof(required) / sizeof(required[0]); r++) {
		bool found = false;
		for (size_t i = 0; i < n; i++)
			found = found || strcmp(names[i], required[r]) == 0;
		ok(found, "fixture %s.yaml is present", required[r]);
	}

	for (size_t i = 0; i < n; i++) {
		struct buf y = BUF_INIT, j = BUF_INIT;
		struct json *got = NULL, *want = NULL;
		struct err e;

		snprintf(path, sizeof(path), "%s/%s.yaml", dir, names[i]);
		if (!ok(fs_read_file(path, &y, 1 << 20, &e) == 0, "%s.yaml: read", names[i]))
			goto next;
		snprintf(path, sizeof(path), "%s/%s.json", dir, names[i]);
		if (!ok(fs_read_file(path, &j, 1 << 20, &e) == 0, "%s.json: read", names[i]))
			goto next;
		if (!ok(json_parse(j.data, j.len, NULL, &want, &e) == 0, "%s.json: parses", names[i]))
			tap_diag("%s", e.msg);
		if (!ok(yaml_parse(y.data, y.len, NULL, &got, &e) == 0, "%s.yaml: parses", names[i])) {
			tap_diag("%s", e.msg);
			goto next;
		}
		if (!ok(want && same_typed(got, want), "%s.yaml: tree equals %s.json", names[i], names[i])) {
			char *s = json_to_string(got, JSON_PRETTY);
			tap_diag("got:\n%s", s);
			free(s);
		}
	next:
		json_free(got);
		json_free(want);
		buf_release(&y);
		buf_release(&j);
		free(names[i]);
	}
	ok(n >= sizeof(required) / sizeof(required[0]), "found %zu fixtures", n);
	return tap_done();
}
