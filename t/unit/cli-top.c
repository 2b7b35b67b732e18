/*
 * Unit tests: the pure parts of `denv top` (src/tui/frame.c, cells.c, model.c,
 * render.c): cell formats, the ASCII-only frame, filters, selection kept by
 * id and follow, the timeline's scale, and the 80x24 layout.
 *
 * The unit-test build links src/cli but not src/tui (whose net.c and term.c
 * need the network and curses), so the three pure files are compiled into
 * this test directly. They include nothing from curses.
 */
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/str.h"
#include "json/json.h"
#include "tap.h"

#include "tui/frame.c"
#include "tui/cells.c"
#include "tui/model.c"
#include "tui/render.c"

/* 2026-01-01T00:00:00Z and offsets from it. */
#define T0_NS INT64_C(1767225600000000000)

static void stamp(char *out, int64_t ms)
{
	char s[CLOCK_RFC3339_MAX];

	clock_format_rfc3339(T0_NS + ms * 1000000, s);
	str_copy(out, CLOCK_RFC3339_MAX, s);
}

static struct json *parse(const char *text)
{
	struct json *doc = NULL;
	struct err e;

	if (json_parse(text, strlen(text), NULL, &doc, &e) < 0)
		tap_diag("bad test JSON: %s", e.msg);
	return doc;
}

static struct json *phase(int seq, const char *name, const char *status, int64_t s_ms, int64_t f_ms)
{
	char a[CLOCK_RFC3339_MAX], b[CLOCK_RFC3339_MAX];
	struct buf t = BUF_INIT;
	struct json *p;

	stamp(a, s_ms);
	stamp(b, f_ms);
	buf_addf(&t, "{\"Seq\":%d,\"Name\":\"%s\",\"Status\":\"%s\",\"Evidence\":{\"n\":%d},\"Error\":\"\","
		 "\"StartedAt\":\"%s\",\"FinishedAt\":\"%s\"}", seq, name, status, seq, s_ms < 0 ? "" : a,
		 f_ms < 0 ? "" : b);
	p = parse(t.data);
	buf_release(&t);
	return p;
}

/* A model: one host, one environment, two deployments; the newest has three
 * phases over 4 s: 0-1 s ok, 1-3 s ok, 3-4 s failed. */
static void fill(struct top *t)
{
	struct json *doc, *phases;

	top_init(t);
	t->now_ms = T0_NS / 1000000 + 10000;
	t->loaded = true;
	t->hosts = parse("[{\"ID\":\"host_1\",\"Name\":\"box-1\",\"connected\":true,\"Status\":\"connected\","
			 "\"Capabilities\":{\"storage\":\"dir\",\"cpus\":4,\"memory_mb\":2048,\"disk_gb\":50}}]");
	t->envs = parse("[{\"ID\":\"env_1\",\"Name\":\"alpha\",\"_project\":\"hub\",\"HostID\":\"host_1\","
			"\"Status\":\"running\",\"CurrentVersionID\":\"ver_01M8KVWNY3K4SSVDV1JJCDPGF0\","
			"\"ParentVersionID\":\"\",\"Endpoints\":{\"box\":\"127.0.0.1:20000\"}}]");
	t->deps = parse("[{\"ID\":\"dep_02\",\"_env\":\"hub/alpha\",\"Kind\":\"deploy\",\"Status\":\"failed\"},"
			"{\"ID\":\"dep_01\",\"_env\":\"hub/alpha\",\"Kind\":\"deploy\",\"Status\":\"succeeded\"}]");
	doc = parse("{\"deployment\":{\"ID\":\"dep_02\",\"Status\":\"failed\"},\"phases\":[]}");
	phases = json_get(doc, "phases");
	json_array_push(phases, phase(1, "resolve", "ok", 0, 1000));
	json_array_push(phases, phase(2, "prepare", "ok", 1000, 3000));
	json_array_push(phases, phase(3, "verdict", "failed", 3000, 4000));
	t->dep_doc = doc;
	top_rebuild(t);
}

/* Row y of the frame as a string (right-trimmed). */
static const char *row(const struct tui_frame *f, int y)
{
	static char line[TOP_MAX_W + 1];
	int n = f->w;

	memcpy(line, f->ch + (size_t)y * (size_t)f->w, (size_t)n);
	while (n > 0 && line[n - 1] == ' ')
		n--;
	line[n] = '\0';
	return line;
}

/* The first row that starts with prefix, or -1. */
static int find_row(const struct tui_frame *f, const char *prefix)
{
	for (int y = 0; y < f->h; y++)
		if (str_has_prefix(row(f, y), prefix))
			return y;
	return -1;
}

static void test_formats(void)
{
	char s[64];

	top_fmt_took(0, s, sizeof(s));
	is_str(s, "0ms", "took 0");
	top_fmt_took(1500, s, sizeof(s));
	is_str(s, "1.5s", "took 1.5 s");
	top_fmt_took(61000, s, sizeof(s));
	is_str(s, "1m01s", "took over a minute");
	top_fmt_took(-1, s, sizeof(s));
	is_str(s, "-", "not finished");
	top_fmt_age(59000, s, sizeof(s));
	is_str(s, "59s", "age in seconds");
	top_fmt_age(7200000, s, sizeof(s));
	is_str(s, "2h", "age in hours");
	top_fmt_age(-5, s, sizeof(s));
	is_str(s, "0s", "a clock skew never shows a negative age");
	top_short_id("dep_01M8KVWNY3K4SSVDV1JJCDPGF0", s, sizeof(s));
	is_str(s, "dep_CDPGF0", "ids: prefix and the last six characters");
	top_short_id("", s, sizeof(s));
	is_str(s, "-", "no id");
	ok(top_match("hub/alpha RUNNING", "running"), "filter: case-insensitive substring");
	ok(!top_match("hub/alpha", "beta"), "filter: no match");
	ok(top_match("anything", ""), "filter: empty matches all");
}

static void test_frame(void)
{
	struct tui_frame f = { 0 };

	frame_reset(&f, 10, 2);
	is_int(frame_put(&f, 0, 0, -1, TA_NORMAL, "a\033[31mb"), 7, "a control byte takes one cell");
	is_str(row(&f, 0), "a?[31mb", "control bytes show as ?");
	frame_put(&f, 1, 0, -1, TA_NORMAL, "\xc3\xa9t\xe2\x82\xac");
	is_str(row(&f, 1), "?t?", "one ? per UTF-8 character");
	frame_put(&f, 1, 7, -1, TA_OK, "123456");
	is_str(row(&f, 1), "?t?    123", "text is clipped at the right edge");
	is_int(f.at[17], TA_OK, "attributes follow the text");
	frame_release(&f);
}

static void test_selection(void)
{
	struct top t;

	fill(&t);
	is_str(top_selected_dep(&t), "dep_02", "follow selects the newest deployment");
	ok(top_src(&t, P_PHASES) != NULL, "its phases are shown");
	t.focus = P_DEPS;
	top_move(&t, 1);
	is_str(top_selected_dep(&t), "dep_01", "moving selects the older one");
	ok(!t.follow, "and stops following");
	ok(top_src(&t, P_PHASES) == NULL, "the other deployment's phases are not shown as this one's");
	/* A new deployment arrives at the top: the selection stays on dep_01. */
	json_free(t.deps);
	t.deps = parse("[{\"ID\":\"dep_03\"},{\"ID\":\"dep_02\"},{\"ID\":\"dep_01\"}]");
	top_rebuild(&t);
	is_str(top_selected_dep(&t), "dep_01", "the selection is kept by id across refreshes");
	t.follow = true;
	top_rebuild(&t);
	is_str(top_selected_dep(&t), "dep_03", "follow again: the newest");
	str_copy(t.pane[P_DEPS].filter, sizeof(t.pane[P_DEPS].filter), "dep_02");
	t.follow = false;
	top_rebuild(&t);
	is_int(t.pane[P_DEPS].nrows, 1, "a filter keeps the matching rows only");
	is_str(top_selected_dep(&t), "dep_02", "and the selection moves onto what is shown");
	top_release(&t);
}

/* --once at 80 columns: fixed widths give the timeline 25 cells for 4 s. */
static void test_timeline(void)
{
	struct tui_frame f = { 0 };
	struct top t;
	int y;

	fill(&t);
	t.once = true;
	frame_reset(&f, 80, top_once_height(&t, 80));
	top_render(&t, &f);
	y = find_row(&f, "  #  PHASE");
	ok(y > 0, "the phases pane is drawn");
	is_str(row(&f, y + 1), "> 1  resolve   ok      1.0s   =======                   {\"n\":1}",
	       "phase 1: 0-1 s of 4 s is the first 7 cells");
	is_str(row(&f, y + 2), "  2  prepare   ok      2.0s         =============       {\"n\":2}",
	       "phase 2: 1-3 s starts at cell 6 and is twice as long");
	is_str(row(&f, y + 3), "  3  verdict   failed  1.0s                     XXXXXXX {\"n\":3}",
	       "phase 3: the failed last second (cells 18-24), drawn with X");
	y = find_row(&f, "> box-1");
	ok(y > 0 && strstr(row(&f, y), "yes  connected   dir   4   2.0G   50G   -     hub/alpha"),
	   "the host row: connected, storage, cpus, memory, disk, environments");
	frame_release(&f);
	top_release(&t);
}

/* The console at 80x24: title, four panes, footer; nothing past column 80. */
static void test_layout(void)
{
	struct tui_frame f = { 0 };
	struct top t;

	fill(&t);
	t.live = false;
	frame_reset(&f, 80, 24);
	top_render(&t, &f);
	ok(str_has_prefix(row(&f, 0), " denv top ") && strstr(row(&f, 0), "follow  polling  ? help"),
	   "title: follow and the polling indicator");
	ok(str_has_prefix(row(&f, 23), "Tab pane"), "footer: the keys");
	ok(find_row(&f, "  HOST") > 0 && find_row(&f, "  PROJECT") > 0 && find_row(&f, "  DEPLOYMENT") > 0 &&
		   find_row(&f, "  #  PHASE") > 0,
	   "all four panes fit at 80x24");
	is_int(f.at[(size_t)find_row(&f, "  DEPLOYMENT") * 80], TA_HEAD_FOCUS, "the focused pane's header stands out");
	frame_reset(&f, 80, 7);
	top_render(&t, &f);
	ok(find_row(&f, "  DEPLOYMENT") == 1 && find_row(&f, "  HOST") < 0, "too short: the focused pane alone");
	frame_reset(&f, 10, 3);
	top_render(&t, &f);
	is_str(row(&f, 0), "terminal t", "too small: a notice, cut to the width");
	t.help = true;
	frame_reset(&f, 80, 24);
	top_render(&t, &f);
	is_str(row(&f, 1), " HELP", "? shows the help over the panes");
	frame_release(&f);
	top_release(&t);
}

int main(void)
{
	test_formats();
	test_frame();
	test_selection();
	test_timeline();
	test_layout();
	return tap_done();
}
