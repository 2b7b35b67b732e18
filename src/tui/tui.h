/*
 * tui.h: `denv top`, the console an environment engineer leaves open while
 * deploying and grading.
 *
 * Layout of src/tui (one job per file):
 *  - frame.c:  a grid of ASCII cells with one attribute each. The renderer
 *              draws into it; the terminal module copies it to the screen,
 *              --once prints it as plain text. Nothing here knows curses.
 *  - model.c:  what the control plane told us (hosts, environments,
 *              deployments, the selected deployment's phases), the panes'
 *              selections and filters.
 *  - render.c: layout and the four panes, the detail and help overlays.
 *  - net.c:    the network, all on the event loop: REST reads with the
 *              asynchronous client, the live event stream, polling when the
 *              stream is not there.
 *  - term.c:   the only module that touches the terminal (after htop's
 *              CRT.c): set-up, tear-down on every exit path, the fatal-signal
 *              handler that restores the terminal first, stderr buffered
 *              while curses runs.
 *  - top.c:    the command: flags, keys, the loop.
 */
#ifndef DENV_TUI_H
#define DENV_TUI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/ev.h"

struct json;
struct cli_config;

/* ---- limits and intervals (all in one place) ---- */

#define TOP_POLL_MS 1000		/* full refresh when there is no live stream */
#define TOP_LIVE_REFRESH_MS 5000	/* full refresh even with the stream (LastSeenAt moves) */
#define TOP_DEP_REFRESH_MS 700		/* the selected running deployment: phases emit no events */
#define TOP_EVENT_DEBOUNCE_MS 150	/* events come in bursts: one refresh per burst */
#define TOP_HTTP_TIMEOUT_MS 10000	/* one REST read */
#define TOP_MAX_RESPONSE ((size_t)16 << 20)
#define TOP_MAX_INFLIGHT 4		/* concurrent REST reads */
#define TOP_MAX_PROJECTS 128		/* projects whose environments we list */
#define TOP_MAX_ENVS 256		/* environments whose deployments we list */
#define TOP_DEPS_PER_ENV 20		/* newest deployments kept per environment */
#define TOP_MAX_DEPS 400		/* deployments kept in all */
#define TOP_STREAM_DIAL_MS 2000		/* first dial of the live stream (before the screen is up) */
#define TOP_REDIAL_MS 15000		/* try the stream again this often while polling */
#define TOP_REDIAL_DIAL_MS 300		/* ... with this dial budget (ws_dial blocks) */
#define TOP_ONCE_WIDTH 100		/* --once frame width unless --width */
#define TOP_MIN_W 20			/* smaller terminals get a "too small" line */
#define TOP_MIN_H 6
#define TOP_MAX_W 1000			/* frame bounds */
#define TOP_MAX_H 100000
#define TOP_FILTER_MAX 48
#define TOP_CELL_MAX 256		/* one table cell's text */
#define TOP_MAX_CELLS 12		/* columns of one pane */
#define TOP_ID_MAX 128
#define TOP_STATUS_MAX 200		/* the footer's message */
#define TOP_STDERR_KEEP ((size_t)64 << 10)	/* buffered stderr printed after curses */

/* ---- frame (frame.c) ---- */

/* Cell attributes: what a cell means, not how it looks (term.c decides). */
enum tui_attr {
	TA_NORMAL,
	TA_TITLE,	/* the title bar */
	TA_HEAD,	/* a pane's column header, pane not focused */
	TA_HEAD_FOCUS,	/* ... the focused pane */
	TA_SELECT,	/* selected row of the focused pane */
	TA_OK,		/* ok, succeeded, connected, running environment */
	TA_FAIL,	/* failed, rolled_back, unreachable */
	TA_BUSY,	/* running, pending */
	TA_DIM,		/* skipped, absent */
	TA_WARN,	/* the footer's error, the polling indicator */
	TA_COUNT
};

struct tui_frame {
	int w, h;
	char *ch;		/* w*h printable ASCII bytes */
	unsigned char *at;	/* w*h enum tui_attr */
};

/* Resize to w x h (bounded by TOP_MAX_W / TOP_MAX_H) and clear. */
void frame_reset(struct tui_frame *f, int w, int h);
void frame_release(struct tui_frame *f);
/* Write s at (y, x), at most maxw cells (<0: to the right edge), clipped to
 * the frame. Bytes outside printable ASCII show as '?' (one per UTF-8
 * sequence), so the screen never gets a control byte or a wide character.
 * Returns the cells written. */
int frame_put(struct tui_frame *f, int y, int x, int maxw, enum tui_attr a, const char *s);
/* Set the attribute of n cells from (y, x). */
void frame_attr(struct tui_frame *f, int y, int x, int n, enum tui_attr a);
/* Fill row y with spaces of attribute a. */
void frame_fill_row(struct tui_frame *f, int y, enum tui_attr a);
/* The frame as text: each row right-trimmed, one '\n' each, trailing blank
 * rows dropped. */
void frame_text(const struct tui_frame *f, struct buf *out);

/* ---- model and view state (model.c) ---- */

enum top_pane { P_HOSTS, P_ENVS, P_DEPS, P_PHASES, P_COUNT };

struct top_pane_state {
	size_t *rows;		/* indices into the pane's source array, after the filter */
	size_t nrows, nsrc;
	int sel;		/* index into rows; -1 when empty */
	int scroll;		/* first row shown */
	char sel_id[TOP_ID_MAX];	/* the selection survives refreshes by id */
	char filter[TOP_FILTER_MAX];
};

struct top {
	/* what the control plane said (owned) */
	struct json *hosts;	/* array of hosts */
	struct json *envs;	/* array of environments, each with "_project" added */
	struct json *deps;	/* array of deployments, newest first, each with "_env" */
	struct json *dep_doc;	/* {deployment, phases} of the selected deployment */
	struct json *pools;	/* GET /v1/pools's array; NULL when the server has none */

	struct top_pane_state pane[P_COUNT];
	int focus;
	bool follow;		/* select the newest deployment as deployments appear */
	bool detail;		/* the detail overlay is up */
	int detail_scroll;
	bool help;
	bool editing;		/* typing a filter */
	char edit[TOP_FILTER_MAX];

	bool once;		/* plain frame: no clock, every row */
	bool live;		/* the live stream is open */
	bool loaded;		/* a first full refresh arrived */
	const char *server;
	int64_t now_ms;		/* wall clock for ages, set before each render */
	char status[TOP_STATUS_MAX];	/* the last network error, "" when fine */
};

void top_init(struct top *t);
void top_release(struct top *t);
/* Recompute every pane's rows from the data and filters, keep selections by
 * id, apply follow. Call after any change to data or filters. */
void top_rebuild(struct top *t);
/* The source array of a pane (phases: the selected deployment's). */
const struct json *top_src(const struct top *t, int pane);
/* The selected item of a pane, or NULL. */
const struct json *top_selected(const struct top *t, int pane);
/* The selected deployment's id, or "" when none. */
const char *top_selected_dep(const struct top *t);
/* Move the focused pane's selection by delta rows (clamped). */
void top_move(struct top *t, int delta);
/* Whether the row text matches the filter (case-insensitive substring). */
bool top_match(const char *text, const char *filter);

/* ---- cells (cells.c) ---- */

/* A pane's column: its head and width (cells incl. the gap after; 0: the
 * rest of the line; -1: the timeline). Each pane's list ends at head NULL. */
struct top_col {
	const char *head;
	int width;
};
extern const struct top_col *const top_pane_cols[P_COUNT];

/* The text of cell col of item in pane (what the filter also matches). */
void top_cells(const struct top *t, int pane, const struct json *item, char cells[TOP_MAX_CELLS][TOP_CELL_MAX],
	       int *ncells);
/* Short forms used in cells (exposed for the detail overlay). */
void top_short_id(const char *id, char *out, size_t n);
void top_fmt_age(int64_t ms, char *out, size_t n);
void top_fmt_took(int64_t ms, char *out, size_t n);
/* RFC 3339 field of obj in Unix ms, or -1. */
int64_t top_time_ms(const struct json *obj, const char *key);

/* ---- rendering (render.c) ---- */

/* Draw the whole screen into f (its size is the terminal's). */
void top_render(struct top *t, struct tui_frame *f);
/* --once: the height every row needs at width w. */
int top_once_height(const struct top *t, int w);
/* Lines of the detail overlay's text. */
void top_detail_text(const struct top *t, struct buf *out);

/* ---- network (net.c) ---- */

struct top_net;
/* changed: the model changed and the screen should be redrawn. */
typedef void (*top_changed_fn)(void *arg);

/* no_stream: poll only (--no-stream, DENV_NO_STREAM, --once). */
struct top_net *top_net_new(struct ev *ev, const struct cli_config *cfg, struct top *t, bool no_stream,
			    top_changed_fn changed, void *arg);
void top_net_free(struct top_net *n);
/* Start the periodic refresh (a full one now). */
void top_net_start(struct top_net *n);
/* Try the live stream, blocking up to dial_ms (ws_dial). 0 / -1 with e. */
int top_net_stream(struct top_net *n, int dial_ms, struct err *e);
/* A full refresh as soon as the current one ends. */
void top_net_refresh(struct top_net *n);
/* The selected deployment changed: read it now. */
void top_net_dep_changed(struct top_net *n);
/* Completed full refreshes, and whether the selected deployment's document
 * is current (for --once). */
int top_net_sweeps(const struct top_net *n);
bool top_net_dep_ready(const struct top_net *n);

/* ---- terminal (term.c) ---- */

/* Keys as top.c sees them: printable bytes as themselves, the rest here. */
enum {
	TK_NONE = -1,
	TK_UP = 0x1000, TK_DOWN, TK_LEFT, TK_RIGHT, TK_PGUP, TK_PGDN, TK_HOME, TK_END,
	TK_TAB, TK_BTAB, TK_ENTER, TK_BACKSPACE, TK_ESC, TK_RESIZE,
};
struct term_opts {
	bool color;	/* false: NO_COLOR, --no-color */
};

/* Take the terminal: curses on, stderr into a buffer, fatal signals restore
 * the terminal before they kill us. 0 / -1 with e (nothing changed then). */
int term_start(const struct term_opts *o, struct err *e);
/* Give the terminal back and print what was written to stderr meanwhile.
 * Safe to call twice and when term_start failed. */
void term_stop(void);
/* The terminal's size now (after a SIGWINCH). */
void term_size(int *h, int *w);
/* Take a new size after SIGWINCH. */
void term_resized(void);
/* Copy the frame to the screen. */
void term_draw(const struct tui_frame *f);
/* The next key (a byte or a TK_ code), TK_NONE when none waits. */
int term_key(void);

#endif
