/* Unit tests: freeze.c over a fake /proc and /sys/fs/cgroup in a temp dir:
 * finding a container's freezer from its pid (cgroup v1, v2, hybrid, mount
 * roots, escapes, refusals), freeze and thaw through the files, the
 * processes' names, and the record a killed worker leaves behind. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "tap.h"

static char top[1024];

static void put(const char *rel, const char *text)
{
	char path[2048], dir[2048];
	struct err e;

	snprintf(path, sizeof(path), "%s/%s", top, rel);
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	if (fs_mkdir_p(dir, 0700, &e) < 0 || fs_write_atomic(path, text, strlen(text), 0600, &e) < 0)
		tap_diag("cannot write %s: %s", path, e.msg);
}

static const char *get(const char *abs)
{
	static char out[600];
	struct buf b = BUF_INIT;
	struct err e;

	out[0] = '\0';
	if (fs_read_file(abs, &b, sizeof(out) - 1, &e) == 0)
		snprintf(out, sizeof(out), "%s", b.data);
	else
		snprintf(out, sizeof(out), "<%s>", e.msg);
	buf_release(&b);
	return out;
}

static const char *rel(const char *abs)
{
	size_t tl = strlen(top);

	return strncmp(abs, top, tl) == 0 ? abs + tl : abs;
}

#define HYBRID \
	"22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n" \
	"31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" \
	"32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n" \
	"37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime shared:14 - cgroup cgroup rw,freezer\n" \
	"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"

static void test_v1(struct fz_sys *s)
{
	struct fz_cg cg;
	struct err e;

	put("proc/self/mountinfo", HYBRID);
	put("proc/100/cgroup", "9:name=systemd:/docker/abc123\n6:freezer:/docker/abc123\n"
			       "1:cpu,cpuacct:/docker/abc123\n0::/docker/abc123\n");
	put("sys/fs/cgroup/freezer/docker/abc123/freezer.state", "THAWED\n");
	put("sys/fs/cgroup/unified/docker/abc123/cgroup.freeze", "0\n");
	ok(fz_cgroup_of(s, 100, "abc123", &cg, &e) == 0 && cg.version == 1,
	   "hybrid host: the v1 freezer is preferred: %s", e.msg);
	is_str(rel(cg.dir), "/sys/fs/cgroup/freezer/docker/abc123", "v1 directory under the freezer mount");
	ok(fz_cgroup_of(s, 100, "zzz999", &cg, &e) < 0 && strstr(e.msg, "not in the container's cgroup"),
	   "a pid whose cgroup does not name the container is refused: %s", e.msg);
	ok(fz_cgroup_of(s, 0, NULL, &cg, &e) < 0, "pid 0 is refused: %s", e.msg);
	ok(fz_cgroup_of(s, 999, NULL, &cg, &e) < 0, "a pid without /proc entry fails: %s", e.msg);

	/* The same hierarchy mounted with a root of /docker (as inside a container). */
	put("proc/self/mountinfo", "37 31 0:34 /docker /sys/fs/cgroup/freezer rw - cgroup cgroup rw,freezer\n");
	put("sys/fs/cgroup/freezer/abc123/freezer.state", "THAWED\n");
	ok(fz_cgroup_of(s, 100, NULL, &cg, &e) == 0 && str_eq(rel(cg.dir), "/sys/fs/cgroup/freezer/abc123"),
	   "a mount root is taken off the cgroup path: %s", e.msg[0] ? e.msg : rel(cg.dir));
	put("proc/101/cgroup", "6:freezer:/other/xyz\n");
	ok(fz_cgroup_of(s, 101, NULL, &cg, &e) < 0 && strstr(e.msg, "no usable cgroup freezer"),
	   "a cgroup outside the mount's root is not reachable: %s", e.msg);
	put("proc/102/cgroup", "6:freezer:/docker/../../etc\n");
	ok(fz_cgroup_of(s, 102, NULL, &cg, &e) < 0, "a cgroup path with .. is refused: %s", e.msg);

	/* Octal escapes in the mount point. */
	put("proc/self/mountinfo", "37 31 0:34 / /sys/fs/cgroup/my\\040freezer rw - cgroup cgroup rw,freezer\n");
	put("sys/fs/cgroup/my freezer/docker/abc123/freezer.state", "THAWED\n");
	ok(fz_cgroup_of(s, 100, "abc123", &cg, &e) == 0 &&
	   str_eq(rel(cg.dir), "/sys/fs/cgroup/my freezer/docker/abc123"), "\\040 in mountinfo is a space: %s",
	   e.msg[0] ? e.msg : rel(cg.dir));

	/* No freezer anywhere: v1 controllers without it and no cgroup2. */
	put("proc/self/mountinfo", "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n");
	ok(fz_cgroup_of(s, 100, NULL, &cg, &e) < 0 && strstr(e.msg, "no usable cgroup freezer"),
	   "no freezer mount: a clear error: %s", e.msg);
}

static void test_v2(struct fz_sys *s)
{
	struct fz_cg cg;
	struct err e;

	put("proc/self/mountinfo", "25 22 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
	put("proc/200/cgroup", "0::/system.slice/docker-def456.scope\n");
	put("sys/fs/cgroup/system.slice/docker-def456.scope/cgroup.freeze", "0\n");
	put("sys/fs/cgroup/system.slice/docker-def456.scope/cgroup.events", "populated 1\nfrozen 0\n");
	ok(fz_cgroup_of(s, 200, "def456", &cg, &e) == 0 && cg.version == 2, "cgroup v2: found: %s", e.msg);
	is_str(rel(cg.dir), "/sys/fs/cgroup/system.slice/docker-def456.scope", "v2 directory under the cgroup2 mount");
	put("proc/201/cgroup", "0::/\n");
	ok(fz_cgroup_of(s, 201, NULL, &cg, &e) < 0, "the root cgroup (no cgroup.freeze) is refused: %s", e.msg);

	/* Freeze that never completes: timeout, and it is thawed again. */
	ok(fz_cgroup_of(s, 200, NULL, &cg, &e) == 0, "found again");
	ok(fz_freeze(&cg, 1, 30, &e) < 0 && strstr(e.msg, "did not freeze"), "v2: no \"frozen 1\": timeout: %s",
	   e.msg);
	{
		char p[FZ_PATH_MAX + 32];

		snprintf(p, sizeof(p), "%s/cgroup.freeze", cg.dir);
		is_str(get(p), "0", "v2: thawed again after the failed freeze");
		put("sys/fs/cgroup/system.slice/docker-def456.scope/cgroup.events", "populated 1\nfrozen 1\n");
		ok(fz_freeze(&cg, 1, 1000, &e) == 0, "v2: \"frozen 1\" in cgroup.events: frozen: %s", e.msg);
		is_str(get(p), "1", "v2: 1 written to cgroup.freeze");
		ok(fz_thaw(&cg, 1, &e) == 0, "v2: thaw");
		is_str(get(p), "0", "v2: 0 written to cgroup.freeze");
	}
}

static void test_freeze_v1_and_comms(struct fz_sys *s)
{
	struct fz_cg cg[2];
	struct err e;
	struct buf b = BUF_INIT;
	char p[FZ_PATH_MAX + 32];

	put("proc/self/mountinfo", HYBRID);
	put("proc/300/cgroup", "6:freezer:/docker/c1\n");
	put("proc/301/cgroup", "6:freezer:/docker/c2\n");
	put("sys/fs/cgroup/freezer/docker/c1/freezer.state", "THAWED\n");
	put("sys/fs/cgroup/freezer/docker/c2/freezer.state", "THAWED\n");
	ok(fz_cgroup_of(s, 300, "c1", &cg[0], &e) == 0 && fz_cgroup_of(s, 301, "c2", &cg[1], &e) == 0,
	   "two v1 cgroups");
	ok(fz_freeze(cg, 2, 1000, &e) == 0, "v1: both frozen (freezer.state reads FROZEN): %s", e.msg);
	snprintf(p, sizeof(p), "%s/freezer.state", cg[1].dir);
	is_str(get(p), "FROZEN", "v1: FROZEN written");
	ok(fz_thaw(cg, 2, &e) == 0 && str_eq(get(p), "THAWED"), "v1: THAWED written");

	put("sys/fs/cgroup/freezer/docker/c1/cgroup.procs", "300\n310\n311\n");
	put("proc/300/comm", "sh\n");
	put("proc/310/comm", "postgres\n");	/* 311 is gone: skipped */
	ok(fz_comms(s, &cg[0], &b, &e) == 0, "the names of the cgroup's processes: %s", e.msg);
	is_str(b.data, "sh\npostgres\n", "comm of each process still there");
	buf_reset(&b);
	put("sys/fs/cgroup/freezer/docker/c2/cgroup.procs", "");
	ok(fz_comms(s, &cg[1], &b, &e) < 0 && strstr(e.msg, "no process"),
	   "no visible process is an error (the caller falls back to docker top): %s", e.msg);
	buf_release(&b);
}

static void test_record(struct fz_sys *s)
{
	struct fz_cg cg[2];
	struct err e;
	char record[FZ_PATH_MAX], p1[FZ_PATH_MAX + 32], p2[FZ_PATH_MAX + 32], outside[3 * FZ_PATH_MAX];
	int fd, fd2;

	put("proc/self/mountinfo", HYBRID);
	put("proc/400/cgroup", "6:freezer:/docker/r1\n");
	put("proc/401/cgroup", "0::/docker/r2\n");
	put("sys/fs/cgroup/freezer/docker/r1/freezer.state", "THAWED\n");
	put("sys/fs/cgroup/unified/docker/r2/cgroup.freeze", "0\n");
	put("sys/fs/cgroup/unified/docker/r2/cgroup.events", "frozen 1\n");
	ok(fz_cgroup_of(s, 400, NULL, &cg[0], &e) == 0 && cg[0].version == 1 &&
	   fz_cgroup_of(s, 401, NULL, &cg[1], &e) == 0 && cg[1].version == 2, "one v1 and one v2 cgroup");
	snprintf(p1, sizeof(p1), "%s/freezer.state", cg[0].dir);
	snprintf(p2, sizeof(p2), "%s/cgroup.freeze", cg[1].dir);
	put("data/envs/env_A/spec.json", "{}");
	{
		char data[1100];

		snprintf(data, sizeof(data), "%s/data", top);
		fz_record_path(data, "env_A", record, sizeof(record));
	}
	is_str(rel(record), "/data/envs/env_A/frozen", "the record's place");
	ok(fz_recover(s, record, &e) == 0, "no record: nothing to do");
	fd = fz_record_begin(record, cg, 2, &e);
	ok(fd >= 0, "record written and locked: %s", fd < 0 ? e.msg : "");
	ok(fz_freeze(cg, 2, 1000, &e) == 0 && str_eq(get(p1), "FROZEN") && str_eq(get(p2), "1"), "both frozen");
	{
		char want[2 * FZ_PATH_MAX + 16];

		snprintf(want, sizeof(want), "v1 %s\nv2 %s\n", cg[0].dir, cg[1].dir);
		is_str(get(record), want, "the record lists each cgroup with its version");
	}
	ok(fz_recover(s, record, &e) == 0 && fs_exists(record) && str_eq(get(p1), "FROZEN"),
	   "while its worker holds the lock, a recovery leaves it alone");
	/* The worker dies: its descriptor (and lock) goes, the record stays. */
	close(fd);
	ok(fz_recover(s, record, &e) == 1, "the worker is gone: recovery thaws: %s", e.msg);
	ok(str_eq(get(p1), "THAWED") && str_eq(get(p2), "0") && !fs_exists(record),
	   "both thawed and the record removed");
	ok(fz_recover(s, record, &e) == 0, "a second recovery has nothing to do");

	/* The normal end: thaw, then fz_record_end. */
	fd = fz_record_begin(record, cg, 1, &e);
	ok(fd >= 0 && fz_record_end(record, fd, &e) == 0 && !fs_exists(record), "record removed at the end");

	/* A record naming something outside every freezer mount: never written. */
	put("elsewhere/freezer.state", "KEEP\n");
	snprintf(outside, sizeof(outside), "v1 %s/elsewhere\nv1 %s/sys/fs/cgroup/freezer/../../../elsewhere\n"
		 "v2 %s\nbogus line\n", top, top, cg[0].dir);
	put("data/envs/env_A/frozen", outside);
	ok(fz_recover(s, record, &e) == 0 && !fs_exists(record), "a forged record is consumed: %s", e.msg);
	snprintf(outside, sizeof(outside), "%s/elsewhere/freezer.state", top);
	is_str(get(outside), "KEEP\n", "nothing outside a freezer mount was written");
	ok(!fs_exists(p1) || str_eq(get(p1), "THAWED"), "a v1 directory named as v2 is not touched either");

	/* A cgroup whose container is gone: thawing it is no error. */
	fd2 = fz_record_begin(record, cg, 1, &e);
	put("sys/fs/cgroup/freezer/docker/r1/freezer.state", "FROZEN\n");
	{
		char d[FZ_PATH_MAX + 32];
		struct err e2;

		snprintf(d, sizeof(d), "%s", cg[0].dir);
		unlink(p1);
		rmdir(d);
		close(fd2);
		ok(fz_recover(s, record, &e2) == 0 && !fs_exists(record),
		   "a container gone since: nothing thawed, record removed: %s", e2.msg);
	}
}

int main(void)
{
	struct fz_sys s;
	char proc[1100];

	snprintf(top, sizeof(top), "%s", tap_tmpdir());
	snprintf(proc, sizeof(proc), "%s/proc", top);
	s.proc = proc;
	s.root = top;
	test_v1(&s);
	test_v2(&s);
	test_freeze_v1_and_comms(&s);
	test_record(&s);
	return tap_done();
}
