/* runtime.c: the container runtimes a service can run under.
 *
 *   runc    Docker's default: the host kernel with namespaces, cgroups, caps.
 *   gvisor  gVisor's runsc (Debian's package): a user-space kernel between
 *           the service and the host, so a kernel bug is not the host's.
 *
 * Docker knows a runtime only when dockerd's configuration names it, so
 * denvd registers runsc itself (`denvd install`, and every start): it adds
 * "runtimes": {"runsc": {...}} to /etc/docker/daemon.json and sends dockerd
 * SIGHUP, which reloads the runtimes without restarting a container.
 * Nothing else in the file is changed; a file that is not a JSON object is
 * left alone and the reason logged.
 *
 * The arguments (measured on a Firecracker VM's 6.18 kernel, no /dev/kvm):
 * --platform=ptrace, as KVM is rarely there inside a VM; --network=host,
 * so that the service uses the container's own network namespace through
 * the host kernel: Docker's internal network, the netns egress probe and
 * the ingress proxy then see exactly what the service sees (gVisor's own
 * network stack would keep its routes where the probe cannot look). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"
#include "base/str.h"
#include "sidecar/sidecar.h"

static const char *const rt_runsc_paths[] = { "/usr/bin/runsc", "/usr/sbin/runsc", "/usr/local/bin/runsc" };
static const char *const rt_runsc_args[] = { "--platform=ptrace", "--network=host" };

const char *rt_runsc_binary(void)
{
	for (size_t i = 0; i < sizeof(rt_runsc_paths) / sizeof(rt_runsc_paths[0]); i++)
		if (access(rt_runsc_paths[i], X_OK) == 0)
			return rt_runsc_paths[i];
	return NULL;
}

int rt_docker_has(const char *name, struct err *e)
{
	struct buf out = BUF_INIT;
	struct json *j = NULL;
	int rc;

	if (dk(&out, SC_DOCKER_QUICK_MS, e, "info", "--format", "{{json .Runtimes}}", NULL) < 0) {
		buf_release(&out);
		return -1;
	}
	rc = json_parse(out.data, out.len, NULL, &j, e);
	buf_release(&out);
	if (rc < 0)
		return err_prefix(e, "docker info's runtimes");
	rc = json_get(j, name) != NULL;
	json_free(j);
	return rc;
}

void rt_capabilities(struct json *caps)
{
	struct json *list = json_new_array();
	struct err e;

	json_array_push(list, json_new_str("runc"));
	if (rt_docker_has(RT_RUNSC_DOCKER_NAME, &e) == 1)
		json_array_push(list, json_new_str("gvisor"));
	json_object_set(caps, "runtimes", list);
}

/* daemon.json with runtimes.runsc set; -1 with e when the file is not ours to change. */
static int add_runsc(const char *path, const char *bin, char **text, struct err *e)
{
	struct json *cfg = NULL, *rts, *rt, *args;

	if (fs_exists(path)) {
		if (json_parse_file(path, RT_DAEMON_JSON_MAX, &cfg, e) < 0)
			return err_prefix(e, "%s (left as it is)", path);
		if (cfg->type != JSON_OBJECT) {
			json_free(cfg);
			return err_set(e, "%s is not a JSON object (left as it is)", path);
		}
	} else {
		cfg = json_new_object();
	}
	if (!(rts = json_get(cfg, "runtimes"))) {
		rts = json_new_object();
		json_object_set(cfg, "runtimes", rts);
	} else if (rts->type != JSON_OBJECT) {
		json_free(cfg);
		return err_set(e, "%s: runtimes is not an object (left as it is)", path);
	}
	rt = json_new_object();
	args = json_new_array();
	json_object_set_str(rt, "path", bin);
	for (size_t i = 0; i < sizeof(rt_runsc_args) / sizeof(rt_runsc_args[0]); i++)
		json_array_push(args, json_new_str(rt_runsc_args[i]));
	json_object_set(rt, "runtimeArgs", args);
	json_object_set(rts, RT_RUNSC_DOCKER_NAME, rt);
	*text = json_to_string(cfg, JSON_PRETTY);
	json_free(cfg);
	return 0;
}

/* SIGHUP to dockerd, then wait for its runtimes to list runsc. */
static int reload_dockerd(const char *pidfile, struct err *e)
{
	struct buf b = BUF_INIT;
	uint64_t pid = 0;
	int64_t until;

	if (fs_read_file(pidfile, &b, 64, e) < 0)
		return err_prefix(e, "finding dockerd to reload");
	str_trim(b.data);
	if (str_to_u64(b.data, &pid) < 0 || pid < 2 || pid > INT32_MAX) {
		buf_release(&b);
		return err_set(e, "%s does not hold a process id", pidfile);
	}
	buf_release(&b);
	if (kill((pid_t)pid, SIGHUP) < 0)
		return err_errno(e, "SIGHUP to dockerd (pid %llu)", (unsigned long long)pid);
	for (until = ev_mono_ms() + RT_RELOAD_WAIT_MS; ev_mono_ms() < until;) {
		struct timespec ts = { 0, RT_RELOAD_POLL_MS * 1000000L };

		if (rt_docker_has(RT_RUNSC_DOCKER_NAME, e) == 1)
			return 0;
		nanosleep(&ts, NULL);
	}
	return err_set(e, "dockerd did not list runtime %s within %d ms of SIGHUP (is %s valid?)",
		       RT_RUNSC_DOCKER_NAME, RT_RELOAD_WAIT_MS, RT_DAEMON_JSON);
}

int rt_register(const char *root, struct err *e)
{
	const char *bin = rt_runsc_binary();
	char path[FS_PATH_MAX], pidfile[FS_PATH_MAX];
	char *text = NULL;
	int has, rc;

	if (!bin)
		return 0;
	/* Under --root (tests) the real dockerd is not asked and not reloaded. */
	if (!root && (has = rt_docker_has(RT_RUNSC_DOCKER_NAME, e)) != 0)
		return has < 0 ? -1 : 0;
	if (fs_path(path, sizeof(path), e, "%s%s", root ? root : "", RT_DAEMON_JSON) < 0 ||
	    fs_path(pidfile, sizeof(pidfile), e, "%s%s", root ? root : "", RT_DOCKER_PIDFILE) < 0)
		return -1;
	if (add_runsc(path, bin, &text, e) < 0)
		return -1;
	{
		char dir[FS_PATH_MAX], *slash;

		str_copy(dir, sizeof(dir), path);
		if ((slash = strrchr(dir, '/')) && slash != dir)
			*slash = '\0';
		rc = fs_mkdir_p(dir, 0755, e);
	}
	if (rc == 0)
		rc = fs_write_atomic(path, text, strlen(text), 0644, e);
	free(text);
	if (rc < 0)
		return err_prefix(e, "registering runsc with Docker");
	if (root)
		return 1;
	log_info("runtime", "registered %s as Docker runtime %s in %s; reloading dockerd (SIGHUP)", bin,
		 RT_RUNSC_DOCKER_NAME, RT_DAEMON_JSON);
	return reload_dockerd(pidfile, e) < 0 ? -1 : 1;
}

/* The runtime a service runs under: its own, else the host's default. */
static const char *runtime_of(const struct json *svc, const char *host_default)
{
	const char *rt = json_get_str(svc, "runtime");

	return rt && *rt ? rt : host_default && *host_default ? host_default : "runc";
}

int rt_prepare(const struct wk *w, const struct json *spec, struct json *order, struct json *res, struct err *e)
{
	struct json *ev = json_new_object();
	bool gvisor = false;
	int has;

	for (size_t i = 0; i < json_len(order); i++) {
		struct json *svc = json_at(order, i);
		char rt[16];

		/* A copy: setting "runtime" below frees the string it came from. */
		if (str_copy(rt, sizeof(rt), runtime_of(svc, w->runtime)) < 0 || !rt_name_ok(rt)) {
			json_free(ev);
			return err_set(e, "service \"%s\": runtime \"%s\" is not one this denvd knows (runc, gvisor)",
				       json_get_str(svc, "name"), runtime_of(svc, w->runtime));
		}
		json_object_set_str(svc, "runtime", rt);
		json_object_set_str(ev, json_get_str(svc, "name"), rt);
		gvisor |= str_eq(rt, "gvisor");
	}
	if (gvisor && fc_active(json_get(spec, "clock"))) {
		json_free(ev);
		/* fc_check reads the service's maps from the host, which under
		 * gVisor show the sandbox, not the service. */
		return err_set(e, "x-denv.clock cannot be checked under runtime gvisor yet: use clock: real or runtime runc");
	}
	if (gvisor && (has = rt_docker_has(RT_RUNSC_DOCKER_NAME, e)) != 1) {
		json_free(ev);
		if (has < 0)
			return -1;
		return err_set(e, "runtime gvisor: Docker on this host has no runtime %s (apt-get install runsc, "
			       "then restart denvd, which registers it)", RT_RUNSC_DOCKER_NAME);
	}
	json_object_set(res, "runtime", ev);
	return 0;
}

void rt_run_args(const struct json *svc, struct argv *a)
{
	if (!str_eq(json_get_str(svc, "runtime"), "gvisor"))
		return;
	av_add(a, "--runtime");
	av_add(a, RT_RUNSC_DOCKER_NAME);
}

bool rt_name_ok(const char *name)
{
	return str_eq(name, "runc") || str_eq(name, "gvisor");
}

void rt_root_exec_args(bool gvisor, struct argv *a)
{
	av_add(a, "exec");
	av_add(a, "-u");
	av_add(a, "0");
	if (gvisor)
		av_add(a, "--privileged");
}
