/*
 * wait.c: follow a deployment until it ends (--wait, deployment watch).
 *
 * The deployment document (GET /v1/deployments/{id}) is the only source of
 * truth. The live event stream (GET /v1/events/stream, a WebSocket) only
 * says when to read it again, so a missed or unexpected event can cost a
 * delay but never a wrong line. Without the stream we read it every 700 ms.
 */
#include "cli/cli.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ev.h"
#include "base/str.h"
#include "http/http.h"
#include "json/json.h"
#include "ws/ws.h"

/* Consecutive failed reads of the deployment we ride out (a restarting server). */
#define WAIT_MAX_ERRORS 10
/* Where a failed phase's output lines start. */
#define WAIT_OUTPUT_INDENT "             | "

bool cli_status_final(const char *s)
{
	return str_eq(s, "succeeded") || str_eq(s, "failed") || str_eq(s, "rolled_back");
}

void cli_watch_release(struct cli_watch *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->status[i]);
	free(w->status);
	w->status = NULL;
	w->n = 0;
}

/* A failed phase's own words: its evidence's stderr (the warm command's),
 * else its stdout, one output line per line. */
static void phase_output(const struct json *ev, struct buf *out)
{
	const char *text = json_get_str(ev, "stderr");

	if (!text || !*text)
		text = json_get_str(ev, "stdout");
	while (text && *text) {
		const char *nl = strchr(text, '\n');
		size_t n = nl ? (size_t)(nl - text) : strlen(text);

		buf_addf(out, "\n" WAIT_OUTPUT_INDENT "%.*s", (int)n, text);
		text = nl ? nl + 1 : NULL;
	}
}

/* What follows the status on a phase line: the error, else the evidence
 * (cut at CLI_WAIT_DETAIL_MAX unless verbose). */
static void phase_detail(const struct json *ph, bool verbose, struct buf *out)
{
	const char *err = json_get_str(ph, "Error");
	const struct json *ev = json_get(ph, "Evidence");
	bool empty = !ev || ev->type == JSON_NULL || (ev->type == JSON_OBJECT && json_len(ev) == 0);
	struct buf text = BUF_INIT;

	if (!empty)
		json_write(&text, ev, JSON_COMPACT);
	if (err && *err) {
		buf_addf(out, "  %s", err);
		phase_output(ev, out);
		if (verbose && !empty)
			buf_addf(out, "\n             evidence: %s", text.data);
	} else if (!empty && !verbose && text.len > CLI_WAIT_DETAIL_MAX) {
		buf_addf(out, "  %.*s...", CLI_WAIT_DETAIL_MAX, text.data);
	} else if (!empty) {
		buf_addf(out, "  %s", text.data);
	}
	buf_release(&text);
}

int cli_watch_print(struct cli_watch *w, const struct json *doc, struct buf *out)
{
	const struct json *phases = json_get(doc, "phases");
	size_t n = json_len(phases);
	int lines = 0;

	if (n > w->n) {
		w->status = xrealloc(w->status, n * sizeof(*w->status));
		memset(w->status + w->n, 0, (n - w->n) * sizeof(*w->status));
		w->n = n;
	}
	for (size_t i = 0; i < n; i++) {
		const struct json *ph = json_at(phases, i);
		const char *st = json_get_str(ph, "Status");

		if (!st || str_eq(st, w->status[i]))
			continue;
		/* A phase that has not started yet is not news. */
		if (!w->status[i] && str_eq(st, "pending"))
			continue;
		free(w->status[i]);
		w->status[i] = xstrdup(st);
		buf_addf(out, "  %-10s %-8s", json_get_str(ph, "Name") ? json_get_str(ph, "Name") : "?", st);
		phase_detail(ph, w->verbose, out);
		while (out->len && out->data[out->len - 1] == ' ')
			buf_truncate(out, out->len - 1);
		buf_addch(out, '\n');
		lines++;
	}
	return lines;
}

/* Compose warnings (spec.h), one "warning: " line each on stderr: stdout
 * may be JSON. */
static void print_warnings(const struct json *list)
{
	for (size_t i = 0; i < json_len(list); i++)
		if (json_at(list, i)->type == JSON_STRING)
			fprintf(stderr, "warning: %s\n", json_at(list, i)->u.str.s);
}

/* The resolve phase's warnings once it has evidence. true when there is
 * nothing more to print. */
static bool resolve_warnings(const struct json *doc)
{
	const struct json *phases = json_get(doc, "phases"), *ev;

	for (size_t i = 0; i < json_len(phases); i++) {
		if (!str_eq(json_get_str(json_at(phases, i), "Name"), "resolve"))
			continue;
		ev = json_get(json_at(phases, i), "Evidence");
		if (!ev || ev->type == JSON_NULL)
			return false;
		print_warnings(json_get(ev, "warnings"));
		return true;
	}
	return true;
}

/* One follower: what the stream callbacks and the loop share. */
struct waiter {
	struct cli *c;
	struct buf path;
	struct cli_watch watch;
	struct json *doc;
	struct ev *ev;
	struct ws_conn *ws;
	bool dirty;		/* an event arrived since the last read */
	bool warned;		/* the resolve phase's warnings are out */
	int errors;
	const char *dep;	/* the deployment's id */
};

/* A build's output (progress "build: ..." on dep:<id>, cp's orch_deploy.c)
 * is shown as it comes, under the prepare phase that is running it. */
static void print_build_line(const struct waiter *w, const void *data, size_t len)
{
	struct json *ev = NULL;
	struct err e;
	const char *msg, *subject;

	if (json_parse(data, len, NULL, &ev, &e) < 0)
		return;
	subject = json_get_str(ev, "Subject");
	msg = json_get_str(json_get(ev, "Body"), "message");
	if (str_eq(json_get_str(ev, "Kind"), "progress") && subject && str_has_prefix(subject, "dep:") &&
	    str_eq(subject + 4, w->dep) && msg && str_has_prefix(msg, "build: ")) {
		printf("  prepare    | %s\n", msg + 7);
		fflush(stdout);
	}
	json_free(ev);
}

/* Read the deployment and print what changed. 1 when it has ended. */
static int refresh(struct waiter *w, struct err *e)
{
	struct json *doc;
	struct buf out = BUF_INIT;
	const char *st;

	w->dirty = false;
	if (cli_call(w->c, "GET", w->path.data, NULL, &doc, e) < 0) {
		/* 4xx will not get better; anything else may (restart, network). */
		if ((e->code >= 400 && e->code < 500) || ++w->errors > WAIT_MAX_ERRORS)
			return -1;
		return 0;
	}
	w->errors = 0;
	json_free(w->doc);
	w->doc = doc;
	cli_watch_print(&w->watch, doc, &out);
	fwrite(out.data, 1, out.len, stdout);
	fflush(stdout);
	buf_release(&out);
	if (!w->warned)
		w->warned = resolve_warnings(doc);
	st = json_get_str(json_get(doc, "deployment"), "Status");
	return cli_status_final(st) ? 1 : 0;
}

static void on_ws_message(struct ws_conn *conn, bool binary, const void *data, size_t len, void *arg)
{
	struct waiter *w = arg;

	/* Any event of the team may be about this deployment's phases
	 * (dep:<id>, or env:<id> of its environment): read it again. */
	w->dirty = true;
	if (!binary)
		print_build_line(w, data, len);
}

static void on_ws_close(struct ws_conn *conn, int code, const char *reason, void *arg)
{
	struct waiter *w = arg;

	ws_conn_free(conn);
	w->ws = NULL;
}

/* ws(s)://<server>/v1/events/stream */
static void stream_url(const char *server, struct buf *out)
{
	cli_ws_url(out, server, "/v1/events/stream");
}

/* Try the live stream; on any failure we simply poll. */
static void open_stream(struct waiter *w)
{
	struct ws_opts o = { 0 };
	struct buf url = BUF_INIT, hdr = BUF_INIT;
	struct err e;

	if (getenv("DENV_NO_STREAM") && *getenv("DENV_NO_STREAM"))
		return;
	w->ev = ev_new();
	stream_url(w->c->cfg.server, &url);
	if (w->c->cfg.api_key)
		buf_addf(&hdr, "Authorization: Bearer %s\r\n", w->c->cfg.api_key);
	o.dial_timeout_ms = CLI_STREAM_DIAL_MS;
	o.ping_interval_ms = 30000;
	o.on_message = on_ws_message;
	o.on_close = on_ws_close;
	o.arg = w;
	if (ws_dial(w->ev, url.data, hdr.len ? hdr.data : NULL, &o, &w->ws, &e) < 0)
		w->ws = NULL;
	memset(hdr.data, 0, hdr.len);
	buf_release(&hdr);
	buf_release(&url);
}

void cli_sleep_ms(int ms)
{
	poll(NULL, 0, ms);
}

/* Wait for the next reason to read the deployment. */
static void next_turn(struct waiter *w)
{
	int64_t until;

	if (!w->ws) {
		cli_sleep_ms(CLI_POLL_MS);
		return;
	}
	until = ev_mono_ms() + CLI_STREAM_REFRESH_MS;
	while (w->ws && !w->dirty && ev_mono_ms() < until)
		ev_run_once(w->ev, until - ev_mono_ms());
	/* Events come in bursts (one per phase): let the burst land. */
	if (w->dirty)
		ev_run_once(w->ev, 50);
}

int cli_wait(struct cli *c, const char *dep, struct json **final, struct err *e)
{
	struct waiter w = { .c = c, .path = BUF_INIT, .dep = dep };
	int r, rc = -1;

	w.watch.verbose = c->verbose;
	buf_adds(&w.path, "/v1/deployments/");
	http_pct_encode(&w.path, dep, "");
	r = refresh(&w, e);
	if (r == 0) {
		open_stream(&w);
		/* Anything that happened while we were connecting. */
		r = refresh(&w, e);
	}
	while (r == 0) {
		next_turn(&w);
		r = refresh(&w, e);
	}
	if (r < 0) {
		err_prefix(e, "deployment %s", dep);
		goto out;
	}
	printf("deployment %s: %s\n", dep, json_get_str(json_get(w.doc, "deployment"), "Status"));
	fflush(stdout);
	if (final) {
		*final = w.doc;
		w.doc = NULL;
	}
	rc = 0;
out:
	if (w.ws)
		ws_conn_free(w.ws);
	if (w.ev)
		ev_free(w.ev);
	json_free(w.doc);
	cli_watch_release(&w.watch);
	buf_release(&w.path);
	return rc;
}

int cli_started(struct cli *c, const struct json *resp, bool wait,
		void (*extra)(const struct json *final), struct err *e)
{
	const struct json *dep = json_get(resp, "deployment");
	const char *id = json_get_str(dep, "ID"), *env = json_get_str(dep, "EnvID"), *st, *why;
	struct json *final = NULL;
	int rc;

	if (!wait) {
		print_warnings(json_get(resp, "warnings"));
		return cli_print_json(resp, e) < 0 ? CLI_FAIL : CLI_OK;
	}
	if (!id)
		return err_set(e, "the server answered without a deployment id"), CLI_FAIL;
	if (env && *env)
		printf("deployment %s (environment %s)\n", id, env);
	else
		printf("deployment %s\n", id);
	fflush(stdout);
	if (cli_wait(c, id, &final, e) < 0)
		return CLI_FAIL;
	if (extra)
		extra(final);
	dep = json_get(final, "deployment");
	st = json_get_str(dep, "Status");
	why = json_get_str(dep, "Error");
	rc = CLI_OK;
	if (!str_eq(st, "succeeded")) {
		/* rolled_back is a failed deploy too: the change did not land. */
		err_set(e, "deployment %s %s%s%s", id, str_eq(st, "rolled_back") ? "rolled back" : "failed",
			why && *why ? ": " : "", why && *why ? why : "");
		rc = CLI_FAIL;
	}
	json_free(final);
	return rc;
}
