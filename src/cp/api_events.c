/* api_events.c: GET /v1/events, newest first, the caller's team only: the
 * subject must be an object of the caller's team (else 404, as on the
 * object's own route). */

#include "base/str.h"
#include "cp/cp.h"

static bool same_team(const struct json *row, void *team_id)
{
	return str_eq(json_get_str(row, "TeamID"), team_id);
}

static void h_events(struct cp *cp, struct http_req *req)
{
	const char *subject = http_req_query(req, "subject");
	struct cp_caller who;
	struct json *resp;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	if (!subject || !*subject) {
		http_respond_error(req, 400, "subject is required (env:<id>, dep:<id>, host:<id> or cmd:<id>)");
		return;
	}
	if (!cp_event_subject_valid(subject)) {
		http_respond_error(req, 400, "subject must be env:<id>, dep:<id>, host:<id> or cmd:<id>");
		return;
	}
	if (!cp_event_subject_visible(cp, req, who.team_id, subject))
		return;
	/* Event ids are ULIDs: a reverse scan is newest first. The team filter
	 * runs before the limit so another team's events never crowd ours out. */
	resp = json_new_object();
	json_object_set(resp, "events",
			cp_list(cp, "events", "Subject", subject, true, CP_EVENTS_MAX, same_team, who.team_id));
	cp_reply(req, 200, resp);
}

int cp_api_events(struct cp *cp)
{
	/* The stream first: "/v1/events" does not match it, but order says intent. */
	if (cp_events_stream_route(cp) < 0)
		return -1;
	return cp_route(cp, "GET", "/v1/events", 0, h_events);
}
