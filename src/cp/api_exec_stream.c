/*
 * api_exec_stream.c: GET /v1/envs/{env}/exec/stream, a streamed exec over a
 * WebSocket (denv-cp(8), "Streamed exec"). Authenticated and checked like
 * POST /v1/envs/{env}/exec before the upgrade, so a refusal is an HTTP
 * status. The client's first message is the command,
 *   {"service": S, "cmd": [ARGV...], "timeout_sec": N}
 * sent to the host as env.exec with stream true. Its output comes back as
 * exec.out frames (ws/xframe.h) and is relayed as it arrives, in seq order;
 * the last frame is exec.exit or exec.error, then a normal close.
 *
 * With "stdin": true (and "tty": true, "rows", "cols" for a terminal) the
 * client's later messages go to the command: exec.in, exec.resize and
 * exec.kill frames (ws/xframe.h), or binary messages, which are stdin bytes.
 * The stream holds one of the team's exec slots (quota.c) until it ends.
 * A client that goes away kills the command (exec.kill to the host).
 *
 * Bounds: a client that lets more than CP_XS_QUEUED bytes of output wait is
 * sent exec.error and dropped (the queue's cap is twice that, so the error
 * fits; a client that still does not read loses it with the queue when the
 * close handshake times out); a lost or malformed frame from the host ends the stream the same
 * way.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"
#include "ws/ws.h"
#include "ws/xframe.h"

struct cp_xs {
	struct cp *cp;
	struct ws_conn *ws;
	struct cp_cmd *cmd;	/* NULL before the command and after its result */
	char env_id[ID_MAX], host_id[ID_MAX];
	bool started, ended;
	bool interactive;	/* stdin or tty: later messages are for the command */
	char team_id[ID_MAX];	/* holds one of its exec slots while non-empty */
	int64_t next_seq;
	struct cp_xs *next;
};

static void xs_unlink(struct cp *cp, struct cp_xs *x)
{
	for (struct cp_xs **p = &cp->xstreams; *p; p = &(*p)->next)
		if (*p == x) {
			*p = x->next;
			cp->nxstreams--;
			return;
		}
}

/* Queue a frame (taken) to the client; the queue's cap is 2 * CP_XS_QUEUED. */
static void xs_send(struct cp_xs *x, struct json *f)
{
	char *text = json_to_string(f, JSON_COMPACT);
	struct err e;

	if (ws_is_open(x->ws) && ws_send_text(x->ws, text, strlen(text), &e) < 0)
		log_debug("cp", "exec stream: send: %s", e.msg);
	free(text);
	json_free(f);
}

static void xs_put_slot(struct cp_xs *x)
{
	if (*x->team_id)
		cp_quota_exec_put(x->cp, x->team_id);
	x->team_id[0] = '\0';
}

/* Kill the command on its host (the caller then forgets it). */
static void xs_kill(struct cp_xs *x)
{
	struct err e;

	if (x->cmd && cp_cmd_send_frame(x->cmd, xf_kill_json(NULL), &e) < 0)
		log_info("cp", "exec stream of %s: kill: %s", x->env_id, e.msg);
}

/* The last frame: exec.error with msg (or none), then a close. */
static void xs_end(struct cp_xs *x, const char *msg)
{
	if (x->ended)
		return;
	x->ended = true;
	xs_put_slot(x);
	if (msg)
		xs_kill(x);	/* a stream that broke leaves no command behind */
	if (msg)
		log_info("cp", "exec stream of %s (%s) ended: %s", x->env_id, x->cmd ? cp_cmd_id(x->cmd) : "no command",
			 msg);
	cp_cmd_cancel(x->cmd);
	x->cmd = NULL;
	if (msg)
		xs_send(x, xf_error_json(NULL, msg));
	if (ws_is_open(x->ws))
		ws_close(x->ws, msg ? WS_CLOSE_POLICY : WS_CLOSE_NORMAL, msg ? "exec stream failed" : "");
}

static void xs_out(struct cp *cp, const struct json *frame, void *arg)
{
	struct cp_xs *x = arg;
	struct xf_frame f;
	struct err e;
	char msg[ERR_MSG_MAX + 64];

	xf_frame_init(&f);
	if (xf_from_json(frame, &f, &e) < 0 || f.kind != XF_OUT || f.seq != x->next_seq) {
		snprintf(msg, sizeof(msg), "exec stream: output frame %" PRId64 " lost or malformed (%s)", x->next_seq,
			 e.msg[0] ? e.msg : "out of order");
		xs_end(x, msg);
	} else if (ws_queued(x->ws) > CP_XS_QUEUED) {
		snprintf(msg, sizeof(msg), "exec stream: the client fell behind by more than %zu MiB of output",
			 CP_XS_QUEUED >> 20);
		xs_end(x, msg);
	} else {
		x->next_seq++;
		xs_send(x, xf_out_json(cp_cmd_id(x->cmd), f.stream, f.seq, f.data.data, f.data.len));
	}
	xf_frame_release(&f);
}

/* A host that ignored stream (an older denvd) answers with the whole output. */
static void relay_whole(struct cp_xs *x, const struct json *pl, const char *key, enum xf_stream s)
{
	const struct json *v = json_get(pl, key);

	for (size_t off = 0; v && v->type == JSON_STRING && off < v->u.str.len; off += XF_CHUNK_MAX) {
		size_t n = v->u.str.len - off < XF_CHUNK_MAX ? v->u.str.len - off : XF_CHUNK_MAX;

		xs_send(x, xf_out_json(NULL, s, x->next_seq++, v->u.str.s + off, n));
	}
}

static void xs_done(struct cp *cp, const struct cp_result *res, void *arg)
{
	struct cp_xs *x = arg;
	const struct json *pl = res->payload;
	int64_t code = json_get_int(pl, "exit_code", -1);
	char msg[256];

	x->cmd = NULL;
	if (!res->ok) {
		xs_end(x, res->error);
		return;
	}
	if (!json_get_bool(pl, "streamed", false)) {
		relay_whole(x, pl, "stdout", XF_STDOUT);
		relay_whole(x, pl, "stderr", XF_STDERR);
	} else if (json_get_int(pl, "frames", x->next_seq) != x->next_seq) {
		/* Sent while the host's stream was down, or answered from its log. */
		snprintf(msg, sizeof(msg), "exec stream: %" PRId64 " of %" PRId64 " output frames lost (the host "
			 "reconnected while the command ran); it exited with %" PRId64, json_get_int(pl, "frames", 0) -
			 x->next_seq, json_get_int(pl, "frames", 0), code);
		xs_end(x, msg);
		return;
	}
	xs_send(x, xf_exit_json(NULL, code < -1 || code > 255 ? -1 : (int)code, json_get_bool(pl, "timed_out", false)));
	xs_end(x, NULL);
}

/* The command message: NULL and why in msg when it is not usable. */
static struct json *command_payload(const void *data, size_t len, char *msg, size_t n)
{
	struct json *m = NULL;
	const struct json *cmd, *t;
	const char *service;
	int64_t timeout = CP_EXEC_TIMEOUT_DEFAULT_S;
	const struct json *rows, *cols;
	struct err e;

	if (json_parse(data, len, NULL, &m, &e) < 0 || m->type != JSON_OBJECT) {
		snprintf(msg, n, "the first message must be a JSON object {service, cmd, timeout_sec}");
		json_free(m);
		return NULL;
	}
	service = json_get_str(m, "service");
	cmd = json_get(m, "cmd");
	t = json_get(m, "timeout_sec");
	if (!service || !*service)
		snprintf(msg, n, "service is required");
	else if (!cmd || cmd->type != JSON_ARRAY || json_len(cmd) == 0)
		snprintf(msg, n, "cmd must be a non-empty array of strings");
	else if (t && (t->type != JSON_INT || t->u.i <= 0 || t->u.i > CP_EXEC_TIMEOUT_MAX_S))
		snprintf(msg, n, "timeout_sec must be 1 to %d", CP_EXEC_TIMEOUT_MAX_S);
	rows = json_get(m, "rows");
	cols = json_get(m, "cols");
	if (!*msg && ((rows && (rows->type != JSON_INT || rows->u.i < 1 || rows->u.i > XF_TTY_MAX)) ||
		      (cols && (cols->type != JSON_INT || cols->u.i < 1 || cols->u.i > XF_TTY_MAX))))
		snprintf(msg, n, "rows and cols must be 1 to %d", XF_TTY_MAX);
	for (size_t i = 0; !*msg && i < json_len(cmd); i++)
		if (json_at(cmd, i)->type != JSON_STRING)
			snprintf(msg, n, "cmd must be a non-empty array of strings");
	if (*msg) {
		json_free(m);
		return NULL;
	}
	if (t)
		timeout = t->u.i;
	{
		struct json *p = cp_obj("service", json_new_str(service), "cmd", json_dup(cmd), "timeout_sec",
					json_new_int(timeout), "stream", json_new_bool(true), NULL);
		bool in = json_get_bool(m, "stdin", false), tty = json_get_bool(m, "tty", false);

		if (in)
			json_object_set_bool(p, "stdin", true);
		if (tty)
			json_object_set_bool(p, "tty", true);
		if (tty && rows && cols) {
			json_object_set_int(p, "rows", rows->u.i);
			json_object_set_int(p, "cols", cols->u.i);
		}
		json_free(m);
		return p;
	}
}

/* A later message of an interactive stream: for the command's host. */
static void xs_input(struct cp_xs *x, bool is_binary, const char *data, size_t len)
{
	struct xf_frame f;
	struct err e;
	int rc = 0;

	if (!x->interactive || !x->cmd)
		return;	/* not asked for, or the command has ended */
	if (is_binary) {
		for (size_t off = 0; rc == 0 && off < len; off += XF_CHUNK_MAX)
			rc = cp_cmd_send_frame(x->cmd, xf_in_json(NULL, data + off, len - off < XF_CHUNK_MAX ? len - off
											     : XF_CHUNK_MAX, false), &e);
	} else {
		xf_frame_init(&f);
		if (xf_parse(data, len, &f, &e) < 0 || (f.kind != XF_IN && f.kind != XF_RESIZE && f.kind != XF_KILL))
			rc = err_set(&e, "exec stream: a message after the command must be exec.in, exec.resize or "
				     "exec.kill (%s)", e.msg[0] ? e.msg : "another type");
		else if (f.kind == XF_IN)
			rc = cp_cmd_send_frame(x->cmd, xf_in_json(NULL, f.data.data, f.data.len, f.eof), &e);
		else if (f.kind == XF_RESIZE)
			rc = cp_cmd_send_frame(x->cmd, xf_resize_json(NULL, f.rows, f.cols), &e);
		else
			rc = cp_cmd_send_frame(x->cmd, xf_kill_json(NULL), &e);
		xf_frame_release(&f);
	}
	if (rc < 0)
		xs_end(x, e.msg);
}

static void xs_message(struct ws_conn *c, bool is_binary, const void *data, size_t len, void *arg)
{
	struct cp_xs *x = arg;
	struct json *payload;
	char msg[256] = "";
	int64_t timeout;

	if (x->ended)
		return;
	if (x->started) {
		xs_input(x, is_binary, data, len);
		return;
	}
	x->started = true;
	if (is_binary || !(payload = command_payload(data, len, msg, sizeof(msg)))) {
		xs_end(x, *msg ? msg : "the first message must be a JSON text message");
		return;
	}
	if (!cp_host_connected(x->cp, x->host_id)) {
		json_free(payload);
		snprintf(msg, sizeof(msg), "host %s is not connected", x->host_id);
		xs_end(x, msg);
		return;
	}
	timeout = json_get_int(payload, "timeout_sec", CP_EXEC_TIMEOUT_DEFAULT_S);
	x->interactive = json_get_bool(payload, "stdin", false) || json_get_bool(payload, "tty", false);
	x->cmd = cp_cmd_send(x->cp, x->host_id, x->env_id, "env.exec", payload, NULL,
			     timeout * 1000 + CP_EXEC_SLACK_MS, xs_done, x);
	cp_cmd_on_output(x->cmd, xs_out);
}

static void xs_close(struct ws_conn *c, int code, const char *reason, void *arg)
{
	struct cp_xs *x = arg;

	/* A client gone before the end takes its command with it. */
	if (x->cmd && !x->ended)
		xs_kill(x);
	xs_put_slot(x);
	cp_cmd_cancel(x->cmd);
	xs_unlink(x->cp, x);
	ws_conn_free(c);
	free(x);
}

static void h_exec_stream(struct cp *cp, struct http_req *req)
{
	struct ws_opts o = { 0 };
	struct cp_caller who;
	const struct json *env;
	const char *host;
	struct cp_xs *x;
	struct err e;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	env = cp_team_row(cp, req, "environments", who.team_id, http_req_param(req, "env"), "environment");
	if (!env)
		return;
	if (str_eq(json_get_str(env, "Status"), "destroyed")) {
		http_respond_error(req, 409, "environment is destroyed");
		return;
	}
	host = json_get_str(env, "HostID");
	if (!host || !*host) {
		http_respond_error(req, 502, "the environment has no host; deploy it first");
		return;
	}
	if (!cp_host_connected(cp, host)) {
		cp_fail(req, 502, "host %s is not connected", host);
		return;
	}
	if (cp->stopping || cp->nxstreams >= CP_XS_MAX) {
		http_respond_error(req, 503, cp->stopping ? "the control plane is shutting down"
							  : "too many streamed execs; use POST /v1/envs/{env}/exec");
		return;
	}
	/* Counted like a one-shot exec, from the upgrade to the stream's end. */
	if (cp_quota_exec_take(cp, req, who.team_id) < 0)
		return;
	x = xcalloc(1, sizeof(*x));
	str_copy(x->team_id, sizeof(x->team_id), who.team_id);
	x->cp = cp;
	str_copy(x->env_id, sizeof(x->env_id), json_get_str(env, "ID"));
	str_copy(x->host_id, sizeof(x->host_id), host);
	o.max_message = CP_XS_MAX_MESSAGE;
	o.max_queued = CP_XS_QUEUED * 2;
	o.ping_interval_ms = 30000;
	o.on_message = xs_message;
	o.on_close = xs_close;
	o.arg = x;
	if (ws_accept(cp->ev, req, &o, &x->ws, &e) < 0) {
		log_debug("cp", "exec stream: %s", e.msg);
		xs_put_slot(x);
		free(x);
		return;
	}
	x->next = cp->xstreams;
	cp->xstreams = x;
	cp->nxstreams++;
}

void cp_exec_streams_close_all(struct cp *cp)
{
	while (cp->xstreams) {
		struct cp_xs *x = cp->xstreams;

		cp->xstreams = x->next;
		xs_put_slot(x);
		cp_cmd_cancel(x->cmd);
		ws_conn_free(x->ws);
		free(x);
	}
	cp->nxstreams = 0;
}

int cp_exec_stream_route(struct cp *cp)
{
	return cp_route(cp, "GET", "/v1/envs/{env}/exec/stream", 0, h_exec_stream);
}
