/*
 * hub.c: GET /v1/hosts/stream, the one WebSocket each sidecar keeps open
 * (protocol.md, "Session"). The first frame is hello: a join token admits a
 * new host, a host secret a known one; any refusal closes with 1008. After
 * that the stream carries heartbeats, the answers to commands (cmd.c) and
 * host events. A host is connected while its admitted stream is open; a
 * dropped stream or CP_HOST_GRACE_MS without a frame makes it unreachable,
 * and a newer stream of the same host replaces the older one.
 *
 * Secrets: the join token and the host secret are hashed on arrival and
 * never logged; the new secret is sent once, in the hello answer.
 *
 * Budget under a flood (denv-cp(8), "Connection limits"): the route is
 * reserved in the HTTP server, so a sidecar's upgrade gets a slot even when
 * ordinary connections fill it. Anyone may upgrade, though, so the hub
 * keeps its own budget: at most CP_HUB_MAX_PENDING streams may wait for
 * their hello (each for CP_HELLO_TIMEOUT_MS at most), and when that many
 * wait, a new stream drops the one that has waited longest; a real sidecar
 * says hello in its first round trip, so only a flood that opens that many
 * streams within one round trip can push it out (it then reconnects). At
 * CP_HUB_MAX_CONNS in all, a new stream drops the oldest stream already
 * closing (refused or replaced); admitted hosts are never dropped for a
 * newcomer: with all slots taken by them, the answer is 503 + Retry-After.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/crypto.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"
#include "ws/ws.h"

enum conn_state {
	CONN_HELLO,	/* waiting for the first frame */
	CONN_JOINING,	/* a new host's rows are being committed */
	CONN_ADMITTED,	/* the host's current stream */
	CONN_CLOSING,	/* refused, replaced or timed out; waiting for the close */
};

struct cp_conn {
	struct cp *cp;
	struct ws_conn *ws;
	uint64_t serial;	/* commit callbacks find their stream by this, not by pointer */
	enum conn_state state;
	char host_id[ID_MAX];
	char team_id[ID_MAX];
	struct ev_timer timer;	/* hello deadline, then the heartbeat grace */
	struct cp_conn *next;
};

static struct cp_conn *conn_by_serial(struct cp *cp, uint64_t serial)
{
	for (struct cp_conn *c = cp->conns; c; c = c->next)
		if (c->serial == serial)
			return c;
	return NULL;
}

/* The admitted stream of host_id, or NULL. */
static struct cp_conn *conn_of_host(struct cp *cp, const char *host_id)
{
	for (struct cp_conn *c = cp->conns; c; c = c->next)
		if (c->state == CONN_ADMITTED && str_eq(c->host_id, host_id))
			return c;
	return NULL;
}

bool cp_host_is_driver(struct cp *cp, const struct json *host)
{
	const char *cloud_id = json_get_str(host, "CloudID");
	const struct json *cloud = cloud_id && *cloud_id ? st_get(cp->db, "clouds", cloud_id) : NULL;

	return cp_provider_is_driver(json_get_str(cloud, "Provider"));
}

bool cp_host_connected(struct cp *cp, const char *host_id)
{
	const struct json *h;

	if (!host_id || !*host_id)
		return false;
	if (conn_of_host(cp, host_id))
		return true;
	h = st_get(cp->db, "hosts", host_id);
	return h && cp_host_is_driver(cp, h);
}

int cp_hub_send(struct cp *cp, const char *host_id, const struct json *frame, struct err *e)
{
	struct cp_conn *c = conn_of_host(cp, host_id);
	char *text;
	int rc;

	if (!c)
		return err_set(e, "host %s is not connected", host_id);
	text = json_to_string(frame, JSON_COMPACT);
	rc = ws_send_text(c->ws, text, strlen(text), e);
	free(text);
	return rc;
}

static void set_status(struct cp *cp, const char *host_id, const char *status, bool seen)
{
	struct json *f = cp_obj("Status", json_new_str(status), NULL);

	if (seen)
		json_object_set(f, "LastSeenAt", cp_now_json());
	cp_update(cp, "hosts", host_id, f);
}

/* Refuse the stream: 1008 with the reason; the sidecar treats it as fatal. */
static void refuse(struct cp_conn *c, const char *why)
{
	log_info("hub", "refused a host stream: %s", why);
	ev_timer_stop(c->cp->ev, &c->timer);
	c->state = CONN_CLOSING;
	ws_close(c->ws, WS_CLOSE_POLICY, why);
}

static void send_frame(struct cp_conn *c, struct json *frame)
{
	char *text = json_to_string(frame, JSON_COMPACT);
	struct err e;

	if (ws_send_text(c->ws, text, strlen(text), &e) < 0)
		log_warn("hub", "host %s: send: %s", c->host_id, e.msg);
	/* The hello answer carries the secret: leave no copy behind. */
	memset(text, 0, strlen(text));
	free(text);
	json_free(frame);
}

static void on_timer(struct ev *ev, void *arg);

static void arm(struct cp_conn *c, int64_t ms)
{
	ev_timer_start(c->cp->ev, &c->timer, ms, on_timer, c);
}

/* The stream is now the host's: replace an older one, re-send its commands. */
static void admitted(struct cp_conn *c, const char *host_id, const char *team_id)
{
	struct cp_conn *old = conn_of_host(c->cp, host_id);

	if (old && old != c) {
		log_info("hub", "host %s: a new stream replaces the older one", host_id);
		old->state = CONN_CLOSING;
		ev_timer_stop(c->cp->ev, &old->timer);
		ws_close(old->ws, WS_CLOSE_POLICY, "replaced by a newer stream of the same host");
	}
	str_copy(c->host_id, sizeof(c->host_id), host_id);
	str_copy(c->team_id, sizeof(c->team_id), team_id);
	c->state = CONN_ADMITTED;
	arm(c, c->cp->cfg.host_grace_ms);
	cp_lost_host_back(c->cp, host_id);
	cp_cmd_host_up(c->cp, host_id);
	cp_orch_host_up(c->cp, team_id);
}

struct join {
	struct cp *cp;
	uint64_t serial;
	char host_id[ID_MAX];
	char team_id[ID_MAX];
	char secret[CRYPTO_TOKEN_MAX];
};

static void join_done(int status, struct err *e, void *arg)
{
	struct join *j = arg;
	struct cp_conn *c = conn_by_serial(j->cp, j->serial);
	struct json *frame, *payload;

	if (status != 0)
		log_error("hub", "join: store: %s", e ? e->msg : "commit failed");
	if (c && c->state == CONN_JOINING) {
		if (status != 0) {
			refuse(c, "join: the control plane could not record the host");
		} else {
			payload = cp_obj("host_id", json_new_str(j->host_id), "secret", json_new_str(j->secret), NULL);
			frame = cp_obj("type", json_new_str("hello"), "host_id", json_new_str(j->host_id),
				       "payload", payload, "sent_at", cp_now_json(), NULL);
			send_frame(c, frame);
			log_info("hub", "host %s joined team %s", j->host_id, j->team_id);
			admitted(c, j->host_id, j->team_id);
		}
	}
	memset(j->secret, 0, sizeof(j->secret));
	free(j);
}

/* Whether an RFC 3339 time is in the past (an unparsable one counts as past). */
static bool expired(const char *at)
{
	int64_t ns;

	return !at || clock_parse_rfc3339(at, &ns) < 0 || ns <= clock_now_ns();
}

/* The new host's row; a machine the provision phase created left its
 * provider's id on the token (orch_place.c). */
static struct json *host_row(const struct join *j, const struct json *tok, const struct json *caps,
			     const char *hash)
{
	const char *name = json_get_str(caps, "hostname");
	const char *cloud_id = json_get_str(tok, "CloudID"), *ref = json_get_str(tok, "ProviderRef");
	struct json *h = json_new_object();

	json_object_set_str(h, "ID", j->host_id);
	json_object_set_str(h, "TeamID", j->team_id);
	json_object_set_str(h, "CloudID", cloud_id ? cloud_id : "");
	json_object_set_str(h, "Name", name && *name ? name : j->host_id);
	json_object_set_str(h, "Status", "connected");
	json_object_set_str(h, "ProviderRef", ref ? ref : "");
	json_object_set(h, "LastSeenAt", cp_now_json());
	json_object_set(h, "CreatedAt", cp_now_json());
	json_object_set(h, "Capabilities", caps && caps->type == JSON_OBJECT ? json_dup(caps) : json_new_object());
	json_object_set_str(h, "Hash", hash);
	return h;
}

/* First connect: consume the join token, create the host with a new secret. */
static void join(struct cp_conn *c, const char *token, const struct json *caps)
{
	struct cp *cp = c->cp;
	char hash[SHA256_HEX_LEN + 1], shash[SHA256_HEX_LEN + 1];
	const struct json *tok;
	struct json *used;
	struct st_txn *txn;
	struct join *j;
	struct err e;

	if (!str_has_prefix(token, "djt_") || sha256_hex(token, strlen(token), hash) < 0 ||
	    !(tok = cp_find(cp, "join_tokens", "Hash", hash, NULL, NULL))) {
		refuse(c, "join: unknown join token");
		return;
	}
	if (json_get_str(tok, "UsedAt")) {
		refuse(c, "join: join token already used");
		return;
	}
	if (expired(json_get_str(tok, "ExpiresAt"))) {
		refuse(c, "join: join token expired");
		return;
	}
	j = xcalloc(1, sizeof(*j));
	j->cp = cp;
	j->serial = c->serial;
	id_new("host", j->host_id);
	str_copy(j->team_id, sizeof(j->team_id), json_get_str(tok, "TeamID"));
	if (crypto_token("dhs", CP_TOKEN_BYTES, j->secret, sizeof(j->secret), &e) < 0 ||
	    sha256_hex(j->secret, strlen(j->secret), shash) < 0) {
		free(j);
		refuse(c, "join: cannot make a host secret");
		return;
	}
	/* The token is used the moment this commit is applied in memory, so a
	 * second hello with it, even in the same turn, is refused. */
	used = json_dup(tok);
	json_object_set(used, "UsedAt", cp_now_json());
	json_object_set_str(used, "HostID", j->host_id);
	txn = st_begin(cp->db);
	st_put(txn, "hosts", j->host_id, host_row(j, tok, caps, shash));
	st_put(txn, "join_tokens", json_get_str(tok, "ID"), used);
	c->state = CONN_JOINING;
	ev_timer_stop(cp->ev, &c->timer);
	if (st_commit(txn, join_done, j, &e) < 0) {
		log_error("hub", "join: store: %s", e.msg);
		memset(j->secret, 0, sizeof(j->secret));
		free(j);
		refuse(c, "join: the control plane could not record the host");
	}
}

/* A known host: check the secret against its hash. */
static void reconnect(struct cp_conn *c, const char *host_id, const char *secret, const struct json *caps)
{
	struct cp *cp = c->cp;
	const struct json *h = st_get(cp->db, "hosts", host_id);
	const char *want = json_get_str(h, "Hash");
	char hash[SHA256_HEX_LEN + 1];
	struct json *f, *frame;
	char team[ID_MAX];

	if (!h || !want || strlen(want) != SHA256_HEX_LEN || !secret ||
	    sha256_hex(secret, strlen(secret), hash) < 0 || !crypto_equal(hash, want, SHA256_HEX_LEN)) {
		refuse(c, "hello: unknown host or wrong secret");
		return;
	}
	str_copy(team, sizeof(team), json_get_str(h, "TeamID"));
	f = cp_obj("Status", json_new_str("connected"), "LastSeenAt", cp_now_json(), NULL);
	if (caps && caps->type == JSON_OBJECT)
		json_object_set(f, "Capabilities", json_dup(caps));
	cp_update(cp, "hosts", host_id, f);
	frame = cp_obj("type", json_new_str("hello"), "host_id", json_new_str(host_id), "payload",
		       cp_obj("host_id", json_new_str(host_id), NULL), "sent_at", cp_now_json(), NULL);
	send_frame(c, frame);
	log_info("hub", "host %s reconnected", host_id);
	admitted(c, host_id, team);
}

static void hello(struct cp_conn *c, const struct json *frame)
{
	const struct json *p = json_get(frame, "payload");
	const char *host_id = json_get_str(p, "host_id"), *token = json_get_str(p, "token");
	const struct json *caps = json_get(p, "capabilities");

	if (!str_eq(json_get_str(frame, "type"), "hello")) {
		refuse(c, "hello: the first frame must be hello");
		return;
	}
	if (!token || !*token) {
		refuse(c, "hello: token is required");
		return;
	}
	if (!host_id || !*host_id)
		join(c, token, caps);
	else
		reconnect(c, host_id, token, caps);
}

/* A heartbeat: the host is alive, and its payload (when it has one) is
 * what it has now (cpus, memory_mb, disk_gb), merged into Capabilities for
 * placement (place_fit.c). */
static void heartbeat(struct cp_conn *c, const struct json *payload)
{
	static const char *const keys[] = { "cpus", "memory_mb", "disk_gb" };
	const struct json *h = st_get(c->cp->db, "hosts", c->host_id);
	struct json *f = cp_obj("Status", json_new_str("connected"), "LastSeenAt", cp_now_json(), NULL);
	struct json *caps = NULL;

	for (size_t i = 0; payload && i < sizeof(keys) / sizeof(keys[0]); i++) {
		const struct json *v = json_get(payload, keys[i]);

		if (!v || v->type != JSON_INT || v->u.i < 0)
			continue;
		if (!caps) {
			const struct json *old = json_get(h, "Capabilities");

			caps = old && old->type == JSON_OBJECT ? json_dup(old) : json_new_object();
		}
		json_object_set_int(caps, keys[i], v->u.i);
	}
	if (caps)
		json_object_set(f, "Capabilities", caps);
	cp_update(c->cp, "hosts", c->host_id, f);
}

/* Frames of an admitted host. Any frame shows it is alive. */
static void admitted_frame(struct cp_conn *c, const struct json *frame)
{
	const char *type = json_get_str(frame, "type");
	char subject[ST_ID_MAX];
	const char *kind;

	arm(c, c->cp->cfg.host_grace_ms);
	if (str_eq(type, "heartbeat")) {
		heartbeat(c, json_get(frame, "payload"));
	} else if (str_eq(type, "ack") || str_eq(type, "progress") || str_eq(type, "result") ||
		   str_eq(type, "chunk") || str_eq(type, "exec.out")) {
		cp_cmd_frame(c->cp, c->host_id, type, frame);
	} else if (str_eq(type, "event")) {
		kind = json_get_str(frame, "kind");
		snprintf(subject, sizeof(subject), "host:%s", c->host_id);
		cp_event(c->cp, NULL, c->team_id, subject, kind && *kind ? kind : "host.event",
			 json_dup(json_get(frame, "payload")));
	} else {
		log_debug("hub", "host %s: ignoring a %s frame", c->host_id, type ? type : "untyped");
	}
}

static void on_message(struct ws_conn *ws, bool is_binary, const void *data, size_t len, void *arg)
{
	struct cp_conn *c = arg;
	struct json_limits lim = { 64, CP_HUB_MAX_MESSAGE };
	struct json *frame = NULL;
	struct err e;

	if (c->state == CONN_CLOSING || c->state == CONN_JOINING)
		return;
	if (is_binary || json_parse(data, len, &lim, &frame, &e) < 0 || frame->type != JSON_OBJECT) {
		json_free(frame);
		if (c->state == CONN_HELLO)
			refuse(c, "hello: frames are JSON objects");
		else
			log_warn("hub", "host %s: dropped a frame that is not a JSON object", c->host_id);
		return;
	}
	if (c->state == CONN_HELLO)
		hello(c, frame);
	else
		admitted_frame(c, frame);
	json_free(frame);
}

static void on_timer(struct ev *ev, void *arg)
{
	struct cp_conn *c = arg;

	if (c->state == CONN_HELLO) {
		refuse(c, "hello: no hello frame in time");
		return;
	}
	if (c->state != CONN_ADMITTED)
		return;
	log_warn("hub", "host %s: nothing heard for %lld s; marking it unreachable", c->host_id,
		 (long long)(c->cp->cfg.host_grace_ms / 1000));
	set_status(c->cp, c->host_id, "unreachable", false);
	c->state = CONN_CLOSING;
	ws_close(c->ws, WS_CLOSE_GOING_AWAY, "no heartbeat within the grace window");
}

static void unlink_conn(struct cp *cp, struct cp_conn *c)
{
	for (struct cp_conn **p = &cp->conns; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			cp->nconns--;
			return;
		}
}

static void on_close(struct ws_conn *ws, int code, const char *reason, void *arg)
{
	struct cp_conn *c = arg;

	ev_timer_stop(c->cp->ev, &c->timer);
	if (c->state == CONN_ADMITTED) {
		log_info("hub", "host %s: stream closed (%d %s); unreachable", c->host_id, code, reason ? reason : "");
		set_status(c->cp, c->host_id, "unreachable", false);
	}
	unlink_conn(c->cp, c);
	ws_conn_free(ws);
	free(c);
}

/* The stream in state st that was opened first, or NULL (the list has the
 * newest first) and how many are in that state. */
static struct cp_conn *oldest_in(struct cp *cp, enum conn_state st, size_t *n)
{
	struct cp_conn *old = NULL;

	*n = 0;
	for (struct cp_conn *c = cp->conns; c; c = c->next)
		if (c->state == st) {
			old = c;
			(*n)++;
		}
	return old;
}

/* Drop a stream with no close handshake (it was waiting for a hello or for
 * its close): a newcomer needs the room now. */
static void drop(struct cp_conn *c, const char *why)
{
	struct cp *cp = c->cp;

	/* Debug only: a flood would make one line per stream. */
	log_debug("hub", "dropped a host stream %s to make room for a new one", why);
	ev_timer_stop(cp->ev, &c->timer);
	unlink_conn(cp, c);
	ws_conn_free(c->ws);
	free(c);
}

/* Room for one more stream: 0, or -1 when every slot is an admitted host
 * (or one joining). The policy is at the top of this file. */
static int make_room(struct cp *cp)
{
	size_t n;
	struct cp_conn *old = oldest_in(cp, CONN_HELLO, &n);

	if (n >= CP_HUB_MAX_PENDING) {
		drop(old, "still waiting for its hello");
		return 0;
	}
	if (cp->nconns < CP_HUB_MAX_CONNS)
		return 0;
	old = oldest_in(cp, CONN_CLOSING, &n);
	if (!old)
		old = oldest_in(cp, CONN_HELLO, &n);
	if (!old)
		return -1;
	drop(old, old->state == CONN_HELLO ? "still waiting for its hello" : "already closing");
	return 0;
}

static void h_stream(struct cp *cp, struct http_req *req)
{
	struct ws_opts o = { 0 };
	struct cp_conn *c;
	struct err e;
	char ra[16];

	if (cp->stopping) {
		http_respond_error(req, 503, "the control plane is shutting down");
		return;
	}
	if (make_room(cp) < 0) {
		snprintf(ra, sizeof(ra), "%d", CP_HUB_RETRY_AFTER_S);
		http_resp_header(req, "Retry-After", ra);
		http_respond_error(req, 503, "too many host streams");
		return;
	}
	c = xcalloc(1, sizeof(*c));
	c->cp = cp;
	c->serial = ++cp->conn_serial;
	c->state = CONN_HELLO;
	o.max_message = CP_HUB_MAX_MESSAGE;
	o.max_queued = CP_HUB_MAX_QUEUED;
	o.on_message = on_message;
	o.on_close = on_close;
	o.arg = c;
	if (ws_accept(cp->ev, req, &o, &c->ws, &e) < 0) {
		log_debug("hub", "stream: %s", e.msg);
		free(c);
		return;
	}
	c->next = cp->conns;
	cp->conns = c;
	cp->nconns++;
	arm(c, CP_HELLO_TIMEOUT_MS);
}

int cp_hub_routes(struct cp *cp)
{
	/* Reserved: sidecars must reach it when ordinary clients fill the server. */
	return cp_route_flags(cp, "GET", "/v1/hosts/stream", 0, HTTP_ROUTE_RESERVED, h_stream);
}

struct mark_ctx {
	struct json *ids;
};

static int mark_one(const char *id, const struct json *row, void *arg)
{
	struct mark_ctx *m = arg;

	if (str_eq(json_get_str(row, "Status"), "connected"))
		json_array_push(m->ids, json_new_str(id));
	return 0;
}

void cp_hub_start(struct cp *cp)
{
	struct mark_ctx m = { json_new_array() };
	struct err e;

	if (st_scan(cp->db, "hosts", NULL, NULL, NULL, mark_one, &m, &e) < 0)
		log_error("hub", "hosts: %s", e.msg);
	for (size_t i = 0; i < json_len(m.ids); i++) {
		const char *id = json_at(m.ids, i)->u.str.s;

		if (!cp_host_is_driver(cp, st_get(cp->db, "hosts", id)))
			set_status(cp, id, "unreachable", false);
	}
	json_free(m.ids);
}

void cp_hub_shutdown(struct cp *cp)
{
	for (struct cp_conn *c = cp->conns; c; c = c->next)
		if (c->state != CONN_CLOSING) {
			ev_timer_stop(cp->ev, &c->timer);
			c->state = CONN_CLOSING;
			ws_close(c->ws, WS_CLOSE_GOING_AWAY, "control plane shutting down");
		}
}

void cp_hub_free_all(struct cp *cp)
{
	while (cp->conns) {
		struct cp_conn *c = cp->conns;

		cp->conns = c->next;
		ev_timer_stop(cp->ev, &c->timer);
		ws_conn_free(c->ws);
		free(c);
	}
	cp->nconns = 0;
}
