/* health.c: wait until containers are ready. A container that exits or
 * that Docker finds unhealthy fails the wait at once with what it printed,
 * so the person reading the deploy sees why. Ready is, first to pass:
 *  - no healthcheck: running;
 *  - a database's stock healthcheck (ready.c): the database's own answer
 *    from inside the container's network namespace, tried from
 *    RD_GAP_FIRST_MS on. Its exec test runs too, from RD_EXEC_BEHIND_MS on,
 *    in case the database does not listen on 127.0.0.1, until the database
 *    answers the native test at all (then its answers decide);
 *  - any healthcheck: its command run through the Engine API's exec, from
 *    RD_GAP_EXEC_FIRST_MS on, backing off;
 *  - Docker's own HEALTHCHECK state turning healthy (the fallback, and
 *    the only test for a healthcheck the image brings itself).
 * Docker is looked at every RD_LOOK_MAX_MS at most, and the whole wait is
 * bounded by the services' own interval x retries plus SC_HEALTH_BASE_MS.
 * Each ready service's test, time and tries go into the readiness evidence. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/proc.h"
#include "base/str.h"
#include "sidecar/sidecar.h"

static int64_t budget_ms(const struct json *svc)
{
	const struct json *h = json_get(svc, "health");
	const char *iv = json_get_str(h, "interval");
	int64_t interval = SC_HEALTH_DEFAULT_INTERVAL_MS, retries = json_get_int(h, "retries", 0), ms;

	if (!h)
		return SC_HEALTH_BASE_MS;
	if (iv && *iv && clock_parse_duration(iv, &ms) == 0 && ms > 0)
		interval = ms;
	if (retries <= 0)
		retries = 3;	/* Docker's default */
	ms = SC_HEALTH_BASE_MS + interval * (retries + 1);
	return ms > SC_HEALTH_MAX_MS ? SC_HEALTH_MAX_MS : ms;
}

/* The last lines the container printed (stdout and stderr). */
static void log_tail(const char *cname, char *out, size_t n)
{
	const char *argv[] = { "docker", "logs", "--tail", "5", cname, NULL };
	struct proc_spec s;
	struct proc_result r;
	struct err e;
	struct buf all = BUF_INIT;
	size_t len;

	out[0] = '\0';
	proc_spec_init(&s, argv);
	s.timeout_ms = SC_DOCKER_QUICK_MS;
	s.out_max = s.err_max = 16384;
	if (proc_run(&s, NULL, 0, &r, &e) == 0) {
		buf_add(&all, r.out.data, r.out.len);
		buf_add(&all, r.err.data, r.err.len);
		len = all.len > SC_LOG_TAIL_BYTES ? SC_LOG_TAIL_BYTES : all.len;
		snprintf(out, n, "%s", all.data + all.len - len);
		for (char *p = out; *p; p++)
			if (*p == '\n')
				*p = ' ';
	}
	buf_release(&all);
	proc_result_release(&r);
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* One service being waited for. */
struct waiter {
	const struct json *svc;
	const char *name;
	char cname[SC_DOCKER_NAME_MAX];
	struct rd_plan plan;
	bool ready;
	int64_t next_native, gap_native, next_exec, gap_exec;
	int tries;
	char state[160];	/* Docker's status/health at the last look */
};


static void waiter_init(struct waiter *w, const char *project, const struct json *svc, int64_t now)
{
	memset(w, 0, sizeof(*w));
	w->svc = svc;
	w->name = json_get_str(svc, "name");
	dk_container(project, w->name, w->cname, sizeof(w->cname));
	rd_plan_of(svc, &w->plan);
	w->gap_native = RD_GAP_FIRST_MS;
	w->gap_exec = RD_GAP_EXEC_FIRST_MS;
	w->next_native = now;
	w->next_exec = now + (w->plan.native != RD_NONE ? RD_EXEC_BEHIND_MS : 0);
}

/* Whether an earlier wait (for a dependency) already recorded the service. */
static bool recorded(const struct json *readiness, const char *name)
{
	for (size_t i = 0; i < json_len(readiness); i++)
		if (str_eq(json_get_str(json_at(readiness, i), "service"), name))
			return true;
	return false;
}

static void mark_ready(struct waiter *w, const char *test, const char *detail, int64_t since,
		       struct json *readiness)
{
	w->ready = true;
	if (!readiness || recorded(readiness, w->name))
		return;
	{
		struct json *r = json_new_object();

		json_object_set_str(r, "service", w->name);
		json_object_set_str(r, "test", test);
		json_object_set_int(r, "ready_ms", ev_mono_ms() - since);
		json_object_set_int(r, "tries", w->tries);
		if (*detail)
			json_object_set_str(r, "detail", detail);
		json_array_push(readiness, r);
	}
}

/* A container that stopped or that Docker calls unhealthy: -1 with e. */
static int failed(const struct waiter *w, const struct engine_ctr *c, struct err *e)
{
	char tail[SC_LOG_TAIL_BYTES + 1];

	if (str_eq(c->status, "exited") || str_eq(c->status, "dead")) {
		log_tail(w->cname, tail, sizeof(tail));
		return err_set(e, "service \"%s\" exited with code %d%s%s", w->name, c->exit_code, *tail ? ": " : "",
			       tail);
	}
	{
		struct buf hl = BUF_INIT;
		int rc = dk(&hl, SC_DOCKER_QUICK_MS, e, "inspect", "--format",
			    "{{with .State.Health}}{{range .Log}}{{.Output}}{{end}}{{end}}", w->cname, NULL);

		dk_first_line(rc == 0 ? hl.data : "", tail, sizeof(tail));
		buf_release(&hl);
	}
	return err_set(e, "service \"%s\" is unhealthy%s%s", w->name, *tail ? ": " : "", tail);
}

/* The healthcheck's command as Docker runs it: CMD's words, CMD-SHELL through /bin/sh -c. */
static size_t exec_argv(const struct json *test, const char **argv, size_t max)
{
	size_t n = 0;

	if (str_eq(json_at(test, 0)->u.str.s, "CMD-SHELL")) {
		argv[n++] = "/bin/sh";
		argv[n++] = "-c";
		argv[n++] = json_at(test, 1)->u.str.s;
	} else {
		for (size_t i = 1; i < json_len(test) && n + 1 < max; i++)
			argv[n++] = json_at(test, i)->u.str.s;
	}
	argv[n] = NULL;
	return n;
}

/* The healthcheck through the Engine API: 1 passed, 0 not (or the API
 * cannot run it: then Docker's own state decides, exec is not tried again). */
static int try_exec(struct waiter *w, char *detail, size_t n)
{
	const struct json *test = json_get(json_get(w->svc, "health"), "test");
	const char *argv[SC_HEALTH_ARGV_MAX + 1];
	struct engine_exec x;
	struct err e;
	int rc;

	exec_argv(test, argv, SC_HEALTH_ARGV_MAX + 1);
	rc = engine_exec(w->cname, argv, RD_EXEC_TIMEOUT_MS, SC_LOG_TAIL_BYTES, &x, &e);
	if (rc == 0)
		w->plan.exec = false;
	rc = rc == 1 && !x.timed_out && x.exit_code == 0;
	if (rc)
		snprintf(detail, n, "%s exited 0", str_eq(argv[0], "/bin/sh") ? argv[2] : argv[0]);
	engine_exec_release(&x);
	return rc;
}

/* The tests due now for one running service with a healthcheck. */
static void try_due(struct waiter *w, const struct engine_ctr *c, int64_t since, struct json *readiness)
{
	char detail[NETNS_MSG_MAX] = "";
	int64_t now = ev_mono_ms();
	struct err e;

	if (w->plan.native != RD_NONE && now >= w->next_native) {
		int rc = rd_native(c->pid, &w->plan, detail, sizeof(detail), &e);

		w->tries++;
		if (rc < 0) {
			wk_progress("service %s: its own readiness cannot be asked (%s); using its healthcheck", w->name,
				    e.msg);
			w->plan.native = RD_NONE;
		} else if (rc == 1) {
			mark_ready(w, w->plan.native == RD_POSTGRES ? "postgres" : "redis", detail, since, readiness);
			return;
		} else if (rc == 2) {
			w->plan.exec = false;	/* the database itself answers: its word decides */
		}
		w->next_native = now + w->gap_native;
		w->gap_native = rd_gap_next(w->gap_native, RD_GAP_NATIVE_MAX_MS);
	}
	if (w->plan.exec && now >= w->next_exec) {
		w->tries++;
		if (try_exec(w, detail, sizeof(detail))) {
			mark_ready(w, "exec", detail, since, readiness);
			return;
		}
		w->next_exec = ev_mono_ms() + w->gap_exec;
		w->gap_exec = rd_gap_next(w->gap_exec, RD_GAP_EXEC_MAX_MS);
	}
}

/* One look at one service: 0 (ready or not yet: w->ready says), -1 failed. */
static int look(struct waiter *w, int64_t since, struct json *readiness, struct err *e)
{
	struct engine_ctr c;
	int rc;

	if ((rc = engine_container(w->cname, &c, e)) <= 0)
		return rc == 0 ? err_set(e, "service \"%s\": no container %s", w->name, w->cname)
			       : err_prefix(e, "service \"%s\"", w->name);
	snprintf(w->state, sizeof(w->state), "%s/%s", c.status, c.health);
	if (str_eq(c.status, "exited") || str_eq(c.status, "dead") || str_eq(c.health, "unhealthy"))
		return failed(w, &c, e);
	if (!str_eq(c.status, "running"))
		return 0;
	if (str_eq(c.health, "none"))
		mark_ready(w, "running", "", since, readiness);
	else if (str_eq(c.health, "healthy"))
		mark_ready(w, "docker", "Docker's healthcheck state is healthy", since, readiness);
	else
		try_due(w, &c, since, readiness);
	return 0;
}

/* How long to sleep before the next test is due. */
static int64_t pause_ms(const struct waiter *ws, size_t n)
{
	int64_t now = ev_mono_ms(), wake = now + RD_LOOK_MAX_MS;

	for (size_t i = 0; i < n; i++) {
		if (ws[i].ready)
			continue;
		if (ws[i].plan.native != RD_NONE && ws[i].next_native < wake)
			wake = ws[i].next_native;
		if (ws[i].plan.exec && ws[i].next_exec < wake)
			wake = ws[i].next_exec;
	}
	return wake - now > 1 ? wake - now : 1;
}

int health_wait(const char *project, const struct json *services, const char *only, struct json *readiness,
		struct err *e)
{
	int64_t start = ev_mono_ms(), budget = 0;
	size_t n = 0, left;
	struct waiter *ws = xcalloc(json_len(services) + 1, sizeof(*ws));
	int rc = 0;

	for (size_t i = 0; i < json_len(services); i++) {
		const struct json *s = json_at(services, i);

		if (!only || str_eq(only, json_get_str(s, "name"))) {
			int64_t b = budget_ms(s);

			budget = b > budget ? b : budget;
			waiter_init(&ws[n++], project, s, start);
		}
	}
	for (left = n; left > 0 && rc == 0;) {
		const struct waiter *late = NULL;

		for (size_t i = 0; i < n && rc == 0; i++) {
			if (!ws[i].ready && (rc = look(&ws[i], start, readiness, e)) == 0 && ws[i].ready)
				left--;
			if (!ws[i].ready && !late)
				late = &ws[i];
		}
		if (rc < 0 || left == 0)
			break;
		if (ev_mono_ms() - start > budget) {
			rc = err_set(e, "service \"%s\" is not healthy after %lld s (%s)", late->name,
				     (long long)(budget / 1000), late->state);
			break;
		}
		sleep_ms(pause_ms(ws, n));
	}
	free(ws);
	return rc;
}
