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
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/log.h"
#include "base/str.h"
#include "http/http.h"
#include "http/stream.h"
#include "sidecar/sidecar.h"

#define EXEC_HEAD_MAX 16384
#define EXEC_READ_CHUNK 65536

/* The exec's id, or 0 when the API will not create it (the CLI then). */
static int create(const char *container, const char *const *argv, char *id, size_t n, struct err *e)
{
	struct json *body = json_new_object(), *cmd = json_new_array(), *res = NULL;
	char path[400];
	int status = 0, rc;

	for (size_t i = 0; argv[i]; i++)
		json_array_push(cmd, json_new_str(argv[i]));
	json_object_set_bool(body, "AttachStdin", false);
	json_object_set_bool(body, "AttachStdout", true);
	json_object_set_bool(body, "AttachStderr", true);
	json_object_set_bool(body, "Tty", false);
	json_object_set(body, "Cmd", cmd);
	snprintf(path, sizeof(path), "/containers/%s/exec", container);
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
	char head[EXEC_HEAD_MAX];
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

/* Send the start request and demultiplex the output until EOF or the deadline. */
static int attach(const char *id, int64_t deadline, struct engine_exec *r, struct err *e)
{
	static const char body[] = "{\"Detach\":false,\"Tty\":false}";
	struct stream *s = NULL;
	struct buf req = BUF_INIT;
	char chunk[EXEC_READ_CHUNK];
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
		if (!ev_wait_fd(stream_fd(s), EV_READ, deadline)) {
			r->timed_out = true;
			break;
		}
	}
	rc = 0;
out:
	if (rc < 0 && !e->msg[0])
		err_errno(e, "exec start");
	buf_release(&req);
	stream_free(s);
	return rc;
}

/* The exit code; after a timeout, kill the process it still runs. */
static int finish(const char *id, struct engine_exec *r, struct err *e)
{
	char path[300];
	struct json *res = NULL;
	int status = 0;

	snprintf(path, sizeof(path), "/exec/%s/json", id);
	if (engine_api("GET", path, NULL, (int)SC_DOCKER_QUICK_MS, &status, &res, e) < 0 || status != 200) {
		json_free(res);
		return err_prefix(e, "exec result");
	}
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

static int run(const char *container, const char *const *argv, int64_t timeout_ms, struct engine_exec *r,
	       struct err *e)
{
	int64_t deadline = ev_mono_ms() + timeout_ms;
	char id[128];

	if (!engine_socket() || create(container, argv, id, sizeof(id), e) == 0) {
		log_debug("worker", "exec through the API not possible (%s); using the docker CLI", e->msg);
		err_clear(e);
		return 0;
	}
	if (attach(id, deadline, r, e) < 0 || finish(id, r, e) < 0)
		return -1;
	return 1;
}

int engine_exec(const char *container, const char *const *argv, int64_t timeout_ms, size_t max,
		struct engine_exec *r, struct err *e)
{
	memset(r, 0, sizeof(*r));
	mux_init(&r->mux, max);
	return run(container, argv, timeout_ms, r, e);
}

int engine_exec_stream(const char *container, const char *const *argv, int64_t timeout_ms,
		       void (*sink)(void *arg, int which, const char *p, size_t n), void *arg,
		       struct engine_exec *r, struct err *e)
{
	memset(r, 0, sizeof(*r));
	mux_init(&r->mux, 0);
	r->mux.sink = sink;
	r->mux.sink_arg = arg;
	return run(container, argv, timeout_ms, r, e);
}

void engine_exec_release(struct engine_exec *r)
{
	mux_release(&r->mux);
}
