/* hostinfo.c: the machine's capabilities (protocol.md "Capabilities"), sent
 * in hello and returned by host.report. Blocking: docker version and zpool
 * list run with short timeouts. */
#include <ctype.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/proc.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"

/* Run argv; 0 and its trimmed first line of stdout in out if it exited 0. */
static int probe_cmd(const char *const *argv, char *out, size_t n)
{
	struct proc_spec s;
	struct proc_result r;
	struct err e;
	int rc = -1;

	proc_spec_init(&s, argv);
	s.timeout_ms = SC_HOSTINFO_TIMEOUT_MS;
	s.out_max = s.err_max = 65536;
	if (proc_run(&s, NULL, 0, &r, &e) == 0 && r.exit_code == 0 && !r.timed_out) {
		if (out)
			dk_first_line(r.out.data, out, n);
		rc = 0;
	}
	proc_result_release(&r);
	return rc;
}

static const char *arch_name(const char *m)
{
	if (str_eq(m, "x86_64"))
		return "amd64";
	if (str_eq(m, "aarch64"))
		return "arm64";
	return m;
}

struct json *sc_capabilities(const struct sc_config *c)
{
	struct json *j = json_new_object();
	struct utsname u;
	char host[256] = "", os[64] = "", docker[128] = "";
	const char *dv[] = { "docker", "version", "--format", "{{.Server.Version}}", NULL };
	const char *cv[] = { "docker", "compose", "version", NULL };

	gethostname(host, sizeof(host) - 1);
	if (uname(&u) < 0)
		memset(&u, 0, sizeof(u));
	for (size_t i = 0; u.sysname[i] && i + 1 < sizeof(os); i++)
		os[i] = (char)tolower((unsigned char)u.sysname[i]);
	if (probe_cmd(dv, docker, sizeof(docker)) < 0)
		docker[0] = '\0';
	json_object_set_str(j, "hostname", host);
	json_object_set_str(j, "os", os);
	json_object_set_str(j, "arch", arch_name(u.machine));
	sc_caps_refresh(j, c->data_dir);
	/* What new environments get (storage.c): zfs when the pool answers,
	 * btrfs when --btrfs-root is on btrfs, else dir. */
	json_object_set_str(j, "storage", stg_host_backend(c->zfs_pool, c->btrfs_root));
	json_object_set_str(j, "docker", docker);
	json_object_set_bool(j, "compose", docker[0] && probe_cmd(cv, NULL, 0) == 0);
	json_object_set_bool(j, "netns", str_eq(os, "linux") && geteuid() == 0 && fs_exists("/proc/self/ns/net"));
	rt_capabilities(j);
	json_object_set_str(j, "runtime", c->runtime && *c->runtime ? c->runtime : "runc");
	json_object_set_str(j, "denvd_version", DENVD_VERSION);
	{
		struct json *names = nm_capabilities(c);

		if (names)
			json_object_set(j, "ingress", names);
	}
	return j;
}

/* What placement counts (cpus, memory_mb, disk_gb free under the data
 * dir): set at start, refreshed for every hello and sent in every
 * heartbeat, since free disk (and online CPUs) change while we run. */
void sc_caps_refresh(struct json *caps, const char *data_dir)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	struct statvfs sv;

	json_object_set_int(caps, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
	json_object_set_int(caps, "memory_mb", pages > 0 && psize > 0 ? (int64_t)pages * psize / (1 << 20) : 0);
	json_object_set_int(caps, "disk_gb", data_dir && statvfs(data_dir, &sv) == 0
				     ? (int64_t)((uint64_t)sv.f_bavail * sv.f_frsize >> 30) : 0);
}

/* host.report: {capabilities, environments, load_avg}; only capabilities
 * are filled, as in the reference. */
int cmd_host_report(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	struct sc_config c;

	memset(&c, 0, sizeof(c));
	c.data_dir = w->data;
	c.zfs_pool = w->zfs_pool;
	c.btrfs_root = w->btrfs_root;
	c.runtime = w->runtime;
	*result = json_new_object();
	json_object_set(*result, "capabilities", sc_capabilities(&c));
	return 0;
}
