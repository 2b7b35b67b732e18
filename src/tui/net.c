/*
 * net.c: everything `denv top` reads, on the event loop, never blocking the
 * screen (the one exception is ws_dial, see top_net_stream).
 *
 * A "sweep" reads the whole picture: hosts and projects, then each
 * project's environments, then each environment's deployments, at most
 * TOP_MAX_INFLIGHT requests at a time. Its results are staged and replace
 * the model only when the sweep completes without error, so the screen
 * never shows half of one refresh and half of another. The selected
 * deployment's document is read on its own, more often while it runs:
 * phase changes produce no events, only the deployment's start and end do.
 *
 * The live event stream is only a doorbell: any event of the team starts a
 * sweep (after a short debounce); the REST answers are the truth, as in
 * src/cli/wait.c. Without the stream we sweep every TOP_POLL_MS and say
 * "polling" in the title bar.
 */
#include "tui/tui.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/str.h"
#include "cli/cli.h"
#include "http/http.h"
#include "json/json.h"
#include "ws/ws.h"

enum req_kind { R_HOSTS, R_PROJECTS, R_ENVS, R_DEPS, R_DEP, R_POOLS };

struct req {
	struct top_net *n;
	enum req_kind kind;
	char key[TOP_ID_MAX];		/* project id, env id, deployment id */
	char label[2 * TOP_ID_MAX];	/* project name, "project/env" */
	char *path;
	struct http_acall *call;	/* NULL while queued */
	struct req *next;
};

struct top_net {
	struct ev *ev;
	struct http_aclient *ac;
	const struct cli_config *cfg;
	struct top *t;
	top_changed_fn changed;
	void *arg;
	struct buf auth;		/* "Authorization: Bearer ..." */

	struct req *reqs;		/* every request alive, queued or in flight */
	int inflight;
	/* the sweep */
	bool sweeping, again;
	int pending;			/* sweep requests queued or in flight */
	int sweeps;
	struct json *s_hosts, *s_envs, *s_deps, *s_pools;
	char s_err[TOP_STATUS_MAX];
	int nprojects, nenvs;
	/* the selected deployment */
	struct req *dep;
	bool dep_ready;
	/* the stream */
	struct ws_conn *ws;
	bool no_stream;
	int64_t last_dial;
	struct ev_timer tick, dep_tick, debounce;
};

static void start_sweep(struct top_net *n);
static void pump(struct top_net *n);

/* snprintf for messages whose cut is intended (an over-long server error). */
static void __attribute__((format(printf, 3, 4))) msgf(char *out, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out, size, fmt, ap);
	va_end(ap);
}

/* ---- requests ---- */

static void req_unlink(struct req *r)
{
	struct req **pp = &r->n->reqs;

	while (*pp && *pp != r)
		pp = &(*pp)->next;
	if (*pp)
		*pp = r->next;
	free(r->path);
	free(r);
}

static struct req *req_new(struct top_net *n, enum req_kind kind, const char *key, const char *label,
			   const char *path)
{
	struct req *r = xcalloc(1, sizeof(*r));

	r->n = n;
	r->kind = kind;
	str_copy(r->key, sizeof(r->key), key ? key : "");
	str_copy(r->label, sizeof(r->label), label ? label : "");
	r->path = xstrdup(path);
	r->next = n->reqs;
	n->reqs = r;
	return r;
}

/* "/v1/<a>/<escaped key>/<b>" */
static char *path_of(const char *a, const char *key, const char *b)
{
	struct buf p = BUF_INIT;

	buf_addf(&p, "/v1/%s/", a);
	http_pct_encode(&p, key, "");
	buf_adds(&p, b);
	return buf_detach(&p, NULL);
}

/* The server's {"error"} message or the status line. */
static void http_status_error(const struct http_client_resp *resp, char *out, size_t size)
{
	int k = snprintf(out, size, "%d ", resp->status);

	/* The message goes after the status, cut to the room left. */
	if (k < 0 || (size_t)k >= size || !http_client_resp_error(resp, out + k, size - (size_t)k))
		snprintf(out, size, "%d %s", resp->status, http_status_text(resp->status));
}

static void on_reply(const struct http_client_resp *resp, const struct err *e, void *arg);

static int req_send(struct req *r, struct err *e)
{
	struct top_net *n = r->n;
	struct http_client_req hr = { 0 };
	struct buf url = BUF_INIT;
	const char *headers[3] = { n->auth.data, "User-Agent: denv-top", NULL };

	buf_addf(&url, "%s%s", n->cfg->server, r->path);
	hr.method = "GET";
	hr.url = url.data;
	hr.headers = n->auth.len ? headers : headers + 1;
	hr.timeout_ms = TOP_HTTP_TIMEOUT_MS;
	r->call = http_aclient_do(n->ac, &hr, TOP_MAX_RESPONSE, on_reply, r, e);
	buf_release(&url);
	return r->call ? 0 : -1;
}

/* ---- the sweep ---- */

static void sweep_fail(struct top_net *n, const char *path, const char *msg)
{
	if (!n->s_err[0])
		msgf(n->s_err, sizeof(n->s_err), "GET %s: %s", path, msg);
}

static void sweep_add(struct top_net *n, enum req_kind kind, const char *key, const char *label, char *path)
{
	req_new(n, kind, key, label, path);
	free(path);
	n->pending++;
}

static int by_id_desc(const void *a, const void *b)
{
	const char *x = json_get_str(*(struct json *const *)a, "ID"), *y = json_get_str(*(struct json *const *)b, "ID");

	return -strcmp(x ? x : "", y ? y : "");
}

static void sort_newest_first(struct json *arr)
{
	if (arr && arr->type == JSON_ARRAY && arr->u.arr.n > 1)
		qsort(arr->u.arr.items, arr->u.arr.n, sizeof(*arr->u.arr.items), by_id_desc);
}

static void got_projects(struct top_net *n, const struct json *doc)
{
	const struct json *ps = json_get(doc, "projects");

	for (size_t i = 0; i < json_len(ps) && n->nprojects < TOP_MAX_PROJECTS; i++, n->nprojects++) {
		const struct json *p = json_at(ps, i);
		const char *id = json_get_str(p, "ID");

		if (id)
			sweep_add(n, R_ENVS, id, json_get_str(p, "Name"), path_of("projects", id, "/envs"));
	}
}

static void got_envs(struct top_net *n, const struct req *r, const struct json *doc)
{
	const struct json *es = json_get(doc, "environments");

	for (size_t i = 0; i < json_len(es); i++) {
		struct json *env = json_dup(json_at(es, i));
		const char *id = json_get_str(env, "ID");
		char label[2 * TOP_ID_MAX];

		json_object_set_str(env, "_project", r->label);
		msgf(label, sizeof(label), "%s/%s", r->label, json_get_str(env, "Name") ? json_get_str(env, "Name") : "?");
		json_array_push(n->s_envs, env);
		if (id && n->nenvs++ < TOP_MAX_ENVS)
			sweep_add(n, R_DEPS, id, label, path_of("envs", id, "/deployments"));
	}
}

static void got_deps(struct top_net *n, const struct req *r, const struct json *doc)
{
	struct json *ds = json_dup(json_get(doc, "deployments"));

	sort_newest_first(ds);
	for (size_t i = 0; i < json_len(ds) && i < TOP_DEPS_PER_ENV; i++) {
		struct json *d = json_dup(json_at(ds, i));

		json_object_set_str(d, "_env", r->label);
		json_array_push(n->s_deps, d);
	}
	json_free(ds);
}

static void swap(struct json **dst, struct json **src)
{
	json_free(*dst);
	*dst = *src;
	*src = NULL;
}

static void dep_fetch(struct top_net *n);

/* The sweep is over: show it (or say why not), then maybe start the next. */
static void sweep_end(struct top_net *n)
{
	struct top *t = n->t;
	char before[TOP_ID_MAX];

	n->sweeping = false;
	if (n->s_err[0]) {
		str_copy(t->status, sizeof(t->status), n->s_err);
	} else {
		str_copy(before, sizeof(before), top_selected_dep(t));
		sort_newest_first(n->s_deps);
		while (json_len(n->s_deps) > TOP_MAX_DEPS)
			json_free(n->s_deps->u.arr.items[--n->s_deps->u.arr.n]);
		swap(&t->hosts, &n->s_hosts);
		swap(&t->pools, &n->s_pools);
		swap(&t->envs, &n->s_envs);
		swap(&t->deps, &n->s_deps);
		t->loaded = true;
		t->status[0] = '\0';
		n->sweeps++;
		top_rebuild(t);
		if (!str_eq(before, top_selected_dep(t)) || !n->dep_ready)
			dep_fetch(n);
	}
	json_free(n->s_hosts);
	json_free(n->s_envs);
	json_free(n->s_deps);
	json_free(n->s_pools);
	n->s_hosts = n->s_envs = n->s_deps = n->s_pools = NULL;
	n->changed(n->arg);
	if (n->again)
		start_sweep(n);
}

static void sweep_reply(struct req *r, const struct json *doc)
{
	struct top_net *n = r->n;

	if (r->kind == R_HOSTS)
		n->s_hosts = json_dup(json_get(doc, "hosts"));
	else if (r->kind == R_POOLS)
		n->s_pools = json_dup(json_get(doc, "pools"));
	else if (r->kind == R_PROJECTS)
		got_projects(n, doc);
	else if (r->kind == R_ENVS)
		got_envs(n, r, doc);
	else
		got_deps(n, r, doc);
}

static void start_sweep(struct top_net *n)
{
	if (n->sweeping) {
		n->again = true;
		return;
	}
	n->sweeping = true;
	n->again = false;
	n->s_err[0] = '\0';
	n->nprojects = n->nenvs = 0;
	n->s_envs = json_new_array();
	n->s_deps = json_new_array();
	sweep_add(n, R_HOSTS, NULL, NULL, xstrdup("/v1/hosts"));
	sweep_add(n, R_PROJECTS, NULL, NULL, xstrdup("/v1/projects"));
	sweep_add(n, R_POOLS, NULL, NULL, xstrdup("/v1/pools"));
	pump(n);
}

/* Send queued sweep requests while there is room. */
static void pump(struct top_net *n)
{
	for (struct req *r = n->reqs; r && n->inflight < TOP_MAX_INFLIGHT;) {
		struct req *next = r->next;
		struct err e;

		if (!r->call && r->kind != R_DEP) {
			if (req_send(r, &e) < 0) {
				sweep_fail(n, r->path, e.msg);
				n->pending--;
				req_unlink(r);
			} else {
				n->inflight++;
			}
		}
		r = next;
	}
	if (n->sweeping && n->pending == 0)
		sweep_end(n);
}

/* ---- the selected deployment ---- */

static void dep_reply(struct req *r, const struct json *doc, const char *err)
{
	struct top_net *n = r->n;
	struct top *t = n->t;

	n->dep = NULL;
	n->dep_ready = true;
	if (err) {
		msgf(t->status, sizeof(t->status), "GET %s: %s", r->path, err);
	} else if (str_eq(r->key, top_selected_dep(t))) {
		json_free(t->dep_doc);
		t->dep_doc = json_dup(doc);
		top_rebuild(t);
	}
	n->changed(n->arg);
}

static void dep_fetch(struct top_net *n)
{
	const char *id = top_selected_dep(n->t);
	struct err e;
	char *path;

	if (n->dep && str_eq(n->dep->key, id))
		return;
	if (n->dep) {
		http_acall_cancel(n->dep->call);
		req_unlink(n->dep);
		n->dep = NULL;
	}
	if (!*id) {
		n->dep_ready = true;
		return;
	}
	n->dep_ready = false;
	path = path_of("deployments", id, "");
	n->dep = req_new(n, R_DEP, id, NULL, path);
	free(path);
	if (req_send(n->dep, &e) < 0) {
		struct req *r = n->dep;

		dep_reply(r, NULL, e.msg);
		req_unlink(r);
	}
}

/* ---- replies ---- */

static void on_reply(const struct http_client_resp *resp, const struct err *e, void *arg)
{
	struct req *r = arg;
	struct top_net *n = r->n;
	struct json *doc = NULL;
	struct err perr;
	char msg[TOP_STATUS_MAX] = "";

	r->call = NULL;
	if (!resp)
		str_copy(msg, sizeof(msg), e->msg);
	else if (resp->status < 200 || resp->status > 299)
		http_status_error(resp, msg, sizeof(msg));
	else if (json_parse(resp->body.data, resp->body.len, NULL, &doc, &perr) < 0)
		msgf(msg, sizeof(msg), "bad JSON: %s", perr.msg);
	if (r->kind == R_DEP) {
		dep_reply(r, doc, msg[0] ? msg : NULL);
	} else {
		n->inflight--;
		n->pending--;
		/* A server without GET /v1/pools: the title shows no pools. */
		if (msg[0] && r->kind != R_POOLS)
			sweep_fail(n, r->path, msg);
		else if (!msg[0] && !n->s_err[0])
			sweep_reply(r, doc);
	}
	json_free(doc);
	req_unlink(r);
	pump(n);
}

/* ---- timers ---- */

static bool dep_running(const struct top *t)
{
	const char *st = json_get_str(json_get(t->dep_doc, "deployment"), "Status");

	return top_selected_dep(t)[0] && !cli_status_final(st);
}

static void on_dep_tick(struct ev *ev, void *arg)
{
	struct top_net *n = arg;

	if (dep_running(n->t))
		dep_fetch(n);
	ev_timer_start(ev, &n->dep_tick, TOP_DEP_REFRESH_MS, on_dep_tick, n);
}

static void on_tick(struct ev *ev, void *arg)
{
	struct top_net *n = arg;
	struct err e;

	/* While polling, knock on the stream's door now and then. */
	if (!n->ws && !n->no_stream && ev_mono_ms() - n->last_dial >= TOP_REDIAL_MS)
		top_net_stream(n, TOP_REDIAL_DIAL_MS, &e);
	start_sweep(n);
	ev_timer_start(ev, &n->tick, n->ws ? TOP_LIVE_REFRESH_MS : TOP_POLL_MS, on_tick, n);
}

static void on_debounce(struct ev *ev, void *arg)
{
	struct top_net *n = arg;

	start_sweep(n);
	if (dep_running(n->t))
		dep_fetch(n);
}

/* ---- the stream ---- */

static void on_ws_message(struct ws_conn *c, bool binary, const void *data, size_t len, void *arg)
{
	struct top_net *n = arg;

	if (!ev_timer_armed(&n->debounce))
		ev_timer_start(n->ev, &n->debounce, TOP_EVENT_DEBOUNCE_MS, on_debounce, n);
}

static void on_ws_close(struct ws_conn *c, int code, const char *reason, void *arg)
{
	struct top_net *n = arg;

	ws_conn_free(c);
	n->ws = NULL;
	n->t->live = false;
	/* Back to polling at once, not after a live-mode interval. */
	ev_timer_start(n->ev, &n->tick, 0, on_tick, n);
	n->changed(n->arg);
}

int top_net_stream(struct top_net *n, int dial_ms, struct err *e)
{
	struct ws_opts o = { 0 };
	struct buf url = BUF_INIT, hdr = BUF_INIT;
	const char *s = n->cfg->server;
	int rc;

	n->last_dial = ev_mono_ms();
	if (n->no_stream)
		return err_set(e, "the live stream is off (DENV_NO_STREAM)");
	if (str_has_prefix(s, "https://"))
		buf_addf(&url, "wss://%s/v1/events/stream", s + 8);
	else
		buf_addf(&url, "ws://%s/v1/events/stream", str_has_prefix(s, "http://") ? s + 7 : s);
	if (n->auth.len)
		buf_addf(&hdr, "%s\r\n", n->auth.data);
	o.dial_timeout_ms = dial_ms;
	o.ping_interval_ms = 30000;
	o.on_message = on_ws_message;
	o.on_close = on_ws_close;
	o.arg = n;
	rc = ws_dial(n->ev, url.data, hdr.len ? hdr.data : NULL, &o, &n->ws, e);
	if (rc < 0)
		n->ws = NULL;
	n->t->live = n->ws != NULL;
	memset(hdr.data, 0, hdr.len);
	buf_release(&hdr);
	buf_release(&url);
	return rc;
}

/* ---- life cycle ---- */

struct top_net *top_net_new(struct ev *ev, const struct cli_config *cfg, struct top *t, bool no_stream,
			    top_changed_fn changed, void *arg)
{
	struct top_net *n = xcalloc(1, sizeof(*n));

	n->ev = ev;
	n->ac = http_aclient_new(ev);
	n->cfg = cfg;
	n->t = t;
	n->changed = changed;
	n->arg = arg;
	n->auth = (struct buf)BUF_INIT;
	/* The key goes only into this header: never into a message or a log. */
	if (cfg->api_key)
		buf_addf(&n->auth, "Authorization: Bearer %s", cfg->api_key);
	n->no_stream = no_stream;
	return n;
}

void top_net_free(struct top_net *n)
{
	if (!n)
		return;
	ev_timer_stop(n->ev, &n->tick);
	ev_timer_stop(n->ev, &n->dep_tick);
	ev_timer_stop(n->ev, &n->debounce);
	if (n->ws)
		ws_conn_free(n->ws);
	/* Cancels the calls in flight without their callbacks: free them here. */
	http_aclient_free(n->ac);
	while (n->reqs)
		req_unlink(n->reqs);
	json_free(n->s_hosts);
	json_free(n->s_pools);
	json_free(n->s_envs);
	json_free(n->s_deps);
	memset(n->auth.data, 0, n->auth.len);
	buf_release(&n->auth);
	free(n);
}

void top_net_start(struct top_net *n)
{
	ev_timer_start(n->ev, &n->tick, 0, on_tick, n);
	ev_timer_start(n->ev, &n->dep_tick, TOP_DEP_REFRESH_MS, on_dep_tick, n);
}

void top_net_refresh(struct top_net *n)
{
	start_sweep(n);
	dep_fetch(n);
}

void top_net_dep_changed(struct top_net *n)
{
	dep_fetch(n);
}

int top_net_sweeps(const struct top_net *n)
{
	return n->sweeps;
}

bool top_net_dep_ready(const struct top_net *n)
{
	return n->dep_ready;
}
