/* health.c: wait until containers are up: running, and healthy when they
 * have a healthcheck. A container that exits or turns unhealthy fails the
 * wait at once with what it printed, so the person reading the deploy sees
 * why. Polls `docker inspect` every SC_HEALTH_POLL_MS, bounded by the
 * services' own interval x retries plus SC_HEALTH_BASE_MS. */
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

/* One look at one container: 1 ready, 0 not yet, -1 failed (e set). */
static int check_one(const char *cname, const char *svc, char *health_status, size_t hn, struct err *e)
{
	char tail[SC_LOG_TAIL_BYTES + 1];
	struct engine_ctr c;
	int rc;

	if ((rc = engine_container(cname, &c, e)) <= 0)
		return rc == 0 ? err_set(e, "service \"%s\": no container %s", svc, cname)
			       : err_prefix(e, "service \"%s\"", svc);
	snprintf(health_status, hn, "%s/%s", c.status, c.health);
	if (str_eq(c.status, "exited") || str_eq(c.status, "dead")) {
		log_tail(cname, tail, sizeof(tail));
		return err_set(e, "service \"%s\" exited with code %d%s%s", svc, c.exit_code, *tail ? ": " : "",
			       tail);
	}
	if (str_eq(c.health, "unhealthy")) {
		struct buf hl = BUF_INIT;

		rc = dk(&hl, SC_DOCKER_QUICK_MS, e, "inspect", "--format",
			"{{with .State.Health}}{{range .Log}}{{.Output}}{{end}}{{end}}", cname, NULL);
		dk_first_line(rc == 0 ? hl.data : "", tail, sizeof(tail));
		buf_release(&hl);
		return err_set(e, "service \"%s\" is unhealthy%s%s", svc, *tail ? ": " : "", tail);
	}
	if (str_eq(c.status, "running") && (str_eq(c.health, "none") || str_eq(c.health, "healthy")))
		return 1;
	return 0;
}

int health_wait(const char *project, const struct json *services, const char *only, struct err *e)
{
	int64_t start = ev_mono_ms(), budget = 0;

	for (size_t i = 0; i < json_len(services); i++) {
		const struct json *s = json_at(services, i);

		if (!only || str_eq(only, json_get_str(s, "name"))) {
			int64_t b = budget_ms(s);

			budget = b > budget ? b : budget;
		}
	}
	for (;;) {
		bool all = true;
		char last[160] = "", lastsvc[SC_ID_MAX] = "";

		for (size_t i = 0; i < json_len(services); i++) {
			const struct json *s = json_at(services, i);
			const char *name = json_get_str(s, "name");
			char cname[300];
			int rc;

			if (only && !str_eq(only, name))
				continue;
			dk_container(project, name, cname, sizeof(cname));
			if ((rc = check_one(cname, name, last, sizeof(last), e)) < 0)
				return -1;
			if (rc == 0) {
				all = false;
				str_copy(lastsvc, sizeof(lastsvc), name);
				break;
			}
		}
		if (all)
			return 0;
		if (ev_mono_ms() - start > budget)
			return err_set(e, "service \"%s\" is not healthy after %lld s (%s)", lastsvc,
				       (long long)(budget / 1000), last);
		sleep_ms(SC_HEALTH_POLL_MS);
	}
}
