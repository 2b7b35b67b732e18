/* Unit tests: store failure injection through the system-call table. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/ev.h"
#include "base/fs.h"
#include "base/log.h"
#include "json/json.h"
#include "store/store.h"
#include "tap.h"
#include "store-util.h"

/* ---- the fake system-call table ---- */

/* C_MARKWRITE: a pwrite to the mark file (not counted as C_PWRITE). */
enum call { C_PWRITE, C_FSYNC, C_FTRUNCATE, C_RENAME, C_OPEN, C_MARKWRITE, C_FDATASYNC, C_NCALLS };

static struct {
	int count[C_NCALLS];
	int fail_at[C_NCALLS];	/* fail the Nth call of that kind (1-based); 0 = never */
	int fail_errno[C_NCALLS];
	bool fail_all[C_NCALLS];	/* and every later one */
	bool short_write;	/* the failing pwrite first writes half its bytes */
	int eintr_fsync;	/* this many fsyncs fail with EINTR first */
	int mark_fd;		/* the fd last opened on <dir>/mark or mark.new, or -1 */
} F;

static void fake_reset(void)
{
	int mark_fd = F.mark_fd;

	memset(&F, 0, sizeof(F));
	F.mark_fd = mark_fd;	/* a store open across the reset keeps its fd */
}

static bool should_fail(enum call c)
{
	F.count[c]++;
	if (!F.fail_at[c])
		return false;
	if (F.count[c] == F.fail_at[c] || (F.fail_all[c] && F.count[c] > F.fail_at[c])) {
		errno = F.fail_errno[c] ? F.fail_errno[c] : EIO;
		return true;
	}
	return false;
}

/* The mark, or the temp file that becomes it (creation). */
static bool is_mark(const char *path)
{
	size_t n = strlen(path);

	return (n >= 5 && strcmp(path + n - 5, "/mark") == 0) || (n >= 9 && strcmp(path + n - 9, "/mark.new") == 0);
}

static int fake_open(const char *path, int flags, mode_t mode)
{
	int fd;

	if (should_fail(C_OPEN))
		return -1;
	fd = open(path, flags, mode);
	if (fd >= 0 && is_mark(path))
		F.mark_fd = fd;
	return fd;
}

static ssize_t fake_pwrite(int fd, const void *p, size_t n, off_t off)
{
	if (fd == F.mark_fd) {
		if (should_fail(C_MARKWRITE)) {
			/* Half the slot reaches the file: a torn slot. */
			if (n > 1 && pwrite(fd, p, n / 2, off) < 0)
				return -1;
			errno = F.fail_errno[C_MARKWRITE] ? F.fail_errno[C_MARKWRITE] : EIO;
			return -1;
		}
		return pwrite(fd, p, n, off);
	}
	if (should_fail(C_PWRITE)) {
		int saved = errno;
		if (F.short_write && n > 1) {
			/* The disk took half, then filled up: a torn record in the file. */
			ssize_t w = pwrite(fd, p, n / 2, off);
			F.fail_at[C_PWRITE]++;	/* the retry for the rest fails */
			errno = saved;
			return w;
		}
		return -1;
	}
	return pwrite(fd, p, n, off);
}

static int fake_fsync(int fd)
{
	if (F.eintr_fsync > 0) {
		F.eintr_fsync--;
		errno = EINTR;
		return -1;
	}
	if (should_fail(C_FSYNC))
		return -1;
	return fsync(fd);
}

static int fake_close(int fd)
{
	if (fd == F.mark_fd)
		F.mark_fd = -1;	/* the number may come back as another file */
	return close(fd);
}

static int fake_fdatasync(int fd)
{
	if (should_fail(C_FDATASYNC))
		return -1;
	return fdatasync(fd);
}

static int fake_ftruncate(int fd, off_t len)
{
	if (should_fail(C_FTRUNCATE))
		return -1;
	return ftruncate(fd, len);
}

static int fake_rename(const char *a, const char *b)
{
	if (should_fail(C_RENAME))
		return -1;
	return rename(a, b);
}


static struct st_sys fake_sys;

static void fake_init(void)
{
	F.mark_fd = -1;
	fake_sys = *st_sys_default();
	fake_sys.open = fake_open;
	fake_sys.close = fake_close;
	fake_sys.pwrite = fake_pwrite;
	fake_sys.fsync = fake_fsync;
	fake_sys.fdatasync = fake_fdatasync;
	fake_sys.ftruncate = fake_ftruncate;
	fake_sys.rename = fake_rename;
}

/* ---- helpers ---- */

static off_t log_size(const char *dir)
{
	struct buf b = BUF_INIT;
	struct stat st;
	off_t n;

	buf_addf(&b, "%s/log", dir);
	n = stat(b.data, &st) == 0 ? st.st_size : -1;
	buf_release(&b);
	return n;
}

/* Transaction i: a/<i> = {i} and b/count = {n: i}. */
static struct st_txn *txn_n(struct st_db *db, int i)
{
	struct st_txn *t = st_begin(db);
	struct json *r = json_new_object(), *c = json_new_object();
	char id[16];

	snprintf(id, sizeof(id), "r%03d", i);
	json_object_set_int(r, "i", i);
	json_object_set_str(r, "pad", "padding padding padding padding padding padding");
	json_object_set_int(c, "n", i);
	st_put(t, "a", id, r);
	st_put(t, "b", "count", c);
	return t;
}

/* The store holds exactly the transactions whose bit is set in want[]. */
static int holds(struct st_db *db, const bool *want, int n)
{
	int ok = 1, last = -1, count = 0;

	for (int i = 0; i < n; i++) {
		char id[16];
		snprintf(id, sizeof(id), "r%03d", i);
		ok = ok && (st_get(db, "a", id) != NULL) == want[i];
		if (want[i]) {
			last = i;
			count++;
		}
	}
	ok = ok && (int)st_count(db, "a", NULL, NULL) == count;
	ok = ok && json_get_int(st_get(db, "b", "count"), "n", -1) == last;
	return ok;
}

static bool reopen_holds(const char *dir, const bool *want, int n)
{
	struct st_db *db;
	struct err e;
	bool r;

	if (st_open(dir, NULL, &db, &e) < 0) {
		tap_diag("reopen: %s", e.msg);
		return false;
	}
	r = holds(db, want, n);
	st_close(db);
	return r;
}

struct done_rec {
	int calls, status;
	char msg[ERR_MSG_MAX];
};

static void on_done(int status, struct err *e, void *arg)
{
	struct done_rec *d = arg;

	d->calls++;
	d->status = status;
	snprintf(d->msg, sizeof(d->msg), "%s", e ? e->msg : "");
}

/* ---- tests ---- */

static void test_fsync_fails_group(void)
{
	char *dir = dir_named("fsync-group");
	struct ev *ev = ev_new();
	struct st_opts o = { .ev = ev, .sys = &fake_sys };
	struct st_db *db;
	struct err e;
	struct done_rec d[5];
	bool want[8] = { false };

	fake_reset();
	memset(d, 0, sizeof(d));
	ok(st_open(dir, &o, &db, &e) == 0, "open with the fake table and a loop");
	st_commit(txn_n(db, 0), on_done, &d[0], &e);
	st_commit(txn_n(db, 1), on_done, &d[1], &e);
	ev_run_once(ev, 0);
	ok(d[0].calls == 1 && d[0].status == 0 && d[1].status == 0, "first turn acknowledged");
	want[0] = want[1] = true;

	F.fail_at[C_FSYNC] = F.count[C_FSYNC] + 1;
	for (int i = 2; i < 5; i++)
		ok(st_commit(txn_n(db, i), on_done, &d[i], &e) == 0, "commit %d queued", i);
	ev_run_once(ev, 0);
	ok(d[2].calls == 1 && d[3].calls == 1 && d[4].calls == 1, "every pending done_fn was called once");
	ok(d[2].status == -1 && d[3].status == -1 && d[4].status == -1, "all with -1");
	ok(strstr(d[3].msg, "fsync") && strstr(d[3].msg, "refusing further commits"), "error says why: %s", d[3].msg);
	ok(st_failed(db), "the store is marked failed");
	ok(st_commit(txn_n(db, 5), on_done, &d[0], &e) == -1 && strstr(e.msg, "fsync"),
	   "later commits are refused: %s", e.msg);
	is_int(d[0].calls, 1, "a refused commit's done_fn is never called");
	ok(st_compact(db, &e) == -1, "compaction is refused too");
	ok(st_get(db, "a", "r000") != NULL, "reads still work");
	st_close(db);
	ev_run_once(ev, 0);
	ev_free(ev);
	/* The fake failed the fsync but the bytes reached the page cache: the
	 * unacknowledged transactions may be there; the acknowledged must be. */
	{
		struct st_db *db2;
		ok(st_open(dir, NULL, &db2, &e) == 0, "reopen");
		ok(db2 && st_get(db2, "a", "r000") && st_get(db2, "a", "r001"), "acknowledged transactions present");
		st_close(db2);
	}
	free(dir);
}

static void test_fsync_fails_sync(void)
{
	char *dir = dir_named("fsync-sync");
	struct st_opts o = { .sys = &fake_sys };
	struct st_db *db;
	struct err e;
	struct done_rec d = { 0 };

	fake_reset();
	ok(st_open(dir, &o, &db, &e) == 0, "open without a loop");
	ok(st_commit(txn_n(db, 0), NULL, NULL, &e) == 0, "commit 0");
	F.eintr_fsync = 3;
	ok(st_commit(txn_n(db, 1), NULL, NULL, &e) == 0, "an fsync interrupted by signals is retried");
	F.fail_at[C_FSYNC] = F.count[C_FSYNC] + 1;
	F.fail_errno[C_FSYNC] = EIO;
	ok(st_commit(txn_n(db, 2), on_done, &d, &e) == -1 && strstr(e.msg, "Input/output error"),
	   "a failed fsync fails st_commit: %s", e.msg);
	ok(d.calls == 1 && d.status == -1, "and its done_fn, synchronously");
	ok(st_commit(txn_n(db, 3), on_done, &d, &e) == -1 && st_failed(db), "later commits refused");
	is_int(d.calls, 2, "done_fn hears about the refusal without a loop");
	st_close(db);
	free(dir);
}

static void test_write_fails(void)
{
	char *dir = dir_named("write");
	struct st_opts o = { .sys = &fake_sys };
	struct st_db *db;
	struct err e;
	bool want[8] = { false };
	off_t before;

	fake_reset();
	ok(st_open(dir, &o, &db, &e) == 0, "open");
	ok(st_commit(txn_n(db, 0), NULL, NULL, &e) == 0, "commit 0");
	want[0] = true;
	before = log_size(dir);

	/* Half the record reaches the file, then ENOSPC. */
	F.fail_at[C_PWRITE] = F.count[C_PWRITE] + 1;
	F.fail_errno[C_PWRITE] = ENOSPC;
	F.short_write = true;
	ok(st_commit(txn_n(db, 1), NULL, NULL, &e) == -1 && strstr(e.msg, "No space left"),
	   "a write failing mid-record fails the commit: %s", e.msg);
	is_int(F.count[C_PWRITE] >= 2, 1, "(the short write was retried before giving up)");
	is_int(log_size(dir), before, "the half record was cut off the log");
	ok(!st_failed(db), "the store is still usable");
	ok(st_get(db, "a", "r001") == NULL, "the failed transaction is not in memory");
	F.short_write = false;
	ok(st_commit(txn_n(db, 2), NULL, NULL, &e) == 0, "the next commit succeeds");
	want[2] = true;
	ok(holds(db, want, 8), "memory holds exactly the acknowledged transactions");
	st_close(db);
	ok(reopen_holds(dir, want, 8), "the log reopens to exactly the acknowledged state");

	/* Same, but the log cannot be cut back either: refuse from then on. */
	fake_reset();
	ok(st_open(dir, &o, &db, &e) == 0, "open again");
	F.fail_at[C_PWRITE] = 1;
	F.short_write = true;
	F.fail_at[C_FTRUNCATE] = 1;
	ok(st_commit(txn_n(db, 3), NULL, NULL, &e) == -1 && strstr(e.msg, "could not be cut back"),
	   "write and truncate both failing: %s", e.msg);
	ok(st_failed(db), "the store refuses further commits");
	F.short_write = false;
	ok(st_commit(txn_n(db, 4), NULL, NULL, &e) == -1, "refused");
	ok(log_size(dir) > before, "(the half record is still in the file)");
	st_close(db);
	ok(reopen_holds(dir, want, 8), "reopen drops the torn tail: exactly the acknowledged state");

	/* With a loop: a refused commit never calls done_fn; its neighbours are fine. */
	{
		struct ev *ev = ev_new();
		struct st_opts oe = { .ev = ev, .sys = &fake_sys };
		struct done_rec d[3];
		memset(d, 0, sizeof(d));
		fake_reset();
		ok(st_open(dir, &oe, &db, &e) == 0, "open with a loop");
		ok(st_commit(txn_n(db, 5), on_done, &d[0], &e) == 0, "commit 5");
		F.fail_at[C_PWRITE] = F.count[C_PWRITE] + 1;
		F.short_write = true;
		ok(st_commit(txn_n(db, 6), on_done, &d[1], &e) == -1, "commit 6 fails to write");
		ok(st_commit(txn_n(db, 7), on_done, &d[2], &e) == 0, "commit 7");
		ev_run_once(ev, 0);
		ok(d[0].calls == 1 && d[0].status == 0 && d[1].calls == 0 && d[2].calls == 1 && d[2].status == 0,
		   "5 and 7 acknowledged, 6 never");
		want[5] = want[7] = true;
		st_close(db);
		ev_run_once(ev, 0);
		ev_free(ev);
		ok(reopen_holds(dir, want, 8), "reopen: exactly the acknowledged state");
	}
	free(dir);
}

/* Fail each system call of a compaction in turn. */
static void test_compaction_faults(void)
{
	char *dir = dir_named("compact");
	struct st_opts o = { .sys = &fake_sys, .no_auto_compact = true };
	struct st_db *db;
	struct err e;
	bool want[8] = { false };
	static const struct {
		enum call c;
		int nth;
		const char *what;
		bool fails_store;
	} cases[] = {
		{ C_OPEN, 1, "creating the temp file", false },
		{ C_PWRITE, 1, "writing the header", false },
		{ C_PWRITE, 2, "writing the rows", false },
		{ C_FSYNC, 1, "fsync of the temp file", false },
		{ C_RENAME, 1, "the rename", false },
		{ C_OPEN, 2, "opening the directory", true },
		{ C_FSYNC, 2, "fsync of the directory", true },
	};

	fake_reset();
	ok(st_open(dir, &o, &db, &e) == 0, "open");
	for (int i = 0; i < 8; i++) {
		st_commit(txn_n(db, i), NULL, NULL, &e);
		want[i] = true;
	}
	st_close(db);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char *tmp;
		struct buf b = BUF_INIT;

		fake_reset();
		ok(st_open(dir, &o, &db, &e) == 0, "open");
		memset(F.count, 0, sizeof(F.count));
		F.fail_at[cases[c].c] = cases[c].nth;
		ok(st_compact(db, &e) == -1, "compaction fails at %s: %s", cases[c].what, e.msg);
		is_int(st_failed(db), cases[c].fails_store, cases[c].fails_store ?
		       "after the rename, the store refuses commits" : "before the rename, the store carries on");
		buf_addf(&b, "%s/log.compact", dir);
		tmp = buf_detach(&b, NULL);
		ok(!fs_exists(tmp), "no temp file left behind");
		free(tmp);
		ok(holds(db, want, 8), "memory unchanged");
		if (!cases[c].fails_store) {
			fake_reset();
			ok(st_commit(txn_n(db, 7), NULL, NULL, &e) == 0, "commits still work");
		}
		st_close(db);
		ok(reopen_holds(dir, want, 8), "reopen: nothing lost");
	}
	free(dir);
}

static void test_open_faults(void)
{
	char *dir = dir_named("openfault");
	struct st_opts o = { .sys = &fake_sys };
	struct st_db *db;
	struct err e;
	struct buf log = BUF_INIT;
	int fd;

	fake_reset();
	ok(st_open(dir, &o, &db, &e) == 0, "open");
	st_commit(txn_n(db, 0), NULL, NULL, &e);
	st_close(db);
	buf_addf(&log, "%s/log", dir);
	fd = open(log.data, O_WRONLY | O_APPEND);
	if (write(fd, "junkjunkjunk", 12) != 12)
		perror("write");
	close(fd);
	fake_reset();
	F.fail_at[C_FTRUNCATE] = 1;
	log_set_level(LOG_ERROR);
	ok(st_open(dir, &o, &db, &e) == -1 && strstr(e.msg, "truncate"),
	   "a torn tail that cannot be truncated fails the open cleanly: %s", e.msg);
	log_set_level(LOG_WARN);
	fake_reset();
	F.fail_at[C_OPEN] = 2;	/* lock, then the mark */
	ok(st_open(dir, &o, &db, &e) == -1 && strstr(e.msg, "open") && strstr(e.msg, "/mark"),
	   "a mark that cannot be opened: %s", e.msg);
	fake_reset();
	F.fail_at[C_OPEN] = 3;	/* lock, mark, then the log */
	ok(st_open(dir, &o, &db, &e) == -1 && strstr(e.msg, "open") && strstr(e.msg, "/log"),
	   "a log that cannot be opened: %s", e.msg);

	/* A missing store whose creation fails leaves nothing half made. */
	free(dir);
	dir = dir_named("createfault");
	fake_reset();
	F.fail_at[C_RENAME] = 1;
	ok(st_open(dir, &o, &db, &e) == -1 && strstr(e.msg, "rename"), "creation fails at the rename: %s", e.msg);
	fake_reset();
	ok(st_open(dir, &o, &db, &e) == 0, "and succeeds next time");
	st_close(db);
	buf_release(&log);
	free(dir);
}

/* ---- ordering: what must reach the disk before what ---- */

static struct buf trace = BUF_INIT;
static char fd_names[64][32];

static void trace_add(const char *what, int fd)
{
	const char *name = fd >= 0 && fd < 64 ? fd_names[fd] : "?";

	buf_addf(&trace, "%s(%s) ", what, name);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

static int t_open(const char *path, int flags, mode_t mode)
{
	int fd = open(path, flags, mode);

	if (fd >= 0 && fd < 64)
		snprintf(fd_names[fd], sizeof(fd_names[fd]), "%s", (flags & O_DIRECTORY) ? "dir" : base_name(path));
	return fd;
}

static ssize_t t_pwrite(int fd, const void *p, size_t n, off_t off)
{
	trace_add("write", fd);
	return pwrite(fd, p, n, off);
}

static int t_fsync(int fd)
{
	trace_add("fsync", fd);
	return fsync(fd);
}

static int t_fdatasync(int fd)
{
	trace_add("fdatasync", fd);
	return fdatasync(fd);
}

static int t_rename(const char *a, const char *b)
{
	buf_addf(&trace, "rename(%s->%s) ", base_name(a), base_name(b));
	/* An open fd follows its file to the new name. */
	for (int fd = 0; fd < 64; fd++)
		if (strcmp(fd_names[fd], base_name(a)) == 0)
			snprintf(fd_names[fd], sizeof(fd_names[fd]), "%s", base_name(b));
	return rename(a, b);
}

static void t_done(int status, struct err *e, void *arg)
{
	buf_addf(&trace, "done%d ", status);
}

static void test_ordering(void)
{
	char *dir = dir_named("order");
	struct st_sys sys = *st_sys_default();
	struct ev *ev = ev_new();
	struct st_opts o = { .ev = ev, .sys = &sys, .no_auto_compact = true };
	struct st_db *db;
	struct err e;

	sys.open = t_open;
	sys.pwrite = t_pwrite;
	sys.fsync = t_fsync;
	sys.fdatasync = t_fdatasync;
	sys.rename = t_rename;
	ok(st_open(dir, &o, &db, &e) == 0, "open with a tracing table");
	buf_reset(&trace);
	for (int i = 0; i < 3; i++)
		st_commit(txn_n(db, i), t_done, NULL, &e);
	buf_adds(&trace, "| ");
	ev_run_once(ev, 0);
	is_str(trace.data, "write(log) write(log) write(log) | fsync(log) write(mark) done0 done0 done0 ",
	       "group commit: three writes, nothing acknowledged in the turn, one fsync, the mark after it, "
	       "then every done_fn");
	buf_reset(&trace);
	{
		int64_t t0 = ev_mono_ms();
		while (!trace.len && ev_mono_ms() - t0 < 3 * ST_MARK_SYNC_MS)
			ev_run_once(ev, ST_MARK_SYNC_MS);
	}
	is_str(trace.data, "fdatasync(mark) ", "the mark's fdatasync follows within ST_MARK_SYNC_MS, on a timer");

	buf_reset(&trace);
	ok(st_compact(db, &e) == 0, "compact");
	is_str(trace.data, "write(log.compact) write(log.compact) fsync(log.compact) write(mark) fdatasync(mark) "
	       "rename(log.compact->log) fsync(dir) ",
	       "compaction: temp file written and fsynced, then the mark, before the rename; the directory fsynced after");
	buf_reset(&trace);
	st_commit(txn_n(db, 3), t_done, NULL, &e);
	ev_run_once(ev, 0);
	is_str(trace.data, "write(log) fsync(log) write(mark) done0 ",
	       "after compaction, commits go to the new log");
	st_close(db);
	ev_run_once(ev, 0);
	ev_free(ev);

	o.ev = NULL;
	ok(st_open(dir, &o, &db, &e) == 0, "open without a loop");
	buf_reset(&trace);
	st_commit(txn_n(db, 4), t_done, NULL, &e);
	is_str(trace.data, "write(log) fsync(log) write(mark) done0 ",
	       "without a loop: write, fsync, the mark, then done_fn");
	buf_reset(&trace);
	st_close(db);
	is_str(trace.data, "fdatasync(mark) ", "close syncs the mark");
	ok(st_open(dir, &o, &db, &e) == 0, "open again");
	usleep((ST_MARK_SYNC_MS + 20) * 1000);
	buf_reset(&trace);
	st_commit(txn_n(db, 5), t_done, NULL, &e);
	is_str(trace.data, "write(log) fsync(log) write(mark) fdatasync(mark) done0 ",
	       "without a loop, a commit ST_MARK_SYNC_MS after the last sync syncs the mark too");
	st_close(db);
	buf_release(&trace);
	free(dir);

	/* Creating a store: header fsynced before the rename that publishes it. */
	dir = dir_named("order-create");
	buf_reset(&trace);
	ok(st_open(dir, &o, &db, &e) == 0, "create a store");
	is_str(trace.data, "write(log.new) fsync(log.new) rename(log.new->log) fsync(dir) "
	       "write(mark.new) fsync(mark.new) rename(mark.new->mark) fsync(dir) ",
	       "creation: header written and fsynced, renamed into place, directory fsynced; the mark the same way");
	st_close(db);
	buf_release(&trace);
	free(dir);
}

/* The mark's write or sync failing after a good fsync of the log: the data
 * is durable (done_fn 0), the store refuses later commits, and a reopen
 * finds every acknowledged transaction without refusing the log. */
static void test_mark_faults(void)
{
	static const struct {
		enum call c;
		bool loop;
		const char *what, *says;
	} cases[] = {
		{ C_MARKWRITE, true, "the mark's write (group commit)", "write mark" },
		{ C_FDATASYNC, true, "the mark's fdatasync (group commit)", "fdatasync mark" },
		{ C_MARKWRITE, false, "the mark's write (sync commit)", "write mark" },
		{ C_FDATASYNC, false, "the mark's fdatasync (sync commit)", "fdatasync mark" },
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		char name[32];
		char *dir;
		struct ev *ev = cases[c].loop ? ev_new() : NULL;
		struct st_opts o = { .ev = ev, .sys = &fake_sys };
		struct st_db *db;
		struct err e;
		struct done_rec d[3];
		bool want[8] = { false };

		snprintf(name, sizeof(name), "markfault%zu", c);
		dir = dir_named(name);
		memset(d, 0, sizeof(d));
		fake_reset();
		ok(st_open(dir, &o, &db, &e) == 0, "%s: open", cases[c].what);
		st_commit(txn_n(db, 0), on_done, &d[0], &e);
		if (ev)
			ev_run_once(ev, 0);
		want[0] = true;
		F.fail_at[cases[c].c] = F.count[cases[c].c] + 1;
		log_set_level(LOG_ERROR + 1);
		if (cases[c].c == C_FDATASYNC && !ev)
			usleep((ST_MARK_SYNC_MS + 20) * 1000);	/* this commit's mark is synced */
		st_commit(txn_n(db, 1), on_done, &d[1], &e);
		if (ev)
			ev_run_once(ev, 0);
		if (cases[c].c == C_FDATASYNC && ev) {
			/* the mark's timer, within ST_MARK_SYNC_MS */
			int64_t t0 = ev_mono_ms();
			while (!st_failed(db) && ev_mono_ms() - t0 < 3 * ST_MARK_SYNC_MS)
				ev_run_once(ev, ST_MARK_SYNC_MS);
		}
		log_set_level(LOG_WARN);
		want[1] = true;
		ok(d[0].status == 0 && d[1].calls == 1 && d[1].status == 0,
		   "%s fails: the commit is still acknowledged (its data was fsynced)", cases[c].what);
		ok(st_failed(db), "the store refuses further commits");
		ok(st_commit(txn_n(db, 2), on_done, &d[2], &e) == -1 && strstr(e.msg, cases[c].says) &&
		   strstr(e.msg, "refusing further commits"), "and says why: %s", e.msg);
		st_close(db);
		if (ev) {
			ev_run_once(ev, 0);
			ev_free(ev);
		}
		ok(reopen_holds(dir, want, 8), "reopen: every acknowledged transaction, no refusal");
		free(dir);
	}

	/* In a compaction, before the rename: the compaction fails, the store
	 * carries on, and the old log still matches its mark. */
	{
		char *dir = dir_named("markcompact");
		struct st_opts o = { .sys = &fake_sys, .no_auto_compact = true };
		struct st_db *db;
		struct err e;
		bool want[8] = { false };

		fake_reset();
		ok(st_open(dir, &o, &db, &e) == 0, "open");
		for (int i = 0; i < 4; i++) {
			st_commit(txn_n(db, i), NULL, NULL, &e);
			want[i] = true;
		}
		F.fail_at[C_MARKWRITE] = F.count[C_MARKWRITE] + 1;
		ok(st_compact(db, &e) == -1 && strstr(e.msg, "write mark"), "a compaction whose mark write fails "
		   "fails before the rename: %s", e.msg);
		ok(!st_failed(db), "the store carries on");
		ok(st_commit(txn_n(db, 4), NULL, NULL, &e) == 0, "commits still work");
		want[4] = true;
		F.fail_at[C_FDATASYNC] = F.count[C_FDATASYNC] + 1;
		ok(st_compact(db, &e) == -1 && strstr(e.msg, "fdatasync mark"), "so does one whose mark sync fails: %s",
		   e.msg);
		ok(!st_failed(db) && st_commit(txn_n(db, 5), NULL, NULL, &e) == 0, "the store carries on");
		want[5] = true;
		F.fail_at[C_RENAME] = F.count[C_RENAME] + 1;
		ok(st_compact(db, &e) == -1 && strstr(e.msg, "rename"), "a rename failing after the mark has the new "
		   "file: %s", e.msg);
		ok(!st_failed(db) && st_commit(txn_n(db, 6), NULL, NULL, &e) == 0, "the store carries on");
		want[6] = true;
		st_close(db);
		ok(reopen_holds(dir, want, 8), "reopen: the log matches its mark, nothing lost");
		fake_reset();
		ok(st_open(dir, &o, &db, &e) == 0 && st_compact(db, &e) == 0, "a compaction without faults");
		st_close(db);
		ok(reopen_holds(dir, want, 8), "and the compacted log matches its mark");
		free(dir);
	}

	/* Creating the mark (a new store) fails: the open fails cleanly, the
	 * next one creates it. */
	{
		char *dir = dir_named("markcreate");
		struct st_opts o = { .sys = &fake_sys };
		struct st_db *db;
		struct err e;

		fake_reset();
		F.fail_at[C_MARKWRITE] = 1;
		ok(st_open(dir, &o, &db, &e) == -1 && strstr(e.msg, "mark.new"), "the mark's creation fails: %s", e.msg);
		fake_reset();
		ok(st_open(dir, &o, &db, &e) == 0, "the next open creates it");
		st_close(db);
		free(dir);
	}
}

int main(void)
{
	log_set_level(LOG_WARN);
	fake_init();
	test_fsync_fails_group();
	test_fsync_fails_sync();
	test_write_fails();
	test_compaction_faults();
	test_open_faults();
	test_mark_faults();
	test_ordering();
	return tap_done();
}
