/*
 * cells.c: what each pane's row says, cell by cell: the panes' columns,
 * the short forms of ids, ages and durations, and one row's cells from its
 * JSON item. Both the model (filtering matches the cells) and the renderer
 * (drawing them) read it; it reads neither.
 */
#include "tui/tui.h"

#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/str.h"
#include "json/json.h"

/* Evidence text on a phase row before it is cut (the detail shows it all). */
#define EVIDENCE_MAX 200

static const struct top_col host_cols[] = {
	{ "HOST", 14 }, { "CONN", 5 }, { "STATUS", 12 }, { "STORE", 6 }, { "CPU", 4 },
	{ "MEM", 7 }, { "DISK", 6 }, { "SEEN", 6 }, { "ENVIRONMENTS", 0 }, { NULL, 0 },
};
static const struct top_col env_cols[] = {
	{ "PROJECT", 12 }, { "ENV", 14 }, { "STATUS", 10 }, { "VERSION", 11 }, { "PARENT", 11 },
	{ "ENDPOINTS", 0 }, { NULL, 0 },
};
static const struct top_col dep_cols[] = {
	{ "DEPLOYMENT", 11 }, { "ENVIRONMENT", 20 }, { "KIND", 9 }, { "STATUS", 12 }, { "AGE", 6 },
	{ "TOOK", 7 }, { "ERROR", 0 }, { NULL, 0 },
};
static const struct top_col phase_cols[] = {
	{ "#", 3 }, { "PHASE", 10 }, { "STATUS", 8 }, { "TOOK", 7 }, { "TIMELINE", -1 },
	{ "EVIDENCE", 0 }, { NULL, 0 },
};
const struct top_col *const top_pane_cols[P_COUNT] = { host_cols, env_cols, dep_cols, phase_cols };
/* ---- formatting ---- */

void top_short_id(const char *id, char *out, size_t n)
{
	const char *us = id ? strchr(id, '_') : NULL;
	size_t len;

	if (!id || !*id) {
		str_copy(out, n, "-");
		return;
	}
	/* "<prefix>_" and the ULID's last 6 (random) characters: short and distinct. */
	len = strlen(id);
	if (us && len - (size_t)(us + 1 - id) > 6)
		snprintf(out, n, "%.*s%s", (int)(us + 1 - id), id, id + len - 6);
	else
		str_copy(out, n, id);
}

void top_fmt_age(int64_t ms, char *out, size_t n)
{
	int64_t s = ms < 0 ? 0 : ms / 1000;

	if (s < 60)
		snprintf(out, n, "%llds", (long long)s);
	else if (s < 3600)
		snprintf(out, n, "%lldm", (long long)(s / 60));
	else if (s < 86400)
		snprintf(out, n, "%lldh", (long long)(s / 3600));
	else
		snprintf(out, n, "%lldd", (long long)(s / 86400));
}

void top_fmt_took(int64_t ms, char *out, size_t n)
{
	if (ms < 0)
		str_copy(out, n, "-");
	else if (ms < 1000)
		snprintf(out, n, "%lldms", (long long)ms);
	else if (ms < 60000)
		snprintf(out, n, "%lld.%llds", (long long)(ms / 1000), (long long)(ms % 1000 / 100));
	else
		snprintf(out, n, "%lldm%02llds", (long long)(ms / 60000), (long long)(ms % 60000 / 1000));
}

int64_t top_time_ms(const struct json *obj, const char *key)
{
	const char *s = json_get_str(obj, key);
	int64_t ns;

	if (!s || !*s || clock_parse_rfc3339(s, &ns) < 0 || ns <= 0)
		return -1;
	return ns / 1000000;
}

static void fmt_mem(int64_t mb, char *out, size_t n)
{
	if (mb <= 0)
		str_copy(out, n, "-");
	else if (mb < 1024)
		snprintf(out, n, "%lldM", (long long)mb);
	else
		snprintf(out, n, "%lld.%lldG", (long long)(mb / 1024), (long long)(mb % 1024 * 10 / 1024));
}

static void fmt_num(const struct json *v, const char *unit, char *cell)
{
	if (v && v->type == JSON_INT && v->u.i > 0)
		snprintf(cell, TOP_CELL_MAX, "%lld%s", (long long)v->u.i, unit);
	else
		str_copy(cell, TOP_CELL_MAX, "-");
}

static void cell_str(char *cell, const char *s)
{
	str_copy(cell, TOP_CELL_MAX, s && *s ? s : "-");
}

/* Compact JSON of v, cut to max bytes. */
static void cell_json(char *cell, const struct json *v, size_t max)
{
	struct buf b = BUF_INIT;

	if (v && v->type != JSON_NULL && !(v->type == JSON_OBJECT && json_len(v) == 0))
		json_write(&b, v, JSON_COMPACT);
	snprintf(cell, TOP_CELL_MAX, "%.*s", (int)(b.len < max ? b.len : max), b.data);
	buf_release(&b);
}

/* ---- cells per pane ---- */

/* "project/env" of the environments on host id. */
static void host_envs(const struct top *t, const char *id, char *cell)
{
	struct buf b = BUF_INIT;

	for (size_t i = 0; i < json_len(t->envs); i++) {
		const struct json *e = json_at(t->envs, i);

		if (!str_eq(json_get_str(e, "HostID"), id) || str_eq(json_get_str(e, "Status"), "destroyed"))
			continue;
		buf_addf(&b, "%s%s/%s", b.len ? "," : "", json_get_str(e, "_project") ? json_get_str(e, "_project") : "?",
			 json_get_str(e, "Name") ? json_get_str(e, "Name") : "?");
	}
	cell_str(cell, b.data);
	buf_release(&b);
}

static void host_cells(const struct top *t, const struct json *h, char c[][TOP_CELL_MAX])
{
	const struct json *caps = json_get(h, "Capabilities");
	int64_t seen = top_time_ms(h, "LastSeenAt");

	cell_str(c[0], json_get_str(h, "Name"));
	cell_str(c[1], json_get_bool(h, "connected", false) ? "yes" : "no");
	cell_str(c[2], json_get_str(h, "Status"));
	cell_str(c[3], json_get_str(caps, "storage"));
	/* Absent figures (a provider host, an old sidecar) show as "-", not 0. */
	fmt_num(json_get(caps, "cpus"), "", c[4]);
	fmt_mem(json_get_int(caps, "memory_mb", 0), c[5], TOP_CELL_MAX);
	fmt_num(json_get(caps, "disk_gb"), "G", c[6]);
	if (seen < 0)
		str_copy(c[7], TOP_CELL_MAX, "-");
	else
		top_fmt_age(t->now_ms - seen, c[7], TOP_CELL_MAX);
	host_envs(t, json_get_str(h, "ID"), c[8]);
}

static void env_cells(const struct json *e, char c[][TOP_CELL_MAX])
{
	const struct json *eps = json_get(e, "Endpoints");
	struct buf b = BUF_INIT;

	cell_str(c[0], json_get_str(e, "_project"));
	cell_str(c[1], json_get_str(e, "Name"));
	cell_str(c[2], json_get_str(e, "Status"));
	top_short_id(json_get_str(e, "CurrentVersionID"), c[3], TOP_CELL_MAX);
	top_short_id(json_get_str(e, "ParentVersionID"), c[4], TOP_CELL_MAX);
	for (size_t i = 0; eps && eps->type == JSON_OBJECT && i < eps->u.obj.n; i++) {
		const struct json_member *m = &eps->u.obj.m[i];

		if (m->val->type == JSON_STRING)
			buf_addf(&b, "%s%s=%s", b.len ? " " : "", m->key, m->val->u.str.s);
	}
	cell_str(c[5], b.data);
	buf_release(&b);
}

static void dep_cells(const struct top *t, const struct json *d, char c[][TOP_CELL_MAX])
{
	int64_t created = top_time_ms(d, "CreatedAt"), finished = top_time_ms(d, "FinishedAt");

	top_short_id(json_get_str(d, "ID"), c[0], TOP_CELL_MAX);
	cell_str(c[1], json_get_str(d, "_env"));
	cell_str(c[2], json_get_str(d, "Kind"));
	cell_str(c[3], json_get_str(d, "Status"));
	if (created < 0)
		str_copy(c[4], TOP_CELL_MAX, "-");
	else
		top_fmt_age(t->now_ms - created, c[4], TOP_CELL_MAX);
	top_fmt_took(created >= 0 && finished >= created ? finished - created : -1, c[5], TOP_CELL_MAX);
	str_copy(c[6], TOP_CELL_MAX, json_get_str(d, "Error") ? json_get_str(d, "Error") : "");
}

static void phase_cells(const struct json *p, char c[][TOP_CELL_MAX])
{
	int64_t s = top_time_ms(p, "StartedAt"), f = top_time_ms(p, "FinishedAt");
	const char *err = json_get_str(p, "Error");

	snprintf(c[0], TOP_CELL_MAX, "%lld", (long long)json_get_int(p, "Seq", 0));
	cell_str(c[1], json_get_str(p, "Name"));
	cell_str(c[2], json_get_str(p, "Status"));
	/* A skipped phase was stamped, not run: it took nothing worth a number. */
	top_fmt_took(s >= 0 && f >= s && !str_eq(json_get_str(p, "Status"), "skipped") ? f - s : -1, c[3],
		     TOP_CELL_MAX);
	c[4][0] = '\0';
	if (err && *err)
		str_copy(c[5], TOP_CELL_MAX, err);
	else
		cell_json(c[5], json_get(p, "Evidence"), EVIDENCE_MAX);
}

void top_cells(const struct top *t, int pane, const struct json *item, char cells[TOP_MAX_CELLS][TOP_CELL_MAX],
	       int *ncells)
{
	int n = 0;

	while (top_pane_cols[pane][n].head)
		cells[n++][0] = '\0';
	*ncells = n;
	if (pane == P_HOSTS)
		host_cells(t, item, cells);
	else if (pane == P_ENVS)
		env_cells(item, cells);
	else if (pane == P_DEPS)
		dep_cells(t, item, cells);
	else
		phase_cells(item, cells);
}
