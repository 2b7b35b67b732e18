/* agent.c: the session with the control plane (protocol.md "Session"):
 * dial, hello with capabilities, the hello answer that carries a new host's
 * identity, heartbeats every 10 s, reconnects with backoff 1 s -> 30 s
 * (going round --server's list of URLs first), and exit on a 1008 close. Frames in are handed to dispatch.c. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "ws/ws.h"

struct agent {
	struct ev *ev;
	struct sc_config *cfg;
	struct ws_conn *conn;
	struct dispatch *dp;
	struct json *caps;
	struct ev_timer heartbeat, reconnect, sweep;
	char urls[SC_SERVERS_MAX][SC_URL_MAX];	/* --server's list, as stream URLs */
	size_t nurls, cur;			/* urls[cur] is dialled next */
	size_t failed;				/* URLs tried in a row without a session */
	int64_t backoff_ms;
	int64_t connected_at;
	bool fatal;
	char fatal_msg[ERR_MSG_MAX + 300];
};

static void schedule_reconnect(struct agent *a);

struct ev *agent_ev(struct agent *a) { return a->ev; }
const struct sc_config *agent_config(const struct agent *a) { return a->cfg; }
bool agent_online(const struct agent *a) { return a->conn && ws_is_open(a->conn); }
size_t agent_queued(const struct agent *a) { return a->conn ? ws_queued(a->conn) : 0; }

int agent_send_text(struct agent *a, const char *text, size_t len)
{
	struct err e;

	if (!agent_online(a))
		return -1;
	if (ws_send_text(a->conn, text, len, &e) < 0) {
		log_warn("denvd", "send: %s", e.msg);
		return -1;
	}
	return 0;
}

int agent_send(struct agent *a, struct json *f)
{
	char ts[CLOCK_RFC3339_MAX];
	struct buf b = BUF_INIT;
	int rc;

	if (a->cfg->host_id[0] && !json_get(f, "host_id"))
		json_object_set_str(f, "host_id", a->cfg->host_id);
	clock_format_rfc3339(clock_now_ns(), ts);
	json_object_set_str(f, "sent_at", ts);
	buf_init(&b, SC_FRAME_MAX);
	rc = json_write(&b, f, JSON_COMPACT);
	json_free(f);
	if (rc < 0) {
		buf_release(&b);
		log_warn("denvd", "frame larger than %zu bytes dropped", (size_t)SC_FRAME_MAX);
		return -1;
	}
	rc = agent_send_text(a, b.data, b.len);
	buf_release(&b);
	return rc;
}

static void send_heartbeat(struct ev *ev, void *arg)
{
	struct agent *a = arg;
	struct json *f = json_new_object();
	struct json *capacity = json_new_object();

	json_object_set_str(f, "type", "heartbeat");
	/* What the host has now, for the control plane's placement. */
	sc_caps_refresh(capacity, a->cfg->data_dir);
	json_object_set(f, "payload", capacity);
	agent_send(a, f);
	if (agent_online(a))
		ev_timer_start(ev, &a->heartbeat, SC_HEARTBEAT_MS, send_heartbeat, a);
}

/* A new host's hello answer: {host_id, secret}, persisted before anything else. */
static void on_hello(struct agent *a, const struct json *f)
{
	const struct json *p = json_get(f, "payload");
	const char *id = json_get_str(p, "host_id"), *secret = json_get_str(p, "secret");
	struct err e;

	if (!id || !*id)
		id = json_get_str(f, "host_id");
	if (!secret || !*secret) {
		if (id && *id && !a->cfg->host_id[0])
			str_copy(a->cfg->host_id, sizeof(a->cfg->host_id), id);
		log_info("denvd", "admitted as %s", a->cfg->host_id);
		return;
	}
	if (!id || !sc_safe_id(id)) {
		log_error("denvd", "hello answer without a valid host_id; ignored");
		return;
	}
	str_copy(a->cfg->host_id, sizeof(a->cfg->host_id), id);
	str_copy(a->cfg->secret, sizeof(a->cfg->secret), secret);
	if (sc_state_save(a->cfg, &e) < 0) {
		/* Without the secret on disk the next start cannot authenticate. */
		a->fatal = true;
		snprintf(a->fatal_msg, sizeof(a->fatal_msg), "joined as %s but %s", id, e.msg);
		ev_stop(a->ev);
		return;
	}
	log_info("denvd", "joined as %s; identity saved to %s", id, a->cfg->state_path);
}

static void on_message(struct ws_conn *c, bool is_binary, const void *data, size_t len, void *arg)
{
	struct agent *a = arg;
	struct json *f = NULL;
	struct err e;
	const char *type;

	if (is_binary) {
		log_warn("denvd", "binary frame ignored");
		return;
	}
	if (json_parse(data, len, NULL, &f, &e) < 0 || f->type != JSON_OBJECT) {
		log_warn("denvd", "bad frame ignored: %s", f ? "not an object" : e.msg);
		json_free(f);
		return;
	}
	a->failed = 0;	/* this URL answers: a drop starts a new round of the list */
	type = json_get_str(f, "type");
	if (str_eq(type, "command"))
		dispatch_command(a->dp, f);
	else if (str_eq(type, "chunk"))
		dispatch_chunk(a->dp, f);
	else if (str_eq(type, "exec.in") || str_eq(type, "exec.resize") || str_eq(type, "exec.kill"))
		dispatch_exec_ctl(a->dp, f);
	else if (str_eq(type, "hello"))
		on_hello(a, f);
	else
		log_debug("denvd", "frame of type %s ignored", type ? type : "(none)");
	json_free(f);
}

static void on_drain(struct ws_conn *c, void *arg)
{
	dispatch_drain(((struct agent *)arg)->dp);
}

static void on_close(struct ws_conn *c, int code, const char *reason, void *arg)
{
	struct agent *a = arg;

	ws_conn_free(c);
	a->conn = NULL;
	ev_timer_stop(a->ev, &a->heartbeat);
	dispatch_offline(a->dp);
	if (code == WS_CLOSE_POLICY) {
		a->fatal = true;
		snprintf(a->fatal_msg, sizeof(a->fatal_msg),
			 "the control plane refused this host (1008): %s", reason && *reason ? reason : "policy violation");
		ev_stop(a->ev);
		return;
	}
	log_warn("denvd", "stream closed (%d%s%s)", code, reason && *reason ? ": " : "", reason ? reason : "");
	if (a->connected_at && ev_mono_ms() - a->connected_at >= SC_BACKOFF_RESET_MS)
		a->backoff_ms = SC_BACKOFF_MIN_MS;
	schedule_reconnect(a);
}

static struct json *hello_frame(struct agent *a)
{
	struct json *f = json_new_object(), *p = json_new_object();
	bool known = a->cfg->host_id[0] && a->cfg->secret[0];

	json_object_set_str(f, "type", "hello");
	json_object_set_str(p, "host_id", known ? a->cfg->host_id : "");
	json_object_set_str(p, "token", known ? a->cfg->secret : a->cfg->token);
	sc_caps_refresh(a->caps, a->cfg->data_dir);
	json_object_set(p, "capabilities", json_dup(a->caps));
	json_object_set(f, "payload", p);
	return f;
}

static void connect_now(struct ev *ev, void *arg)
{
	struct agent *a = arg;
	struct ws_opts o;
	struct err e;

	memset(&o, 0, sizeof(o));
	o.max_message = SC_FRAME_MAX;
	o.ping_interval_ms = SC_WS_PING_MS;
	o.on_message = on_message;
	o.on_close = on_close;
	o.on_drain = on_drain;
	o.arg = a;
	log_info("denvd", "connecting to %s", a->urls[a->cur]);
	if (ws_dial(ev, a->urls[a->cur], NULL, &o, &a->conn, &e) < 0) {
		a->conn = NULL;
		log_warn("denvd", "connect: %s", e.msg);
		schedule_reconnect(a);
		return;
	}
	a->connected_at = ev_mono_ms();
	agent_send(a, hello_frame(a));
	ev_timer_start(ev, &a->heartbeat, SC_HEARTBEAT_MS, send_heartbeat, a);
}

/* The next URL of the list (a standby may be the active one now) soon;
 * once every URL failed in a row, wait the back-off, which then grows. */
static void schedule_reconnect(struct agent *a)
{
	a->cur = (a->cur + 1) % a->nurls;
	if (++a->failed < a->nurls) {
		log_info("denvd", "trying the next control plane, %s", a->urls[a->cur]);
		ev_timer_start(a->ev, &a->reconnect, SC_NEXT_SERVER_MS, connect_now, a);
		return;
	}
	a->failed = 0;
	log_info("denvd", "reconnecting in %lld s", (long long)(a->backoff_ms / 1000));
	ev_timer_start(a->ev, &a->reconnect, a->backoff_ms, connect_now, a);
	a->backoff_ms *= 2;
	if (a->backoff_ms > SC_BACKOFF_MAX_MS)
		a->backoff_ms = SC_BACKOFF_MAX_MS;
}

static void on_sweep(struct ev *ev, void *arg)
{
	struct agent *a = arg;

	dispatch_sweep(a->dp);
	nm_keep(a->cfg);
	ev_timer_start(ev, &a->sweep, SC_SWEEP_MS, on_sweep, a);
}

static void on_signal(struct ev *ev, int signo, void *arg)
{
	log_info("denvd", "signal %d: stopping (running commands finish on their own)", signo);
	ev_stop(ev);
}

/* Identity and data dir ready, or a message saying what is missing. */
static int check_identity(struct sc_config *c, struct err *e)
{
	char dir[4096];

	if (sc_state_load(c, e) < 0)
		return -1;
	if (str_eq(c->verb, "run") && !(c->host_id[0] && c->secret[0]))
		return err_set(e, "denvd run: no saved identity in %s; join first with "
				  "denvd join --server URL --token djt_...", c->state_path);
	if (!(c->host_id[0] && c->secret[0]) && !(c->token && *c->token))
		return err_set(e, "denvd join: no saved identity in %s and no join token "
				  "(--token or DENV_JOIN_TOKEN)", c->state_path);
	snprintf(dir, sizeof(dir), "%s/commands", c->data_dir);
	if (fs_mkdir_p(dir, 0700, e) < 0)
		return err_prefix(e, "data dir");
	snprintf(dir, sizeof(dir), "%s/envs", c->data_dir);
	if (fs_mkdir_p(dir, 0700, e) < 0)
		return err_prefix(e, "data dir");
	return 0;
}

int agent_run(struct sc_config *c, struct err *e)
{
	struct agent a;
	int rc = 0;

	if (check_identity(c, e) < 0)
		return -1;
	/* Containers a killed snapshot worker left frozen (freeze.c). */
	if (fz_recover_all(c->data_dir, e) < 0)
		log_warn("denvd", "thawing what a killed snapshot left frozen: %s", e->msg);
	/* The port proxies of egress-denied environments whose containers run (ingress_ctl.c). */
	ig_restore_all(c->data_dir);
	/* The host's name gateway, when there is a domain (names_ctl.c). */
	if (nm_start(c, e) < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.cfg = c;
	if (sc_stream_urls(c->server, a.urls, SC_SERVERS_MAX, &a.nurls, e) < 0)
		return -1;
	if (!(a.ev = ev_new()))
		return err_set(e, "cannot create the event loop");
	a.caps = sc_capabilities(c);
	a.dp = dispatch_new(&a);
	a.backoff_ms = SC_BACKOFF_MIN_MS;
	log_info("denvd", "denvd %s; data %s; host %s", DENVD_VERSION, c->data_dir,
		 c->host_id[0] ? c->host_id : "(joining)");
	ev_signal_add(a.ev, SIGINT, on_signal, &a);
	ev_signal_add(a.ev, SIGTERM, on_signal, &a);
	ev_timer_start(a.ev, &a.sweep, SC_SWEEP_FIRST_MS, on_sweep, &a);
	connect_now(a.ev, &a);
	if (ev_run(a.ev) < 0)
		rc = err_set(e, "event loop failed");
	if (a.fatal)
		rc = err_set(e, "%s", a.fatal_msg);
	if (a.conn) {
		ws_conn_free(a.conn);
		a.conn = NULL;
	}
	dispatch_free(a.dp);
	json_free(a.caps);
	ev_free(a.ev);
	return rc;
}
