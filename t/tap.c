/* tap.c: see tap.h. */
#include "tap.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"

static int tap_count;
static int tap_failed;
static char tap_dir[256];

int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	tap_count++;
	printf("%sok %d - ", cond ? "" : "not ", tap_count);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond) {
		tap_failed++;
		printf("#   failed at %s:%d\n", file, line);
	}
	fflush(stdout);
	return cond;
}

int tap_is_str(const char *got, const char *want, const char *file, int line, const char *name)
{
	int same = got && want ? strcmp(got, want) == 0 : got == want;

	tap_ok(same, file, line, "%s", name);
	if (!same) {
		printf("#        got: '%s'\n", got ? got : "(null)");
		printf("#   expected: '%s'\n", want ? want : "(null)");
	}
	return same;
}

int tap_is_int(long long got, long long want, const char *file, int line, const char *name)
{
	tap_ok(got == want, file, line, "%s", name);
	if (got != want)
		printf("#        got: %lld\n#   expected: %lld\n", got, want);
	return got == want;
}

void tap_diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

int tap_skip_all(const char *reason)
{
	printf("1..0 # SKIP %s\n", reason);
	return 0;
}

const char *tap_tmpdir(void)
{
	const char *base = getenv("TMPDIR");

	if (tap_dir[0])
		return tap_dir;
	snprintf(tap_dir, sizeof(tap_dir), "%s/denv-t.XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(tap_dir)) {
		perror("mkdtemp");
		exit(2);
	}
	return tap_dir;
}

int tap_done(void)
{
	struct err e;

	if (tap_dir[0] && fs_remove_all(tap_dir, &e) < 0)
		printf("# cleanup: %s\n", e.msg);
	printf("1..%d\n", tap_count);
	if (tap_failed)
		printf("# failed %d of %d\n", tap_failed, tap_count);
	return tap_failed ? 1 : 0;
}
