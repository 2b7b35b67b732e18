/* exec_stream.c: `denv exec` through GET /v1/envs/{env}/exec/stream
 * (denv-cp(8), "Streamed exec"): the command's stdout and stderr are written
 * as they arrive, each to its own stream, bytes as they are; the exit frame
 * gives the code. A server without the route (or any refusal before the
 * stream opens, when nothing has run) makes the caller use the one-shot
 * POST /v1/envs/{env}/exec instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/str.h"
#include "cli/cli.h"
#include "ws/ws.h"
#include "ws/xframe.h"

struct xsc {
	struct err *e;
	struct ws_conn *ws;
	bool done;
	int rc;
	int64_t next_seq, timeout_s;
};

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
	cli_escape(out, env_id);
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
	o.arg = &x;
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
	/* The server ends the stream at the command's timeout; this is the backstop. */
	until = ev_mono_ms() + x.timeout_s * 1000 + CLI_EXEC_SLACK_MS;
	while (!x.done && x.ws && ev_mono_ms() < until)
		ev_run_once(ev, until - ev_mono_ms());
	if (!x.done)
		err_set(e, "exec: no answer from the server within the timeout");
out:
	if (x.ws)
		ws_conn_free(x.ws);
	ev_free(ev);
	memset(hdr.data, 0, hdr.len);
	buf_release(&hdr);
	buf_release(&url);
	return x.rc;
}
