/* events.c: the events table and the live event streams
 * (GET /v1/events/stream, a WebSocket per client). Each new event of a team
 * is pushed to that team's streams as it is appended, optionally filtered to
 * one subject; GET /v1/events stays the way to read the past. */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"
#include "ws/ws.h"

struct cp_sub {
	struct cp *cp;
	struct ws_conn *ws;
	char team_id[ID_MAX];
	char subject[ST_ID_MAX];	/* "" for every subject */
	struct cp_sub *next;
};

static void sub_unlink(struct cp *cp, struct cp_sub *s)
{
	for (struct cp_sub **p = &cp->subs; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			cp->nsubs--;
			return;
		}
}

/* Push one event row to every matching stream. A stream whose client reads
 * too slowly is closed rather than buffered without bound. */
static void publish(struct cp *cp, const struct json *row)
{
	const char *team = json_get_str(row, "TeamID"), *subject = json_get_str(row, "Subject");
	char *text = NULL;
	struct err e;

	for (struct cp_sub *s = cp->subs; s; s = s->next) {
		if (!str_eq(s->team_id, team) || (*s->subject && !str_eq(s->subject, subject)) || !ws_is_open(s->ws))
			continue;
		if (!text)
			text = json_to_string(row, JSON_COMPACT);
		if (ws_queued(s->ws) > CP_EVENT_SUB_QUEUED || ws_send_text(s->ws, text, strlen(text), &e) < 0)
			ws_close(s->ws, WS_CLOSE_GOING_AWAY, "event stream fell behind; reconnect and read GET /v1/events");
	}
	free(text);
}

void cp_event(struct cp *cp, struct st_txn *txn, const char *team_id, const char *subject, const char *kind,
	      struct json *body)
{
	char id[ID_MAX];
	struct json *row = cp_row_new("evt", team_id, id);

	json_object_set_str(row, "Subject", subject);
	json_object_set_str(row, "Kind", kind);
	json_object_set(row, "Body", body ? body : json_new_null());
	json_object_set(row, "At", cp_now_json());
	/* Pushed now rather than after the fsync: the row is already visible
	 * to readers, and a failed fsync stops the store for everyone. */
	publish(cp, row);
	if (txn) {
		st_put(txn, "events", id, row);
	} else {
		struct st_txn *t = st_begin(cp->db);

		st_put(t, "events", id, row);
		cp_commit_quiet(t, "event");
	}
}

static void sub_message(struct ws_conn *c, bool is_binary, const void *data, size_t len, void *arg)
{
	/* Clients have nothing to say on this stream; pings are answered by ws. */
}

static void sub_close(struct ws_conn *c, int code, const char *reason, void *arg)
{
	struct cp_sub *s = arg;

	sub_unlink(s->cp, s);
	ws_conn_free(c);
	free(s);
}

bool cp_event_subject_valid(const char *s)
{
	static const char *const kinds[] = { "env:", "dep:", "host:", "cmd:", NULL };

	for (const char *const *k = kinds; *k; k++)
		if (str_has_prefix(s, *k) && s[strlen(*k)] && strlen(s) < ST_ID_MAX)
			return true;
	return false;
}

bool cp_event_subject_visible(struct cp *cp, struct http_req *req, const char *team_id, const char *subject)
{
	static const struct {
		const char *prefix, *table, *what;
	} kinds[] = {
		{ "env:", "environments", "environment" },
		{ "dep:", "deployments", "deployment" },
		{ "host:", "hosts", "host" },
		{ "cmd:", "commands", "command" },
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (str_has_prefix(subject, kinds[i].prefix))
			return cp_team_row(cp, req, kinds[i].table, team_id, subject + strlen(kinds[i].prefix),
					   kinds[i].what) != NULL;
	cp_fail(req, 404, "subject not found");	/* not reached: the caller checked the form */
	return false;
}

static void h_stream(struct cp *cp, struct http_req *req)
{
	const char *subject = http_req_query(req, "subject");
	struct ws_opts o = { 0 };
	struct cp_caller who;
	struct cp_sub *s;
	struct err e;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	if (subject && *subject && !cp_event_subject_valid(subject)) {
		http_respond_error(req, 400, "subject must be env:<id>, dep:<id>, host:<id> or cmd:<id>");
		return;
	}
	if (subject && *subject && !cp_event_subject_visible(cp, req, who.team_id, subject))
		return;
	if (cp->nsubs >= CP_EVENT_SUBS_MAX) {
		http_respond_error(req, 503, "too many live event streams; poll GET /v1/events instead");
		return;
	}
	s = xcalloc(1, sizeof(*s));
	s->cp = cp;
	str_copy(s->team_id, sizeof(s->team_id), who.team_id);
	str_copy(s->subject, sizeof(s->subject), subject ? subject : "");
	o.max_message = 4096;
	o.max_queued = CP_EVENT_SUB_QUEUED * 2;
	o.ping_interval_ms = 30000;
	o.on_message = sub_message;
	o.on_close = sub_close;
	o.arg = s;
	if (ws_accept(cp->ev, req, &o, &s->ws, &e) < 0) {
		log_debug("cp", "event stream: %s", e.msg);
		free(s);
		return;
	}
	s->next = cp->subs;
	cp->subs = s;
	cp->nsubs++;
}

void cp_events_close_all(struct cp *cp)
{
	while (cp->subs) {
		struct cp_sub *s = cp->subs;

		cp->subs = s->next;
		ws_conn_free(s->ws);
		free(s);
	}
	cp->nsubs = 0;
}

int cp_events_stream_route(struct cp *cp)
{
	return cp_route(cp, "GET", "/v1/events/stream", 0, h_stream);
}
