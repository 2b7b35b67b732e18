/* Unit tests: x-denv.clock into docker run arguments (fakeclock.c). */
#include <stdio.h>
#include <string.h>

#include "base/fs.h"
#include "sidecar/sidecar.h"
#include "tap.h"

static struct json *parse(const char *text)
{
	struct json *j = NULL;
	struct err e;

	if (json_parse(text, strlen(text), NULL, &j, &e) < 0) {
		tap_diag("bad test JSON: %s", e.msg);
		return json_new_object();
	}
	return j;
}

/* The arguments fc_run_args adds for service 0 of order, space-separated. */
static const char *args_of(const struct json *order, char *out, size_t n)
{
	struct argv a;

	av_init(&a);
	fc_run_args(json_at(order, 0), &a);
	out[0] = '\0';
	for (size_t i = 0; i < a.n; i++)
		snprintf(out + strlen(out), n - strlen(out), "%s%s", i ? " " : "", a.v[i]);
	av_release(&a);
	return out;
}

static void test_real(void)
{
	struct json *order = parse("[{\"name\":\"a\"}]"), *real = parse("{\"mode\":\"real\"}");
	char got[1024];
	struct err e;

	ok(fc_prepare(NULL, order, &e) == 0, "no clock: nothing to prepare");
	ok(fc_prepare(real, order, &e) == 0, "real: nothing to prepare");
	is_str(args_of(order, got, sizeof(got)), "", "real time adds no docker run argument");
	ok(!fc_active(real) && !fc_active(NULL), "real and absent are not active");
	json_free(order);
	json_free(real);
}

static void test_modes(void)
{
	struct json *order = parse("[{\"name\":\"a\"},{\"name\":\"b\"}]");
	struct json *frozen = parse("{\"mode\":\"frozen\",\"at\":\"2026-01-01T00:00:00Z\"}");
	struct json *offset = parse("{\"mode\":\"offset\",\"offset\":\"-24h0m0s\",\"offset_sec\":-86400}");
	struct json *odd = parse("{\"mode\":\"paused\"}"), *bad_at = parse("{\"mode\":\"frozen\",\"at\":\"soon\"}");
	char got[1024], want[1024];
	struct err e;
	const char *lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

	ok(fc_prepare(odd, order, &e) < 0 && strstr(e.msg, "mode \"paused\"") != NULL,
	   "an unknown mode is refused, never ignored");
	if (!fs_exists(lib)) {
		tap_diag("no %s on this host (t/deps.sh installs libfaketime)", lib);
		ok(fc_prepare(frozen, order, &e) < 0 && strstr(e.msg, "apt-get install libfaketime") != NULL,
		   "without libfaketime a frozen clock is refused with the fix");
		goto out;
	}
	ok(fc_prepare(bad_at, order, &e) < 0 && strstr(e.msg, "\"soon\"") != NULL, "a malformed at is refused");
	ok(fc_prepare(frozen, order, &e) == 0, "frozen is prepared");
	snprintf(want, sizeof(want),
		 "-v %s:/.denv/libfaketime.so.1:ro -e LD_PRELOAD=/.denv/libfaketime.so.1 "
		 "-e FAKETIME=@2026-01-01 00:00:00 -e FAKETIME_DONT_FAKE_MONOTONIC=1", lib);
	is_str(args_of(order, got, sizeof(got)), want, "frozen: the library read-only, preloaded, started at the instant");
	ok(json_get(json_at(order, 1), "fakeclock") != NULL, "every service gets the clock");
	ok(fc_prepare(offset, order, &e) == 0, "offset is prepared");
	ok(strstr(args_of(order, got, sizeof(got)), "-e FAKETIME=-86400 ") != NULL, "offset: FAKETIME is the signed seconds");
out:
	json_free(order);
	json_free(frozen);
	json_free(offset);
	json_free(odd);
	json_free(bad_at);
}

int main(void)
{
	test_real();
	test_modes();
	return tap_done();
}
