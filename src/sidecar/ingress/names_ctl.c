/* names_ctl.c: denvd's side of the name gateway (names.c): its flags
 * checked, the process started at denvd's start (one an earlier denvd left
 * is stopped first: its flags may have changed) and again from the sweep
 * when it is gone, and what the hello says of it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"
#include "base/proc.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "spec/spec.h"

int nm_files_dir(const char *data, char *out, struct err *e)
{
	if (fs_path(out, FS_PATH_MAX, e, "%s/names", data) < 0)
		return -1;
	return fs_mkdir_p(out, 0700, e);
}

int nm_listen_parse(const char *addr, char *host, size_t n, int *port)
{
	const char *colon = addr ? strrchr(addr, ':') : NULL;
	size_t hl;

	if (!colon || ig_port_parse(colon + 1, port) < 0)
		return -1;
	hl = (size_t)(colon - addr);
	if (hl == 0)
		return str_fmt(host, n, "0.0.0.0");
	if (hl >= n)
		return -1;
	memcpy(host, addr, hl);
	host[hl] = '\0';
	return 0;
}

static int cert_days(const struct sc_config *c)
{
	char *end;
	long d = strtol(c->ingress_cert_days ? c->ingress_cert_days : "", &end, 10);

	return *end || d < 1 || d > NT_DAYS_MAX ? -1 : (int)d;
}

int nm_config_check(const struct sc_config *c, struct err *e)
{
	char host[64];
	int port;

	if (!c->ingress_domain)
		return 0;
	if (!spec_ingress_domain_ok(c->ingress_domain))
		return err_set(e, "--ingress-domain %s: not a DNS name of two labels or more, in lower case",
			       c->ingress_domain);
	if (nm_listen_parse(c->ingress_listen, host, sizeof(host), &port) < 0)
		return err_set(e, "--ingress-listen %s: not HOST:PORT", c->ingress_listen);
	if (!c->ingress_ca_cert != !c->ingress_ca_key)
		return err_set(e, "--ingress-ca-cert and --ingress-ca-key go together");
	if (cert_days(c) < 0)
		return err_set(e, "--ingress-cert-days %s: a whole number of days, 1 to %d", c->ingress_cert_days,
			       NT_DAYS_MAX);
	return 0;
}

/* The pid in names.pid when that process is a gateway of this data dir.
 * (The sweep asks: nothing is made here.) */
static int running_pid(const char *data)
{
	char pidfile[FS_PATH_MAX];
	struct err e;
	int pid;

	if (fs_path(pidfile, sizeof(pidfile), &e, "%s/names/names.pid", data) < 0)
		return 0;
	pid = ig_read_pid(pidfile);
	return ig_pid_runs(pid, "__names", data, NULL, NULL) ? pid : 0;
}

static void stop_running(const char *data)
{
	int pid = running_pid(data);

	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	for (int waited = 0; waited < IG_STOP_MS && kill(pid, 0) == 0; waited += 50)
		usleep(50 * 1000);
	kill(pid, SIGKILL);
}

int nm_start(const struct sc_config *c, struct err *e)
{
	char days[16], line[SC_DOCKER_LINE_MAX];
	struct argv argv;
	struct proc_spec s;
	struct proc_result r;
	int rc;

	if (!c->ingress_domain)
		return 0;
	stop_running(c->data_dir);
	snprintf(days, sizeof(days), "%d", cert_days(c));
	av_init(&argv);
	av_addl(&argv, "/proc/self/exe", "__names", "--data", c->data_dir, "--domain", c->ingress_domain, "--listen",
		c->ingress_listen, "--cert-days", days, NULL);
	if (c->ingress_ca_cert)
		av_addl(&argv, "--ca-cert", c->ingress_ca_cert, "--ca-key", c->ingress_ca_key, NULL);
	proc_spec_init(&s, (const char *const *)argv.v);
	s.timeout_ms = IG_START_MS;
	rc = proc_run(&s, NULL, 0, &r, e);
	av_release(&argv);
	if (rc < 0)
		return err_prefix(e, "ingress names");
	rc = r.exit_code == 0 ? 0 : -1;
	if (rc < 0) {
		dk_first_line(r.err.data ? r.err.data : "", line, sizeof(line));
		err_set(e, "ingress names: %s", r.timed_out ? "the gateway did not start in time" : *line ? line : "failed");
	}
	proc_result_release(&r);
	return rc;
}

void nm_keep(const struct sc_config *c)
{
	struct err e;

	if (!c->ingress_domain || running_pid(c->data_dir) > 0)
		return;
	log_warn("names", "the name gateway is not running; starting it again");
	if (nm_start(c, &e) < 0)
		log_error("names", "%s", e.msg);
}

struct json *nm_capabilities(const struct sc_config *c)
{
	struct json *j;
	char host[64];
	int port;

	if (!c->ingress_domain || nm_listen_parse(c->ingress_listen, host, sizeof(host), &port) < 0)
		return NULL;
	j = json_new_object();
	json_object_set_str(j, "domain", c->ingress_domain);
	json_object_set_int(j, "port", port);
	json_object_set_str(j, "issuer", c->ingress_ca_cert ? "ca" : "self-signed");
	return j;
}
