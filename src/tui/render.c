/*
 * render.c: the screen as a frame: title bar, the four panes (hosts,
 * environments, deployments, phases of the selected deployment), footer,
 * and the detail and help overlays. Pure: it reads the model and writes
 * cells, so --once and the terminal show the same thing.
 */
#include "tui/tui.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/str.h"
#include "json/json.h"

/* Columns before the first cell: the selection marker. */
#define MARK_W 2
/* Phases: the timeline gets half of what the fixed columns leave, within these. */
#define TIMELINE_MIN 10
#define TIMELINE_MAX 40
static const char *const pane_empty[P_COUNT] = {
	"(no hosts: `denv host join-token` prints the line that adds one)",
	"(no environments: `denv project create` makes one)",
	"(no deployments yet)",
	"(no deployment selected)",
};

/* ---- colours by meaning ---- */

static enum tui_attr status_attr(const char *s)
{
	static const char *const good[] = { "ok", "succeeded", "connected", "running", "yes", NULL };
	static const char *const bad[] = { "failed", "rolled_back", "unreachable", "no", NULL };
	static const char *const dim[] = { "skipped", "destroyed", "-", NULL };

	for (int i = 0; good[i]; i++)
		if (str_eq(s, good[i]))
			return TA_OK;
	for (int i = 0; bad[i]; i++)
		if (str_eq(s, bad[i]))
			return TA_FAIL;
	for (int i = 0; dim[i]; i++)
		if (str_eq(s, dim[i]))
			return TA_DIM;
	return TA_BUSY;
}

/* Which cells of a pane carry a status colour. */
static bool is_status_col(int pane, int col)
{
	static const signed char cols[P_COUNT][2] = { { 1, 2 }, { 2, -1 }, { 3, -1 }, { 2, -1 } };

	return cols[pane][0] == col || cols[pane][1] == col;
}

/* ---- table layout ---- */

/* x of each column and its width; the timeline's width in *tw. */
static int col_layout(int pane, int w, int x[], int wid[])
{
	const struct top_col *cols = top_pane_cols[pane];
	int fixed = MARK_W, n = 0, tw = 0, pos = MARK_W;

	for (n = 0; cols[n].head; n++)
		fixed += cols[n].width > 0 ? cols[n].width : 0;
	if (pane == P_PHASES) {
		tw = (w - fixed) / 2;
		tw = tw < TIMELINE_MIN ? TIMELINE_MIN : tw > TIMELINE_MAX ? TIMELINE_MAX : tw;
	}
	for (int i = 0; i < n; i++) {
		x[i] = pos;
		wid[i] = cols[i].width > 0 ? cols[i].width : cols[i].width < 0 ? tw + 1 : w - pos;
		if (wid[i] < 0)
			wid[i] = 0;
		pos += wid[i];
	}
	return n;
}

static void scroll_into_view(struct top_pane_state *ps, int rows)
{
	int max;

	if (ps->sel >= 0 && ps->sel < ps->scroll)
		ps->scroll = ps->sel;
	if (ps->sel >= 0 && ps->sel >= ps->scroll + rows)
		ps->scroll = ps->sel - rows + 1;
	max = (int)ps->nrows - rows;
	if (ps->scroll > max)
		ps->scroll = max;
	if (ps->scroll < 0)
		ps->scroll = 0;
}

/* The phases' common time axis: [t0, t1] in Unix ms. */
static void phase_span(const struct top *t, int64_t *t0, int64_t *t1)
{
	const struct json *ph = top_src(t, P_PHASES);

	*t0 = -1;
	*t1 = -1;
	for (size_t i = 0; i < json_len(ph); i++) {
		const struct json *p = json_at(ph, i);
		int64_t s = top_time_ms(p, "StartedAt"), f = top_time_ms(p, "FinishedAt");

		if (s < 0)
			continue;
		if (f < s)
			f = str_eq(json_get_str(p, "Status"), "running") ? t->now_ms : s;
		if (*t0 < 0 || s < *t0)
			*t0 = s;
		if (f > *t1)
			*t1 = f;
	}
}

/* One phase's bar: where it ran on the deployment's time axis, to scale. */
static void draw_timeline(const struct top *t, struct tui_frame *f, int y, int x, int tw, const struct json *p)
{
	const char *st = json_get_str(p, "Status");
	int64_t t0, t1, s = top_time_ms(p, "StartedAt"), e = top_time_ms(p, "FinishedAt"), span;
	int a, b;
	char bar = str_eq(st, "failed") ? 'X' : str_eq(st, "running") ? '>' : '=';

	phase_span(t, &t0, &t1);
	if (s < 0 || t0 < 0 || str_eq(st, "skipped"))
		return;
	if (e < s)
		e = str_eq(st, "running") ? t->now_ms : s;
	span = t1 - t0 > 0 ? t1 - t0 : 1;
	a = (int)((s - t0) * tw / span);
	b = (int)(((e - t0) * tw + span - 1) / span);
	if (a >= tw)
		a = tw - 1;
	if (b <= a)
		b = a + 1;
	if (b > tw)
		b = tw;
	for (int i = a; i < b; i++) {
		char one[2] = { bar, '\0' };

		frame_put(f, y, x + i, 1, status_attr(st), one);
	}
}

static void draw_header(struct top *t, struct tui_frame *f, int pane, int y)
{
	const struct top_pane_state *ps = &t->pane[pane];
	enum tui_attr a = pane == t->focus && !t->once ? TA_HEAD_FOCUS : TA_HEAD;
	int x[TOP_MAX_CELLS], wid[TOP_MAX_CELLS], n = col_layout(pane, f->w, x, wid);
	char right[TOP_FILTER_MAX + TOP_ID_MAX + 48], sid[TOP_ID_MAX];
	int rlen;

	frame_fill_row(f, y, a);
	for (int i = 0; i < n; i++)
		frame_put(f, y, x[i], wid[i] - 1, a, top_pane_cols[pane][i].head);
	/* Right side: the count (shown/all and the filter when one applies);
	 * for phases, whose deployment they are. */
	sid[0] = '\0';
	if (pane == P_PHASES && top_selected_dep(t)[0])
		top_short_id(top_selected_dep(t), sid, sizeof(sid));
	if (ps->filter[0])
		snprintf(right, sizeof(right), " %zu/%zu /%s %s%s", ps->nrows, ps->nsrc, ps->filter, sid, sid[0] ? " " : "");
	else if (pane == P_PHASES)
		snprintf(right, sizeof(right), " %s ", sid);
	else
		snprintf(right, sizeof(right), " %zu ", ps->nrows);
	rlen = (int)strlen(right);
	/* The count goes on the right unless it would cover a column name. */
	if (f->w - rlen > x[n - 1] + (int)strlen(top_pane_cols[pane][n - 1].head))
		frame_put(f, y, f->w - rlen, rlen, a, right);
}

static void draw_row(struct top *t, struct tui_frame *f, int pane, int y, size_t idx, bool selected)
{
	const struct json *item = json_at(top_src(t, pane), idx);
	char cells[TOP_MAX_CELLS][TOP_CELL_MAX];
	int x[TOP_MAX_CELLS], wid[TOP_MAX_CELLS], n = col_layout(pane, f->w, x, wid), nc;

	top_cells(t, pane, item, cells, &nc);
	if (selected)
		frame_put(f, y, 0, MARK_W, TA_NORMAL, ">");
	for (int i = 0; i < n && i < nc; i++) {
		enum tui_attr a = is_status_col(pane, i) ? status_attr(cells[i]) : TA_NORMAL;

		if (pane == P_PHASES && top_pane_cols[pane][i].width < 0)
			draw_timeline(t, f, y, x[i], wid[i] - 1, item);
		else
			frame_put(f, y, x[i], i == n - 1 ? wid[i] : wid[i] - 1, a, cells[i]);
	}
	/* The focused pane's cursor: reverse video over the whole row. */
	if (selected && pane == t->focus && !t->once)
		frame_attr(f, y, 0, f->w, TA_SELECT);
}

/* A pane: its header, then up to rows rows. */
static void draw_pane(struct top *t, struct tui_frame *f, int pane, int y, int rows)
{
	struct top_pane_state *ps = &t->pane[pane];

	draw_header(t, f, pane, y);
	if (!ps->nrows) {
		const char *msg = !t->loaded ? "(loading...)" : ps->nsrc ? "(nothing matches the filter)" : pane_empty[pane];

		frame_put(f, y + 1, MARK_W, -1, TA_DIM, msg);
		return;
	}
	scroll_into_view(ps, rows);
	for (int r = 0; r < rows && ps->scroll + r < (int)ps->nrows; r++)
		draw_row(t, f, pane, y + 1 + r, ps->rows[ps->scroll + r], ps->scroll + r == ps->sel);
}

/* ---- layout ---- */

static int want_rows(const struct top *t, int pane)
{
	return t->pane[pane].nrows ? (int)t->pane[pane].nrows : 1;
}

/*
 * Split body rows between the panes: each gets its header and one row, then
 * rows go round-robin to panes that have more, first with hosts,
 * environments and deployments capped so the phases of the followed
 * deployment stay on screen, then without caps.
 */
static void split_rows(const struct top *t, int body, int rows[P_COUNT])
{
	int left = body - 2 * P_COUNT;
	int cap[P_COUNT] = { body / 5, body / 5, body / 4, body };

	for (int p = 0; p < P_COUNT; p++)
		rows[p] = 1;
	for (int pass = 0; pass < 2; pass++) {
		bool grew = true;

		while (left > 0 && grew) {
			grew = false;
			for (int p = 0; p < P_COUNT && left > 0; p++) {
				if (rows[p] >= want_rows(t, p) || (pass == 0 && rows[p] >= cap[p]))
					continue;
				rows[p]++;
				left--;
				grew = true;
			}
		}
	}
}

/* An image pool's image, or a version pool's version. */
static const char *pool_name(const struct json *p)
{
	const char *image = json_get_str(p, "image"), *version = json_get_str(p, "version");

	return image && *image ? image : version && *version ? version : "?";
}

/* " pools: IMAGE R/N ready C claimed, ..." for the team's warm pools, or "". */
static void pools_text(const struct top *t, char *out, size_t n)
{
	size_t k = 0;

	out[0] = '\0';
	for (size_t i = 0; i < json_len(t->pools) && k < n; i++) {
		const struct json *p = json_at(t->pools, i);
		int w = snprintf(out + k, n - k, "%s %s %" PRId64 "/%" PRId64 " ready %" PRId64 " claimed",
				 i ? "," : "  pools:", pool_name(p),
				 json_get_int(p, "ready", 0), json_get_int(p, "size", 0), json_get_int(p, "claims", 0));

		if (w < 0)
			break;
		k += (size_t)w;
	}
}

static void draw_title(struct top *t, struct tui_frame *f)
{
	char left[256], clock_s[16] = "", pools[160];
	time_t now = (time_t)(t->now_ms / 1000);
	struct tm tm;

	frame_fill_row(f, 0, TA_TITLE);
	if (t->once) {
		pools_text(t, pools, sizeof(pools));
		snprintf(left, sizeof(left), "denv top  %s%s", t->server ? t->server : "", pools);
		frame_put(f, 0, 0, -1, TA_TITLE, left);
		return;
	}
	if (localtime_r(&now, &tm))
		strftime(clock_s, sizeof(clock_s), "%H:%M:%S", &tm);
	pools_text(t, pools, sizeof(pools));
	snprintf(left, sizeof(left), " denv top  %s  %s%s", clock_s, t->server ? t->server : "", pools);
	frame_put(f, 0, 0, -1, TA_TITLE, left);
	/* Right side: how fresh the data is, and whether we follow. */
	snprintf(left, sizeof(left), " %s%s  ? help ", t->follow ? "follow  " : "", t->live ? "live" : "polling");
	if ((int)strlen(left) < f->w) {
		int x = f->w - (int)strlen(left);

		frame_put(f, 0, x, -1, TA_TITLE, left);
		/* "polling" stands out: the data may be a second old. */
		if (!t->live)
			frame_attr(f, 0, f->w - (int)strlen("polling  ? help "), (int)strlen("polling"), TA_WARN);
	}
}

static void draw_footer(struct top *t, struct tui_frame *f)
{
	char line[TOP_STATUS_MAX + 32];
	int y = f->h - 1;

	frame_fill_row(f, y, TA_NORMAL);
	if (t->editing) {
		snprintf(line, sizeof(line), "filter %s: %s_", top_pane_cols[t->focus][0].head, t->edit);
		frame_put(f, y, 0, -1, TA_NORMAL, line);
	} else if (t->status[0]) {
		frame_put(f, y, 0, -1, TA_WARN, t->status);
	} else if (t->detail || t->help) {
		frame_put(f, y, 0, -1, TA_DIM, "j/k scroll  Esc close  q quit");
	} else {
		frame_put(f, y, 0, -1, TA_DIM,
			  "Tab pane  j/k move  Enter detail  / filter  f follow  r refresh  ? help  q quit");
	}
}

/* ---- overlays ---- */

static const char help_text[] =
	"denv top: hosts, environments, deployments and the phases of the selected\n"
	"deployment, kept current by the live event stream (\"live\" in the title bar)\n"
	"or, when the stream is unavailable, by polling (\"polling\").\n"
	"\n"
	"  Up/Down, j/k     move in the focused pane (PgUp/PgDn, Home/End, g/G)\n"
	"  Tab, Shift-Tab   next / previous pane\n"
	"  Enter            detail: a phase's evidence, pretty-printed; for other\n"
	"                   panes the selected row as the API returned it\n"
	"  /                filter the focused pane (Enter keeps it, Esc clears it)\n"
	"  f                follow the newest deployment (on at start; moving in\n"
	"                   the deployments pane turns it off)\n"
	"  r                refresh now\n"
	"  ?                this help\n"
	"  Esc              close the detail or this help\n"
	"  q                quit\n"
	"\n"
	"Timeline: each phase's bar spans the time it ran, on one scale for the\n"
	"whole deployment. '=' ok, 'X' failed, '>' still running.\n";

void top_detail_text(const struct top *t, struct buf *out)
{
	const struct json *item = top_selected(t, t->focus);
	const char *err;

	if (!item) {
		buf_adds(out, "(nothing selected)\n");
		return;
	}
	if (t->focus != P_PHASES) {
		json_write(out, item, JSON_PRETTY);
		return;
	}
	err = json_get_str(item, "Error");
	if (err && *err)
		buf_addf(out, "error: %s\n\n", err);
	buf_adds(out, "evidence:\n");
	json_write(out, json_get(item, "Evidence") ? json_get(item, "Evidence") : &(struct json){ .type = JSON_NULL },
		   JSON_PRETTY);
}

/* Text in the body, wrapped at the width, from line skip on. */
static void draw_text(struct tui_frame *f, int y0, int rows, const char *text, int *skip)
{
	int line = 0, y = y0, total = 0;
	const char *p;

	/* Count display lines first, so scrolling stops at the end. */
	for (p = text; *p;) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int)(nl - p) : (int)strlen(p);

		total += len ? (len + f->w - 1) / f->w : 1;
		p += len + (nl ? 1 : 0);
	}
	if (*skip > total - rows)
		*skip = total - rows;
	if (*skip < 0)
		*skip = 0;
	for (p = text; *p && y < y0 + rows;) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int)(nl - p) : (int)strlen(p);

		for (int off = 0; (off < len || (len == 0 && off == 0)) && y < y0 + rows; off += f->w, line++) {
			char piece[TOP_MAX_W + 1];
			int n = len - off < f->w ? len - off : f->w;

			snprintf(piece, sizeof(piece), "%.*s", n, p + off);
			if (line >= *skip)
				frame_put(f, y++, 0, -1, TA_NORMAL, piece);
		}
		p += len + (nl ? 1 : 0);
	}
}

static void draw_overlay(struct top *t, struct tui_frame *f, int y, int rows)
{
	struct buf text = BUF_INIT;
	char head[160], sid[TOP_ID_MAX];
	const struct json *item = top_selected(t, t->focus);

	if (t->help) {
		buf_adds(&text, help_text);
		str_copy(head, sizeof(head), " HELP");
	} else {
		top_detail_text(t, &text);
		top_short_id(top_selected_dep(t), sid, sizeof(sid));
		if (t->focus == P_PHASES)
			snprintf(head, sizeof(head), " PHASE %s of %s", json_get_str(item, "Name") ? json_get_str(item, "Name") : "?",
				 sid);
		else
			snprintf(head, sizeof(head), " DETAIL %s %s", top_pane_cols[t->focus][0].head,
				 json_get_str(item, "ID") ? json_get_str(item, "ID") : "");
	}
	frame_fill_row(f, y, TA_HEAD_FOCUS);
	frame_put(f, y, 0, -1, TA_HEAD_FOCUS, head);
	draw_text(f, y + 1, rows - 1, text.data, &t->detail_scroll);
	buf_release(&text);
}

/* ---- the screen ---- */

int top_once_height(const struct top *t, int w)
{
	int h = 1;

	for (int p = 0; p < P_COUNT; p++)
		h += 1 + want_rows(t, p) + 1;
	return h;
}

static void render_once(struct top *t, struct tui_frame *f)
{
	int y = 1;

	draw_title(t, f);
	for (int p = 0; p < P_COUNT; p++) {
		y++;	/* a blank line between panes reads better on paper */
		draw_pane(t, f, p, y, want_rows(t, p));
		y += 1 + want_rows(t, p);
	}
}

void top_render(struct top *t, struct tui_frame *f)
{
	int body = f->h - 2, rows[P_COUNT], y = 1;

	frame_reset(f, f->w, f->h);
	if (t->once) {
		render_once(t, f);
		return;
	}
	if (f->w < TOP_MIN_W || f->h < TOP_MIN_H) {
		frame_put(f, 0, 0, -1, TA_WARN, "terminal too small");
		return;
	}
	draw_title(t, f);
	draw_footer(t, f);
	if (t->detail || t->help) {
		draw_overlay(t, f, 1, body);
		return;
	}
	if (body < 2 * P_COUNT) {
		/* Too short for four panes: the focused one alone. */
		draw_pane(t, f, t->focus, 1, body - 1);
		return;
	}
	split_rows(t, body, rows);
	for (int p = 0; p < P_COUNT; p++) {
		draw_pane(t, f, p, y, rows[p]);
		y += 1 + rows[p];
	}
}
