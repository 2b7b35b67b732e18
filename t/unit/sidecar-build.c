/* Unit tests: the build cache key and tag (build.c, build_tag): the same
 * build always names the same tag whatever the order of its args; any
 * change of context, Dockerfile, target or an arg names another; the
 * service is lower-cased into a valid repository name. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <utime.h>

#include "base/fs.h"
#include "json/json.h"
#include "sidecar/sidecar.h"
#include "tap.h"

#define DIGEST "0ff4b023187e0000000000000000000000000000000000000000000000000000"

static struct json *build_of(const char *json)
{
	struct json *v = NULL;
	struct err e;

	if (json_parse(json, strlen(json), NULL, &v, &e) < 0)
		tap_diag("bad JSON in a case: %s", e.msg);
	return v;
}

static void tag_of(const char *svc, const char *json, char *tag, size_t n)
{
	struct json *b = build_of(json);

	if (build_tag(svc, b, tag, n) < 0)
		tag[0] = '\0';
	json_free(b);
}

static void touch(const char *dir, const char *name, time_t mtime)
{
	char path[512];
	struct utimbuf t = { mtime, mtime };
	struct err e;

	snprintf(path, sizeof(path), "%s/contexts/%s", dir, name);
	if (fs_write_atomic(path, "x", 1, 0600, &e) < 0 || utime(path, &t) < 0)
		tap_diag("cannot make %s", path);
}

/* Old archives and parts go; new ones and anything else stay. */
static void test_prune(void)
{
	const char *data = tap_tmpdir();
	char path[512];
	time_t now = 2000000000, old = now - 25 * 3600;

	snprintf(path, sizeof(path), "%s/contexts", data);
	mkdir(path, 0700);
	touch(data, "a.tar", old);
	touch(data, "b.env_1.part", old);
	touch(data, "c.tar", now - 60);
	touch(data, "notes", old);
	is_int(build_prune(data, now), 2, "build_prune removes the day-old archive and part");
	snprintf(path, sizeof(path), "%s/contexts/c.tar", data);
	ok(fs_exists(path), "  keeps a new archive");
	snprintf(path, sizeof(path), "%s/contexts/notes", data);
	ok(fs_exists(path), "  and files that are neither");
}

int main(void)
{
	char base[300], other[300];
	static const char *const changed[] = {
		"{\"context_digest\":\"" DIGEST "1\",\"dockerfile\":\"Dockerfile\",\"target\":\"\",\"args\":{\"A\":\"1\",\"B\":\"2\"}}",
		"{\"context_digest\":\"" DIGEST "\",\"dockerfile\":\"Dockerfile.dev\",\"target\":\"\",\"args\":{\"A\":\"1\",\"B\":\"2\"}}",
		"{\"context_digest\":\"" DIGEST "\",\"dockerfile\":\"Dockerfile\",\"target\":\"test\",\"args\":{\"A\":\"1\",\"B\":\"2\"}}",
		"{\"context_digest\":\"" DIGEST "\",\"dockerfile\":\"Dockerfile\",\"target\":\"\",\"args\":{\"A\":\"1\",\"B\":\"3\"}}",
		"{\"context_digest\":\"" DIGEST "\",\"dockerfile\":\"Dockerfile\",\"target\":\"\",\"args\":{\"A\":\"1\"}}",
		/* "A=1" + "B=2" must not read as "A=1B" + "=2" */
		"{\"context_digest\":\"" DIGEST "\",\"dockerfile\":\"Dockerfile\",\"target\":\"\",\"args\":{\"A\":\"1B\",\"\":\"2\"}}",
	};

	tag_of("App", "{\"context_digest\":\"" DIGEST "\",\"dockerfile\":\"Dockerfile\",\"target\":\"\","
		      "\"args\":{\"A\":\"1\",\"B\":\"2\"}}", base, sizeof(base));
	ok(strncmp(base, "denv-build/app:", 15) == 0 && strlen(base) == 15 + 12,
	   "the tag is denv-build/<service, lower case>:<12 hex digits> (%s)", base);
	tag_of("App", "{\"context_digest\":\"" DIGEST "\",\"dockerfile\":\"Dockerfile\",\"target\":\"\","
		      "\"args\":{\"B\":\"2\",\"A\":\"1\"}}", other, sizeof(other));
	is_str(other, base, "the order of the args does not change it");
	for (size_t i = 0; i < sizeof(changed) / sizeof(changed[0]); i++) {
		tag_of("App", changed[i], other, sizeof(other));
		ok(other[0] && strcmp(other, base) != 0, "a changed build names another tag (%zu)", i);
	}
	test_prune();
	return tap_done();
}
