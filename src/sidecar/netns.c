/* netns.c: run a short piece of code inside a container's network namespace.
 * A forked child of the worker enters /proc/<pid>/ns/net (setns needs root)
 * and calls the function, which connects where the stack's own processes
 * would (the egress probe, a database's readiness). The worker itself never
 * changes namespace: a child is the only way back out, and it costs about a
 * millisecond. The child's line of text and exit code come back over a
 * close-on-exec pipe; a child past its deadline is killed and reaped. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/sys.h"
#include "sidecar/sidecar.h"

/* In the child: report a line on fd and exit with code. */
static void child_report(int fd, int code, const char *msg)
{
	(void)sys_write_all(fd, msg, strlen(msg));
	_exit(code);
}

static void child(int pid, netns_fn fn, void *arg, int rep)
{
	char path[64], msg[NETNS_MSG_MAX];
	int ns, code;

	snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
	if ((ns = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(msg, sizeof(msg), "open %s: %s", path, strerror(errno));
		child_report(rep, NETNS_CANNOT, msg);
	}
	if (setns(ns, CLONE_NEWNET) < 0) {
		snprintf(msg, sizeof(msg), "setns: %s", strerror(errno));
		child_report(rep, NETNS_CANNOT, msg);
	}
	msg[0] = '\0';
	code = fn(arg, msg, sizeof(msg));
	child_report(rep, code, msg);
}

int netns_run(int pid, netns_fn fn, void *arg, int64_t timeout_ms, char *msg, size_t n, struct err *e)
{
	int fds[2], status = 0;
	pid_t kid;
	struct pollfd pfd;
	size_t len = 0;
	ssize_t got;
	int64_t deadline, left;

	msg[0] = '\0';
	if (pid <= 0)
		return err_set(e, "the container has no process");
	if (pipe2(fds, O_CLOEXEC) < 0)
		return err_errno(e, "pipe");
	if ((kid = fork()) < 0) {
		sys_close(fds[0]);
		sys_close(fds[1]);
		return err_errno(e, "fork");
	}
	if (kid == 0) {
		sys_close(fds[0]);
		child(pid, fn, arg, fds[1]);
	}
	sys_close(fds[1]);
	deadline = ev_mono_ms() + timeout_ms;
	pfd.fd = fds[0];
	pfd.events = POLLIN;
	while (len < n - 1 && (left = deadline - ev_mono_ms()) > 0 && poll(&pfd, 1, (int)left) > 0) {
		if ((got = sys_read(fds[0], msg + len, n - 1 - len)) <= 0)
			break;
		len += (size_t)got;
		msg[len] = '\0';
	}
	sys_close(fds[0]);
	kill(kid, SIGKILL);	/* no-op when it already exited */
	while (waitpid(kid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) == NETNS_CANNOT)
		return err_set(e, "%s", *msg ? msg : "the namespace process failed");
	return WEXITSTATUS(status);
}
