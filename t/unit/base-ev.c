/* Unit tests: the event loop (fds, timers, defer, children, signals, stop). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/ev.h"
#include "base/sys.h"
#include "tap.h"

/* Run turns until *flag is set or max_turns pass (each waits at most 100 ms). */
static void run_until(struct ev *ev, const int *flag, int max_turns)
{
	for (int i = 0; i < max_turns && !*flag; i++)
		ev_run_once(ev, 100);
}

/* ---- fds ---- */

struct rd {
	int calls, revents, got_eof;
	char data[64];
	size_t len;
};

static void on_read(struct ev *ev, int fd, int revents, void *arg)
{
	struct rd *r = arg;
	ssize_t n = sys_read(fd, r->data + r->len, sizeof(r->data) - 1 - r->len);

	r->calls++;
	r->revents |= revents;
	if (n > 0)
		r->len += (size_t)n;
	else if (n == 0) {
		r->got_eof = 1;
		ev_fd_del(ev, fd);
	}
	r->data[r->len] = '\0';
}

static void test_fd_read(void)
{
	struct ev *ev = ev_new();
	struct rd r = { 0 };
	int p[2];

	ok(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0, "pipe");
	ok(ev_fd_add(ev, p[0], EV_READ, on_read, &r) == 0, "watch read end");
	ok(ev_fd_add(ev, p[0], EV_READ, on_read, &r) == -1 && errno == EEXIST, "watching twice refused");
	ok(ev_fd_add(ev, -1, EV_READ, on_read, &r) == -1, "negative fd refused");
	ev_run_once(ev, 0);
	is_int(r.calls, 0, "nothing ready, no callback");
	sys_write_all(p[1], "hello", 5);
	ev_run_once(ev, 1000);
	ok(r.calls == 1 && (r.revents & EV_READ), "readable pipe reported with EV_READ");
	is_str(r.data, "hello", "callback read the data");
	ev_fd_set(ev, p[0], 0);
	sys_write_all(p[1], "!", 1);
	ev_run_once(ev, 0);
	is_int(r.calls, 1, "paused fd (events 0) not reported");
	ev_fd_set(ev, p[0], EV_READ);
	ev_run_once(ev, 1000);
	is_str(r.data, "hello!", "resumed fd reported again");
	close(p[1]);
	run_until(ev, &r.got_eof, 10);
	ok(r.got_eof, "hang-up reported as EV_READ, read gives EOF");
	ok(ev_fd_set(ev, p[0], EV_READ) == -1, "fd_set on a removed fd fails");
	close(p[0]);
	ev_free(ev);
}

struct wr {
	int calls, revents;
};

static void on_write(struct ev *ev, int fd, int revents, void *arg)
{
	struct wr *w = arg;

	w->calls++;
	w->revents |= revents;
	ev_fd_del(ev, fd);
}

static void test_fd_write(void)
{
	struct ev *ev = ev_new();
	struct wr w = { 0, 0 };
	int p[2];

	pipe2(p, O_CLOEXEC | O_NONBLOCK);
	ev_fd_add(ev, p[1], EV_WRITE, on_write, &w);
	ev_run_once(ev, 1000);
	is_int(w.calls, 1, "writable pipe reported to a write watcher");
	ok(w.revents & EV_WRITE, "with EV_WRITE");
	ok(!(w.revents & EV_READ), "and without EV_READ");

	/* reader gone: the write end reports an error; the callback still hears of it */
	w.calls = w.revents = 0;
	close(p[0]);
	ev_fd_add(ev, p[1], EV_WRITE, on_write, &w);
	ev_run_once(ev, 1000);
	ok(w.calls == 1 && (w.revents & EV_WRITE), "closed reader reported to a write watcher");
	close(p[1]);
	ev_free(ev);
}

/* Two ready fds whose callbacks each remove the other: only one may run. */
struct pair {
	struct ev *ev;
	int fds[2];
	int calls[2];
	int reused_fd, reused_calls;
};

static void on_reused(struct ev *ev, int fd, int revents, void *arg)
{
	struct pair *p = arg;
	p->reused_calls++;
}

static void on_pair(struct ev *ev, int fd, int revents, void *arg)
{
	struct pair *p = arg;
	int me = fd == p->fds[0] ? 0 : 1, other = p->fds[1 - me];
	int np[2];

	p->calls[me]++;
	ev_fd_del(ev, fd);
	ev_fd_del(ev, other);
	/* close the other and hand its number to a new pipe, also made readable:
	 * the loop must not report the new registration on the old poll result */
	close(other);
	if (pipe2(np, O_CLOEXEC | O_NONBLOCK) == 0) {
		sys_write_all(np[1], "x", 1);
		p->reused_fd = np[0];
		ev_fd_add(ev, np[0], EV_READ, on_reused, p);
		close(np[1]);
	}
}

static void test_fd_remove_other(void)
{
	struct ev *ev = ev_new();
	struct pair pr = { ev, { -1, -1 }, { 0, 0 }, -1, 0 };
	int a[2], b[2], other_fd;

	pipe2(a, O_CLOEXEC | O_NONBLOCK);
	pipe2(b, O_CLOEXEC | O_NONBLOCK);
	pr.fds[0] = a[0];
	pr.fds[1] = b[0];
	ev_fd_add(ev, a[0], EV_READ, on_pair, &pr);
	ev_fd_add(ev, b[0], EV_READ, on_pair, &pr);
	sys_write_all(a[1], "x", 1);
	sys_write_all(b[1], "x", 1);
	ev_run_once(ev, 1000);
	is_int(pr.calls[0] + pr.calls[1], 1, "a callback that removes another ready fd stops its callback");
	other_fd = pr.calls[0] ? b[0] : a[0];
	is_int(pr.reused_fd, other_fd, "the new pipe reused the removed fd's number");
	is_int(pr.reused_calls, 0, "the new registration is not called on the old poll result");
	ev_run_once(ev, 1000);
	is_int(pr.reused_calls, 1, "but is on the next turn");
	ev_fd_del(ev, pr.reused_fd);
	close(pr.reused_fd);
	close(pr.calls[0] ? a[0] : b[0]);
	close(a[1]);
	close(b[1]);
	ev_free(ev);
}

/* ---- timers ---- */

struct tlog {
	int order[300];
	int n;
};

struct tctx {
	struct tlog *log;
	int id;
	int64_t when;
};

static void on_timer(struct ev *ev, void *arg)
{
	struct tctx *c = arg;
	c->log->order[c->log->n++] = c->id;
}

static void test_timer_order(void)
{
	struct ev *ev = ev_new();
	struct tlog log = { { 0 }, 0 };
	struct ev_timer t[4] = { EV_TIMER_INIT, EV_TIMER_INIT, EV_TIMER_INIT, EV_TIMER_INIT };
	struct tctx c[4];
	static const int delays[4] = { 40, 10, 30, 0 };

	for (int i = 0; i < 4; i++) {
		c[i] = (struct tctx){ &log, i, 0 };
		ev_timer_start(ev, &t[i], delays[i], on_timer, &c[i]);
	}
	ok(ev_timer_armed(&t[0]) && ev_timer_armed(&t[3]), "armed");
	while (log.n < 4)
		ev_run_once(ev, -1);
	ok(log.order[0] == 3 && log.order[1] == 1 && log.order[2] == 2 && log.order[3] == 0,
	   "timers fire in deadline order (got %d %d %d %d)", log.order[0], log.order[1], log.order[2], log.order[3]);
	ok(!ev_timer_armed(&t[0]) && !ev_timer_armed(&t[3]), "fired timers are disarmed");
	ev_free(ev);
}

static void test_timer_stop_restart(void)
{
	struct ev *ev = ev_new();
	struct tlog log = { { 0 }, 0 };
	struct ev_timer a = EV_TIMER_INIT, b = EV_TIMER_INIT, c = EV_TIMER_INIT;
	struct tctx ca = { &log, 1, 0 }, cb = { &log, 2, 0 }, cc = { &log, 3, 0 };

	ev_timer_start(ev, &a, 10, on_timer, &ca);
	ev_timer_stop(ev, &a);
	ok(!ev_timer_armed(&a), "stopped timer is disarmed");
	ev_timer_stop(ev, &a);
	ok(1, "stopping twice is safe");
	ev_timer_start(ev, &b, 1000, on_timer, &cb);
	ev_timer_start(ev, &c, 30, on_timer, &cc);
	ev_timer_start(ev, &b, 5, on_timer, &cb);	/* restart moves it earlier */
	while (log.n < 2)
		ev_run_once(ev, -1);
	ok(log.order[0] == 2 && log.order[1] == 3, "restarted timer fires at its new deadline, once");
	ev_run_once(ev, 50);
	is_int(log.n, 2, "stopped timer never fires, restarted one fires once");
	ev_free(ev);
}

struct periodic {
	struct ev_timer t;
	int fired;
};

static void on_periodic(struct ev *ev, void *arg)
{
	struct periodic *p = arg;
	if (++p->fired < 3)
		ev_timer_start(ev, &p->t, 1, on_periodic, p);
}

static void test_timer_rearm_in_callback(void)
{
	struct ev *ev = ev_new();
	struct periodic p = { EV_TIMER_INIT, 0 };
	int done = 0;

	ev_timer_start(ev, &p.t, 0, on_periodic, &p);
	for (int i = 0; i < 50 && p.fired < 3; i++)
		ev_run_once(ev, 100);
	is_int(p.fired, 3, "a timer re-armed from its own callback fires again");
	run_until(ev, &done, 1);
	is_int(p.fired, 3, "and stops when not re-armed");
	ev_free(ev);
}

static void test_timer_heap(void)
{
	enum { N = 200 };
	struct ev *ev = ev_new();
	struct tlog log = { { 0 }, 0 };
	struct ev_timer *t = calloc(N, sizeof(*t));
	struct tctx *c = calloc(N, sizeof(*c));
	int stopped = 0, bad_order = 0, fired_stopped = 0;
	int64_t last = -1;

	srand(7);
	for (int i = 0; i < N; i++) {
		c[i] = (struct tctx){ &log, i, 0 };
		ev_timer_start(ev, &t[i], rand() % 60, on_timer, &c[i]);
		c[i].when = t[i].when;
	}
	for (int i = 0; i < N; i += 3) {
		ev_timer_stop(ev, &t[i]);
		stopped++;
	}
	while (log.n < N - stopped)
		ev_run_once(ev, -1);
	for (int i = 0; i < log.n; i++) {
		int id = log.order[i];
		if (id % 3 == 0)
			fired_stopped++;
		if (c[id].when < last)
			bad_order++;
		last = c[id].when;
	}
	is_int(log.n, N - stopped, "every running timer fired once");
	is_int(fired_stopped, 0, "no stopped timer fired");
	is_int(bad_order, 0, "200 timers fired in deadline order");
	free(t);
	free(c);
	ev_free(ev);
}

/* ---- defer ---- */

struct dctx {
	struct ev *ev;
	int seq;
	int fd_a_at, fd_b_at, defer1_at, defer2_at;
};

static void on_defer2(struct ev *ev, void *arg)
{
	struct dctx *d = arg;
	d->defer2_at = ++d->seq;
}

static void on_defer1(struct ev *ev, void *arg)
{
	struct dctx *d = arg;
	d->defer1_at = ++d->seq;
	ev_defer(ev, on_defer2, d);
}

static void on_defer_fd(struct ev *ev, int fd, int revents, void *arg)
{
	struct dctx *d = arg;
	char c;

	sys_read(fd, &c, 1);
	if (c == 'a') {
		d->fd_a_at = ++d->seq;
		ev_defer(ev, on_defer1, d);
	} else {
		d->fd_b_at = ++d->seq;
		ev_defer(ev, on_defer1, d);
	}
}

static void test_defer(void)
{
	struct ev *ev = ev_new();
	struct dctx d = { ev, 0, 0, 0, 0, 0 };
	int a[2], b[2];

	pipe2(a, O_CLOEXEC | O_NONBLOCK);
	pipe2(b, O_CLOEXEC | O_NONBLOCK);
	ev_fd_add(ev, a[0], EV_READ, on_defer_fd, &d);
	ev_fd_add(ev, b[0], EV_READ, on_defer_fd, &d);
	sys_write_all(a[1], "a", 1);
	sys_write_all(b[1], "b", 1);
	ev_run_once(ev, 1000);
	ok(d.fd_a_at && d.fd_b_at, "both fds ran in one turn");
	ok(d.defer1_at > d.fd_a_at && d.defer1_at > d.fd_b_at, "deferred callback ran after every fd callback of the turn");
	is_int(d.seq, 4, "both deferred callbacks ran in the same turn");
	is_int(d.defer2_at, 0, "callbacks deferred during the deferred run wait for the next turn");
	ev_run_once(ev, 1000);	/* must not block: something is deferred */
	ok(d.defer2_at > 0, "and run on the next turn");
	ev_fd_del(ev, a[0]);
	ev_fd_del(ev, b[0]);
	close(a[0]); close(a[1]); close(b[0]); close(b[1]);
	ev_free(ev);
}

/* ---- children ---- */

struct cctx {
	int calls;
	pid_t pid;
	int status;
};

static void on_child(struct ev *ev, pid_t pid, int status, void *arg)
{
	struct cctx *c = arg;
	c->calls++;
	c->pid = pid;
	c->status = status;
}

/* A child that exits with code once gate's write end is closed everywhere. */
static pid_t fork_exit(int code, const int gate[2])
{
	pid_t pid = fork();

	if (pid < 0) {
		/* never go on to kill(-1, ...) below */
		perror("fork");
		exit(2);
	}
	if (pid == 0) {
		char c;
		close(gate[1]);
		(void)!read(gate[0], &c, 1);
		_exit(code);
	}
	return pid;
}

static void test_child(void)
{
	struct ev *ev = ev_new();
	struct cctx c = { 0, 0, 0 }, c2 = { 0, 0, 0 }, c3 = { 0, 0, 0 };
	int gate[2];
	pid_t pid, pid2, pid3;

	pipe2(gate, O_CLOEXEC);
	pid = fork_exit(7, gate);
	ok(ev_child_add(ev, pid, on_child, &c) == 0, "watch child");
	ok(ev_child_add(ev, 0, on_child, &c) == -1, "pid 0 refused");
	ev_run_once(ev, 0);
	is_int(c.calls, 0, "running child not reported");
	close(gate[1]);		/* let it exit */
	run_until(ev, &c.calls, 50);
	is_int(c.calls, 1, "child exit reported once");
	ok(c.pid == pid && WIFEXITED(c.status) && WEXITSTATUS(c.status) == 7, "with its pid and exit status 7");
	close(gate[0]);

	/* a child that already exited before it was watched */
	pipe2(gate, O_CLOEXEC);
	pid2 = fork();
	if (pid2 < 0)
		exit(2);
	if (pid2 == 0)
		_exit(3);
	close(gate[1]);
	{
		siginfo_t si;
		/* wait without reaping, so it is surely a zombie when we watch it */
		waitid(P_PID, (id_t)pid2, &si, WEXITED | WNOWAIT);
	}
	ev_child_add(ev, pid2, on_child, &c2);
	run_until(ev, &c2.calls, 50);
	ok(c2.calls == 1 && WEXITSTATUS(c2.status) == 3, "child that exited before being watched is still reported");
	close(gate[0]);

	/* killed by a signal */
	pipe2(gate, O_CLOEXEC);
	pid3 = fork_exit(0, gate);
	ev_child_add(ev, pid3, on_child, &c3);
	kill(pid3, SIGTERM);
	run_until(ev, &c3.calls, 50);
	ok(c3.calls == 1 && WIFSIGNALED(c3.status) && WTERMSIG(c3.status) == SIGTERM, "death by SIGTERM reported");
	close(gate[0]);
	close(gate[1]);
	ev_free(ev);
	{
		struct sigaction sa;

		sigaction(SIGCHLD, NULL, &sa);
		ok(sa.sa_handler == SIG_DFL, "ev_free puts SIGCHLD back to its default");
	}
}

static void test_child_del(void)
{
	struct ev *ev = ev_new();
	struct cctx c = { 0, 0, 0 };
	int gate[2], done = 0;
	pid_t pid, r;

	pipe2(gate, O_CLOEXEC);
	pid = fork_exit(5, gate);
	ev_child_add(ev, pid, on_child, &c);
	ev_child_del(ev, pid);
	close(gate[1]);
	close(gate[0]);
	{
		siginfo_t si;
		waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT);
	}
	for (int i = 0; i < 5; i++)
		run_until(ev, &done, 1);
	is_int(c.calls, 0, "forgotten child not reported");
	errno = 0;
	r = waitpid(pid, NULL, WNOHANG);
	ok(r == -1 && errno == ECHILD, "but reaped by the loop, as ev.h promises (no zombie)");
	if (r == pid)
		tap_diag("child was left a zombie");
	ev_free(ev);
}

/* Many children exiting together, each callback adding and removing watches. */
struct many {
	int reported;
	pid_t extra;
	struct cctx extra_c;
};

static void on_many(struct ev *ev, pid_t pid, int status, void *arg)
{
	struct many *m = arg;
	m->reported++;
}

static void test_children_many(void)
{
	enum { N = 30 };
	struct ev *ev = ev_new();
	struct many m = { 0, 0, { 0, 0, 0 } };
	int gate[2];

	pipe2(gate, O_CLOEXEC);
	for (int i = 0; i < N; i++)
		ev_child_add(ev, fork_exit(i, gate), on_many, &m);
	close(gate[1]);
	close(gate[0]);
	for (int i = 0; i < 200 && m.reported < N; i++)
		ev_run_once(ev, 100);
	is_int(m.reported, N, "30 children exiting at once are all reported");
	errno = 0;
	ok(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD, "no child left unreaped");
	ev_free(ev);
}

/* ---- signals and stop ---- */

struct sctx {
	int calls, signo;
};

static void on_sig(struct ev *ev, int signo, void *arg)
{
	struct sctx *s = arg;
	s->calls++;
	s->signo = signo;
}

static void test_signal(void)
{
	struct ev *ev = ev_new();
	struct sctx s = { 0, 0 };

	ok(ev_signal_add(ev, SIGUSR1, on_sig, &s) == 0, "watch SIGUSR1");
	raise(SIGUSR1);
	is_int(s.calls, 0, "not delivered inside the handler");
	run_until(ev, &s.calls, 10);
	ok(s.calls == 1 && s.signo == SIGUSR1, "SIGUSR1 delivered as a callback on the loop");
	raise(SIGUSR1);
	raise(SIGUSR1);
	for (int i = 0; i < 3; i++)
		ev_run_once(ev, 10);
	ok(s.calls >= 2, "delivered again (%d)", s.calls);
	ev_free(ev);
	ok(signal(SIGUSR1, SIG_DFL) == SIG_DFL, "ev_free restored the default disposition");
}

static void on_stop_timer(struct ev *ev, void *arg)
{
	int *n = arg;
	(*n)++;
	ev_stop(ev);
}

static void test_stop(void)
{
	struct ev *ev = ev_new();
	struct ev_timer t = EV_TIMER_INIT;
	int n = 0;

	ev_timer_start(ev, &t, 5, on_stop_timer, &n);
	ok(ev_run(ev) == 0, "ev_run returns 0 after ev_stop");
	is_int(n, 1, "stopped from a timer callback");
	ok(ev_stopped(ev), "ev_stopped");
	ok(ev_now(ev) > 0 && ev_now(ev) <= ev_mono_ms(), "ev_now is a monotonic time from this turn");
	ev_free(ev);
}

static int count_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

int main(void)
{
	int fds;

	/* the loop's signal self-pipe is process-wide and stays open: make it first */
	ev_free(ev_new());
	fds = count_fds();
	test_fd_read();
	test_fd_write();
	test_fd_remove_other();
	test_timer_order();
	test_timer_stop_restart();
	test_timer_rearm_in_callback();
	test_timer_heap();
	test_defer();
	test_child();
	test_child_del();
	test_children_many();
	test_signal();
	test_stop();
	is_int(count_fds(), fds, "no fd leaked");
	return tap_done();
}
