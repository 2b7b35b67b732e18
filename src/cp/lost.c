/*
 * lost.c: hosts that stay away (denv-cp(8), "PLACEMENT"). A sidecar whose
 * stream is gone is unreachable at once (hub.c); when it has been so for
 * cfg.host_lost_ms after its LastSeenAt, it becomes lost, and so does
 * every environment on it that is not destroyed: each gets Status lost,
 * LostAt and the status it had (LostFrom), with an env.lost event, and the
 * host a host.lost event listing them. A lost environment is re-created
 * elsewhere by a redeploy of its version (api_place.c): its old host is not
 * connected, so placement picks another.
 *
 * After a restart of the control plane every host gets the whole grace
 * again (counted from start-up): LastSeenAt may be old only because the
 * control plane was down. A lost host that reconnects gets its
 * environments back with the status they had (env.found), unless a
 * redeploy has moved them meanwhile (their HostID is another host's).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/ev.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

/* Hosts found due in one tick; more wait for the next. */
#define LOST_PER_TICK 64

struct due {
	char ids[LOST_PER_TICK][ID_MAX];
	size_t n;
	int64_t cutoff_ns;	/* LastSeenAt at or before this: due */
};

struct scan {
	struct cp *cp;
	struct due *due;
};

static int pick_due(const char *id, const struct json *row, void *arg)
{
	struct scan *s = arg;
	const char *seen = json_get_str(row, "LastSeenAt");
	int64_t ns;

	if (!str_eq(json_get_str(row, "Status"), "unreachable") || cp_host_is_driver(s->cp, row) ||
	    cp_host_connected(s->cp, id))
		return 0;
	if (seen && clock_parse_rfc3339(seen, &ns) == 0 && ns > s->due->cutoff_ns)
		return 0;
	str_copy(s->due->ids[s->due->n++], ID_MAX, id);
	return s->due->n == LOST_PER_TICK;
}

struct env_ids {
	const char *team_id;
	const char *status;	/* only environments with this status; NULL: any live one */
	struct json *ids;
};

static int pick_env(const char *id, const struct json *row, void *arg)
{
	struct env_ids *w = arg;
	const char *st = json_get_str(row, "Status");

	if (!str_eq(json_get_str(row, "TeamID"), w->team_id))
		return 0;
	if (w->status ? str_eq(st, w->status) : !str_eq(st, "destroyed") && !str_eq(st, "lost"))
		json_array_push(w->ids, json_new_str(id));
	return 0;
}

/* The ids of host_id's team's environments on it (status as in env_ids). */
static struct json *envs_on(struct cp *cp, const char *team_id, const char *host_id, const char *status)
{
	struct env_ids w = { team_id, status, json_new_array() };
	struct err e;

	/* By HostID: a hello reads that host's environments, not the team's
	 * (1,000 hosts coming back over 100,000 environments took 71 s). */
	if (st_scan(cp->db, "environments", "HostID", host_id, NULL, pick_env, &w, &e) < 0)
		log_error("lost", "environments: %s", e.msg);
	return w.ids;
}

static void env_event(struct cp *cp, const char *team_id, const char *env_id, const char *kind, struct json *body)
{
	char subject[ST_ID_MAX];

	snprintf(subject, sizeof(subject), "env:%s", env_id);
	cp_event(cp, NULL, team_id, subject, kind, body);
}

static void mark_lost(struct cp *cp, const char *host_id)
{
	const struct json *h = st_get(cp->db, "hosts", host_id);
	char team[ID_MAX], seen[CLOCK_RFC3339_MAX], subject[ST_ID_MAX];
	struct json *ids;

	if (!h)
		return;
	str_copy(team, sizeof(team), json_get_str(h, "TeamID"));
	str_copy(seen, sizeof(seen), json_get_str(h, "LastSeenAt") ? json_get_str(h, "LastSeenAt") : "");
	ids = envs_on(cp, team, host_id, NULL);
	for (size_t i = 0; i < json_len(ids); i++) {
		const char *env_id = json_at(ids, i)->u.str.s;
		const char *was = json_get_str(st_get(cp->db, "environments", env_id), "Status");
		struct json *from = json_new_str(was ? was : "");

		cp_update(cp, "environments", env_id,
			  cp_obj("Status", json_new_str("lost"), "LostAt", cp_now_json(), "LostFrom", json_dup(from),
				 NULL));
		env_event(cp, team, env_id, "env.lost",
			  cp_obj("host", json_new_str(host_id), "last_seen_at", json_new_str(seen), "was", from, NULL));
	}
	cp_update(cp, "hosts", host_id, cp_obj("Status", json_new_str("lost"), "LostAt", cp_now_json(), NULL));
	snprintf(subject, sizeof(subject), "host:%s", host_id);
	log_warn("lost", "host %s: unreachable since %s; it and %zu environment%s are lost", host_id,
		 *seen ? seen : "it joined", json_len(ids), json_len(ids) == 1 ? "" : "s");
	cp_event(cp, NULL, team, subject, "host.lost",
		 cp_obj("host", json_new_str(host_id), "last_seen_at", json_new_str(seen), "environments", ids, NULL));
}

static void tick(struct ev *ev, void *arg)
{
	struct cp *cp = arg;
	struct due *due = xcalloc(1, sizeof(*due));
	struct scan s = { cp, due };
	int64_t grace_ns = cp->cfg.host_lost_ms * 1000000;
	struct err e;

	/* Until the grace has passed since start-up, nobody is due. */
	if (!cp->stopping && ev_mono_ms() - cp->lost_since_ms >= cp->cfg.host_lost_ms) {
		due->cutoff_ns = clock_now_ns() - grace_ns;
		if (st_scan(cp->db, "hosts", NULL, NULL, NULL, pick_due, &s, &e) < 0)
			log_error("lost", "hosts: %s", e.msg);
		for (size_t i = 0; i < due->n; i++)
			mark_lost(cp, due->ids[i]);
	}
	free(due);
	ev_timer_start(ev, &cp->lost_timer, CP_LOST_TICK_MS, tick, cp);
}

void cp_lost_start(struct cp *cp)
{
	cp->lost_since_ms = ev_mono_ms();
	ev_timer_start(cp->ev, &cp->lost_timer, CP_LOST_TICK_MS, tick, cp);
}

void cp_lost_stop(struct cp *cp)
{
	ev_timer_stop(cp->ev, &cp->lost_timer);
}

void cp_lost_host_back(struct cp *cp, const char *host_id)
{
	const struct json *h = st_get(cp->db, "hosts", host_id);
	char team[ID_MAX];
	struct json *ids;

	if (!h)
		return;
	str_copy(team, sizeof(team), json_get_str(h, "TeamID"));
	ids = envs_on(cp, team, host_id, "lost");
	for (size_t i = 0; i < json_len(ids); i++) {
		const char *env_id = json_at(ids, i)->u.str.s;
		const char *was = json_get_str(st_get(cp->db, "environments", env_id), "LostFrom");
		struct json *back = json_new_str(was && *was ? was : "running");

		cp_update(cp, "environments", env_id, cp_obj("Status", json_dup(back), "LostAt", json_new_null(), NULL));
		env_event(cp, team, env_id, "env.found", cp_obj("host", json_new_str(host_id), "status", back, NULL));
	}
	if (json_len(ids))
		log_info("lost", "host %s is back: %zu lost environment%s restored", host_id, json_len(ids),
			 json_len(ids) == 1 ? "" : "s");
	json_free(ids);
}
