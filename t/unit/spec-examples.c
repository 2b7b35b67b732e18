/* Unit tests: every compose example in the spec resolves to the Spec written by
 * hand in t/fixtures/spec/<name>.json ({"yaml": path, "spec": {...}} or
 * {"yaml": path, "error": "message"}). A bare `clock: frozen` is the time of
 * the parse: the fixture writes its at as "<now>", checked to be a time. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/str.h"
#include "json/json.h"
#include "spec/spec.h"
#include "tap.h"

static void now_is_a_time(struct json *spec, const struct json *want)
{
	struct json *clock = json_get(spec, "clock");
	int64_t ns;

	if (!str_eq(json_get_str(json_get(want, "clock"), "at"), "<now>"))
		return;
	ok(clock_parse_rfc3339(json_get_str(clock, "at") ? json_get_str(clock, "at") : "", &ns) == 0,
	   "  a bare frozen clock is stamped with a time");
	json_object_set_str(clock, "at", "<now>");
}

static void check_example(const char *top, const char *name)
{
	char path[4096];
	struct buf text = BUF_INIT, yaml = BUF_INIT;
	struct json *fixture = NULL, *spec = NULL;
	const char *want_error;
	struct err e = { "", 0 };
	int rc;

	snprintf(path, sizeof(path), "%s/t/fixtures/spec/%s", top, name);
	if (!ok(fs_read_file(path, &text, 1 << 20, &e) == 0 &&
		json_parse(text.data, text.len, NULL, &fixture, &e) == 0, "%s: fixture loads", name)) {
		tap_diag("%s", e.msg);
		goto out;
	}
	snprintf(path, sizeof(path), "%s/%s", top, json_get_str(fixture, "yaml"));
	if (!ok(fs_read_file(path, &yaml, 1 << 20, &e) == 0, "%s: compose file reads", name))
		goto out;
	rc = spec_parse_compose(yaml.data, yaml.len, &spec, &e);
	want_error = json_get_str(fixture, "error");
	if (want_error) {
		ok(rc == -1, "%s: refused", name);
		is_str(e.msg, want_error, "  with the expected message");
	} else if (ok(rc == 0, "%s: resolves", name)) {
		now_is_a_time(spec, json_get(fixture, "spec"));
		if (!ok(json_equal(spec, json_get(fixture, "spec")), "  to the Spec written by hand")) {
			char *got = json_to_string(spec, JSON_PRETTY);
			tap_diag("got: %s", got);
			free(got);
		}
	} else {
		tap_diag("%s", e.msg);
	}
out:
	json_free(spec);
	json_free(fixture);
	buf_release(&text);
	buf_release(&yaml);
}

int main(void)
{
	const char *top = getenv("DENV_TOP") ? getenv("DENV_TOP") : ".";
	char dir[4096];
	struct dirent **list;
	int n, examples = 0;

	snprintf(dir, sizeof(dir), "%s/t/fixtures/spec", top);
	n = scandir(dir, &list, NULL, alphasort);
	if (n < 0)
		return tap_skip_all("no t/fixtures/spec (run from the repository root)");
	for (int i = 0; i < n; i++) {
		if (str_has_suffix(list[i]->d_name, ".json")) {
			check_example(top, list[i]->d_name);
			examples++;
		}
		free(list[i]);
	}
	free(list);
	ok(examples >= 6, "found the spec's examples (%d)", examples);
	return tap_done();
}
