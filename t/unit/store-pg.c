/*
 * Unit tests: the store on PostgreSQL (src/store/pg.c) against a real
 * server, a throw-away cluster that t/lib/pg.sh starts in this test's temp
 * directory (skipped when none can be started). Put, get, scan, delete,
 * the rows again after a reopen, the schema check, one process per
 * database, done_fn only after COMMIT, and a lost connection: writes
 * refused, reconnect, the lost batch sent again.
 */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "base/buf.h"
#include "base/ev.h"
#include "base/log.h"
#include "json/json.h"
#include "store/store.h"
#include "tap.h"
#include "store-util.h"

#define DSN_MAX 512
#define WAIT_MS 8000		/* longest a test waits for the loop */

static const char *const ix[] = { "TeamID", NULL };
static char dsn[DSN_MAX];

/* sh t/lib/pg.sh CMD DIR; with out, its first line of stdout. 0 / -1. */
static int pg_sh(const char *cmd, char *out, size_t n)
{
	const char *top = getenv("DENV_TOP");
	char script[1024];
	int fds[2], status;
	pid_t pid;
	ssize_t got = 0, r;
	const char *dir;

	snprintf(script, sizeof(script), "%s/t/lib/pg.sh", top && *top ? top : ".");
	dir = tap_tmpdir();	/* before the fork: the child's would be another */
	if (pipe(fds) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execl("/bin/sh", "sh", script, cmd, dir, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	while (out && (size_t)got < n - 1 && (r = read(fds[0], out + got, n - 1 - (size_t)got)) > 0)
		got += r;
	close(fds[0]);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	if (out) {
		out[got] = '\0';
		out[strcspn(out, "\n")] = '\0';
	}
	return 0;
}

/* A child that stops the server when this process ends however it ends
 * (a sanitizer's abort included): it waits for EOF on a pipe whose write
 * end only this process holds (close-on-exec: not the server's). */
static void watchdog(void)
{
	int fds[2];
	char c;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		close(fds[1]);
		while (read(fds[0], &c, 1) < 0)
			;
		pg_sh("stop", NULL, 0);
		_exit(0);
	}
	close(fds[0]);	/* fds[1] stays open until this process is gone */
}

/* Stop the server before tap_done removes its directory. */
static void __attribute__((noreturn)) bail(void)
{
	pg_sh("stop", NULL, 0);
	exit(tap_done());
}

/* The test's own connection, to look at and poke the server. */
static PGconn *admin(void)
{
	PGconn *c = PQconnectdb(dsn);

	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "admin connection: %s", PQerrorMessage(c));
		bail();
	}
	return c;
}

/* The first value of sql's result, as a string ("" on error), malloc'd. */
static char *q1(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	char *v = xstrdup(PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) ? PQgetvalue(r, 0, 0) : "");

	PQclear(r);
	return v;
}

static bool q1_is(PGconn *c, const char *sql, const char *want)
{
	char *v = q1(c, sql);
	bool same = strcmp(v, want) == 0;

	if (!same)
		tap_diag("%s: got '%s', want '%s'", sql, v, want);
	free(v);
	return same;
}

static void exec_or_die(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);

	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
		fprintf(stderr, "%s: %s", sql, PQresultErrorMessage(r));
		bail();
	}
	PQclear(r);
}

static int count_fn(const char *id, const struct json *r, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

static void test_basic(PGconn *a)
{
	struct st_db *db;
	struct err e;
	const struct json *r;
	int n = 0;

	if (!ok(st_open(dsn, NULL, &db, &e) == 0, "open on PostgreSQL"))
		tap_diag("%s", e.msg);
	if (!db)
		bail();
	ok(st_table(db, "envs", ix, &e) == 0, "declare a table with an index");
	ok(put1(db, "envs", "e1", "{\"TeamID\":\"t1\",\"Name\":\"one\"}") == 0 &&
	   put1(db, "envs", "e2", "{\"TeamID\":\"t1\",\"Name\":\"two\"}") == 0 &&
	   put1(db, "envs", "e3", "{\"TeamID\":\"t2\",\"Name\":\"three\"}") == 0 &&
	   put1(db, "teams", "t1", "{\"Name\":\"a\"}") == 0, "four puts commit");
	ok(q1_is(a, "SELECT count(*) FROM denv_rows", "4"), "each put is a row on the server once st_commit returns");
	r = st_get(db, "envs", "e2");
	is_str(r ? json_get_str(r, "Name") : NULL, "two", "st_get reads a row back");
	st_scan(db, "envs", "TeamID", "t1", NULL, count_fn, &n, &e);
	is_int(n, 2, "the index finds t1's two rows");
	ok(del1(db, "envs", "e1") == 0, "delete commits");
	ok(q1_is(a, "SELECT count(*) FROM denv_rows WHERE tbl = 'envs'", "2"), "the delete reached the server");
	ok(put1(db, "envs", "e2", "{\"TeamID\":\"t2\",\"Name\":\"moved\"}") == 0, "overwrite commits");
	ok(q1_is(a, "SELECT doc->>'Name' FROM denv_rows WHERE id = 'e2'", "moved"), "the overwrite reached the server");
	{
		struct st_db *db2;
		if (!ok(st_open(dsn, NULL, &db2, &e) < 0 && strstr(e.msg, "another denv-cp"),
		   "a second open of the same database is refused"))
			tap_diag("%s", e.msg);
	}
	st_close(db);

	if (!ok(st_open(dsn, NULL, &db, &e) == 0, "reopen"))
		tap_diag("%s", e.msg);
	if (!db)
		bail();
	st_table(db, "envs", ix, &e);
	ok(!st_get(db, "envs", "e1"), "the deleted row stays deleted after the reopen");
	r = st_get(db, "envs", "e2");
	is_str(r ? json_get_str(r, "Name") : NULL, "moved", "the overwritten row is loaded");
	is_int(st_count(db, "envs", "TeamID", "t2"), 2, "the index is rebuilt from the loaded rows");
	is_int(st_count(db, "teams", NULL, NULL), 1, "the other table is loaded too");
	st_close(db);
}

static void test_schema(PGconn *a)
{
	char newer[DSN_MAX + 16];
	struct st_db *db;
	struct err e;
	PGconn *c;
	char *p = strstr(dsn, "/denv?");

	exec_or_die(a, "CREATE DATABASE newer");
	snprintf(newer, sizeof(newer), "%.*s/newer%s", (int)(p - dsn), dsn, p + 5);
	c = PQconnectdb(newer);
	exec_or_die(c, "CREATE TABLE denv_schema (version integer NOT NULL); INSERT INTO denv_schema VALUES (99)");
	if (!ok(st_open(newer, NULL, &db, &e) < 0 && strstr(e.msg, "schema version 99, newer than"),
	   "a newer schema is refused, by name"))
		tap_diag("%s", e.msg);
	ok(q1_is(c, "SELECT count(*) FROM pg_tables WHERE tablename = 'denv_rows'", "0"),
	   "and the database is left untouched");
	PQfinish(c);
	ok(q1_is(a, "SELECT max(version) FROM denv_schema", "1"), "the test database is at schema version 1");
}

struct done {
	int calls, status;
	char msg[ERR_MSG_MAX];
};

static void done_fn(int status, struct err *e, void *arg)
{
	struct done *d = arg;

	d->calls++;
	d->status = status;
	snprintf(d->msg, sizeof(d->msg), "%s", e ? e->msg : "");
}

static int commit_async(struct st_db *db, const char *id, struct done *d, struct err *e)
{
	struct st_txn *t = st_begin(db);

	st_put(t, "envs", id, row("{\"TeamID\":\"t9\"}"));
	return st_commit(t, done_fn, d, e);
}

/* Turn the loop until *flag is set or ms pass. */
static void run_until(struct ev *ev, const int *flag, int64_t ms)
{
	int64_t end = ev_mono_ms() + ms;

	while (!*flag && ev_mono_ms() < end)
		ev_run_once(ev, 50);
}

static void run_for(struct ev *ev, int64_t ms)
{
	int never = 0;

	run_until(ev, &never, ms);
}

/* A done_fn that reads a row pointer taken in its commit's turn. */
struct keep {
	const struct json *row;
	int calls;
	char name[32];
};

static void keep_done(int status, struct err *e, void *arg)
{
	struct keep *k = arg;
	const char *n = json_get_str(k->row, "Name");

	snprintf(k->name, sizeof(k->name), "%s", n ? n : "");
	k->calls++;
}

/* store.h, "Pointers": rows read in a commit's turn live until its done_fn
 * has run, also when that takes several turns and a second batch waits
 * behind the first (under ASan a freed row would be a failure). */
static void test_pointers(PGconn *a)
{
	struct ev *ev = ev_new();
	struct st_opts o = { .ev = ev };
	struct st_db *db;
	struct keep k1 = { 0 }, k2 = { 0 };
	struct st_txn *t;
	struct err e;

	if (st_open(dsn, &o, &db, &e) < 0)
		bail();
	st_table(db, "envs", ix, &e);
	exec_or_die(a, "BEGIN");
	exec_or_die(a, "LOCK TABLE denv_rows IN ACCESS EXCLUSIVE MODE");
	k1.row = st_get(db, "teams", "t1");
	t = st_begin(db);
	st_put(t, "envs", "p1", row("{\"TeamID\":\"t3\"}"));
	st_commit(t, keep_done, &k1, &e);
	run_for(ev, 200);	/* the first batch is out, waiting on the lock */
	k2.row = st_get(db, "envs", "e3");
	t = st_begin(db);
	st_put(t, "envs", "p2", row("{\"TeamID\":\"t3\"}"));
	st_commit(t, keep_done, &k2, &e);
	run_for(ev, 200);
	exec_or_die(a, "COMMIT");
	run_until(ev, &k2.calls, WAIT_MS);
	ok(k1.calls == 1 && strcmp(k1.name, "a") == 0, "the first done_fn reads the row of its turn");
	ok(k2.calls == 1 && strcmp(k2.name, "three") == 0, "the second, queued behind it, reads its own");
	st_close(db);
	ev_run_once(ev, 0);
	ev_free(ev);
}

static const char kill_cp[] =
	"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'denv-cp'";

static PGconn *test_ack_after_commit(PGconn *a)
{
	struct ev *ev = ev_new();
	struct st_opts o = { .ev = ev };
	struct st_db *db;
	struct done d = { 0 };
	struct err e;

	if (!ok(st_open(dsn, &o, &db, &e) == 0, "open with a loop"))
		tap_diag("%s", e.msg);
	if (!db)
		bail();
	/* Another session holds the table: our COMMIT cannot happen. */
	exec_or_die(a, "BEGIN");
	exec_or_die(a, "LOCK TABLE denv_rows IN ACCESS EXCLUSIVE MODE");
	ok(commit_async(db, "a1", &d, &e) == 0, "a commit is accepted");
	ok(st_get(db, "envs", "a1") != NULL, "and visible in memory at once");
	run_for(ev, 500);
	is_int(d.calls, 0, "no done_fn while the server has not committed it (500 ms)");
	exec_or_die(a, "COMMIT");
	run_until(ev, &d.calls, WAIT_MS);
	if (!ok(d.calls == 1 && d.status == 0, "done_fn hears 0 once the lock is gone"))
		tap_diag("%d %s", d.calls, d.msg);
	ok(q1_is(a, "SELECT count(*) FROM denv_rows WHERE id = 'a1'", "1"), "and by then the row is committed");

	/* The server gone: writes are refused, then accepted again. */
	PQfinish(a);
	ok(pg_sh("stop", NULL, 0) == 0, "the server stops");
	run_for(ev, 300);
	memset(&d, 0, sizeof(d));
	if (!ok(commit_async(db, "a2", &d, &e) < 0 && strstr(e.msg, "unreachable"),
	   "a commit while the connection is lost is refused"))
		tap_diag("%s", e.msg);
	ok(pg_sh("resume", NULL, 0) == 0, "the server starts again");
	a = admin();
	{
		int accepted = 0;
		int64_t end = ev_mono_ms() + WAIT_MS;
		while (!accepted && ev_mono_ms() < end) {
			ev_run_once(ev, 100);
			accepted = commit_async(db, "a3", &d, &e) == 0;
		}
		if (!ok(accepted, "after the reconnect commits are accepted again"))
			tap_diag("%s", e.msg);
	}
	run_until(ev, &d.calls, WAIT_MS);
	if (!ok(d.calls == 1 && d.status == 0, "and acknowledged after COMMIT"))
		tap_diag("%s", d.msg);
	ok(q1_is(a, "SELECT count(*) FROM denv_rows WHERE id IN ('a2', 'a3')", "1"),
	   "the refused write is not on the server, the accepted one is");

	/* Lost with a batch in flight: never acknowledged, sent again later. */
	memset(&d, 0, sizeof(d));
	exec_or_die(a, "BEGIN");
	exec_or_die(a, "LOCK TABLE denv_rows IN ACCESS EXCLUSIVE MODE");
	ok(commit_async(db, "a4", &d, &e) == 0, "a commit goes out while the table is locked");
	run_for(ev, 200);
	ok(q1_is(a, kill_cp, "1"), "the server ends the session with the batch in flight");
	run_until(ev, &d.calls, WAIT_MS);
	if (!ok(d.calls == 1 && d.status == -1 && strstr(d.msg, "not known to be committed"),
	   "done_fn hears -1: not known to be committed"))
		tap_diag("%d %d %s", d.calls, d.status, d.msg);
	exec_or_die(a, "COMMIT");
	{
		int accepted = 0;
		int64_t end = ev_mono_ms() + WAIT_MS;
		struct done d2 = { 0 };
		while (!accepted && ev_mono_ms() < end) {
			ev_run_once(ev, 100);
			accepted = commit_async(db, "a5", &d2, &e) == 0;
		}
		run_until(ev, &d2.calls, WAIT_MS);
		ok(accepted && d2.status == 0, "after the reconnect the store writes again");
	}
	ok(q1_is(a, "SELECT count(*) FROM denv_rows WHERE id IN ('a4', 'a5')", "2"),
	   "the lost batch was sent again: the server holds what memory holds");
	st_close(db);
	ev_run_once(ev, 0);
	ev_free(ev);
	return a;
}

/* file store -> PostgreSQL -> file store: same rows, same digest; more rows
 * than one copy transaction holds; a target with rows is refused. */
static void test_copy(PGconn *a)
{
	enum { N = ST_COPY_TXN_OPS * 2 + 7 };
	char *src_dir = dir_named("copy-src"), *back_dir = dir_named("copy-back");
	char copydsn[DSN_MAX + 16];
	char *p = strstr(dsn, "/denv?");
	struct st_db *src, *pg, *back;
	struct st_digest d1, d2, d3;
	struct err e;
	struct st_txn *t;

	exec_or_die(a, "CREATE DATABASE copy");
	snprintf(copydsn, sizeof(copydsn), "%.*s/copy%s", (int)(p - dsn), dsn, p + 5);
	if (st_open(src_dir, NULL, &src, &e) < 0)
		bail();
	t = st_begin(src);
	for (int i = 0; i < N; i++) {
		char id[32], js[96];
		snprintf(id, sizeof(id), "e%06d", i);
		snprintf(js, sizeof(js), "{\"TeamID\":\"t%d\",\"N\":%d,\"S\":\"\\u00e9'\\\\\"}", i % 7, i);
		st_put(t, i % 3 ? "envs" : "events", id, row(js));
	}
	ok(st_commit(t, NULL, NULL, &e) == 0, "a file store with %d rows", N);
	ok(st_open(copydsn, NULL, &pg, &e) == 0, "an empty PostgreSQL database");
	if (!ok(st_copy(src, pg, &e) == 0, "copy file store -> PostgreSQL"))
		tap_diag("%s", e.msg);
	st_close(pg);
	ok(q1_is(a, "SELECT 1", "1"), "(admin still connected)");
	st_open(copydsn, NULL, &pg, &e);
	st_digest(src, &d1, &e);
	st_digest(pg, &d2, &e);
	ok(d1.rows == N && d2.rows == N && d1.tables == 2 && d2.tables == 2, "both hold %d rows in 2 tables", N);
	is_str(d2.sha256, d1.sha256, "and the same digest after reopening the database");
	ok(st_open(back_dir, NULL, &back, &e) == 0 && st_copy(pg, back, &e) == 0, "copy PostgreSQL -> file store");
	st_digest(back, &d3, &e);
	is_str(d3.sha256, d1.sha256, "the round trip keeps the digest");
	ok(st_copy(src, back, &e) < 0 && strstr(e.msg, "already holds rows"), "a target with rows is refused");
	put1(back, "envs", "e000001", "{\"changed\":true}");
	st_digest(back, &d3, &e);
	ok(strcmp(d3.sha256, d1.sha256) != 0, "one changed row changes the digest");
	st_close(back);
	st_close(pg);
	st_close(src);
	free(src_dir);
	free(back_dir);
}

static int scratch_dirs(const char *tmp);

/* The child of test_kill: commit rows k0, k1, ... on a loop, one per turn
 * and several in flight, and write each id to fd once its done_fn says 0. */
struct killer {
	struct st_db *db;
	int fd, next;
};

static void killer_done(int status, struct err *e, void *arg);

static void killer_commit(struct killer *k)
{
	struct st_txn *t = st_begin(k->db);
	struct err e;
	char id[32];
	int *n = xmalloc(sizeof(*n));

	*n = k->next++;
	snprintf(id, sizeof(id), "k%07d", *n);
	st_put(t, "kill", id, row("{\"v\":1}"));
	if (st_commit(t, killer_done, n, &e) < 0)
		_exit(3);
}

static void killer_done(int status, struct err *e, void *arg)
{
	static struct killer *k;
	int *n = arg;

	if (!arg) {
		k = (struct killer *)e;	/* set-up call: remember the state */
		return;
	}
	if (status == 0 && write(k->fd, n, sizeof(*n)) != (ssize_t)sizeof(*n))
		_exit(4);
	free(n);
	killer_commit(k);
}

static void __attribute__((noreturn)) killer_main(int fd)
{
	struct ev *ev = ev_new();
	struct st_opts o = { .ev = ev };
	struct killer k = { NULL, fd, 0 };
	struct err e;

	if (st_open(dsn, &o, &k.db, &e) < 0)
		_exit(5);
	killer_done(0, (struct err *)&k, NULL);
	for (int i = 0; i < 8; i++)
		killer_commit(&k);
	for (;;)
		ev_run_once(ev, 100);
}

/* SIGKILL a writer at a random moment, KILL_ROUNDS times: every id it was
 * told is committed is on the server. */
#define KILL_ROUNDS 10
static void test_kill(PGconn *a)
{
	int lost = 0, acked = 0;

	srand((unsigned)getpid());
	for (int round = 0; round < KILL_ROUNDS; round++) {
		int fds[2], n, status;
		pid_t pid;

		exec_or_die(a, "DELETE FROM denv_rows WHERE tbl = 'kill'");
		if (pipe(fds) < 0)
			bail();
		pid = fork();
		if (pid == 0) {
			close(fds[0]);
			killer_main(fds[1]);
		}
		close(fds[1]);
		usleep(200000 + (useconds_t)(rand() % 300000));
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		while (read(fds[0], &n, sizeof(n)) == (ssize_t)sizeof(n)) {
			char sql[128];
			char *v;
			snprintf(sql, sizeof(sql), "SELECT count(*) FROM denv_rows WHERE tbl = 'kill' AND id = 'k%07d'", n);
			v = q1(a, sql);
			lost += strcmp(v, "1") != 0;
			acked++;
			free(v);
		}
		close(fds[0]);
	}
	ok(acked > KILL_ROUNDS, "the killed writers were told of %d commits", acked);
	is_int(lost, 0, "none of them is missing on the server after SIGKILL");
	{
		struct st_db *db;
		struct err e;
		const char *tmp = getenv("TMPDIR");

		is_int(scratch_dirs(tmp), 1, "the last killed writer's scratch directory is left");
		ok(st_open(dsn, NULL, &db, &e) == 0, "the next open");
		st_close(db);
		is_int(scratch_dirs(tmp), 0, "swept it");
	}
}

static int scratch_dirs(const char *tmp)
{
	DIR *d = opendir(tmp);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		n += strncmp(de->d_name, "denv-cp-pg-", 11) == 0;
	if (d)
		closedir(d);
	return n;
}

/* One scratch directory under TMPDIR while a store is open, none after; one
 * that a dead process left (its lock free) is swept at the next open, one
 * whose lock is held is not. */
static void test_scratch(const char *tmp)
{
	char stale[PATH_MAX], live[PATH_MAX], f[PATH_MAX + 8];
	struct st_db *db;
	struct err e;
	int fd;

	is_int(scratch_dirs(tmp), 0, "no scratch directory after the stores closed");
	snprintf(stale, sizeof(stale), "%s/denv-cp-pg-STALE1", tmp);
	snprintf(live, sizeof(live), "%s/denv-cp-pg-LIVE01", tmp);
	mkdir(stale, 0700);
	mkdir(live, 0700);
	snprintf(f, sizeof(f), "%s/log", stale);
	close(open(f, O_CREAT | O_WRONLY, 0600));
	snprintf(f, sizeof(f), "%s/lock", stale);
	close(open(f, O_CREAT | O_WRONLY, 0600));
	snprintf(f, sizeof(f), "%s/lock", live);
	fd = open(f, O_CREAT | O_RDWR, 0600);
	flock(fd, LOCK_EX);
	ok(st_open(dsn, NULL, &db, &e) == 0, "open");
	ok(access(stale, F_OK) < 0, "a dead process's scratch directory is swept");
	ok(access(live, F_OK) == 0, "a live one's (lock held) is left");
	is_int(scratch_dirs(tmp), 2, "the open store has its own");
	st_close(db);
	is_int(scratch_dirs(tmp), 1, "and removes it at close");
	close(fd);
}

int main(void)
{
	PGconn *a;

	log_set_level(LOG_ERROR);
	signal(SIGPIPE, SIG_IGN);
	if (pg_sh("start", dsn, sizeof(dsn)) < 0) {
		pg_sh("stop", NULL, 0);
		return tap_skip_all("no PostgreSQL server could be started (t/lib/pg.sh)");
	}
	watchdog();
	{
		static char tmp[PATH_MAX];
		snprintf(tmp, sizeof(tmp), "%s/scratch", tap_tmpdir());
		mkdir(tmp, 0700);
		setenv("TMPDIR", tmp, 1);
	}
	a = admin();
	test_basic(a);
	test_schema(a);
	a = test_ack_after_commit(a);
	test_pointers(a);
	test_copy(a);
	test_scratch(getenv("TMPDIR"));
	test_kill(a);
	PQfinish(a);
	pg_sh("stop", NULL, 0);
	return tap_done();
}
