/*
 * Unit tests: the store's high-water mark (store.h, "The mark"): a log cut
 * short of what was acknowledged is refused with the numbers, a torn tail
 * of a write never acknowledged is still dropped with a warning, compaction
 * keeps the mark true on both sides of its rename, and -db-repair says what
 * it drops and resets the mark.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/ev.h"
#include "base/fs.h"
#include "base/log.h"
#include "json/json.h"
#include "store/store.h"
#include "store-log.h"
#include "tap.h"

#define NTXN 10

static char *path2(const char *a, const char *b)
{
	struct buf p = BUF_INIT;

	buf_addf(&p, "%s/%s", a, b);
	return buf_detach(&p, NULL);
}

static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : -1;
}

static void cut(const char *path, off_t len)
{
	if (truncate(path, len) < 0) {
		perror(path);
		exit(2);
	}
}

static void copy_file(const char *from, const char *to)
{
	struct buf b = BUF_INIT;
	struct err e;
	int fd;

	if (fs_read_file(from, &b, 64 << 20, &e) < 0) {
		fprintf(stderr, "%s\n", e.msg);
		exit(2);
	}
	fd = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, b.data, b.len) != (ssize_t)b.len) {
		perror(to);
		exit(2);
	}
	close(fd);
	buf_release(&b);
}

/* Transaction i of a store: a/r<i> = {i, pad} and b/count = {n: i}. */
static int commit_n(struct st_db *db, int i, const char *pad, st_done_fn done, struct err *e)
{
	struct st_txn *t = st_begin(db);
	struct json *r = json_new_object(), *c = json_new_object();
	char id[16];

	snprintf(id, sizeof(id), "r%02d", i);
	json_object_set_int(r, "i", i);
	json_object_set_str(r, "pad", pad);
	json_object_set_int(c, "n", i);
	st_put(t, "a", id, r);
	st_put(t, "b", "count", c);
	return st_commit(t, done, NULL, e);
}

/* A store in tmp/name with n transactions (sync commits, each acknowledged);
 * offs[i]: where transaction i's record starts, offs[n]: the end. */
static char *make_store(const char *name, int n, const char *pad, off_t *offs)
{
	char *dir = path2(tap_tmpdir(), name), *log = path2(dir, "log");
	struct st_db *db;
	struct err e;

	if (st_open(dir, NULL, &db, &e) < 0) {
		fprintf(stderr, "%s\n", e.msg);
		exit(2);
	}
	for (int i = 0; i < n; i++) {
		offs[i] = file_size(log);
		if (commit_n(db, i, pad, NULL, &e) < 0) {
			fprintf(stderr, "%s\n", e.msg);
			exit(2);
		}
	}
	offs[n] = file_size(log);
	st_close(db);
	free(log);
	return dir;
}

/* The store holds exactly transactions 0..n-1. */
static bool holds_exactly(struct st_db *db, int n)
{
	bool ok = (int)st_count(db, "a", NULL, NULL) == n;

	for (int i = 0; i < n && ok; i++) {
		char id[16];
		snprintf(id, sizeof(id), "r%02d", i);
		ok = st_get(db, "a", id) != NULL;
	}
	return ok && json_get_int(st_get(db, "b", "count"), "n", -1) == n - 1;
}

/* The mark file's newest slot, read by the test's own decoder. */
static bool mark_of(const char *dir, uint64_t *bytes, uint64_t *records)
{
	char *m = path2(dir, "mark");
	struct buf b = BUF_INIT;
	struct err e;
	uint64_t seq;
	bool ok = fs_read_file(m, &b, 4096, &e) == 0 && b.len == ST_MARK_BYTES &&
		  stlog_mark((const unsigned char *)b.data, &seq, bytes, records) == 0;

	buf_release(&b);
	free(m);
	return ok;
}

/* st_open with the store's log lines (stderr) captured into out, one line. */
static int open_capturing(const char *dir, const struct st_opts *o, struct st_db **db, struct err *e,
			  struct buf *out)
{
	char *cap = path2(tap_tmpdir(), "stderr.txt");
	int saved = dup(2), fd = open(cap, O_RDWR | O_CREAT | O_TRUNC, 0600), rc;
	struct err re;

	fflush(stderr);
	dup2(fd, 2);
	rc = st_open(dir, o, db, e);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fd);
	buf_reset(out);
	fs_read_file(cap, out, 1 << 20, &re);
	for (size_t i = 0; i < out->len; i++)
		if (out->data[i] == '\n')
			out->data[i] = ' ';
	free(cap);
	return rc;
}

static const char pad[] = "some padding so that records have a body";

/* Cut at a record boundary, inside a record, to nothing, inside the header,
 * or the log gone: refused, with the counts, and the file left as it is. */
static void test_truncation_refused(void)
{
	static const struct {
		const char *name;
		int keep;		/* transactions left whole */
		int extra;		/* bytes of the next record left (-1: the log cut below its header) */
		const char *says;
	} cases[] = {
		{ "cut at a record boundary in the middle", 4, 0, NULL },
		{ "cut inside a record in the middle", 4, 7, "a record cut short at offset" },
		{ "cut to the first record", 0, 0, NULL },
		{ "cut to nothing", 0, -1, NULL },
		{ "cut inside the header", 0, -2, NULL },
		{ "the last acknowledged record cut short", NTXN - 1, 20, "a record cut short at offset" },
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		off_t offs[NTXN + 1], len;
		char name[32], want[256];
		char *dir, *log;
		struct st_db *db;
		struct err e;

		snprintf(name, sizeof(name), "trunc%zu", c);
		dir = make_store(name, NTXN, pad, offs);
		log = path2(dir, "log");
		len = cases[c].extra == -1 ? 0 : cases[c].extra == -2 ? 5 : offs[cases[c].keep] + cases[c].extra;
		cut(log, len);
		ok(st_open(dir, NULL, &db, &e) == -1 && db == NULL, "%s: start-up refused", cases[c].name);
		snprintf(want, sizeof(want), "holds %d transactions (%lld bytes)", cases[c].keep,
			 (long long)(cases[c].extra < 0 ? len : offs[cases[c].keep]));
		ok(strstr(e.msg, want) != NULL, "%s: names what the log holds (%s): %s", cases[c].name, want, e.msg);
		snprintf(want, sizeof(want), "says %d transactions (%lld bytes) were acknowledged", NTXN,
			 (long long)offs[NTXN]);
		ok(strstr(e.msg, want) != NULL && strstr(e.msg, "-db-repair"),
		   "%s: and what was acknowledged, and the way out", cases[c].name);
		if (cases[c].says)
			ok(strstr(e.msg, cases[c].says) != NULL, "%s: says a record was cut", cases[c].name);
		is_int(file_size(log), len, "the log is left untouched");
		free(log);
		free(dir);
	}

	{
		off_t offs[NTXN + 1];
		char *dir = make_store("gone", NTXN, pad, offs), *log = path2(dir, "log");
		struct st_db *db;
		struct err e;
		char want[160];

		unlink(log);
		ok(st_open(dir, NULL, &db, &e) == -1 && strstr(e.msg, "is missing"),
		   "a log removed is refused, not started empty: %s", e.msg);
		snprintf(want, sizeof(want), "says %d transactions (%lld bytes) were acknowledged", NTXN,
			 (long long)offs[NTXN]);
		ok(strstr(e.msg, want) != NULL, "with the numbers");
		ok(!fs_exists(log), "and no empty log is made");
		free(log);
		free(dir);
	}
}

/* ---- a torn tail after a crash: the child's last write was never acknowledged ---- */

static int acked;

static void on_ack(int status, struct err *e, void *arg)
{
	if (status == 0)
		acked++;
}

/* In a child: acknowledge n transactions on a loop, write one more and die
 * (SIGKILL) before the turn's fsync. Returns the log's length at the
 * kill and where the unacknowledged record starts. */
static void crash_after(const char *dir, int n, off_t *rec_off, off_t *end)
{
	int p[2];
	pid_t pid;
	int status;
	off_t v[2] = { -1, -1 };
	char *log = path2(dir, "log");

	if (pipe(p) < 0) {
		perror("pipe");
		exit(2);
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		struct ev *ev = ev_new();
		struct st_opts o = { .ev = ev };
		struct st_db *db;
		struct err e;

		close(p[0]);
		if (st_open(dir, &o, &db, &e) < 0)
			_exit(3);
		for (int i = 0; i < n; i++) {
			commit_n(db, i, pad, on_ack, &e);
			ev_run_once(ev, 0);
		}
		if (acked != n)
			_exit(4);
		v[0] = file_size(log);
		commit_n(db, n, pad, on_ack, &e);	/* written, not fsynced, not acknowledged */
		v[1] = file_size(log);
		if (write(p[1], v, sizeof(v)) != (ssize_t)sizeof(v))
			_exit(5);
		raise(SIGKILL);
	}
	close(p[1]);
	if (read(p[0], v, sizeof(v)) != (ssize_t)sizeof(v))
		v[0] = v[1] = -1;
	close(p[0]);
	waitpid(pid, &status, 0);
	*rec_off = v[0];
	*end = v[1];
	free(log);
}

static void test_torn_tail_after_crash(void)
{
	struct buf logs = BUF_INIT;

	for (int k = 0; k < 2; k++) {
		char *dir = path2(tap_tmpdir(), k ? "crash-whole" : "crash-torn"), *log = path2(dir, "log");
		off_t rec, end;
		struct st_db *db;
		struct err e;
		struct st_stats s;
		uint64_t mb = 0, mr = 0;
		char want[96];

		crash_after(dir, 5, &rec, &end);
		ok(rec > 0 && end > rec, "the child acknowledged 5 transactions, wrote a 6th and was killed");
		ok(mark_of(dir, &mb, &mr) && mr == 5 && (off_t)mb == rec,
		   "its mark says 5 transactions, %lld bytes (got %llu, %llu)", (long long)rec, (unsigned long long)mr,
		   (unsigned long long)mb);
		if (k == 0) {
			/* What a power loss may leave of a write whose fsync never ran. */
			cut(log, rec + (end - rec) / 2);
			ok(open_capturing(dir, NULL, &db, &e, &logs) == 0 && db && holds_exactly(db, 5),
			   "half of the unacknowledged write: the store opens with the 5 acknowledged");
			snprintf(want, sizeof(want), "torn tail at offset %lld", (long long)rec);
			ok(strstr(logs.data, want) && strstr(logs.data, " warn "), "with the torn-tail warning: %s",
			   logs.data);
			st_stats(db, &s);
			is_int(s.truncated_bytes, (end - rec) / 2, "the torn bytes are dropped");
		} else {
			ok(open_capturing(dir, NULL, &db, &e, &logs) == 0 && db && holds_exactly(db, 6),
			   "the whole unacknowledged write reached the file: replayed (6 transactions)");
		}
		st_close(db);
		ok(mark_of(dir, &mb, &mr) && mr == (uint64_t)(k ? 6 : 5) && (off_t)mb == file_size(log),
		   "the open set the mark to the log as replayed");
		free(log);
		free(dir);
	}
	buf_release(&logs);
}

/* ---- compaction ---- */

static void test_compaction(void)
{
	off_t offs[NTXN + 1], compacted;
	char *dir = make_store("compact", NTXN, pad, offs), *log = path2(dir, "log");
	char *saved = path2(dir, "log.saved");
	struct st_opts o = { .no_auto_compact = true };
	struct st_db *db;
	struct err e;
	char want[160];
	uint64_t mb = 0, mr = 0;

	copy_file(log, saved);
	ok(st_open(dir, &o, &db, &e) == 0 && st_compact(db, &e) == 0, "compact a store of %d transactions", NTXN);
	compacted = file_size(log);
	for (int i = NTXN; i < NTXN + 3; i++)
		commit_n(db, i, pad, NULL, &e);
	st_close(db);
	ok(st_open(dir, NULL, &db, &e) == 0 && holds_exactly(db, NTXN + 3), "compacted then 3 more: opens");
	st_close(db);
	ok(mark_of(dir, &mb, &mr) && mr == 4 && (off_t)mb == file_size(log),
	   "the mark counts the compaction's record and the 3 after it (%llu)", (unsigned long long)mr);

	cut(log, compacted);
	ok(st_open(dir, NULL, &db, &e) == -1, "cut back to the compacted file: refused");
	snprintf(want, sizeof(want), "holds 1 transactions (%lld bytes) but its mark", (long long)compacted);
	ok(strstr(e.msg, want) && strstr(e.msg, "says 4 transactions"), "with the numbers: %s", e.msg);
	cut(log, compacted - 10);
	ok(st_open(dir, NULL, &db, &e) == -1 && strstr(e.msg, "holds 0 transactions") &&
	   strstr(e.msg, "cut short at offset 16"), "cut inside the compacted record: refused: %s", e.msg);

	/* A crash after the compaction's mark, before its rename took effect:
	 * the old log is still there, and it must open. */
	free(dir);
	free(log);
	dir = make_store("compact-crash", NTXN, pad, offs);
	log = path2(dir, "log");
	copy_file(log, saved);
	ok(st_open(dir, &o, &db, &e) == 0 && st_compact(db, &e) == 0, "compact");
	st_close(db);
	copy_file(saved, log);
	ok(st_open(dir, NULL, &db, &e) == 0 && holds_exactly(db, NTXN),
	   "the log from before the rename opens against the compaction's mark");
	st_close(db);
	cut(log, offs[NTXN - 2]);
	ok(st_open(dir, NULL, &db, &e) == -1 && strstr(e.msg, "holds 8 transactions"),
	   "and once opened it is checked like any log: %s", e.msg);
	free(saved);
	free(log);
	free(dir);
}

/* ---- -db-repair ---- */

static void test_repair(void)
{
	off_t offs[NTXN + 1];
	char *dir = make_store("repair", NTXN, pad, offs), *log = path2(dir, "log");
	struct st_opts o = { .repair = true };
	struct st_db *db;
	struct err e;
	struct buf logs = BUF_INIT;
	char want[200];
	uint64_t mb = 0, mr = 0;

	cut(log, offs[4]);
	ok(open_capturing(dir, &o, &db, &e, &logs) == 0 && db && holds_exactly(db, 4),
	   "-db-repair opens a log cut to 4 of %d transactions, with the 4", NTXN);
	snprintf(want, sizeof(want), "dropping %d acknowledged transactions (%lld bytes)", NTXN - 4,
		 (long long)(offs[NTXN] - offs[4]));
	ok(strstr(logs.data, want) && strstr(logs.data, "the mark is reset"), "and says what it drops: %s",
	   logs.data);
	st_close(db);
	ok(mark_of(dir, &mb, &mr) && mr == 4 && (off_t)mb == offs[4], "the mark now says 4 transactions");
	ok(st_open(dir, NULL, &db, &e) == 0 && holds_exactly(db, 4), "a plain open works afterwards");
	st_close(db);

	/* Cut inside a record: the partial record is moved aside. */
	free(dir);
	free(log);
	dir = make_store("repair-mid", NTXN, pad, offs);
	log = path2(dir, "log");
	cut(log, offs[6] + 11);
	ok(open_capturing(dir, &o, &db, &e, &logs) == 0 && db && holds_exactly(db, 6),
	   "-db-repair on a log cut inside record 7: the 6 before it");
	snprintf(want, sizeof(want), "dropping %d acknowledged transactions (%lld bytes)", NTXN - 6,
		 (long long)(offs[NTXN] - offs[6]));
	ok(strstr(logs.data, want) && strstr(logs.data, "moved 11 bytes"), "says what it drops: %s", logs.data);
	st_close(db);
	is_int(file_size(log), offs[6], "the log ends at the last whole record");
	ok(st_open(dir, NULL, &db, &e) == 0, "a plain open works afterwards");
	st_close(db);

	/* The log missing: repair starts an empty store. */
	unlink(log);
	ok(open_capturing(dir, &o, &db, &e, &logs) == 0 && db && st_count(db, "a", NULL, NULL) == 0 &&
	   strstr(logs.data, "dropping 6 acknowledged transactions"), "-db-repair on a missing log: empty, "
	   "and says so: %s", logs.data);
	st_close(db);
	ok(st_open(dir, NULL, &db, &e) == 0, "a plain open works afterwards");
	st_close(db);
	buf_release(&logs);
	free(log);
	free(dir);
}

/* ---- other logs, other marks ---- */

static void test_replaced_and_marks(void)
{
	off_t offs[NTXN + 3], other[NTXN + 3];
	char *dir = make_store("replaced", NTXN, pad, offs), *log = path2(dir, "log");
	char *odir = make_store("other", NTXN + 2, "another store's rows, longer", other);
	char *olog = path2(odir, "log"), *mark = path2(dir, "mark");
	struct st_opts o = { .repair = true };
	struct st_db *db;
	struct err e;
	struct buf logs = BUF_INIT;
	unsigned char b;
	int fd;

	copy_file(olog, log);
	ok(st_open(dir, NULL, &db, &e) == -1 && strstr(e.msg, "does not match its mark"),
	   "another store's (longer) log in its place: refused: %s", e.msg);
	ok(open_capturing(dir, &o, &db, &e, &logs) == 0 && strstr(logs.data, "replaced or rewritten"),
	   "-db-repair keeps it and resets the mark: %s", logs.data);
	st_close(db);
	ok(st_open(dir, NULL, &db, &e) == 0 && holds_exactly(db, NTXN + 2), "then it opens");
	st_close(db);

	/* Records appended whole while the store is stopped extend the log:
	 * the mark is still inside it. */
	{
		off_t o2[NTXN + 1];
		char *d2 = make_store("appended", 3, pad, o2), *l2 = path2(d2, "log");
		const char *payload = "{\"ops\":[{\"put\":\"a\",\"id\":\"r03\",\"row\":{\"i\":3}},"
				      "{\"put\":\"b\",\"id\":\"count\",\"row\":{\"n\":3}}]}";
		unsigned char rh[ST_RECORD_HEAD_BYTES];

		stlog_record_head(rh, payload, strlen(payload));
		fd = open(l2, O_WRONLY | O_APPEND);
		if (fd < 0 || write(fd, rh, sizeof(rh)) != (ssize_t)sizeof(rh) ||
		    write(fd, payload, strlen(payload)) != (ssize_t)strlen(payload))
			perror(l2);
		close(fd);
		ok(st_open(d2, NULL, &db, &e) == 0 && holds_exactly(db, 4), "a record appended by hand: opens, replayed");
		st_close(db);
		free(l2);
		free(d2);
	}

	/* A torn newest slot (a power loss mid-write): the older slot, from
	 * before the last commit, serves. */
	ok(st_open(dir, NULL, &db, &e) == 0 && commit_n(db, NTXN + 2, pad, NULL, &e) == 0, "one more commit");
	st_close(db);
	fd = open(mark, O_RDWR);
	{
		uint64_t seq = 0, mb = 0, mr = 0;
		unsigned char buf[ST_MARK_BYTES];
		int newest;
		if (pread(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf) || stlog_mark(buf, &seq, &mb, &mr) < 0)
			perror("mark");
		newest = (int)(seq % 2);
		b = buf[ST_MARK_HEADER_BYTES + newest * ST_MARK_SLOT_BYTES + 9] ^ 0x10;
		if (pwrite(fd, &b, 1, ST_MARK_HEADER_BYTES + newest * ST_MARK_SLOT_BYTES + 9) != 1)
			perror("mark");
	}
	ok(st_open(dir, NULL, &db, &e) == 0 && holds_exactly(db, NTXN + 3), "a torn newest slot: the older one "
	   "serves, no refusal");
	st_close(db);

	/* A header that is not a mark's: refused; repair writes a new one. */
	b = 'X';
	if (pwrite(fd, &b, 1, 0) != 1)
		perror("mark");
	close(fd);
	ok(st_open(dir, NULL, &db, &e) == -1 && strstr(e.msg, "is corrupt (bad header)"),
	   "a mark with a bad header is refused: %s", e.msg);
	ok(open_capturing(dir, &o, &db, &e, &logs) == 0 && strstr(logs.data, "is corrupt"),
	   "-db-repair writes a new one: %s", logs.data);
	st_close(db);
	ok(st_open(dir, NULL, &db, &e) == 0, "then it opens");
	st_close(db);

	/* No mark (a store from before marks): opens with a warning, gets one. */
	unlink(mark);
	ok(open_capturing(dir, NULL, &db, &e, &logs) == 0 && strstr(logs.data, "has no mark"),
	   "a log with records and no mark opens, with a warning: %s", logs.data);
	st_close(db);
	ok(fs_exists(mark), "and gets a mark");
	cut(log, offs[2]);
	ok(st_open(dir, NULL, &db, &e) == -1 && strstr(e.msg, "shorter than what was acknowledged"),
	   "which then catches a cut");
	buf_release(&logs);
	free(mark);
	free(olog);
	free(odir);
	free(log);
	free(dir);
}

int main(void)
{
	log_set_level(LOG_WARN);
	test_truncation_refused();
	test_torn_tail_after_crash();
	test_compaction();
	test_repair();
	test_replaced_and_marks();
	return tap_done();
}
