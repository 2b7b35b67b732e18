/*
 * Crash test (after sqlite's crash tests): a child process commits numbered
 * transactions with group commit on an event loop and reports each one
 * acknowledged (from done_fn, i.e. after its fsync) through a pipe. The
 * parent kills it with SIGKILL at random moments, 200 times; a share of the
 * kills is timed just after the child announces a compaction, and in another
 * share the child kills itself at a random system call (a random prefix of a
 * write reaching the file first). After every kill the parent reopens the
 * store and checks that every acknowledged transaction is there and that no
 * transaction is half applied; the next child carries on from there. The
 * system calls that can kill include the mark's (store.h, "The mark"): its
 * write (a random prefix reaching the file) and its fdatasync; a reopen
 * that refuses the log as shorter than its mark fails the test.
 *
 * Transaction n: put a/n = {i:n, g:"g<n%3>", pad}, put b/count = {n:n},
 * delete a/(n-W). So the state after n is exactly a/(n-W+1..n) and count n:
 * any half-applied transaction shows as a missing or extra row.
 *
 * A SIGKILL leaves the page cache intact: this tests process crashes, not
 * power loss (the torn-tail tests in store-recovery cover what a power loss
 * leaves in the file).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/ev.h"
#include "base/fs.h"
#include "base/log.h"
#include "json/json.h"
#include "store/store.h"
#include "store-log.h"
#include "tap.h"

#define KILLS 200
#define W 20			/* live rows in table a */
#define PAD 1500		/* bytes of padding per row: compaction takes a while */

struct msg {
	char type;		/* R ready, A acknowledged n, S records in the log at that ack,
				 * C compaction begins, c ends, E error */
	int32_t n;
};

/* ---- the child ---- */

static int child_fd = -1;
static int kill_at;		/* self-kill at this system call (0: never) */
static int ncalls;

static void send_msg(char type, int32_t n)
{
	struct msg m = { type, n };

	/* 8 bytes: atomic on a pipe. A parent gone means we are done. */
	if (write(child_fd, &m, sizeof(m)) != (ssize_t)sizeof(m))
		_exit(0);
}

static bool die_now(void)
{
	return kill_at && ++ncalls == kill_at;
}

static ssize_t k_pwrite(int fd, const void *p, size_t n, off_t off)
{
	if (die_now()) {
		/* Part of the write reaches the file, then the process dies. */
		if (n > 1 && pwrite(fd, p, (size_t)rand() % n, off) < 0)
			_exit(5);
		raise(SIGKILL);
	}
	return pwrite(fd, p, n, off);
}

static int k_fsync(int fd)
{
	if (die_now()) {
		if (rand() & 1 && fsync(fd) < 0)
			_exit(5);
		raise(SIGKILL);
	}
	return fsync(fd);
}

/* The mark's sync: a kill here leaves the data fsynced, the mark maybe not. */
static int k_fdatasync(int fd)
{
	if (die_now()) {
		if (rand() & 1 && fdatasync(fd) < 0)
			_exit(5);
		raise(SIGKILL);
	}
	return fdatasync(fd);
}

static int k_rename(const char *a, const char *b)
{
	if (die_now()) {
		if (rand() & 1 && rename(a, b) < 0)
			_exit(5);
		raise(SIGKILL);
	}
	return rename(a, b);
}

static int k_open(const char *path, int flags, mode_t mode)
{
	if (die_now())
		raise(SIGKILL);
	return open(path, flags, mode);
}

struct child {
	struct st_db *db;
	struct ev *ev;
	struct ev_timer tick;
	int32_t next;		/* next transaction number */
	int compact_every, since_compact;
	char pad[PAD + 1];
};

static struct st_db *child_db;

static void child_done(int status, struct err *e, void *arg)
{
	struct st_stats s;

	if (status < 0) {
		send_msg('E', 0);
		_exit(4);
	}
	st_stats(child_db, &s);
	send_msg('A', (int32_t)(intptr_t)arg);
	send_msg('S', (int32_t)s.records);
}

static void child_tick(struct ev *ev, void *arg)
{
	struct child *c = arg;
	int k = 1 + rand() % 4;
	struct err e;

	/* Several commits per turn: one fsync covers them (group commit). */
	for (int i = 0; i < k; i++) {
		int32_t n = c->next++;
		struct st_txn *t = st_begin(c->db);
		struct json *r = json_new_object(), *cnt = json_new_object();
		char id[16], g[16];

		snprintf(id, sizeof(id), "%08d", (int)n);
		snprintf(g, sizeof(g), "g%d", (int)(n % 3));
		json_object_set_int(r, "i", n);
		json_object_set_str(r, "g", g);
		json_object_set_str(r, "pad", c->pad);
		json_object_set_int(cnt, "n", n);
		st_put(t, "a", id, r);
		st_put(t, "b", "count", cnt);
		if (n >= W) {
			snprintf(id, sizeof(id), "%08d", (int)(n - W));
			st_delete(t, "a", id);
		}
		if (st_commit(t, child_done, (void *)(intptr_t)n, &e) < 0) {
			send_msg('E', 1);
			_exit(4);
		}
	}
	if (++c->since_compact >= c->compact_every) {
		c->since_compact = 0;
		send_msg('C', 0);
		if (st_compact(c->db, &e) < 0) {
			send_msg('E', 2);
			_exit(4);
		}
		send_msg('c', 0);
	}
	ev_timer_start(ev, &c->tick, 0, child_tick, c);
}

static void run_child(const char *dir, int fd, int self_kill_at, unsigned seed)
{
	static struct child c;
	struct st_sys sys = *st_sys_default();
	struct st_opts o = { 0 };
	struct err e;

	child_fd = fd;
	srand(seed);
	alarm(20);	/* never outlive a parent that forgot us */
	sys.pwrite = k_pwrite;
	sys.fsync = k_fsync;
	sys.fdatasync = k_fdatasync;
	sys.rename = k_rename;
	sys.open = k_open;
	memset(c.pad, 'p', PAD);
	c.ev = ev_new();
	o.ev = c.ev;
	o.sys = &sys;
	o.no_auto_compact = true;
	c.compact_every = self_kill_at ? 2 : 3;
	if (st_open(dir, &o, &c.db, &e) < 0) {
		fprintf(stderr, "child: %s\n", e.msg);
		send_msg('E', 3);
		_exit(4);
	}
	child_db = c.db;
	c.next = (int32_t)json_get_int(st_get(c.db, "b", "count"), "n", -1) + 1;
	kill_at = self_kill_at;	/* counted from here: the open itself is the parent's check */
	send_msg('R', c.next);
	ev_timer_start(c.ev, &c.tick, 0, child_tick, &c);
	ev_run(c.ev);
	_exit(0);
}

/* ---- the parent ---- */

struct run {
	int32_t acked;		/* highest acknowledged n (-1: none) */
	int32_t acked_records;	/* records in the log at the last ack (-1: none) */
	bool compacted_since_ack;	/* a compaction began after the last ack */
	bool in_compaction;	/* last word was C without c */
	bool error;
	bool ready;
	int compactions_seen;
};

static void take(struct run *r, const struct msg *m)
{
	switch (m->type) {
	case 'R': r->ready = true; break;
	case 'A': if (m->n > r->acked) r->acked = m->n; break;
	case 'S': r->acked_records = m->n; r->compacted_since_ack = false; break;
	case 'C': r->in_compaction = true; r->compactions_seen++; r->compacted_since_ack = true; break;
	case 'c': r->in_compaction = false; break;
	default: r->error = true; break;
	}
}

/* Read messages for up to ms, or until stop(type) is seen. */
static void pump(int fd, struct run *r, int ms, char stop)
{
	int64_t end = ev_mono_ms() + ms;

	for (;;) {
		struct pollfd p = { fd, POLLIN, 0 };
		int64_t left = end - ev_mono_ms();
		struct msg m;
		if (left <= 0)
			return;
		if (poll(&p, 1, (int)left) <= 0)
			return;
		if (read(fd, &m, sizeof(m)) != (ssize_t)sizeof(m))
			return;	/* child gone */
		take(r, &m);
		if (stop && m.type == stop)
			return;
	}
}

static void drain(int fd, struct run *r)
{
	struct msg m;

	while (read(fd, &m, sizeof(m)) == (ssize_t)sizeof(m))
		take(r, &m);
}

/* The newest slot of dir's mark (the test's own decoder, t/store-log.h). */
static bool mark_read(const char *dir, uint64_t *bytes, uint64_t *records)
{
	struct buf p = BUF_INIT, b = BUF_INIT;
	struct err e;
	uint64_t seq;
	bool ok;

	buf_addf(&p, "%s/mark", dir);
	ok = fs_read_file(p.data, &b, 4096, &e) == 0 && b.len == ST_MARK_BYTES &&
	     stlog_mark((const unsigned char *)b.data, &seq, bytes, records) == 0;
	buf_release(&p);
	buf_release(&b);
	return ok;
}

/* The store holds exactly the state after transaction count. */
static bool check_state(struct st_db *db, int32_t count, char *why, size_t whylen)
{
	int32_t lo = count - W + 1 < 0 ? 0 : count - W + 1;
	size_t want = count < 0 ? 0 : (size_t)(count - lo + 1);
	size_t per_g[3] = { 0, 0, 0 };
	struct err e;
	static const char *const ix[] = { "g", NULL };

	if (st_count(db, "a", NULL, NULL) != want) {
		snprintf(why, whylen, "count %d: %zu rows in a, want %zu", (int)count,
			 st_count(db, "a", NULL, NULL), want);
		return false;
	}
	for (int32_t i = lo; i <= count; i++) {
		char id[16];
		const struct json *r;
		const char *pad;
		snprintf(id, sizeof(id), "%08d", (int)i);
		r = st_get(db, "a", id);
		pad = json_get_str(r, "pad");
		if (!r || json_get_int(r, "i", -1) != i || !pad || strlen(pad) != PAD) {
			snprintf(why, whylen, "count %d: row %s missing or wrong", (int)count, id);
			return false;
		}
		per_g[i % 3]++;
	}
	if (st_table(db, "a", ix, &e) < 0) {
		snprintf(why, whylen, "%s", e.msg);
		return false;
	}
	for (int g = 0; g < 3; g++) {
		char v[16];
		snprintf(v, sizeof(v), "g%d", g);
		if (st_count(db, "a", "g", v) != per_g[g]) {
			snprintf(why, whylen, "count %d: index g=%s has %zu rows, want %zu", (int)count, v,
				 st_count(db, "a", "g", v), per_g[g]);
			return false;
		}
	}
	return true;
}

int main(void)
{
	const char *dir;
	struct buf b = BUF_INIT;
	char *tmp_path;
	int32_t acked_ever = -1, last_count = -1;
	int mark_checks = 0;
	int failures = 0, mid_compaction = 0, temp_left = 0, self_kills = 0, timed_kills = 0, torn = 0;
	int64_t t0 = ev_mono_ms();
	unsigned seed = (unsigned)time(NULL);
	const char *env_seed = getenv("STORE_CRASH_SEED");

	if (env_seed)
		seed = (unsigned)strtoul(env_seed, NULL, 10);
	srand(seed);
	tap_diag("seed %u (set STORE_CRASH_SEED to repeat)", seed);
	log_set_level(LOG_ERROR);
	buf_addf(&b, "%s/crash", tap_tmpdir());
	dir = b.data;
	tmp_path = NULL;
	{
		struct buf t = BUF_INIT;
		buf_addf(&t, "%s/log.compact", dir);
		tmp_path = buf_detach(&t, NULL);
	}

	for (int iter = 0; iter < KILLS; iter++) {
		int p[2], status, mode = iter % 4;
		int self_at = mode == 3 ? 1 + rand() % 40 : 0;
		struct run r = { -1, -1, false, false, false, false, 0 };
		pid_t pid;
		struct st_db *db;
		struct err e;
		struct st_stats s;
		int32_t count;
		char why[ERR_MSG_MAX + 64];

		if (pipe(p) < 0) {
			perror("pipe");
			return 2;
		}
		fflush(stdout);
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 2;
		}
		if (pid == 0) {
			close(p[0]);
			run_child(dir, p[1], self_at, seed + (unsigned)iter);
		}
		close(p[1]);
		pump(p[0], &r, 30000, 'R');
		if (mode == 3) {
			self_kills++;
			pump(p[0], &r, 10000, 0);	/* until it kills itself */
		} else if (mode == 2) {
			/* Aim at a compaction: wait for one to begin, then a little. */
			pump(p[0], &r, 5000, 'C');
			usleep((useconds_t)(rand() % 3000));
			timed_kills++;
		} else {
			pump(p[0], &r, rand() % 25, 0);
			timed_kills++;
		}
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		drain(p[0], &r);
		close(p[0]);
		if (r.in_compaction)
			mid_compaction++;
		if (fs_exists(tmp_path))
			temp_left++;
		if (r.error || !r.ready) {
			ok(0, "kill %d: the child failed before the kill (error message or no start)", iter);
			failures++;
			break;
		}
		if (r.acked > acked_ever)
			acked_ever = r.acked;
		/* What the kill left in the mark covers every acknowledged record
		 * (unless a compaction since then rewrote the log smaller). */
		if (r.acked_records >= 0 && !r.compacted_since_ack) {
			uint64_t mb = 0, mr = 0;
			if (!mark_read(dir, &mb, &mr) || mr < (uint64_t)r.acked_records) {
				ok(0, "kill %d: the mark says %llu records, %d were acknowledged", iter,
				   (unsigned long long)mr, (int)r.acked_records);
				failures++;
				break;
			}
			mark_checks++;
		}

		if (st_open(dir, NULL, &db, &e) < 0) {
			ok(0, "kill %d: reopen: %s", iter, e.msg);
			failures++;
			break;
		}
		st_stats(db, &s);
		if (s.truncated_bytes)
			torn++;
		count = (int32_t)json_get_int(st_get(db, "b", "count"), "n", -1);
		if (count < acked_ever) {
			ok(0, "kill %d: transaction %d was acknowledged but the store ends at %d", iter,
			   (int)acked_ever, (int)count);
			failures++;
		} else if (!check_state(db, count, why, sizeof(why))) {
			ok(0, "kill %d: half-applied or inconsistent state: %s", iter, why);
			failures++;
		}
		last_count = count;
		st_close(db);
		if (failures)
			break;
	}
	ok(failures == 0, "%d kills: every acknowledged transaction survived, none half applied", KILLS);
	ok(acked_ever >= 50, "the children made progress (%d transactions acknowledged)", (int)acked_ever);
	ok(mid_compaction > 0, "some kills landed inside a compaction (%d)", mid_compaction);
	ok(mark_checks > 0, "the mark covered every acknowledged record after %d kills", mark_checks);
	tap_diag("kills: %d timed by the parent, %d self-kills at a random system call; %d inside a compaction "
		 "(%d left a temp file to clean up); %d reopens truncated a torn tail; last transaction %d; %lld ms",
		 timed_kills, self_kills, mid_compaction, temp_left, torn, (int)last_count,
		 (long long)(ev_mono_ms() - t0));
	free(tmp_path);
	buf_release(&b);
	return tap_done();
}
