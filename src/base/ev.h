/*
 * ev.h: the poll() event loop every denv program runs on (after redis's ae.c).
 *
 * One loop per process, single-threaded. It watches:
 *  - file descriptors for readability / writability;
 *  - timers, which the caller embeds in its own structs (struct ev_timer), so
 *    stopping one is always safe and never looks anything up;
 *  - child processes: the loop reaps a watched pid and reports its status;
 *  - signals, delivered through a self-pipe as ordinary callbacks;
 *  - end-of-turn callbacks (ev_defer), run after every ready fd and timer of
 *    the turn has been handled and before the next poll(): the store uses this
 *    to cover all commits of one turn with one fsync.
 * Callbacks may add or remove any watcher, including their own; the loop
 * re-checks an fd's registration before each callback.
 */
#ifndef DENV_EV_H
#define DENV_EV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ev;

enum { EV_READ = 1, EV_WRITE = 2 };

typedef void (*ev_fd_fn)(struct ev *ev, int fd, int revents, void *arg);
typedef void (*ev_timer_fn)(struct ev *ev, void *arg);
typedef void (*ev_child_fn)(struct ev *ev, pid_t pid, int status, void *arg);
typedef void (*ev_signal_fn)(struct ev *ev, int signo, void *arg);
typedef void (*ev_defer_fn)(struct ev *ev, void *arg);

/* A timer lives in the caller's memory. Zero it (or EV_TIMER_INIT) before first use. */
struct ev_timer {
	int64_t when;		/* monotonic ms deadline */
	size_t slot;		/* heap index + 1; 0 when not armed */
	ev_timer_fn fn;
	void *arg;
};
#define EV_TIMER_INIT { 0, 0, NULL, NULL }

struct ev *ev_new(void);
void ev_free(struct ev *ev);

/* Watch fd for events (EV_READ|EV_WRITE). The callback gets the ready events,
 * with EV_READ also set on hang-up or error so that a read reports it.
 * -1 if fd is already watched or negative. */
int ev_fd_add(struct ev *ev, int fd, int events, ev_fd_fn fn, void *arg);
/* Change the events of a watched fd (0 pauses it). */
int ev_fd_set(struct ev *ev, int fd, int events);
/* Stop watching fd (does not close it). Safe for an fd that is not watched. */
void ev_fd_del(struct ev *ev, int fd);

/* Arm t to fire once, ms from now (re-arming an armed timer moves it). */
void ev_timer_start(struct ev *ev, struct ev_timer *t, int64_t ms, ev_timer_fn fn, void *arg);
void ev_timer_stop(struct ev *ev, struct ev_timer *t);
bool ev_timer_armed(const struct ev_timer *t);

/* Reap pid when it exits and call fn with its wait status. */
int ev_child_add(struct ev *ev, pid_t pid, ev_child_fn fn, void *arg);
/* Forget pid (it will still be reaped if it exits, and the status dropped). */
void ev_child_del(struct ev *ev, pid_t pid);

/* Call fn on the loop whenever signo arrives (SIGINT, SIGTERM, SIGHUP...). */
int ev_signal_add(struct ev *ev, int signo, ev_signal_fn fn, void *arg);

/* Call fn once at the end of the current (or next) turn. */
void ev_defer(struct ev *ev, ev_defer_fn fn, void *arg);

/* Run until ev_stop. Returns 0, or -1 if poll() fails for a reason other than EINTR. */
int ev_run(struct ev *ev);
/* One turn: wait at most max_ms (-1: until something happens). Returns 0 / -1. */
int ev_run_once(struct ev *ev, int64_t max_ms);
void ev_stop(struct ev *ev);
bool ev_stopped(const struct ev *ev);

/* Outside the loop (blocking clients, dials): wait until fd is ready for
 * events (EV_READ/EV_WRITE) or the monotonic deadline (ms) passes.
 * 1 ready (or in error: the next read or write reports it), 0 timed out. */
int ev_wait_fd(int fd, int events, int64_t deadline_ms);

/* Monotonic milliseconds as of the start of this turn. */
int64_t ev_now(const struct ev *ev);
/* Monotonic milliseconds, read now. */
int64_t ev_mono_ms(void);

#endif
