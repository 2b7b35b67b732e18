/*
 * model.c: the panes' rows, selections and filters over the data net.c
 * stores. Selections are kept by id, so a refresh that inserts or removes
 * rows never moves the cursor onto something else.
 */
#include "tui/tui.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base/str.h"
#include "json/json.h"

void top_init(struct top *t)
{
	memset(t, 0, sizeof(*t));
	for (int p = 0; p < P_COUNT; p++)
		t->pane[p].sel = -1;
	t->focus = P_DEPS;
	t->follow = true;
}

void top_release(struct top *t)
{
	json_free(t->hosts);
	json_free(t->envs);
	json_free(t->deps);
	json_free(t->dep_doc);
	json_free(t->pools);
	for (int p = 0; p < P_COUNT; p++)
		free(t->pane[p].rows);
	memset(t, 0, sizeof(*t));
}

const struct json *top_src(const struct top *t, int pane)
{
	switch (pane) {
	case P_HOSTS:
		return t->hosts;
	case P_ENVS:
		return t->envs;
	case P_DEPS:
		return t->deps;
	default:
		/* Phases of another deployment than the selected one are stale. */
		if (!t->dep_doc ||
		    !str_eq(json_get_str(json_get(t->dep_doc, "deployment"), "ID"), top_selected_dep(t)))
			return NULL;
		return json_get(t->dep_doc, "phases");
	}
}

const struct json *top_selected(const struct top *t, int pane)
{
	const struct top_pane_state *ps = &t->pane[pane];

	if (ps->sel < 0 || (size_t)ps->sel >= ps->nrows)
		return NULL;
	return json_at(top_src(t, pane), ps->rows[ps->sel]);
}

const char *top_selected_dep(const struct top *t)
{
	return t->pane[P_DEPS].sel_id;
}

bool top_match(const char *text, const char *filter)
{
	size_t n = strlen(filter);

	if (!n)
		return true;
	for (const char *p = text; *p; p++) {
		size_t i = 0;

		while (i < n && p[i] && tolower((unsigned char)p[i]) == tolower((unsigned char)filter[i]))
			i++;
		if (i == n)
			return true;
	}
	return false;
}

/* The id a selection is remembered by: ID, or a phase's Name. */
static const char *item_id(int pane, const struct json *item)
{
	return json_get_str(item, pane == P_PHASES ? "Name" : "ID");
}

static bool row_matches(const struct top *t, int pane, const struct json *item)
{
	char cells[TOP_MAX_CELLS][TOP_CELL_MAX];
	struct buf text = BUF_INIT;
	int n = 0;
	bool ok;

	if (!t->pane[pane].filter[0])
		return true;
	top_cells(t, pane, item, cells, &n);
	for (int i = 0; i < n; i++)
		buf_addf(&text, "%s ", cells[i]);
	ok = top_match(text.data, t->pane[pane].filter);
	buf_release(&text);
	return ok;
}

/* Keep the selection on the same id; else on the same position. */
static void reselect(struct top_pane_state *ps, int pane, const struct json *src)
{
	int old = ps->sel;

	ps->sel = -1;
	for (size_t i = 0; i < ps->nrows && ps->sel_id[0]; i++)
		if (str_eq(item_id(pane, json_at(src, ps->rows[i])), ps->sel_id))
			ps->sel = (int)i;
	if (ps->sel < 0 && ps->nrows)
		ps->sel = old < 0 ? 0 : old >= (int)ps->nrows ? (int)ps->nrows - 1 : old;
	if (ps->sel >= 0)
		str_copy(ps->sel_id, sizeof(ps->sel_id), item_id(pane, json_at(src, ps->rows[ps->sel])) ?
			 item_id(pane, json_at(src, ps->rows[ps->sel])) : "");
	else
		ps->sel_id[0] = '\0';
}

static void rebuild_pane(struct top *t, int pane)
{
	struct top_pane_state *ps = &t->pane[pane];
	const struct json *src = top_src(t, pane);
	size_t n = json_len(src);

	free(ps->rows);
	ps->rows = n ? xcalloc(n, sizeof(*ps->rows)) : NULL;
	ps->nrows = 0;
	ps->nsrc = n;
	for (size_t i = 0; i < n; i++)
		if (row_matches(t, pane, json_at(src, i)))
			ps->rows[ps->nrows++] = i;
	/* Follow: the newest deployment (rows are newest first) that the filter shows. */
	if (pane == P_DEPS && t->follow && ps->nrows)
		str_copy(ps->sel_id, sizeof(ps->sel_id), item_id(pane, json_at(src, ps->rows[0])) ?
			 item_id(pane, json_at(src, ps->rows[0])) : "");
	reselect(ps, pane, src);
}

void top_rebuild(struct top *t)
{
	/* Deployments before phases: the phases pane depends on the selected deployment. */
	for (int p = 0; p < P_COUNT; p++)
		rebuild_pane(t, p);
}

void top_move(struct top *t, int delta)
{
	struct top_pane_state *ps = &t->pane[t->focus];
	const struct json *src = top_src(t, t->focus);
	int sel;

	if (!ps->nrows)
		return;
	sel = ps->sel + delta;
	sel = sel < 0 ? 0 : sel >= (int)ps->nrows ? (int)ps->nrows - 1 : sel;
	ps->sel = sel;
	str_copy(ps->sel_id, sizeof(ps->sel_id),
		 item_id(t->focus, json_at(src, ps->rows[sel])) ? item_id(t->focus, json_at(src, ps->rows[sel])) : "");
	/* Choosing a deployment by hand ends following the newest one. */
	if (t->focus == P_DEPS && delta)
		t->follow = false;
	if (t->focus == P_DEPS)
		rebuild_pane(t, P_PHASES);
}
