/*
 * top.c: the `denv top` command: flags, the --once frame, and the
 * interactive console on the event loop (stdin, the network, signals and a
 * clock tick are all loop callbacks; nothing here waits).
 */
#include "tui/tui.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/str.h"
#include "cli/cli.h"
#include "json/json.h"

/* Redraw at least this often: the clock and the ages move. */
#define TOP_CLOCK_MS 1000
/* --once gives up after this long without a complete picture. */
#define TOP_ONCE_DEADLINE_MS (3 * TOP_HTTP_TIMEOUT_MS)
/* Rows a page key moves. */
#define TOP_PAGE 10

struct app {
	struct top t;
	struct ev *ev;
	struct top_net *net;
	struct tui_frame f;
	bool draw_queued;
	struct ev_timer clock;
};

/* ---- drawing ---- */

static void draw_now(struct ev *ev, void *arg)
{
	struct app *a = arg;
	int h, w;

	a->draw_queued = false;
	term_size(&h, &w);
	frame_reset(&a->f, w, h);
	a->t.now_ms = clock_now_ms();
	top_render(&a->t, &a->f);
	term_draw(&a->f);
}

/* Many changes in one loop turn make one redraw, at the end of the turn. */
static void draw_soon(void *arg)
{
	struct app *a = arg;

	if (!a->draw_queued && a->ev) {
		a->draw_queued = true;
		ev_defer(a->ev, draw_now, a);
	}
}

static void on_clock(struct ev *ev, void *arg)
{
	struct app *a = arg;

	draw_soon(a);
	ev_timer_start(ev, &a->clock, TOP_CLOCK_MS, on_clock, a);
}

/* ---- keys ---- */

static void edit_key(struct app *a, int k)
{
	struct top *t = &a->t;
	size_t n = strlen(t->edit);

	if (k == TK_ESC) {
		t->edit[0] = '\0';
		t->editing = false;
	} else if (k == TK_ENTER) {
		t->editing = false;
	} else if (k == TK_BACKSPACE) {
		if (n)
			t->edit[n - 1] = '\0';
	} else if (k >= 0x20 && k < 0x7f && n + 1 < sizeof(t->edit)) {
		t->edit[n] = (char)k;
		t->edit[n + 1] = '\0';
	}
	/* The filter applies as it is typed. */
	str_copy(t->pane[t->focus].filter, sizeof(t->pane[t->focus].filter), t->edit);
	top_rebuild(t);
	top_net_dep_changed(a->net);
}

static void overlay_key(struct app *a, int k)
{
	struct top *t = &a->t;

	if (k == TK_ESC || k == TK_ENTER || (k == '?' && t->help)) {
		t->detail = t->help = false;
	} else if (k == TK_UP || k == 'k') {
		t->detail_scroll--;
	} else if (k == TK_DOWN || k == 'j') {
		t->detail_scroll++;
	} else if (k == TK_PGUP) {
		t->detail_scroll -= TOP_PAGE;
	} else if (k == TK_PGDN || k == ' ') {
		t->detail_scroll += TOP_PAGE;
	} else if (k == TK_HOME || k == 'g') {
		t->detail_scroll = 0;
	}
}

static void move_key(struct app *a, int delta)
{
	top_move(&a->t, delta);
	if (a->t.focus == P_DEPS)
		top_net_dep_changed(a->net);
}

static int move_delta(int k)
{
	switch (k) {
	case TK_UP:
	case 'k':
		return -1;
	case TK_DOWN:
	case 'j':
		return 1;
	case TK_PGUP:
		return -TOP_PAGE;
	case TK_PGDN:
		return TOP_PAGE;
	case TK_HOME:
	case 'g':
		return -TOP_MAX_H;
	case TK_END:
	case 'G':
		return TOP_MAX_H;
	default:
		return 0;
	}
}

static void pane_key(struct app *a, int k)
{
	struct top *t = &a->t;
	int d = move_delta(k);

	if (d) {
		move_key(a, d);
	} else if (k == TK_TAB || k == TK_RIGHT) {
		t->focus = (t->focus + 1) % P_COUNT;
	} else if (k == TK_BTAB || k == TK_LEFT) {
		t->focus = (t->focus + P_COUNT - 1) % P_COUNT;
	} else if (k == TK_ENTER) {
		t->detail = true;
		t->detail_scroll = 0;
	} else if (k == '?') {
		t->help = true;
		t->detail_scroll = 0;
	} else if (k == '/') {
		t->editing = true;
		str_copy(t->edit, sizeof(t->edit), t->pane[t->focus].filter);
	} else if (k == 'f') {
		t->follow = !t->follow;
		top_rebuild(t);
		top_net_dep_changed(a->net);
	} else if (k == 'r') {
		top_net_refresh(a->net);
	}
}

static void handle_key(struct app *a, int k)
{
	struct top *t = &a->t;

	/* Our SIGWINCH callback already took the new size; curses only tells us. */
	if (k == TK_RESIZE)
		return;
	if (t->editing) {
		edit_key(a, k);
		return;
	}
	if (k == 'q' || k == 'Q') {
		ev_stop(a->ev);
		return;
	}
	if (t->detail || t->help)
		overlay_key(a, k);
	else
		pane_key(a, k);
}

static void on_stdin(struct ev *ev, int fd, int revents, void *arg)
{
	struct app *a = arg;
	int k;

	while ((k = term_key()) != TK_NONE)
		handle_key(a, k);
	draw_soon(a);
}

/* ---- signals ---- */

static void on_quit_signal(struct ev *ev, int signo, void *arg)
{
	/* The loop ends and run_top restores the terminal on its way out. */
	ev_stop(ev);
}

static void on_winch(struct ev *ev, int signo, void *arg)
{
	term_resized();
	draw_soon(arg);
}

/* ---- the two modes ---- */

static void no_redraw(void *arg)
{
}

static int run_once(struct cli *c, struct app *a, int width, struct err *e)
{
	int64_t deadline = ev_mono_ms() + TOP_ONCE_DEADLINE_MS;
	struct buf out = BUF_INIT;
	int rc = CLI_FAIL;

	a->t.once = true;
	a->net = top_net_new(a->ev, &c->cfg, &a->t, true, no_redraw, a);
	top_net_start(a->net);
	while (!(top_net_sweeps(a->net) > 0 && top_net_dep_ready(a->net)) && !a->t.status[0] &&
	       ev_mono_ms() < deadline)
		ev_run_once(a->ev, 100);
	if (a->t.status[0] || !top_net_sweeps(a->net)) {
		err_set(e, "%s", a->t.status[0] ? a->t.status : "no answer from the control plane in time");
		goto out;
	}
	a->t.now_ms = clock_now_ms();
	frame_reset(&a->f, width, top_once_height(&a->t, width));
	top_render(&a->t, &a->f);
	frame_text(&a->f, &out);
	if (fwrite(out.data, 1, out.len, stdout) != out.len || fflush(stdout) != 0)
		err_set(e, "cannot write the output");
	else
		rc = CLI_OK;
out:
	buf_release(&out);
	return rc;
}

static int run_live(struct cli *c, struct app *a, bool no_stream, bool color, struct err *e)
{
	struct term_opts o = { .color = color };
	struct err se;

	ev_signal_add(a->ev, SIGINT, on_quit_signal, a);
	ev_signal_add(a->ev, SIGTERM, on_quit_signal, a);
	ev_signal_add(a->ev, SIGHUP, on_quit_signal, a);
	/* Before curses starts, so that curses leaves SIGWINCH to the loop. */
	ev_signal_add(a->ev, SIGWINCH, on_winch, a);
	a->net = top_net_new(a->ev, &c->cfg, &a->t, no_stream, draw_soon, a);
	/* The one blocking step, before the screen is up: connect + handshake. */
	if (!no_stream && top_net_stream(a->net, TOP_STREAM_DIAL_MS, &se) < 0)
		snprintf(a->t.status, sizeof(a->t.status), "live stream unavailable (%.150s): polling", se.msg);
	if (term_start(&o, e) < 0)
		return CLI_FAIL;
	ev_fd_add(a->ev, STDIN_FILENO, EV_READ, on_stdin, a);
	top_net_start(a->net);
	on_clock(a->ev, a);
	ev_run(a->ev);
	ev_fd_del(a->ev, STDIN_FILENO);
	term_stop();
	return CLI_OK;
}

static int parse_width(const char *s, int *w, struct err *e)
{
	if (!s) {
		*w = TOP_ONCE_WIDTH;
		return 0;
	}
	if (str_to_int(s, w) < 0 || *w < TOP_MIN_W || *w > TOP_MAX_W)
		return err_set(e, "--width must be a number from %d to %d", TOP_MIN_W, TOP_MAX_W);
	return 0;
}

static int run_top(struct cli *c, const struct cli_args *args, struct err *e)
{
	const char *dep = cli_flag_str(args, "deployment");
	const char *nc = getenv("NO_COLOR"), *ns = getenv("DENV_NO_STREAM");
	bool no_stream = cli_flag_bool(args, "no-stream", false) || (ns && *ns);
	bool color = !cli_flag_bool(args, "no-color", false) && !(nc && *nc);
	struct app a;
	int width, rc;

	memset(&a, 0, sizeof(a));
	if (parse_width(cli_flag_str(args, "width"), &width, e) < 0)
		return CLI_USAGE;
	top_init(&a.t);
	a.t.server = c->cfg.server;
	if (dep && *dep) {
		str_copy(a.t.pane[P_DEPS].sel_id, sizeof(a.t.pane[P_DEPS].sel_id), dep);
		a.t.follow = false;
	}
	a.ev = ev_new();
	if (cli_flag_bool(args, "once", false))
		rc = run_once(c, &a, width, e);
	else
		rc = run_live(c, &a, no_stream, color, e);
	ev_timer_stop(a.ev, &a.clock);
	top_net_free(a.net);
	ev_free(a.ev);
	frame_release(&a.f);
	top_release(&a.t);
	return rc;
}

static const struct cli_flag top_flags[] = {
	{ "once", 0, CLI_BOOL, NULL, "print one plain-text frame to stdout and exit (for scripts)" },
	{ "width", 0, CLI_STR, "N", "width of the --once frame (default 100)" },
	{ "deployment", 0, CLI_STR, "ID", "show this deployment's phases instead of following the newest" },
	{ "no-color", 0, CLI_BOOL, NULL, "no colours (NO_COLOR in the environment does the same)" },
	{ "no-stream", 0, CLI_BOOL, NULL, "poll instead of using the live event stream (also DENV_NO_STREAM=1)" },
	{ NULL, 0, 0, NULL, NULL },
};

const struct cli_cmd cli_cmd_top = {
	.name = "top",
	.args = "",
	.summary = "live console: hosts, environments, deployments and their phases",
	.flags = top_flags,
	.min_pos = 0,
	.max_pos = 0,
	.run = run_top,
};
