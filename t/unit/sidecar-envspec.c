/* Unit tests: sc_spec_load, the one reader of an environment's spec.json. */
#include <stdio.h>
#include <string.h>

#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "tap.h"

static void put(const char *env, const char *text)
{
	char path[SC_SPEC_PATH_MAX];
	struct err e;

	snprintf(path, sizeof(path), "%s/envs/%s", tap_tmpdir(), env);
	fs_mkdir_p(path, 0700, &e);
	snprintf(path, sizeof(path), "%s/envs/%s/spec.json", tap_tmpdir(), env);
	ok(fs_write_atomic(path, text, strlen(text), 0600, &e) == 0, "wrote %s's spec.json", env);
}

int main(void)
{
	char env[SC_SPEC_PATH_MAX];
	struct json *spec = (struct json *)1;
	struct err e;
	int rc;

	put("good", "{\"storage\":\"dir\"}");
	rc = sc_spec_load(tap_tmpdir(), "good", &spec, &e);
	ok(rc == 1 && spec && str_eq(json_get_str(spec, "storage"), "dir"), "a spec is read (1)");
	json_free(spec);

	rc = sc_spec_load(tap_tmpdir(), "absent", &spec, &e);
	ok(rc == 0 && spec == NULL, "no spec.json: 0 and no object");

	put("bad", "{not json");
	rc = sc_spec_load(tap_tmpdir(), "bad", &spec, &e);
	ok(rc < 0 && spec == NULL && strstr(e.msg, "bad/spec.json"), "not JSON: -1 naming the file: %s", e.msg);

	/* A path that does not fit fails; it is not cut to another file's. */
	memset(env, 'x', sizeof(env) - 1);
	env[sizeof(env) - 1] = '\0';
	rc = sc_spec_load(tap_tmpdir(), env, &spec, &e);
	ok(rc < 0 && spec == NULL && strstr(e.msg, "path too long"), "an over-long path is refused: %.60s...", e.msg);
	return tap_done();
}
