/* engine_exec.c: env.exec's command through dockerd's Engine API, not the
 * docker CLI. The CLI's own start is a fifth of a short exec's time here
 * (about 10 of 57 ms), and env.exec is what a rollout does hundreds of
 * times. Three requests on the socket:
 *   POST /containers/<c>/exec     create, with stdout and stderr attached
 *   POST /exec/<id>/start         the connection is hijacked: after the
 *                                 response head comes the multiplexed output
 *                                 (mux.c) until the process ends and dockerd
 *                                 closes the connection
 *   GET  /exec/<id>/json          the exit code; on a timeout the process's
 *                                 host pid, which is then killed
 * Anything refused before the start (no socket, DOCKER_HOST elsewhere, the
 * container paused or gone) is "use the CLI": it behaves as it always has
 * and its messages are the ones users know. Once the start request is out,
 * the command may be running, so a failure is reported and never retried. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/clock.h"
#include "base/enc.h"
#include "base/log.h"
#include "base/str.h"
#include "base/sys.h"
#include "http/http.h"
#include "http/stream.h"
#include "sidecar/sidecar.h"

/* The exec's id, or 0 when the API will not create it (the CLI then). */
static int create(const char *container, const char *const *argv, const struct engine_tty *t, char *id, size_t n,
		  struct err *e)
{
	struct json *body = json_new_object(), *cmd = json_new_array(), *res = NULL;
	char path[SC_RUN_PATH_MAX];
	int status = 0, rc;

	for (size_t i = 0; argv[i]; i++)
		json_array_push(cmd, json_new_str(argv[i]));
	json_object_set_bool(body, "AttachStdin", t && t->stdin_open);
	json_object_set_bool(body, "AttachStdout", true);
	json_object_set_bool(body, "AttachStderr", true);
	json_object_set_bool(body, "Tty", t && t->tty);
	if (t && t->tty && t->rows > 0 && t->cols > 0) {
		struct json *size = json_new_array();

		json_array_push(size, json_new_int(t->rows));
		json_array_push(size, json_new_int(t->cols));
		json_object_set(body, "ConsoleSize", size);
	}
	json_object_set(body, "Cmd", cmd);
	if (str_fmt(path, sizeof(path), "/containers/%s/exec", container) < 0) {
		json_free(body);
		return 0;	/* a name the API path cannot carry: the CLI runs it */
	}
	rc = engine_api("POST", path, body, (int)SC_DOCKER_QUICK_MS, &status, &res, e);
	json_free(body);
	if (rc < 0 || status != 201) {
		json_free(res);
		return 0;
	}
	str_copy(id, n, json_get_str(res, "Id") ? json_get_str(res, "Id") : "");
	json_free(res);
	return *id ? 1 : 0;
}

/* Read the start response head from s; leftover body bytes go to m. */
static int read_head(struct stream *s, int64_t deadline, struct mux *m, struct err *e)
{
	char head[SC_EXEC_HEAD_MAX];
	size_t len = 0;

	for (;;) {
		struct http_response_head h;
		ssize_t n = stream_read(s, head + len, sizeof(head) - len);
		int hl;

		if (n == 0)
			return err_set(e, "exec start: connection closed before the response");
		if (n < 0) {
			if (errno != EAGAIN)
				return err_errno(e, "exec start");
			if (!ev_wait_fd(stream_fd(s), EV_READ, deadline))
				return err_set(e, "exec start: no response");
			continue;
		}
		len += (size_t)n;
		hl = http_parse_response_head(head, len, &h);
		if (hl == 0 && len == sizeof(head))
			return err_set(e, "exec start: response head too large");
		if (hl == 0)
			continue;
		if (hl < 0)
			return err_set(e, "exec start: malformed response");
		if (h.status != 101 && h.status != 200)
			return err_set(e, "exec start: HTTP %d", h.status);
		return mux_feed(m, head + hl, len - (size_t)hl, e);
	}
}

/* 1 fd ready, 2 ctl ready (checked second: output goes first), 0 the deadline. */
static int wait_two(int fd, int ctl, int64_t deadline)
{
	struct pollfd p[2] = { { fd, POLLIN, 0 }, { ctl, POLLIN, 0 } };

	for (;;) {
		int64_t left = deadline - ev_mono_ms();
		int n;

		if (left <= 0)
			return 0;
		n = poll(p, 2, left > INT32_MAX ? INT32_MAX : (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? 1 : 0;	/* an error: the next read reports it */
		return p[0].revents ? 1 : 2;
	}
}

static int write_all_wait(struct stream *s, const char *p, size_t n, struct err *e)
{
	while (n > 0) {
		ssize_t w = stream_write(s, p, n);

		if (w > 0) {
			p += w;
			n -= (size_t)w;
		} else if (errno != EAGAIN || !ev_wait_fd(stream_fd(s), EV_WRITE, ev_mono_ms() + SC_DOCKER_QUICK_MS)) {
			return err_errno(e, "exec stdin");
		}
	}
	return 0;
}

static void resize(const char *id, int rows, int cols)
{
	char path[SC_RUN_PATH_MAX];
	int status = 0;
	struct err e;

	if (str_fmt(path, sizeof(path), "/exec/%s/resize?h=%d&w=%d", id, rows, cols) < 0)
		return;	/* no such exec id: ids are 64 hex digits */
	if (engine_api("POST", path, NULL, (int)SC_DOCKER_QUICK_MS, &status, NULL, &e) < 0 || status / 100 != 2)
		log_debug("worker", "exec %s: resize: %s", id, e.msg);
}

/* One control line (without its '\n'). */
static int ctl_line(const char *id, struct stream *s, const char *l, size_t n, struct engine_exec *r, struct err *e)
{
	int pid = 0, rows = 0, cols = 0;
	bool running = false;
	struct buf raw = BUF_INIT;
	struct err ie;
	int rc = 0;

	switch (n ? l[0] : 0) {
	case SC_CTL_STDIN:
		if (enc_base64_decode(&raw, l + 1, n - 1, ENC_BASE64, &ie) == 0 && raw.len && !r->stdin_closed)
			rc = write_all_wait(s, raw.data, raw.len, e);
		buf_release(&raw);
		return rc;
	case SC_CTL_EOF:
		/* dockerd ends the process's stdin when its side is half-closed. */
		if (!r->stdin_closed && shutdown(stream_fd(s), SHUT_WR) < 0)
			log_debug("worker", "exec %s: shutdown: %s", id, strerror(errno));
		r->stdin_closed = true;
		return 0;
	case SC_CTL_RESIZE:
		if (sscanf(l + 1, "%d %d", &rows, &cols) == 2 && rows > 0 && cols > 0 && rows <= 10000 && cols <= 10000)
			resize(id, rows, cols);
		return 0;
	case SC_CTL_KILL:
		/* Right after the start dockerd may not know the pid yet: ask
		 * again, a bounded number of times, before giving up on it. */
		for (int i = 0; i < SC_CTL_KILL_TRIES; i++) {
			if (engine_exec_state(id, &pid, &running, &ie) == 0 && running && pid > 1) {
				sc_kill_tree((pid_t)pid, SIGKILL);
				break;
			}
			(void)ev_wait_fd(-1, 0, ev_mono_ms() + SC_CTL_KILL_WAIT_MS);
		}
		r->killed = true;
		return 0;
	}
	return 0;
}

/* Read what the agent wrote on the control pipe and act on whole lines. */
static int ctl_input(const char *id, struct stream *s, const struct engine_tty *t, struct engine_exec *r,
		     struct err *e)
{
	char tmp[8192], *nl;
	ssize_t n = sys_read(t->ctl_fd, tmp, sizeof(tmp));

	/* No writer any more (the agent went away): the command runs on, and
	 * the FIFO, which would now poll readable for ever, is not watched. */
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		r->ctl_gone = true;
		return 0;
	}
	if (n > 0 && buf_add(&r->ctl, tmp, (size_t)n) < 0) {
		log_warn("worker", "exec %s: a control line over %zu bytes dropped", id, SC_CTL_LINE_MAX);
		buf_reset(&r->ctl);
	}
	while ((nl = memchr(r->ctl.data, '\n', r->ctl.len))) {
		size_t len = (size_t)(nl - r->ctl.data);
		int rc = ctl_line(id, s, r->ctl.data, len, r, e);

		buf_consume(&r->ctl, len + 1);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* Send the start request and demultiplex the output until EOF or the
 * deadline; with t, also carry t's control lines to the process. */
/* The sooner of the deadline and the next liveness check. */
static int64_t slice_end(int64_t deadline)
{
	int64_t next = ev_mono_ms() + SC_EXEC_LIVENESS_MS;

	return next < deadline ? next : deadline;
}

/* A wait ran out: at the deadline the command timed out; before it, end
 * the wait only when the container no longer runs. true: stop reading. */
static bool quiet_ends(const char *container, int64_t deadline, struct engine_exec *r)
{
	struct engine_ctr c;
	struct err ce = {0};
	int rc;

	if (ev_mono_ms() >= deadline) {
		r->timed_out = true;
		return true;
	}
	/* An error asking is not an answer: keep waiting. A paused one is there. */
	rc = engine_container(container, &c, &ce);
	if (rc == 0 || (rc == 1 && (str_eq(c.status, "exited") || str_eq(c.status, "dead")))) {
		r->container_ended = true;
		r->exit_code = rc == 1 ? c.exit_code : -1;
		return true;
	}
	return false;
}

static int attach(const char *container, const char *id, int64_t deadline, const struct engine_tty *t,
		  struct engine_exec *r, struct err *e)
{
	const char *body = t && t->tty ? "{\"Detach\":false,\"Tty\":true}" : "{\"Detach\":false,\"Tty\":false}";
	struct stream *s = NULL;
	struct buf req = BUF_INIT;
	char chunk[SC_EXEC_READ_CHUNK];
	size_t off = 0;
	int rc = -1;

	if (stream_dial_unix(engine_socket(), (int)SC_DOCKER_QUICK_MS, &s, e) < 0)
		return -1;
	buf_addf(&req, "POST /exec/%s/start HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\n"
		 "Content-Length: %zu\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n%s", id, strlen(body), body);
	while (off < req.len) {
		ssize_t w = stream_write(s, req.data + off, req.len - off);

		if (w > 0)
			off += (size_t)w;
		else if (errno != EAGAIN || !ev_wait_fd(stream_fd(s), EV_WRITE, deadline))
			goto out;
	}
	if (read_head(s, deadline, &r->mux, e) < 0)
		goto out;
	/* dockerd before API 1.42 ignores ConsoleSize: size the TTY once it
	 * runs, as the docker CLI does (a command that asks at once may still
	 * see 0x0 there). */
	if (t && t->tty && t->rows > 0 && t->cols > 0)
		resize(id, t->rows, t->cols);
	for (;;) {
		ssize_t n = stream_read(s, chunk, sizeof(chunk));

		if (n > 0) {
			if (mux_feed(&r->mux, chunk, (size_t)n, e) < 0)
				goto out;
			continue;
		}
		if (n == 0)
			break;
		if (errno != EAGAIN) {
			err_errno(e, "exec output");
			goto out;
		}
		if (t && t->ctl_fd >= 0 && !r->ctl_gone) {
			int w = wait_two(stream_fd(s), t->ctl_fd, slice_end(deadline));

			if (w == 0 && quiet_ends(container, deadline, r))
				break;
			if (w == 2 && ctl_input(id, s, t, r, e) < 0)
				goto out;
			continue;
		}
		if (!ev_wait_fd(stream_fd(s), EV_READ, slice_end(deadline)) && quiet_ends(container, deadline, r))
			break;
	}
	rc = 0;
out:
	if (rc < 0 && !e->msg[0])
		err_errno(e, "exec start");
	buf_release(&req);
	stream_free(s);
	return rc;
}

/* GET /exec/<id>/json into *res (the caller frees it); what names the
 * question in an error. 0 / -1. */
static int exec_inspect(const char *id, const char *what, struct json **res, struct err *e)
{
	char path[SC_RUN_PATH_MAX];
	int status = 0;

	*res = NULL;
	if (str_fmt(path, sizeof(path), "/exec/%s/json", id) < 0)
		return err_set(e, "%s: exec id too long", what);
	if (engine_api("GET", path, NULL, (int)SC_DOCKER_QUICK_MS, &status, res, e) < 0 || status != 200) {
		if (status && status != 200)
			err_set(e, "HTTP %d", status);
		json_free(*res);
		*res = NULL;
		return err_prefix(e, "%s", what);
	}
	return 0;
}

/* The exit code; after a timeout, kill the process it still runs. */
static int finish(const char *id, struct engine_exec *r, struct err *e)
{
	struct json *res;

	if (exec_inspect(id, "exec result", &res, e) < 0)
		return -1;
	if (r->timed_out && json_get_bool(res, "Running", false)) {
		int64_t pid = json_get_int(res, "Pid", 0);

		/* dockerd reports the host's pid of the exec'd process. */
		if (pid > 1 && kill((pid_t)pid, SIGKILL) < 0)
			log_info("worker", "exec %s: cannot kill pid %lld: %s", id, (long long)pid, strerror(errno));
	}
	r->exit_code = (int)json_get_int(res, "ExitCode", -1);
	json_free(res);
	return 0;
}

static int run(const char *container, const char *const *argv, int64_t timeout_ms, const struct engine_tty *t,
	       struct engine_exec *r, struct err *e)
{
	int64_t deadline = ev_mono_ms() + timeout_ms;
	char id[128];

	if (!engine_socket() || create(container, argv, t, id, sizeof(id), e) == 0) {
		log_debug("worker", "exec through the API not possible (%s); using the docker CLI", e->msg);
		err_clear(e);
		return 0;
	}
	if (r->on_created)
		r->on_created(r->created_arg, id);
	if (attach(container, id, deadline, t, r, e) < 0)
		return -1;
	/* dockerd forgets the execs of a container that stopped. */
	if (r->container_ended)
		return err_set(e, "the container ended while the command ran (exit %d)", r->exit_code);
	if (finish(id, r, e) < 0)
		return -1;
	return 1;
}

int engine_exec(const char *container, const char *const *argv, int64_t timeout_ms, size_t max,
		struct engine_exec *r, struct err *e)
{
	memset(r, 0, sizeof(*r));
	mux_init(&r->mux, max);
	return run(container, argv, timeout_ms, NULL, r, e);
}

int engine_exec_stream(const char *container, const char *const *argv, int64_t timeout_ms,
		       void (*sink)(void *arg, int which, const char *p, size_t n), void *arg,
		       struct engine_exec *r, struct err *e)
{
	memset(r, 0, sizeof(*r));
	mux_init(&r->mux, 0);
	r->mux.sink = sink;
	r->mux.sink_arg = arg;
	return run(container, argv, timeout_ms, NULL, r, e);
}

int engine_exec_watch(const char *container, const char *const *argv, int64_t timeout_ms,
		      void (*sink)(void *arg, int which, const char *p, size_t n),
		      void (*on_created)(void *arg, const char *exec_id), void *arg, struct engine_exec *r,
		      struct err *e)
{
	memset(r, 0, sizeof(*r));
	mux_init(&r->mux, 0);
	r->mux.sink = sink;
	r->mux.sink_arg = arg;
	r->on_created = on_created;
	r->created_arg = arg;
	return run(container, argv, timeout_ms, NULL, r, e);
}

int engine_exec_state(const char *exec_id, int *pid, bool *running, struct err *e)
{
	struct json *res;

	if (exec_inspect(exec_id, "exec state", &res, e) < 0)
		return -1;
	*pid = (int)json_get_int(res, "Pid", 0);
	*running = json_get_bool(res, "Running", false);
	json_free(res);
	return 0;
}

int engine_exec_interactive(const char *container, const char *const *argv, int64_t timeout_ms,
			    const struct engine_tty *t, void (*sink)(void *arg, int which, const char *p, size_t n),
			    void *arg, struct engine_exec *r, struct err *e)
{
	memset(r, 0, sizeof(*r));
	mux_init(&r->mux, 0);
	r->mux.sink = sink;
	r->mux.sink_arg = arg;
	r->mux.raw = t->tty;
	buf_init(&r->ctl, SC_CTL_LINE_MAX);
	return run(container, argv, timeout_ms, t, r, e);
}

void engine_exec_release(struct engine_exec *r)
{
	buf_release(&r->ctl);
	mux_release(&r->mux);
}
