/* ingress_ctl.c: starting and stopping the ingress proxies (ingress.c) of
 * egress-denied environments: from the create worker (ig_publish), from
 * env.destroy and failed creates (ig_stop_env), and from the agent at
 * start-up (ig_restore_all). A proxy is found by its pidfile and believed
 * only when /proc/<pid>/cmdline is "denvd __ingress --data DATA --env ENV
 * --service SVC": a pid reused by another process, or the proxy of another
 * denvd's data directory, is never signalled. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"
#include "base/proc.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"

int ig_files_dir(const char *data, const char *env, char *out, struct err *e)
{
	return fs_path(out, FS_PATH_MAX, e, "%s/envs/%s/ingress", data, env);
}

/* <data>/envs/<env>/ingress/<svc><ext> into out (FS_PATH_MAX bytes). */
static int file_of(const char *data, const char *env, const char *svc, const char *ext, char *out, struct err *e)
{
	return fs_path(out, FS_PATH_MAX, e, "%s/envs/%s/ingress/%s%s", data, env, svc, ext);
}

/* Does pid run "__ingress --data data --env env --service svc"? */
bool ig_pid_runs(int pid, const char *verb_name, const char *data, const char *env, const char *svc)
{
	char path[64], buf[SC_INGRESS_CMDLINE_MAX];
	const char *args[64];
	size_t n = 0, len = 0;
	bool verb = false, d_ok = false, e_ok = false, s_ok = false;
	int fd;
	ssize_t r;

	if (pid <= 1)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	while (len < sizeof(buf) - 1 && (r = sys_read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)r;
	sys_close(fd);
	buf[len] = '\0';
	for (size_t i = 0; i < len && n < 64; i += strlen(buf + i) + 1)
		args[n++] = buf + i;
	for (size_t i = 0; i < n; i++) {
		verb |= str_eq(args[i], verb_name);
		if (i + 1 < n && str_eq(args[i], "--data"))
			d_ok = str_eq(args[i + 1], data);
		if (i + 1 < n && str_eq(args[i], "--env"))
			e_ok = str_eq(args[i + 1], env);
		if (i + 1 < n && str_eq(args[i], "--service"))
			s_ok = str_eq(args[i + 1], svc);
	}
	return verb && d_ok && (!env || e_ok) && (!svc || s_ok);
}

static bool pid_is_ours(int pid, const char *data, const char *env, const char *svc)
{
	return ig_pid_runs(pid, "__ingress", data, env, svc);
}

int ig_read_pid(const char *pidfile)
{
	struct buf b = BUF_INIT;
	struct err e;
	int pid = 0;

	if (fs_read_file(pidfile, &b, 64, &e) == 0 && b.data) {
		char *s = str_trim(b.data);

		if (str_to_int(s, &pid) < 0)
			pid = 0;
	}
	buf_release(&b);
	return pid;
}

static void stop_one(const char *data, const char *env, const char *svc)
{
	char pidfile[FS_PATH_MAX];
	int pid;
	struct err e;

	if (file_of(data, env, svc, ".pid", pidfile, &e) < 0)
		return;	/* no proxy can have written it */
	pid = ig_read_pid(pidfile);
	if (pid > 0 && pid_is_ours(pid, data, env, svc)) {
		int64_t deadline = ev_mono_ms() + IG_STOP_MS;

		kill(pid, SIGTERM);
		while (pid_is_ours(pid, data, env, svc) && ev_mono_ms() < deadline)
			usleep(20000);
		if (pid_is_ours(pid, data, env, svc)) {
			kill(pid, SIGKILL);
			for (int i = 0; i < 50 && pid_is_ours(pid, data, env, svc); i++)
				usleep(20000);
		}
		log_debug("ingress", "%s/%s: proxy %d stopped", env, svc, pid);
	}
	unlink(pidfile);
}

/* Call fn for each <svc>.<ext> in env's ingress dir. */
static void each_service(const char *data, const char *env, const char *ext,
			 void (*fn)(const char *data, const char *env, const char *svc, void *arg), void *arg)
{
	char dir[FS_PATH_MAX];
	DIR *d;
	struct dirent *de;
	struct err e;

	if (ig_files_dir(data, env, dir, &e) < 0 || !(d = opendir(dir)))
		return;
	while ((de = readdir(d))) {
		char svc[SC_ID_MAX];
		size_t n = strlen(de->d_name), x = strlen(ext);

		if (n <= x || n - x >= sizeof(svc) || strcmp(de->d_name + n - x, ext) != 0)
			continue;
		memcpy(svc, de->d_name, n - x);
		svc[n - x] = '\0';
		if (sc_safe_id(svc))
			fn(data, env, svc, arg);
	}
	closedir(d);
}

static void stop_cb(const char *data, const char *env, const char *svc, void *arg)
{
	(void)arg;
	stop_one(data, env, svc);
}

void ig_stop_env(const char *data, const char *env)
{
	each_service(data, env, ".pid", stop_cb, NULL);
}

/* 0 started (or already running), -2 a host port was taken (e), -1 e. */
static int start_one(const char *data, const char *env, const char *svc, struct err *e)
{
	char pidfile[FS_PATH_MAX], line[SC_DOCKER_LINE_MAX];
	const char *argv[10];
	struct proc_spec s;
	struct proc_result r;
	int pid, rc;

	if (file_of(data, env, svc, ".pid", pidfile, e) < 0)
		return -1;
	if ((pid = ig_read_pid(pidfile)) > 0 && pid_is_ours(pid, data, env, svc))
		return 0;
	argv[0] = "/proc/self/exe";
	argv[1] = "__ingress";
	argv[2] = "--data";
	argv[3] = data;
	argv[4] = "--env";
	argv[5] = env;
	argv[6] = "--service";
	argv[7] = svc;
	argv[8] = NULL;
	proc_spec_init(&s, argv);
	s.timeout_ms = IG_START_MS;
	if (proc_run(&s, NULL, 0, &r, e) < 0)
		return err_prefix(e, "ingress proxy of %s", svc);
	if (r.exit_code == 0) {
		proc_result_release(&r);
		return 0;
	}
	dk_first_line(r.err.data ? r.err.data : "", line, sizeof(line));
	rc = r.exit_code == IG_EXIT_BIND ? -2 : -1;
	if (r.timed_out)
		err_set(e, "ingress proxy of %s: not ready within %d s", svc, IG_START_MS / 1000);
	else
		err_set(e, "ingress proxy of %s: %s", svc, *line ? line : "failed");
	proc_result_release(&r);
	return rc;
}

int ig_start(const char *data, const char *env, const char *svc, struct err *e)
{
	return start_one(data, env, svc, e) < 0 ? -1 : 0;
}

/* A free port on 127.0.0.1 right now (the kernel's choice), or -1. */
static int free_port(struct err *e)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd < 0)
		return err_errno(e, "socket");
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
		port = ntohs(sa.sin_port);
	else
		err_errno(e, "choosing a port on 127.0.0.1");
	sys_close(fd);
	return port;
}

static bool config_load(const char *path, struct ig_config *c)
{
	struct buf b = BUF_INIT;
	struct err e;
	bool ok = fs_read_file(path, &b, IG_CONFIG_MAX, &e) == 0 && ig_config_parse(b.data ? b.data : "", b.len, c, &e) == 0;

	buf_release(&b);
	return ok;
}

static int publish_one(const char *data, const char *env, const char *project, const struct json *svc,
		       struct json *endpoints, struct json *ingress, struct err *e)
{
	const char *name = json_get_str(svc, "name");
	const struct json *ports = json_get(svc, "ports");
	struct ig_config c, prev;
	char path[FS_PATH_MAX], key[SC_DOCKER_NAME_MAX], addr[64], cport[16];
	struct json *mine;
	bool have_prev;
	int rc = -2;

	if (!sc_safe_id(name))
		return err_set(e, "service name \"%s\" cannot have a proxy", name ? name : "");
	if (json_len(ports) > IG_MAX_PORTS)
		return err_set(e, "service \"%s\": more than %d ports", name, IG_MAX_PORTS);
	memset(&c, 0, sizeof(c));
	str_copy(c.env, sizeof(c.env), env);
	str_copy(c.service, sizeof(c.service), name);
	dk_container(project, name, c.container, sizeof(c.container));
	for (size_t k = 0; k < json_len(ports); k++) {
		const struct json *p = json_at(ports, k);

		if (p->type != JSON_STRING || ig_port_parse(p->u.str.s, &c.ports[k].container) < 0)
			return err_set(e, "service \"%s\": port \"%s\" is not a port number", name,
				       p->type == JSON_STRING ? p->u.str.s : json_type_name(p->type));
	}
	c.nports = json_len(ports);
	if (file_of(data, env, name, ".json", path, e) < 0)
		return -1;
	/* The host ports this service had before (a rollback, a re-delivered create) come first. */
	have_prev = config_load(path, &prev);
	stop_one(data, env, name);
	for (int t = 0; t < IG_PORT_TRIES && rc == -2; t++) {
		char *text;

		for (size_t k = 0; k < c.nports; k++) {
			c.ports[k].host = 0;
			for (size_t j = 0; t == 0 && have_prev && j < prev.nports; j++)
				if (prev.ports[j].container == c.ports[k].container)
					c.ports[k].host = prev.ports[j].host;
			if (!c.ports[k].host && (c.ports[k].host = free_port(e)) < 0)
				return -1;
		}
		text = ig_config_format(&c);
		rc = fs_write_atomic(path, text, strlen(text), 0600, e);
		free(text);
		if (rc < 0)
			return -1;
		if ((rc = start_one(data, env, name, e)) == -2)
			wk_progress("%s; choosing another port", e->msg);
	}
	if (rc < 0)
		return -1;
	mine = json_new_object();
	for (size_t k = 0; k < c.nports; k++) {
		snprintf(addr, sizeof(addr), "127.0.0.1:%d", c.ports[k].host);
		snprintf(cport, sizeof(cport), "%d", c.ports[k].container);
		if (k == 0)
			str_copy(key, sizeof(key), name);
		else
			snprintf(key, sizeof(key), "%s:%s", name, json_at(ports, k)->u.str.s);
		json_object_set_str(endpoints, key, addr);
		json_object_set_str(mine, cport, addr);
	}
	json_object_set(ingress, name, mine);
	return 0;
}

/* Configs of services that no longer publish anything go. */
static void drop_stale(const char *data, const char *env, const char *svc, void *arg)
{
	const struct json *ingress = arg;
	char path[FS_PATH_MAX];
	struct err e;

	if (json_get(ingress, svc))
		return;
	stop_one(data, env, svc);
	if (file_of(data, env, svc, ".json", path, &e) == 0)
		unlink(path);
}

int ig_publish(const char *data, const char *env, const char *project, const struct json *order,
	       struct json *endpoints, struct json *ingress, struct err *e)
{
	char dir[FS_PATH_MAX];

	if (ig_files_dir(data, env, dir, e) < 0)
		return -1;
	for (size_t i = 0; i < json_len(order); i++) {
		const struct json *s = json_at(order, i);

		if (json_len(json_get(s, "ports")) == 0)
			continue;
		if (fs_mkdir_p(dir, 0700, e) < 0)
			return -1;
		if (publish_one(data, env, project, s, endpoints, ingress, e) < 0)
			return -1;
	}
	each_service(data, env, ".json", drop_stale, ingress);
	return 0;
}

struct restore {
	int started, failed;
};

static void restore_cb(const char *data, const char *env, const char *svc, void *arg)
{
	struct restore *r = arg;
	struct ig_config c;
	struct engine_ctr ctr;
	char path[FS_PATH_MAX];
	struct err e;

	if (file_of(data, env, svc, ".json", path, &e) < 0 || !config_load(path, &c))
		return;
	err_clear(&e);
	if (engine_container(c.container, &ctr, &e) <= 0 || !str_eq(ctr.status, "running"))
		return;
	if (start_one(data, env, svc, &e) < 0) {
		r->failed++;
		log_warn("denvd", "env %s: %s", env, e.msg);
		return;
	}
	r->started++;
}

void ig_restore_all(const char *data)
{
	char dir[FS_PATH_MAX];
	DIR *d;
	struct dirent *de;
	struct restore r = { 0, 0 };
	struct err e;

	if (fs_path(dir, sizeof(dir), &e, "%s/envs", data) < 0 || !(d = opendir(dir)))
		return;
	while ((de = readdir(d)))
		if (sc_safe_id(de->d_name))
			each_service(data, de->d_name, ".json", restore_cb, &r);
	closedir(d);
	if (r.started || r.failed)
		log_info("denvd", "ingress proxies: %d running, %d failed to start", r.started, r.failed);
}
