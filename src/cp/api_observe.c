/*
 * api_observe.c: what an environment uses and prints, read from its host.
 *   GET /v1/envs/{env}/metrics  env.metrics: per service CPU time, memory,
 *                               pids (cgroups); per volume bytes (storage)
 *   GET /v1/envs/{env}/logs     env.logs: a service's last lines (service,
 *                               tail, since, timestamps); follow=true streams them
 *                               as text until the client leaves or the
 *                               environment is destroyed
 * Reads are not activity: watching a sandbox does not keep its idle TTL
 * from running out (ttl.c). Following polls the host every
 * CP_LOGS_FOLLOW_MS for the lines after the last timestamp it sent (docker's
 * timestamps are fixed width, so they compare as strings).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "base/clock.h"
#include "base/str.h"
#include "cp/cp.h"

/* The first service of the environment's current version, for logs
 * without ?service= ("" when it has none). */
static const char *first_service(struct cp *cp, const struct json *env)
{
	const struct json *v = st_get(cp->db, "versions", json_get_str(env, "CurrentVersionID"));
	const struct json *svcs = json_get(json_get(v, "Spec"), "services");

	if (svcs && svcs->type == JSON_ARRAY && json_len(svcs) > 0)
		return json_get_str(json_at(svcs, 0), "name");
	if (svcs && svcs->type == JSON_OBJECT && svcs->u.obj.n > 0)
		return svcs->u.obj.m[0].key;
	return "";
}

/* ---- one-shot reads ---- */

struct read {
	struct http_req *req;
	struct cp_cmd *cmd;
	char env_id[ID_MAX];
	bool logs, timestamps;
};

static void read_gone(struct http_req *req, void *arg)
{
	struct read *r = arg;

	http_respond_error(req, 502, "client went away");
	cp_cmd_cancel(r->cmd);
	free(r);
}

/* Lines of text without their leading "<timestamp> ", into out. */
static void strip_stamps(const char *text, size_t len, struct buf *out)
{
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p)), *stop = nl ? nl + 1 : end;
		const char *sp = memchr(p, ' ', (size_t)(stop - p));

		buf_add(out, sp ? sp + 1 : p, (size_t)(stop - (sp ? sp + 1 : p)));
		p = stop;
	}
}

/* A string member of the host's answer, its timestamps stripped unless kept. */
static struct json *stream_text(const struct json *pl, const char *key, bool keep)
{
	const struct json *v = json_get(pl, key);
	struct buf b = BUF_INIT;
	struct json *out;

	if (!v || v->type != JSON_STRING)
		return json_new_str("");
	if (keep)
		return json_dup(v);
	strip_stamps(v->u.str.s, v->u.str.len, &b);
	out = json_new_strn(b.data ? b.data : "", b.len);
	buf_release(&b);
	return out;
}

static void read_done(struct cp *cp, const struct cp_result *res, void *arg)
{
	struct read *r = arg;
	const struct json *pl = res->payload;
	struct json *resp;

	(void)cp;
	http_req_on_gone(r->req, NULL, NULL);
	if (!res->ok) {
		http_respond_error(r->req, 502, res->error);
	} else if (r->logs) {
		resp = cp_obj("environment", json_new_str(r->env_id), "service",
			      json_new_str(json_get_str(pl, "service")), "stdout", stream_text(pl, "stdout", r->timestamps),
			      "stderr", stream_text(pl, "stderr", r->timestamps), NULL);
		if (json_get_bool(pl, "truncated", false))
			json_object_set_bool(resp, "truncated", true);
		cp_reply(r->req, 200, resp);
	} else {
		resp = pl ? json_dup(pl) : json_new_object();
		json_object_set_str(resp, "environment", r->env_id);
		cp_reply(r->req, 200, resp);
	}
	free(r);
}

static void start_read(struct cp *cp, struct http_req *req, const struct json *env, const char *kind,
		       struct json *payload, bool timestamps)
{
	const char *host = cp_env_host(cp, req, env);
	struct read *r;

	if (!host) {
		json_free(payload);
		return;
	}
	r = xcalloc(1, sizeof(*r));
	r->req = req;
	r->logs = str_eq(kind, "env.logs");
	r->timestamps = timestamps;
	str_copy(r->env_id, sizeof(r->env_id), json_get_str(env, "ID"));
	r->cmd = cp_cmd_send(cp, host, r->env_id, kind, payload, NULL, CP_OBSERVE_TIMEOUT_MS, read_done, r);
	http_req_on_gone(req, read_gone, r);
}

static void h_metrics(struct cp *cp, struct http_req *req)
{
	const struct json *env = cp_team_env(cp, req);

	if (env)
		start_read(cp, req, env, "env.metrics", json_new_object(), false);
}

/* ---- following ---- */

struct follow {
	struct cp *cp;
	struct http_req *req;
	struct cp_cmd *cmd;		/* the env.logs in flight, or NULL */
	struct ev_timer timer;
	char env_id[ID_MAX];
	char service[CP_NAME_MAX + 1];
	char since[CP_LOGS_STAMP_MAX];	/* the last timestamp written, "" before the first */
	int64_t tail;
	bool timestamps;
};

static void follow_free(struct follow *f)
{
	if (f->cmd)
		cp_cmd_cancel(f->cmd);
	ev_timer_stop(f->cp->ev, &f->timer);
	free(f);
}

static void follow_gone(struct http_req *req, void *arg)
{
	(void)req;
	follow_free(arg);
}

static void follow_end(struct follow *f, const char *why)
{
	if (why) {
		char line[ERR_MSG_MAX + 16];
		int n = snprintf(line, sizeof(line), "denv: %s\n", why);

		http_stream_write(f->req, line, n > 0 && (size_t)n < sizeof(line) ? (size_t)n : 0);
	}
	http_req_on_gone(f->req, NULL, NULL);
	http_stream_end(f->req);
	follow_free(f);
}

/* The next line of text at *p (to end), its timestamp in ts; false at the end. */
static bool next_line(const char **p, const char *end, const char **line, size_t *len, char ts[CP_LOGS_STAMP_MAX])
{
	const char *nl, *sp;
	size_t k;

	if (*p >= end)
		return false;
	nl = memchr(*p, '\n', (size_t)(end - *p));
	*line = *p;
	*len = (size_t)((nl ? nl + 1 : end) - *p);
	*p += *len;
	sp = memchr(*line, ' ', *len);
	k = sp ? (size_t)(sp - *line) : 0;
	if (k >= CP_LOGS_STAMP_MAX)
		k = 0;
	memcpy(ts, *line, k);
	ts[k] = '\0';
	return true;
}

/* stdout's and stderr's lines in timestamp order, those after since only. */
static void write_merged(struct follow *f, const struct json *pl)
{
	const struct json *o = json_get(pl, "stdout"), *e = json_get(pl, "stderr");
	const char *po = o && o->type == JSON_STRING ? o->u.str.s : "", *pe = e && e->type == JSON_STRING ? e->u.str.s : "";
	const char *eo = po + (o && o->type == JSON_STRING ? o->u.str.len : 0);
	const char *ee = pe + (e && e->type == JSON_STRING ? e->u.str.len : 0);
	const char *lo = NULL, *le = NULL;
	size_t no = 0, ne = 0;
	char to[CP_LOGS_STAMP_MAX] = "", te[CP_LOGS_STAMP_MAX] = "";
	bool ho = next_line(&po, eo, &lo, &no, to), he = next_line(&pe, ee, &le, &ne, te);

	while (ho || he) {
		bool take_out = ho && (!he || strcmp(to, te) <= 0);
		const char *line = take_out ? lo : le, *ts = take_out ? to : te;
		size_t len = take_out ? no : ne, skip = 0;

		if (!*f->since || strcmp(ts, f->since) > 0) {
			if (!f->timestamps && *ts)
				skip = strlen(ts) + 1;
			http_stream_write(f->req, line + skip, len - (skip < len ? skip : len));
			str_copy(f->since, sizeof(f->since), ts);
		}
		if (take_out)
			ho = next_line(&po, eo, &lo, &no, to);
		else
			he = next_line(&pe, ee, &le, &ne, te);
	}
}

static void follow_tick(struct ev *ev, void *arg);

/* Now as docker stamps its log lines: fixed width, UTC, nanoseconds. */
static void docker_now(char out[CP_LOGS_STAMP_MAX])
{
	int64_t ns = clock_now_ns();
	time_t secs = (time_t)(ns / 1000000000);
	struct tm tm;
	char day[32];

	gmtime_r(&secs, &tm);
	strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, CP_LOGS_STAMP_MAX, "%s.%09lldZ", day, (long long)(ns % 1000000000));
}

static void follow_result(struct cp *cp, const struct cp_result *res, void *arg)
{
	struct follow *f = arg;
	const struct json *env = st_get(cp->db, "environments", f->env_id);

	f->cmd = NULL;
	if (!res->ok) {
		follow_end(f, res->error);
		return;
	}
	write_merged(f, res->payload);
	/* Nothing in the first read (tail 0, or a silent container): follow
	 * from now, or the next read would repeat what tail left out. */
	if (!*f->since)
		docker_now(f->since);
	if (!env || str_eq(json_get_str(env, "Status"), "destroyed")) {
		follow_end(f, "environment destroyed");
		return;
	}
	ev_timer_start(cp->ev, &f->timer, CP_LOGS_FOLLOW_MS, follow_tick, f);
}

static void follow_tick(struct ev *ev, void *arg)
{
	struct follow *f = arg;
	const struct json *env = st_get(f->cp->db, "environments", f->env_id);
	const char *host = json_get_str(env, "HostID");
	struct json *payload;

	(void)ev;
	if (!env || str_eq(json_get_str(env, "Status"), "destroyed")) {
		follow_end(f, "environment destroyed");
		return;
	}
	/* A client that reads slower than the container prints waits a turn. */
	if (http_stream_queued(f->req) > CP_LOGS_FOLLOW_QUEUED || !host || !cp_host_connected(f->cp, host)) {
		ev_timer_start(f->cp->ev, &f->timer, CP_LOGS_FOLLOW_MS, follow_tick, f);
		return;
	}
	payload = cp_obj("service", json_new_str(f->service), "tail",
			 json_new_int(*f->since ? CP_LOGS_FOLLOW_TAIL : f->tail), NULL);
	if (*f->since)
		json_object_set_str(payload, "since", f->since);
	f->cmd = cp_cmd_send(f->cp, host, f->env_id, "env.logs", payload, NULL, CP_OBSERVE_TIMEOUT_MS, follow_result, f);
}

static void start_follow(struct cp *cp, struct http_req *req, const struct json *env, const char *service,
			 int64_t tail, bool timestamps)
{
	struct follow *f;

	if (!cp_env_host(cp, req, env))
		return;
	f = xcalloc(1, sizeof(*f));
	f->cp = cp;
	f->req = req;
	f->tail = tail;
	f->timestamps = timestamps;
	str_copy(f->env_id, sizeof(f->env_id), json_get_str(env, "ID"));
	str_copy(f->service, sizeof(f->service), service);
	if (http_stream_begin(req, 200, "text/plain; charset=utf-8") < 0) {
		free(f);
		return;
	}
	http_req_on_gone(req, follow_gone, f);
	follow_tick(cp->ev, f);
}

/* ?name=true|false (absent: false); -1 after answering 400. */
static int query_bool(struct http_req *req, const char *name, bool *out)
{
	const char *v = http_req_query(req, name);

	*out = false;
	if (!v || !*v || str_eq(v, "false") || str_eq(v, "0"))
		return 0;
	if (str_eq(v, "true") || str_eq(v, "1")) {
		*out = true;
		return 0;
	}
	cp_fail(req, 400, "%s must be true or false", name);
	return -1;
}

static void h_logs(struct cp *cp, struct http_req *req)
{
	const struct json *env = cp_team_env(cp, req);
	const char *service = http_req_query(req, "service"), *tail_s = http_req_query(req, "tail");
	const char *since = http_req_query(req, "since");
	int64_t tail = CP_LOGS_TAIL_DEFAULT;
	struct json *payload;
	bool follow, stamps;

	if (!env || query_bool(req, "follow", &follow) < 0 || query_bool(req, "timestamps", &stamps) < 0)
		return;
	if (tail_s && *tail_s && (str_to_i64(tail_s, &tail) < 0 || tail < 0 || tail > CP_LOGS_TAIL_MAX)) {
		cp_fail(req, 400, "tail must be 0 to %d", CP_LOGS_TAIL_MAX);
		return;
	}
	if (!service || !*service)
		service = first_service(cp, env);
	if (!*service || !cp_valid_name(service)) {
		http_respond_error(req, 400, "service is required");
		return;
	}
	if (since && *since && (strlen(since) >= CP_LOGS_STAMP_MAX || since[0] == '-')) {
		http_respond_error(req, 400, "since must be a timestamp");
		return;
	}
	if (follow) {
		start_follow(cp, req, env, service, tail, stamps);
		return;
	}
	payload = cp_obj("service", json_new_str(service), "tail", json_new_int(tail), NULL);
	if (since && *since)
		json_object_set_str(payload, "since", since);
	start_read(cp, req, env, "env.logs", payload, stamps);
}

int cp_api_observe(struct cp *cp)
{
	if (cp_route(cp, "GET", "/v1/envs/{env}/metrics", 0, h_metrics) < 0 ||
	    cp_route(cp, "GET", "/v1/envs/{env}/logs", 0, h_logs) < 0)
		return -1;
	return 0;
}
