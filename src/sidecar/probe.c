/* probe.c: the egress probe (protections.md 5, DESIGN.md "Sidecar and
 * Docker"). Preferred: a child of the worker (netns.c) enters a running container's
 * network namespace (setns on /proc/<pid>/ns/net) and tries a TCP connection
 * to the probe URL itself, 4 s at most: no extra container, and it sees
 * exactly what the stack sees. Fallback (not root, setns refused, a host name
 * in the URL, or --probe-mode container): a probe container on the stack's
 * network runs wget against the URL. The result says which way ran. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/proc.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"

enum { PROBE_BLOCKED = 0, PROBE_REACHED = 10 };

struct target {
	char host[256];
	char path[1024];
	uint16_t port;
	struct sockaddr_storage sa;
	socklen_t salen;
};

/* http://IP[:port][/path] with an IP literal; -1 for anything else. */
static int parse_target(const char *url, struct target *t)
{
	const char *p, *slash, *colon;
	size_t hl;
	int port = 80;

	if (!str_has_prefix(url, "http://"))
		return -1;
	p = url + 7;
	slash = strchr(p, '/');
	hl = slash ? (size_t)(slash - p) : strlen(p);
	str_copy(t->path, sizeof(t->path), slash ? slash : "/");
	if (hl == 0 || hl >= sizeof(t->host))
		return -1;
	memcpy(t->host, p, hl);
	t->host[hl] = '\0';
	if (t->host[0] != '[' && (colon = strrchr(t->host, ':'))) {
		*(char *)colon = '\0';
		if (str_to_int(colon + 1, &port) < 0 || port <= 0 || port > 65535)
			return -1;
	}
	t->port = (uint16_t)port;
	memset(&t->sa, 0, sizeof(t->sa));
	{
		struct sockaddr_in *in = (struct sockaddr_in *)&t->sa;

		if (inet_pton(AF_INET, t->host, &in->sin_addr) != 1)
			return -1;
		in->sin_family = AF_INET;
		in->sin_port = htons(t->port);
		t->salen = sizeof(*in);
	}
	return 0;
}

/* Runs in netns_run's child, inside the stack's namespace: connect, send a
 * request. The exit code is the finding; msg says what happened. */
static int probe_child(void *arg, char *msg, size_t n)
{
	const struct target *t = arg;
	struct pollfd pfd;
	int s, rc, soerr = 0;
	socklen_t sl = sizeof(soerr);

	if ((s = socket(t->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0) {
		snprintf(msg, n, "socket: %s", strerror(errno));
		return NETNS_CANNOT;
	}
	rc = connect(s, (const struct sockaddr *)&t->sa, t->salen);
	if (rc < 0 && errno != EINPROGRESS) {
		snprintf(msg, n, "connect %s:%u: %s", t->host, t->port, strerror(errno));
		return PROBE_BLOCKED;
	}
	pfd.fd = s;
	pfd.events = POLLOUT;
	if (rc < 0 && poll(&pfd, 1, SC_PROBE_TIMEOUT_MS) <= 0) {
		snprintf(msg, n, "connect %s:%u: no answer within %d s", t->host, t->port, SC_PROBE_TIMEOUT_MS / 1000);
		return PROBE_BLOCKED;
	}
	getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &sl);
	if (soerr) {
		snprintf(msg, n, "connect %s:%u: %s", t->host, t->port, strerror(soerr));
		return PROBE_BLOCKED;
	}
	/* A completed TCP handshake means packets left the stack: that is the finding. */
	snprintf(msg, n, "connected to %s:%u from inside the stack's network", t->host, t->port);
	{
		char req[1400];
		int len = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", t->path, t->host);

		if (len > 0 && (size_t)len < sizeof(req))
			(void)send(s, req, (size_t)len, MSG_NOSIGNAL);
	}
	return PROBE_REACHED;
}

/* 0 with r filled, or -1 when this way cannot run (e says why). */
static int probe_netns(const char *container, struct target *t, struct probe_result *r, struct err *e)
{
	struct engine_ctr c;
	char msg[NETNS_MSG_MAX];
	int code;

	if (engine_container(container, &c, e) <= 0 || c.pid <= 0)
		return e->msg[0] ? -1 : err_set(e, "container %s has no process", container);
	if ((code = netns_run(c.pid, probe_child, t, SC_PROBE_TIMEOUT_MS + 2000, msg, sizeof(msg), e)) < 0)
		return -1;
	r->reached = code == PROBE_REACHED;
	str_copy(r->method, sizeof(r->method), "netns");
	str_copy(r->detail, sizeof(r->detail), msg);
	return 0;
}

static int probe_container(struct wk *w, const char *project, const char *network, struct probe_result *r,
			   struct err *e)
{
	char name[SC_DOCKER_NAME_MAX], label[SC_DOCKER_NAME_MAX], label2[SC_DOCKER_NAME_MAX];
	struct argv argv;
	struct proc_spec s;
	struct proc_result res;
	char line[SC_DOCKER_LINE_MAX];
	int rc = 0;

	snprintf(name, sizeof(name), "%s-egress-probe", project);
	snprintf(label, sizeof(label), "com.docker.compose.project=%s", project);
	snprintf(label2, sizeof(label2), "ai.denv.env=%s", w->env);
	{
		struct err e2;

		dk(NULL, SC_DOCKER_QUICK_MS, &e2, "rm", "-f", name, NULL);
	}
	av_init(&argv);
	av_addl(&argv, "docker", "run", "--rm", "--name", name, "--network", network, "--label", label, "--label",
		label2, "--memory", "64m", "--pids-limit", "64", w->probe_image, "wget", "-q", "-O", "/dev/null",
		w->probe_url, NULL);
	proc_spec_init(&s, (const char *const *)argv.v);
	s.timeout_ms = SC_PROBE_TIMEOUT_MS + SC_PROBE_CONTAINER_SLACK_MS;
	s.out_max = s.err_max = 16384;
	rc = proc_run(&s, NULL, 0, &res, e);
	av_release(&argv);
	if (rc < 0)
		return -1;
	dk_first_line(res.err.data, line, sizeof(line));
	str_copy(r->method, sizeof(r->method), "container");
	if (res.timed_out) {
		r->reached = false;
		snprintf(r->detail, sizeof(r->detail), "wget %s: no answer within %d s", w->probe_url,
			 SC_PROBE_TIMEOUT_MS / 1000);
	} else if (res.exit_code == 125 || res.exit_code == 126 || res.exit_code == 127) {
		rc = err_set(e, "%s", *line ? line : "docker run failed");	/* Docker's own failure */
	} else if (res.exit_code == 0 || strstr(res.err.data, "server returned error")) {
		r->reached = true;	/* an HTTP answer of any status came back */
		snprintf(r->detail, sizeof(r->detail), "wget %s answered", w->probe_url);
	} else {
		r->reached = false;
		snprintf(r->detail, sizeof(r->detail), "%s", *line ? line : "wget failed");
	}
	proc_result_release(&res);
	{
		struct err e2;

		dk(NULL, SC_DOCKER_QUICK_MS, &e2, "rm", "-f", name, NULL);
	}
	return rc;
}

int probe_egress(struct wk *w, const char *project, const char *network, const char *first_container,
		 struct probe_result *r, struct err *e)
{
	struct target t;
	bool netns_ok = !str_eq(w->probe_mode, "container") && geteuid() == 0 &&
			parse_target(w->probe_url, &t) == 0;

	memset(r, 0, sizeof(*r));
	if (netns_ok) {
		if (probe_netns(first_container, &t, r, e) == 0)
			return 0;
		if (str_eq(w->probe_mode, "netns"))
			return err_prefix(e, "egress probe failed to run");
		wk_progress("egress probe: entering the network namespace failed (%s); using a probe container",
			    e->msg);
		err_clear(e);
	} else if (str_eq(w->probe_mode, "netns")) {
		return err_set(e, "egress probe failed to run: netns mode needs root and an http://IP URL");
	}
	if (probe_container(w, project, network, r, e) < 0)
		return err_prefix(e, "egress probe failed to run");
	return 0;
}
