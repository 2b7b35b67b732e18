/* exec_stream.c: `denv exec` through GET /v1/envs/{env}/exec/stream
 * (denv-cp(8), "Streamed exec"): the command's stdout and stderr are written
 * as they arrive, each to its own stream, bytes as they are; the exit frame
 * gives the code. A server without the route (or any refusal before the
 * stream opens, when nothing has run) makes the caller use the one-shot
 * POST /v1/envs/{env}/exec instead.
 *
 * With -i (body "stdin": true) our stdin goes to the command as exec.in
 * frames, its end as eof; with -t ("tty": true) the command gets a TTY of
 * our terminal's size, our terminal is put in raw mode (restored on every
 * way out) so keys reach the command as typed, and a resize (SIGWINCH)
 * follows as exec.resize. Like docker exec, the TTY merges stderr into
 * stdout. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "base/str.h"
#include "cli/cli.h"
#include "http/http.h"
#include "ws/ws.h"
#include "ws/xframe.h"

/* Stdin bytes waiting on the socket above which we stop reading stdin. */
#define XSC_STDIN_QUEUED ((size_t)1 << 20)

struct xsc {
	struct err *e;
	struct ws_conn *ws;
	struct ev *ev;
	bool done;
	int rc;
	int64_t next_seq, timeout_s;
	bool in, in_paused;	/* reading stdin; stopped while the socket is full */
	bool raw;		/* our terminal is in raw mode: saved holds how it was */
	struct termios saved;
};

int cli_tty_size(int fd, int *rows, int *cols)
{
	struct winsize w;

	if (ioctl(fd, TIOCGWINSZ, &w) < 0 || w.ws_row == 0 || w.ws_col == 0)
		return -1;
	*rows = w.ws_row;
	*cols = w.ws_col;
	return 0;
}

static void send_frame(struct xsc *x, struct json *f)
{
	char *text = json_to_string(f, JSON_COMPACT);
	struct err e;

	if (x->ws && ws_send_text(x->ws, text, strlen(text), &e) < 0 && !x->done) {
		err_set(x->e, "exec: cannot send to the server: %s", e.msg);
		x->done = true;
		x->rc = -1;
	}
	free(text);
	json_free(f);
}

static void on_stdin(struct ev *ev, int fd, int revents, void *arg)
{
	struct xsc *x = arg;
	char buf[XF_CHUNK_MAX];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		ev_fd_del(ev, fd);
		x->in = false;
		send_frame(x, xf_in_json(NULL, "", 0, true));
		return;
	}
	send_frame(x, xf_in_json(NULL, buf, (size_t)n, false));
	/* Backpressure: a large pipe waits for the socket, not in our memory. */
	if (x->ws && ws_queued(x->ws) > XSC_STDIN_QUEUED && ev_fd_set(ev, fd, 0) == 0)
		x->in_paused = true;
}

static void on_drain(struct ws_conn *c, void *arg)
{
	struct xsc *x = arg;

	if (x->in && x->in_paused && ev_fd_set(x->ev, 0, EV_READ) == 0)
		x->in_paused = false;
}

static void on_winch(struct ev *ev, int signo, void *arg)
{
	struct xsc *x = arg;
	int rows, cols;

	if (cli_tty_size(1, &rows, &cols) == 0 || cli_tty_size(0, &rows, &cols) == 0)
		send_frame(x, xf_resize_json(NULL, rows, cols));
}

/* Raw mode, as cfmakeraw sets it: bytes as typed, no echo, no signals. */
static void tty_raw(struct xsc *x)
{
	struct termios t;

	if (!isatty(0) || tcgetattr(0, &x->saved) < 0)
		return;
	t = x->saved;
	t.c_iflag &= ~(tcflag_t)(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON);
	t.c_oflag &= ~(tcflag_t)OPOST;
	t.c_lflag &= ~(tcflag_t)(ECHO | ECHONL | ICANON | ISIG | IEXTEN);
	t.c_cflag &= ~(tcflag_t)(CSIZE | PARENB);
	t.c_cflag |= CS8;
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	x->raw = tcsetattr(0, TCSAFLUSH, &t) == 0;
}

static void tty_restore(struct xsc *x)
{
	if (x->raw)
		(void)tcsetattr(0, TCSAFLUSH, &x->saved);
	x->raw = false;
}

static void finish(struct xsc *x, int rc)
{
	x->done = true;
	x->rc = rc;
}

static void on_out(struct xsc *x, const struct xf_frame *f)
{
	FILE *to = f->stream == XF_STDERR ? stderr : stdout;

	if (f->seq != x->next_seq) {
		err_set(x->e, "exec: output frame %lld lost", (long long)x->next_seq);
		finish(x, -1);
		return;
	}
	x->next_seq++;
	if (fwrite(f->data.data, 1, f->data.len, to) != f->data.len || fflush(to) != 0) {
		err_set(x->e, "exec: cannot write the command's output");
		finish(x, -1);
	}
}

static void on_message(struct ws_conn *c, bool binary, const void *data, size_t len, void *arg)
{
	struct xsc *x = arg;
	struct xf_frame f;
	struct err pe;

	if (x->done)
		return;
	xf_frame_init(&f);
	if (binary || xf_parse(data, len, &f, &pe) < 0) {
		err_set(x->e, "exec: a malformed frame from the server: %s", binary ? "binary" : pe.msg);
		finish(x, -1);
	} else if (f.kind == XF_OUT) {
		on_out(x, &f);
	} else if (f.kind == XF_EXIT && f.timed_out) {
		err_set(x->e, "env.exec: timed out after %lld s (the process was killed)", (long long)x->timeout_s);
		finish(x, CLI_EXEC_TIMEOUT);
	} else if (f.kind == XF_EXIT) {
		if (f.exit_code < 0)
			err_set(x->e, "exec: the host reported no exit code for the command");
		finish(x, f.exit_code < 0 ? -1 : f.exit_code);
	} else {
		err_set(x->e, "%s", f.error);
		finish(x, cli_exec_timed_out(502, f.error) ? CLI_EXEC_TIMEOUT : -1);
	}
	xf_frame_release(&f);
}

static void on_close(struct ws_conn *c, int code, const char *reason, void *arg)
{
	struct xsc *x = arg;

	if (!x->done) {
		err_set(x->e, "exec: the stream closed before the command ended (%d %s)", code, reason ? reason : "");
		finish(x, -1);
	}
	ws_conn_free(c);
	x->ws = NULL;
}

static void stream_url(const char *server, const char *env_id, struct buf *out)
{
	cli_ws_url(out, server, "/v1/envs/");
	http_pct_encode(out, env_id, "");
	buf_adds(out, "/exec/stream");
}

int cli_exec_stream(struct cli *c, const char *env_id, const struct json *body, int64_t timeout_s, struct err *e)
{
	struct xsc x = { .e = e, .rc = -1, .timeout_s = timeout_s > 0 ? timeout_s : CLI_EXEC_DEFAULT_TIMEOUT_S };
	struct ws_opts o = { 0 };
	struct buf url = BUF_INIT, hdr = BUF_INIT;
	struct ev *ev;
	struct err de;
	char *text;
	int64_t until;

	if (getenv("DENV_NO_STREAM") && *getenv("DENV_NO_STREAM"))
		return CLI_EXEC_NO_STREAM;
	ev = ev_new();
	stream_url(c->cfg.server, env_id, &url);
	if (c->cfg.api_key)
		buf_addf(&hdr, "Authorization: Bearer %s\r\n", c->cfg.api_key);
	o.dial_timeout_ms = CLI_STREAM_DIAL_MS;
	o.max_message = XF_FRAME_MAX;
	o.ping_interval_ms = 30000;
	o.on_message = on_message;
	o.on_close = on_close;
	o.on_drain = on_drain;
	o.arg = &x;
	x.ev = ev;
	if (ws_dial(ev, url.data, hdr.len ? hdr.data : NULL, &o, &x.ws, &de) < 0) {
		/* Nothing ran: the one-shot route says what is wrong, as it always has. */
		x.rc = CLI_EXEC_NO_STREAM;
		goto out;
	}
	text = json_to_string(body, JSON_COMPACT);
	if (ws_send_text(x.ws, text, strlen(text), &de) < 0) {
		free(text);
		x.rc = CLI_EXEC_NO_STREAM;
		goto out;
	}
	free(text);
	if (json_get_bool(body, "stdin", false)) {
		x.in = true;
		ev_fd_add(ev, 0, EV_READ, on_stdin, &x);
	}
	if (json_get_bool(body, "tty", false)) {
		tty_raw(&x);
		ev_signal_add(ev, SIGWINCH, on_winch, &x);
	}
	/* The server ends the stream at the command's timeout; this is the backstop. */
	until = ev_mono_ms() + x.timeout_s * 1000 + CLI_EXEC_SLACK_MS;
	while (!x.done && x.ws && ev_mono_ms() < until)
		ev_run_once(ev, until - ev_mono_ms());
	if (!x.done)
		err_set(e, "exec: no answer from the server within the timeout");
out:
	tty_restore(&x);
	if (x.ws)
		ws_conn_free(x.ws);
	ev_free(ev);
	memset(hdr.data, 0, hdr.len);
	buf_release(&hdr);
	buf_release(&url);
	return x.rc;
}
