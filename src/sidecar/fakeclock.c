/* fakeclock.c: x-denv.clock on the host, the wall clock a stack's programs read.
 *
 * Measured on this project's images (bookworm, glibc 2.36) before choosing:
 * - Time namespaces (CLONE_NEWTIME) shift only CLOCK_MONOTONIC and
 *   CLOCK_BOOTTIME; CLOCK_REALTIME, what date(1), time.time() and NOW()
 *   read, is not in them. They cannot freeze or offset a wall clock.
 * - libfaketime (Debian's libfaketime) preloaded with LD_PRELOAD reaches every
 *   dynamically linked glibc program: the service's main process, its
 *   children (the environment is inherited) and `docker exec` (an exec gets
 *   the container's environment). It cannot reach a statically linked
 *   program (the busybox fixture: LD_PRELOAD is never read) and is a glibc
 *   library, so a musl image cannot load it.
 * - A stopped clock (FAKETIME="2026-01-01 00:00:00") breaks programs that
 *   sleep: python3's time.sleep fails with EINVAL. So "frozen" uses the
 *   'start at' form: every process starts at the declared instant (children
 *   and execs start there again, FAKETIME_DONT_RESET unset) and its own time
 *   runs on from there. The monotonic clock stays real
 *   (FAKETIME_DONT_FAKE_MONOTONIC), so timeouts keep working.
 * - PostgreSQL 15 runs under it (backends fork from the postmaster without
 *   exec, so now() is the instant plus the postmaster's uptime); Debian's
 *   redis-server and redis-cli (jemalloc) hang at start with libfaketime
 *   0.9.10 in every mode tried (MT build, monotonic faked or not), so such
 *   a service fails its health wait: denv-compose(5) says so.
 * - The date form is read as UTC whatever TZ the service sets; the
 *   FAKETIME_FMT=%s form is not (it shifts by TZ), so it is not used.
 *
 * So: the host's library is bind-mounted read-only into every container at
 * FC_LIB_IN_CONTAINER with LD_PRELOAD and FAKETIME set on the container, and
 * after the stack is healthy each service's main process is checked to have
 * the library mapped (/proc/<pid>/maps). One that has not (a static binary,
 * or a libc that ignored it) fails the create with the reason: a declared
 * clock is never dropped silently. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/ev.h"
#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"

#define FC_MECHANISM "libfaketime (LD_PRELOAD)"

/* Where Debian's libfaketime package puts the library, by architecture. */
static const char *const fc_host_libs[] = {
	"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib/faketime/libfaketime.so.1",
	NULL,
};

static const char *host_lib(void)
{
	for (size_t i = 0; fc_host_libs[i]; i++)
		if (fs_exists(fc_host_libs[i]))
			return fc_host_libs[i];
	return NULL;
}

bool fc_active(const struct json *clock)
{
	const char *mode = json_get_str(clock, "mode");

	return mode && (str_eq(mode, "frozen") || str_eq(mode, "offset"));
}

/* "2026-01-01T00:00:00Z" -> "@2026-01-01 00:00:00" (libfaketime's 'start at'). */
static int faketime_value(const struct json *clock, char *out, size_t n, struct err *e)
{
	const char *at = json_get_str(clock, "at");

	if (str_eq(json_get_str(clock, "mode"), "offset")) {
		snprintf(out, n, "%+lld", (long long)json_get_int(clock, "offset_sec", 0));
		return 0;
	}
	if (!at || strlen(at) != FC_AT_LEN || at[10] != 'T' || at[19] != 'Z')
		return err_set(e, "x-denv.clock: frozen needs at as YYYY-MM-DDTHH:MM:SSZ, got \"%s\"", at ? at : "");
	snprintf(out, n, "@%.10s %.8s", at, at + 11);
	return 0;
}

int fc_prepare(const struct json *clock, struct json *order, struct err *e)
{
	const char *mode = json_get_str(clock, "mode"), *lib;
	char value[FC_VALUE_MAX];

	if (!clock || str_eq(mode, "real"))
		return 0;
	if (!fc_active(clock))
		return err_set(e, "x-denv.clock: mode \"%s\" is not one this denvd knows (real, frozen, offset)",
			       mode ? mode : "");
	if (!(lib = host_lib()))
		return err_set(e, "x-denv.clock: %s needs libfaketime on this host (apt-get install libfaketime): "
			       "not found at %s", mode, fc_host_libs[0]);
	if (faketime_value(clock, value, sizeof(value), e) < 0)
		return -1;
	for (size_t i = 0; i < json_len(order); i++) {
		struct json *fc = json_new_object();

		json_object_set_str(fc, "lib", lib);
		json_object_set_str(fc, "faketime", value);
		json_object_set(json_at(order, i), "fakeclock", fc);
	}
	return 0;
}

void fc_run_args(const struct json *svc, struct argv *a)
{
	const struct json *fc = json_get(svc, "fakeclock");

	if (!fc)
		return;
	av_add(a, "-v");
	av_addf(a, "%s:%s:ro", json_get_str(fc, "lib"), FC_LIB_IN_CONTAINER);
	av_add(a, "-e");
	av_add(a, "LD_PRELOAD=" FC_LIB_IN_CONTAINER);
	av_add(a, "-e");
	av_addf(a, "FAKETIME=%s", json_get_str(fc, "faketime"));
	av_add(a, "-e");
	av_add(a, "FAKETIME_DONT_FAKE_MONOTONIC=1");
}

/* 1 when the process maps libfaketime, 0 when not, -1 with e. */
static int maps_faketime(int pid, struct err *e)
{
	char path[64], line[FC_MAPS_LINE_MAX];
	FILE *f;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	if (!(f = fopen(path, "re")))
		return err_set(e, "reading %s: %s", path, strerror(errno));
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, FC_LIB_IN_CONTAINER) != NULL;
	fclose(f);
	return found;
}

/* maps_faketime until it says 1 or FC_MAPS_WAIT_MS pass (then its last
 * answer, 0 or -1); the main pid is read again each time, since the
 * entrypoint may exec or be replaced. */
static int maps_faketime_wait(const char *cname, int pid, struct err *e)
{
	int64_t deadline = ev_mono_ms() + FC_MAPS_WAIT_MS;
	int rc;

	while ((rc = maps_faketime(pid, e)) != 1 && ev_mono_ms() < deadline) {
		struct engine_ctr st;

		(void)ev_wait_fd(-1, 0, ev_mono_ms() + FC_MAPS_POLL_MS);
		if (engine_container(cname, &st, e) > 0 && st.pid > 0)
			pid = st.pid;
		err_clear(e);
	}
	return rc;
}

int fc_check(const char *project, const struct json *clock, const struct json *order, struct json *res,
	     struct err *e)
{
	struct json *ev;

	if (!fc_active(clock))
		return 0;
	for (size_t i = 0; i < json_len(order); i++) {
		const char *name = json_get_str(json_at(order, i), "name");
		struct engine_ctr st;
		char cname[SC_DOCKER_NAME_MAX];
		int rc;

		dk_container(project, name, cname, sizeof(cname));
		if ((rc = engine_container(cname, &st, e)) <= 0 || st.pid <= 0)
			return rc < 0 ? err_prefix(e, "service \"%s\"", name)
				      : err_set(e, "service \"%s\" is not running to check its clock", name);
		if ((rc = maps_faketime_wait(cname, st.pid, e)) < 0)
			return err_prefix(e, "service \"%s\": checking its clock", name);
		if (rc == 0)
			return err_set(e, "service \"%s\": x-denv.clock %s cannot reach its program: it did not load "
				       "libfaketime (a statically linked binary, or a libc other than glibc, ignores "
				       "LD_PRELOAD); use a dynamically linked glibc image or clock: real",
				       name, json_get_str(clock, "mode"));
	}
	ev = json_dup(clock);
	json_object_set_str(ev, "mechanism", FC_MECHANISM);
	json_object_set(res, "clock", ev);
	return 0;
}
