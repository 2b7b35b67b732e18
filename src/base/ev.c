/* ev.c: see ev.h. */
#include "base/ev.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/sys.h"

struct ev_fd {
	ev_fd_fn fn;		/* NULL: slot unused */
	void *arg;
	int events;
	unsigned gen;		/* bumped on every add, to notice fd reuse within a turn */
};

struct ev_child {
	pid_t pid;
	ev_child_fn fn;
	void *arg;
};

struct ev_sig {
	int signo;
	ev_signal_fn fn;
	void *arg;
};

struct ev_deferred {
	ev_defer_fn fn;
	void *arg;
};

struct ev {
	struct ev_fd *fds;
	size_t nfds;		/* slots in fds (highest fd + 1 ever watched) */
	struct pollfd *pfds;
	size_t pfds_cap;
	struct ev_timer **heap;
	size_t nheap, heap_cap;
	struct ev_child *children;
	size_t nchildren, children_cap;
	bool check_children;
	bool sigchld_installed;
	struct ev_sig *sigs;
	size_t nsigs;
	struct ev_deferred *deferred;
	size_t ndeferred, deferred_cap;
	int64_t now;
	bool stop;
};

/* The self-pipe that signal handlers write to: signals are process-wide, so
 * this is the one piece of state shared by every loop in the process. */
static int ev_sigpipe[2] = { -1, -1 };

int64_t ev_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_signal(int signo)
{
	int saved = errno;
	unsigned char b = (unsigned char)signo;

	if (ev_sigpipe[1] >= 0)
		(void)!write(ev_sigpipe[1], &b, 1);
	errno = saved;
}

static void sigpipe_ready(struct ev *ev, int fd, int revents, void *arg);

struct ev *ev_new(void)
{
	struct ev *ev = xcalloc(1, sizeof(*ev));

	signal(SIGPIPE, SIG_IGN);
	if (ev_sigpipe[0] < 0) {
		if (pipe2(ev_sigpipe, O_CLOEXEC | O_NONBLOCK) < 0) {
			free(ev);
			return NULL;
		}
	}
	ev->now = ev_mono_ms();
	ev_fd_add(ev, ev_sigpipe[0], EV_READ, sigpipe_ready, NULL);
	return ev;
}

void ev_free(struct ev *ev)
{
	if (!ev)
		return;
	for (size_t i = 0; i < ev->nsigs; i++)
		signal(ev->sigs[i].signo, SIG_DFL);
	/* A loop made for a while (denvd's workers start containers on one)
	 * leaves the process's SIGCHLD as it found it. */
	if (ev->sigchld_installed)
		signal(SIGCHLD, SIG_DFL);
	free(ev->fds);
	free(ev->pfds);
	free(ev->heap);
	free(ev->children);
	free(ev->sigs);
	free(ev->deferred);
	free(ev);
}

/* ---- file descriptors ---- */

int ev_fd_add(struct ev *ev, int fd, int events, ev_fd_fn fn, void *arg)
{
	if (fd < 0 || !fn) {
		errno = EBADF;
		return -1;
	}
	if ((size_t)fd >= ev->nfds) {
		size_t n = ev->nfds ? ev->nfds : 64;
		while (n <= (size_t)fd)
			n *= 2;
		ev->fds = xrealloc(ev->fds, n * sizeof(*ev->fds));
		memset(ev->fds + ev->nfds, 0, (n - ev->nfds) * sizeof(*ev->fds));
		ev->nfds = n;
	}
	if (ev->fds[fd].fn) {
		errno = EEXIST;
		return -1;
	}
	ev->fds[fd].fn = fn;
	ev->fds[fd].arg = arg;
	ev->fds[fd].events = events;
	ev->fds[fd].gen++;
	return 0;
}

int ev_fd_set(struct ev *ev, int fd, int events)
{
	if (fd < 0 || (size_t)fd >= ev->nfds || !ev->fds[fd].fn) {
		errno = ENOENT;
		return -1;
	}
	ev->fds[fd].events = events;
	return 0;
}

void ev_fd_del(struct ev *ev, int fd)
{
	if (fd < 0 || (size_t)fd >= ev->nfds)
		return;
	ev->fds[fd].fn = NULL;
	ev->fds[fd].arg = NULL;
	ev->fds[fd].events = 0;
}

/* ---- timers: a binary min-heap of caller-owned structs ---- */

static void heap_place(struct ev *ev, size_t i, struct ev_timer *t)
{
	ev->heap[i] = t;
	t->slot = i + 1;
}

static void heap_up(struct ev *ev, size_t i)
{
	struct ev_timer *t = ev->heap[i];

	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (ev->heap[parent]->when <= t->when)
			break;
		heap_place(ev, i, ev->heap[parent]);
		i = parent;
	}
	heap_place(ev, i, t);
}

static void heap_down(struct ev *ev, size_t i)
{
	struct ev_timer *t = ev->heap[i];

	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		int64_t mw = t->when;
		if (l < ev->nheap && ev->heap[l]->when < mw) {
			m = l;
			mw = ev->heap[l]->when;
		}
		if (r < ev->nheap && ev->heap[r]->when < mw)
			m = r;
		if (m == i)
			break;
		heap_place(ev, i, ev->heap[m]);
		i = m;
	}
	heap_place(ev, i, t);
}

void ev_timer_stop(struct ev *ev, struct ev_timer *t)
{
	size_t i;
	struct ev_timer *last;

	if (!t->slot)
		return;
	i = t->slot - 1;
	t->slot = 0;
	last = ev->heap[--ev->nheap];
	if (i == ev->nheap)
		return;
	heap_place(ev, i, last);
	heap_up(ev, i);
	heap_down(ev, last->slot - 1);
}

void ev_timer_start(struct ev *ev, struct ev_timer *t, int64_t ms, ev_timer_fn fn, void *arg)
{
	ev_timer_stop(ev, t);
	if (ms < 0)
		ms = 0;
	t->when = ev_mono_ms() + ms;
	t->fn = fn;
	t->arg = arg;
	if (ev->nheap == ev->heap_cap) {
		ev->heap_cap = ev->heap_cap ? ev->heap_cap * 2 : 64;
		ev->heap = xrealloc(ev->heap, ev->heap_cap * sizeof(*ev->heap));
	}
	heap_place(ev, ev->nheap++, t);
	heap_up(ev, ev->nheap - 1);
}

bool ev_timer_armed(const struct ev_timer *t)
{
	return t->slot != 0;
}

static void run_timers(struct ev *ev)
{
	/* Only timers due at the start of this pass run, so a callback that
	 * re-arms itself with 0 ms cannot starve the fds. */
	int64_t now = ev_mono_ms();
	size_t budget = ev->nheap;

	while (ev->nheap && budget-- && ev->heap[0]->when <= now) {
		struct ev_timer *t = ev->heap[0];
		ev_timer_stop(ev, t);
		t->fn(ev, t->arg);
	}
}

/* ---- children and signals ---- */

static void install_handler(int signo)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART | (signo == SIGCHLD ? SA_NOCLDSTOP : 0);
	sigemptyset(&sa.sa_mask);
	sigaction(signo, &sa, NULL);
}

int ev_child_add(struct ev *ev, pid_t pid, ev_child_fn fn, void *arg)
{
	if (pid <= 0 || !fn) {
		errno = EINVAL;
		return -1;
	}
	if (ev->nchildren == ev->children_cap) {
		ev->children_cap = ev->children_cap ? ev->children_cap * 2 : 16;
		ev->children = xrealloc(ev->children, ev->children_cap * sizeof(*ev->children));
	}
	if (!ev->sigchld_installed) {
		install_handler(SIGCHLD);
		ev->sigchld_installed = true;
	}
	for (size_t i = 0; i < ev->nchildren; i++) {
		if (ev->children[i].pid == pid) {
			/* watched again after ev_child_del */
			ev->children[i] = (struct ev_child){ pid, fn, arg };
			ev->check_children = true;
			return 0;
		}
	}
	ev->children[ev->nchildren++] = (struct ev_child){ pid, fn, arg };
	/* The child may have exited before we watched it: look at the next turn. */
	ev->check_children = true;
	return 0;
}

void ev_child_del(struct ev *ev, pid_t pid)
{
	/* Keep the entry without a callback so that the child is still reaped
	 * (and its status dropped) instead of staying a zombie. */
	for (size_t i = 0; i < ev->nchildren; i++) {
		if (ev->children[i].pid == pid) {
			ev->children[i].fn = NULL;
			ev->children[i].arg = NULL;
			return;
		}
	}
}

static void reap_children(struct ev *ev)
{
	ev->check_children = false;
	for (size_t i = 0; i < ev->nchildren;) {
		struct ev_child c = ev->children[i];
		int status;
		pid_t r = waitpid(c.pid, &status, WNOHANG);
		if (r == 0 || (r < 0 && errno == EINTR)) {
			i++;
			continue;
		}
		ev->children[i] = ev->children[--ev->nchildren];
		/* r < 0 (ECHILD): someone else reaped it; nothing to report. */
		if (r == c.pid && c.fn) {
			c.fn(ev, c.pid, status, c.arg);
			/* The callback may have added or removed watches and so moved
			 * entries around i: look at all of them again next turn
			 * rather than miss a child that has already exited. */
			ev->check_children = true;
		}
	}
}

int ev_signal_add(struct ev *ev, int signo, ev_signal_fn fn, void *arg)
{
	ev->sigs = xrealloc(ev->sigs, (ev->nsigs + 1) * sizeof(*ev->sigs));
	ev->sigs[ev->nsigs++] = (struct ev_sig){ signo, fn, arg };
	install_handler(signo);
	return 0;
}

static void sigpipe_ready(struct ev *ev, int fd, int revents, void *arg)
{
	unsigned char sigs[64];
	ssize_t n;

	while ((n = sys_read(fd, sigs, sizeof(sigs))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			if (sigs[i] == SIGCHLD) {
				ev->check_children = true;
				continue;
			}
			for (size_t j = 0; j < ev->nsigs; j++)
				if (ev->sigs[j].signo == sigs[i])
					ev->sigs[j].fn(ev, sigs[i], ev->sigs[j].arg);
		}
	}
}

/* ---- deferred ---- */

void ev_defer(struct ev *ev, ev_defer_fn fn, void *arg)
{
	if (ev->ndeferred == ev->deferred_cap) {
		ev->deferred_cap = ev->deferred_cap ? ev->deferred_cap * 2 : 16;
		ev->deferred = xrealloc(ev->deferred, ev->deferred_cap * sizeof(*ev->deferred));
	}
	ev->deferred[ev->ndeferred++] = (struct ev_deferred){ fn, arg };
}

static void run_deferred(struct ev *ev)
{
	/* Run what was queued before this point; callbacks that defer again
	 * land in the next turn. */
	size_t n = ev->ndeferred;
	struct ev_deferred *list;

	if (!n)
		return;
	list = xmemdup(ev->deferred, n * sizeof(*list));
	memmove(ev->deferred, ev->deferred + n, (ev->ndeferred - n) * sizeof(*list));
	ev->ndeferred -= n;
	for (size_t i = 0; i < n; i++)
		list[i].fn(ev, list[i].arg);
	free(list);
}

/* ---- the loop ---- */

int ev_run_once(struct ev *ev, int64_t max_ms)
{
	size_t n = 0;
	int timeout, r;
	int64_t wait = max_ms;

	if (ev->nheap) {
		int64_t until = ev->heap[0]->when - ev_mono_ms();
		if (until < 0)
			until = 0;
		if (wait < 0 || until < wait)
			wait = until;
	}
	if (ev->ndeferred || ev->check_children)
		wait = 0;
	timeout = wait < 0 ? -1 : wait > 60000 ? 60000 : (int)wait;

	if (ev->pfds_cap < ev->nfds) {
		ev->pfds_cap = ev->nfds;
		ev->pfds = xrealloc(ev->pfds, ev->pfds_cap * sizeof(*ev->pfds));
	}
	for (size_t fd = 0; fd < ev->nfds; fd++) {
		struct ev_fd *f = &ev->fds[fd];
		if (!f->fn || !f->events)
			continue;
		ev->pfds[n].fd = (int)fd;
		ev->pfds[n].events = (short)((f->events & EV_READ ? POLLIN : 0) |
					     (f->events & EV_WRITE ? POLLOUT : 0));
		ev->pfds[n].revents = 0;
		n++;
	}
	r = poll(ev->pfds, n, timeout);
	ev->now = ev_mono_ms();
	if (r < 0 && errno != EINTR)
		return -1;

	/* Remember each ready fd's generation first: a callback may close an fd
	 * and a later callback may open another with the same number. */
	for (size_t i = 0; r > 0 && i < n; i++) {
		struct pollfd *p = &ev->pfds[i];
		if (!p->revents)
			continue;
		p->events = (short)ev->fds[p->fd].gen;	/* reuse the field to hold gen */
	}
	for (size_t i = 0; r > 0 && i < n; i++) {
		struct pollfd *p = &ev->pfds[i];
		struct ev_fd *f;
		int re = 0;
		if (!p->revents)
			continue;
		f = &ev->fds[p->fd];
		if (!f->fn || (short)f->gen != p->events)
			continue;	/* removed (or replaced) by an earlier callback */
		if (p->revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL))
			re |= EV_READ;
		if (p->revents & (POLLOUT | POLLERR | POLLHUP))
			re |= EV_WRITE;
		re &= f->events | (p->revents & (POLLHUP | POLLERR | POLLNVAL) ? EV_READ : 0);
		if (re)
			f->fn(ev, p->fd, re, f->arg);
	}
	if (ev->check_children)
		reap_children(ev);
	run_timers(ev);
	run_deferred(ev);
	return 0;
}

int ev_run(struct ev *ev)
{
	ev->stop = false;
	while (!ev->stop)
		if (ev_run_once(ev, -1) < 0)
			return -1;
	return 0;
}

void ev_stop(struct ev *ev)
{
	ev->stop = true;
}

bool ev_stopped(const struct ev *ev)
{
	return ev->stop;
}

int ev_wait_fd(int fd, int events, int64_t deadline_ms)
{
	struct pollfd p = { .fd = fd, .events = (short)((events & EV_READ ? POLLIN : 0) |
							(events & EV_WRITE ? POLLOUT : 0)) };

	for (;;) {
		int64_t left = deadline_ms - ev_mono_ms();
		int r;
		if (left <= 0)
			return 0;
		r = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (r > 0 || (r < 0 && errno != EINTR))
			return 1;
	}
}

int64_t ev_now(const struct ev *ev)
{
	return ev->now;
}
