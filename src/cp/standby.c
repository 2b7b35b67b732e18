/* standby.c: a standby control plane (denv-cp(8), "Standby").
 *
 * Two or more denv-cp processes may share one PostgreSQL store. The store's
 * connection holds a session advisory lock (store/pg.h): that lock is the
 * lease. Whoever holds it is active; a process that finds it taken at start
 * stands by: it listens on its address and answers every request 503 with
 * Retry-After (GET /health says "standby"), so load balancers and sidecars
 * move on to the active one, and tries for the lease every
 * CP_STANDBY_POLL_MS. When the active process dies its connection closes,
 * PostgreSQL drops the lock, and the next try opens the store: rows are
 * loaded from PostgreSQL, the standby listener is closed and the normal
 * start-up follows (the same recovery as after a restart: deployments that
 * were in flight end failed with a reason, unanswered commands likewise).
 *
 * Nothing is lost at take-over because nothing lives only in the active
 * process: a write is acknowledged after PostgreSQL committed it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

struct standby {
	struct cp *cp;
	struct http_server *srv;
	struct ev_timer poll;
	char last_err[ERR_MSG_MAX];	/* logged once, not every poll */
	int rc;				/* 0: the store is open; -1: stopped */
};

static void answer_standby(struct http_req *req, void *arg)
{
	char retry[16];

	snprintf(retry, sizeof(retry), "%d", CP_STANDBY_RETRY_AFTER_S);
	http_resp_header(req, "Retry-After", retry);
	if (str_eq(http_req_path(req), "/health")) {
		static const char body[] = "{\"status\":\"standby\"}";

		http_respond(req, 503, "application/json", body, sizeof(body) - 1);
		return;
	}
	http_respond_error(req, 503, "standby: another denv-cp holds the store's lease; ask the active one");
}

static int standby_routes(struct standby *s)
{
	static const char *const methods[] = { "GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", NULL };

	for (const char *const *m = methods; *m; m++)
		if (http_route(s->srv, *m, "/{rest...}", 0, answer_standby, s) < 0 ||
		    http_route(s->srv, *m, "/", 0, answer_standby, s) < 0)
			return -1;
	return 0;
}

static void try_lease(struct ev *ev, void *arg)
{
	struct standby *s = arg;
	struct err e;

	if (s->cp->stopping) {
		ev_stop(ev);
		return;
	}
	if (cp_db_open(s->cp, &e) == 0) {
		s->rc = 0;
		ev_stop(ev);
		return;
	}
	st_close(s->cp->db);
	s->cp->db = NULL;
	if (e.code != EBUSY && strcmp(e.msg, s->last_err) != 0)
		log_warn("cp", "standby: %s (trying again every %d ms)", e.msg, CP_STANDBY_POLL_MS);
	str_copy(s->last_err, sizeof(s->last_err), e.msg);
	ev_timer_start(ev, &s->poll, CP_STANDBY_POLL_MS, try_lease, s);
}

/* -addr HOST:0 asks for any port: the standby's, so that whoever found
 * this process on it finds the active server there too. */
static void keep_port(struct cp *cp, int port)
{
	const char *addr = cp->cfg.addr, *colon = strrchr(addr, ':');

	if (!colon || !str_eq(colon, ":0"))
		return;
	snprintf(cp->listen, sizeof(cp->listen), "%.*s:%d", (int)(colon - addr), addr, port);
	cp->cfg.addr = cp->listen;
}

int cp_db_open_or_stand_by(struct cp *cp, struct http_server_opts *hopts, struct err *e)
{
	struct standby s;
	int64_t since;

	if (cp_db_open(cp, e) == 0)
		return 0;
	if (e->code != EBUSY || !st_is_remote(cp->cfg.db))
		return -1;
	st_close(cp->db);
	cp->db = NULL;
	memset(&s, 0, sizeof(s));
	s.cp = cp;
	s.rc = -1;
	s.srv = http_server_new(cp->ev, hopts, e);
	if (!s.srv)
		return err_prefix(e, "listen %s", cp->cfg.addr);
	if (standby_routes(&s) < 0) {
		http_server_free(s.srv);
		return err_set(e, "standby: cannot add its routes");
	}
	log_info("cp", "standby on port %d: another denv-cp holds the lease on %s; trying every %d ms",
		 http_server_port(s.srv), cp->cfg.db_shown, CP_STANDBY_POLL_MS);
	since = ev_mono_ms();
	ev_timer_start(cp->ev, &s.poll, CP_STANDBY_POLL_MS, try_lease, &s);
	if (ev_run(cp->ev) < 0)
		err_set(e, "standby: event loop failed");
	ev_timer_stop(cp->ev, &s.poll);
	keep_port(cp, http_server_port(s.srv));
	/* The active server listens on the same address next. */
	http_server_free(s.srv);
	hopts->listen = cp->cfg.addr;
	if (s.rc == 0)
		log_info("cp", "took the lease on %s after %lld s as standby", cp->cfg.db_shown,
			 (long long)((ev_mono_ms() - since) / 1000));
	else if (cp->stopping)
		err_set(e, "stopped while standing by");
	return s.rc;
}

/* An active process that lost the lease (its connection dropped and a
 * standby took the lock) must not go on answering from rows that no longer
 * are the truth: it stops, exit status 1; restarted, it stands by. */
static void check_lease(struct ev *ev, void *arg)
{
	struct cp *cp = arg;

	if (!st_lease_lost(cp->db)) {
		ev_timer_start(ev, &cp->lease_check, CP_STANDBY_POLL_MS, check_lease, cp);
		return;
	}
	log_error("cp", "lost the lease on %s to another denv-cp: stopping", cp->cfg.db_shown);
	cp->lease_lost = true;
	ev_stop(ev);
}

void cp_lease_watch(struct cp *cp)
{
	if (st_is_remote(cp->cfg.db))
		ev_timer_start(cp->ev, &cp->lease_check, CP_STANDBY_POLL_MS, check_lease, cp);
}
