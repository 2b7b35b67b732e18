/* Unit tests: rows live in the log, not in memory: spans after reopen and
 * compaction, the lifetime of the parsed rows st_get and st_scan hand out,
 * read failures, indexes that never read rows, and records written by hand
 * (any key order, whitespace, escapes) whose row spans replay must find. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/ev.h"
#include "base/log.h"
#include "json/json.h"
#include "store/store.h"
#include "store-log.h"
#include "tap.h"
#include "store-util.h"

/* Does table/id hold exactly the JSON text want (NULL: absent)? */
static bool holds(struct st_db *db, const char *table, const char *id, const char *want)
{
	const struct json *got = st_get(db, table, id);
	struct json *w;
	bool same;

	if (!want)
		return got == NULL;
	if (!got)
		return false;
	w = row(want);
	same = json_equal(got, w);
	json_free(w);
	return same;
}

static uint64_t stat_of(struct st_db *db, int which)
{
	struct st_stats s;

	st_stats(db, &s);
	return which == 0 ? s.row_reads : which == 1 ? s.cached_rows : s.compactions;
}
#define READS(db) stat_of(db, 0)
#define CACHED(db) stat_of(db, 1)

static const char *const ix[] = { "Team", NULL };
static const char *const ix2[] = { "Team", "s", NULL };

/* ---- spans after reopen and compaction ---- */

static void fill(struct st_db *db, int n)
{
	char id[32], text[128];

	for (int i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "r%03d", i);
		snprintf(text, sizeof(text), "{\"Team\":\"t%d\",\"n\":%d,\"s\":\"%*s\"}", i % 3, i, i % 50, "x");
		put1(db, "rows", id, text);
	}
}

static bool check_rows(struct st_db *db, int n, const char *when)
{
	char id[32], text[128];

	for (int i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "r%03d", i);
		if (i % 7 == 3) {
			if (!holds(db, "rows", id, NULL)) {
				tap_diag("%s: %s should be deleted", when, id);
				return false;
			}
			continue;
		}
		if (i % 5 == 1)
			snprintf(text, sizeof(text), "{\"Team\":\"t9\",\"n\":%d,\"again\":true}", i);
		else
			snprintf(text, sizeof(text), "{\"Team\":\"t%d\",\"n\":%d,\"s\":\"%*s\"}", i % 3, i, i % 50, "x");
		if (!holds(db, "rows", id, text)) {
			tap_diag("%s: %s differs", when, id);
			return false;
		}
	}
	return true;
}

static void test_spans(void)
{
	char *dir = dir_named("spans");
	struct st_db *db;
	struct err e;
	char id[32], text[128];
	size_t t9;
	int n = 120;

	ok(st_open(dir, NULL, &db, &e) == 0, "open: %s", e.msg);
	st_table(db, "rows", ix, &e);
	fill(db, n);
	for (int i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "r%03d", i);
		if (i % 7 == 3) {
			del1(db, "rows", id);
		} else if (i % 5 == 1) {
			snprintf(text, sizeof(text), "{\"Team\":\"t9\",\"n\":%d,\"again\":true}", i);
			put1(db, "rows", id, text);
		}
	}
	t9 = st_count(db, "rows", "Team", "t9");
	ok(check_rows(db, n, "written"), "rows read back as written (%llu reads)", (unsigned long long)READS(db));
	st_release(db);
	is_int(CACHED(db), 0, "st_release drops every cached row");
	st_close(db);

	ok(st_open(dir, NULL, &db, &e) == 0, "reopen: %s", e.msg);
	is_int(READS(db), 0, "replay reads no row for the index of the data");
	st_table(db, "rows", ix2, &e);
	is_int(READS(db), st_count(db, "rows", NULL, NULL), "two new indexes read each row once");
	ok(st_count(db, "rows", "s", "x") > 0 && st_count(db, "rows", "Team", "t0") > 0, "and both are built");
	is_int(st_count(db, "rows", "Team", "t9"), t9, "and counts as before");
	ok(check_rows(db, n, "reopened"), "rows read back after reopen");
	st_release(db);
	ok(st_compact(db, &e) == 0, "compact: %s", e.msg);
	ok(check_rows(db, n, "compacted"), "rows read back after compaction (spans moved to the new log)");
	put1(db, "rows", "r001", "{\"Team\":\"t9\",\"n\":1,\"again\":true}");
	put1(db, "rows", "zzz", "{\"Team\":\"t1\"}");
	ok(holds(db, "rows", "zzz", "{\"Team\":\"t1\"}") && check_rows(db, n, "after"),
	   "rows committed after the compaction land after it");
	st_close(db);
	ok(st_open(dir, NULL, &db, &e) == 0 && check_rows(db, n, "reopened again") &&
	   holds(db, "rows", "zzz", "{\"Team\":\"t1\"}"), "and all read back after another reopen");
	st_close(db);
	free(dir);
}

/* ---- lifetime of handed-out rows ---- */

struct turn {
	struct st_db *db;
	const struct json *a;
	bool a_ok_in_done;
	int dones;
};

static void read_a(struct ev *ev, void *arg)
{
	struct turn *t = arg;

	t->a = st_get(t->db, "rows", "a");
}

static void done_reads(int status, struct err *e, void *arg)
{
	struct turn *t = arg;

	t->dones++;
	/* a was read in this turn before the commit: still valid here (ASan). */
	t->a_ok_in_done = status == 0 && t->a && json_get_int(t->a, "n", -1) == 1 &&
			  st_get(t->db, "rows", "a") == t->a;
}

static void read_and_commit(struct ev *ev, void *arg)
{
	struct turn *t = arg;
	struct st_txn *txn;
	struct err e;

	t->a = st_get(t->db, "rows", "a");
	txn = st_begin(t->db);
	st_put(txn, "rows", "b", row("{\"n\":22}"));
	if (st_commit(txn, done_reads, t, &e) < 0)
		tap_diag("commit: %s", e.msg);
}

static void test_lifetime(void)
{
	char *dir = dir_named("lifetime");
	struct st_db *db;
	struct st_opts o = { 0 };
	struct ev *ev;
	struct err e;
	struct ev_timer tm = { 0 };
	struct turn t = { 0 };
	const struct json *a, *b;
	uint64_t reads;

	/* Without a loop: rows stay until they change, st_release or close. */
	ok(st_open(dir, NULL, &db, &e) == 0, "open: %s", e.msg);
	put1(db, "rows", "a", "{\"n\":1}");
	put1(db, "rows", "b", "{\"n\":2}");
	a = st_get(db, "rows", "a");
	b = st_get(db, "rows", "b");
	reads = READS(db);
	ok(a && st_get(db, "rows", "a") == a && READS(db) == reads, "a cached row is handed out again, not re-read");
	put1(db, "rows", "b", "{\"n\":3}");
	ok(json_get_int(a, "n", 0) == 1 && st_get(db, "rows", "a") == a,
	   "a commit of another row leaves a row pointer alone");
	is_int(json_get_int(st_get(db, "rows", "b"), "n", 0), 3, "the changed row reads its new value");
	(void)b;	/* b's old pointer died with that commit: not touched (ASan) */
	is_int(CACHED(db), 2, "two rows cached");
	st_release(db);
	is_int(CACHED(db), 0, "st_release frees them");
	ok(holds(db, "rows", "a", "{\"n\":1}"), "and the next st_get reads the row again");
	del1(db, "rows", "a");
	is_int(CACHED(db), 0, "deleting a cached row drops it");
	st_close(db);

	/* With a loop: until the end of the turn that read them. */
	ev = ev_new();
	o.ev = ev;
	ok(st_open(dir, &o, &db, &e) == 0, "open with a loop: %s", e.msg);
	t.db = db;
	put1(db, "rows", "a", "{\"n\":1}");
	ev_run_once(ev, 0);	/* the commit's flush */
	ev_timer_start(ev, &tm, 0, read_a, &t);
	ev_run_once(ev, 100);
	ok(t.a != NULL, "a timer callback reads a row");
	is_int(CACHED(db), 0, "the end of that turn frees it");
	t.a = NULL;
	ev_timer_start(ev, &tm, 0, read_and_commit, &t);
	ev_run_once(ev, 100);
	ok(t.dones == 1 && t.a_ok_in_done,
	   "a row read before a commit in the same turn is still valid in the commit's done_fn");
	is_int(CACHED(db), 0, "and is freed after the flush's done_fns ran");
	st_close(db);
	ev_run_once(ev, 0);
	ev_free(ev);
	free(dir);
}

/* ---- read failures ---- */

static bool fail_pread;
static ssize_t fake_pread(int fd, void *buf, size_t n, off_t off)
{
	if (fail_pread) {
		errno = EIO;
		return -1;
	}
	return pread(fd, buf, n, off);
}

static int count_rows(const char *id, const struct json *r, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

static void test_read_failure(void)
{
	char *dir = dir_named("readfail");
	struct st_sys sys = *st_sys_default();
	struct st_opts o = { 0 };
	struct st_db *db;
	struct st_txn *txn;
	struct err e;
	int n = 0;

	sys.pread = fake_pread;
	o.sys = &sys;
	ok(st_open(dir, &o, &db, &e) == 0, "open: %s", e.msg);
	st_table(db, "rows", ix, &e);
	put1(db, "rows", "a", "{\"Team\":\"t\",\"n\":1}");
	put1(db, "rows", "b", "{\"Team\":\"t\",\"n\":2}");
	fail_pread = true;
	is_int(st_count(db, "rows", "Team", "t"), 2, "st_count on an index reads no row (works while reads fail)");
	ok(st_get(db, "rows", "a") == NULL, "st_get of a row that cannot be read: NULL");
	ok(st_failed(db), "and the store refuses commits from then on");
	txn = st_begin(db);
	st_put(txn, "rows", "c", row("{}"));
	ok(st_commit(txn, NULL, NULL, &e) < 0 && strstr(e.msg, "read row a"), "a commit is refused: %s", e.msg);
	ok(st_scan(db, "rows", NULL, NULL, NULL, count_rows, &n, &e) < 0 && n == 0 &&
	   strstr(e.msg, "read row"), "st_scan fails with the reason: %s", e.msg);
	fail_pread = false;
	ok(holds(db, "rows", "b", "{\"Team\":\"t\",\"n\":2}"), "reads work again once pread does");
	st_close(db);
	ok(st_open(dir, NULL, &db, &e) == 0 && holds(db, "rows", "a", "{\"Team\":\"t\",\"n\":1}") && !st_failed(db),
	   "a restart reads the log again");
	st_close(db);
	free(dir);
}

/* ---- indexes without reading rows ---- */

static int stop_first(const char *id, const struct json *r, void *arg)
{
	return 1;
}

static void test_index_no_reads(void)
{
	char *dir = dir_named("noreads");
	struct st_db *db;
	struct err e;
	struct st_range lim = { NULL, 2, false };
	uint64_t before;
	int n = 0;

	ok(st_open(dir, NULL, &db, &e) == 0, "open: %s", e.msg);
	st_table(db, "rows", ix, &e);
	fill(db, 60);
	st_release(db);
	before = READS(db);
	is_int(st_count(db, "rows", "Team", "t1"), 20, "count by index");
	is_int(st_count(db, "rows", NULL, NULL), 60, "count of a table");
	is_int(READS(db), before, "neither reads a row");
	ok(st_scan(db, "rows", "Team", "t2", &lim, count_rows, &n, &e) == 0 && n == 2,
	   "an index scan with a limit visits 2 rows");
	is_int(READS(db), before + 2, "and reads just those 2");
	ok(st_scan(db, "rows", "Team", "t0", NULL, stop_first, NULL, &e) == 0, "a scan that stops at once");
	is_int(READS(db), before + 3, "reads one row");
	ok(st_scan(db, "rows", "Team", "nobody", NULL, count_rows, &n, &e) == 0 && READS(db) == before + 3,
	   "a scan of an empty index entry reads nothing");
	st_close(db);
	free(dir);
}

/* ---- records written by hand ---- */

static void write_log(const char *dir, const char *const payloads[])
{
	struct buf b = BUF_INIT;
	unsigned char h[ST_HEADER_BYTES];
	int fd;

	stlog_header(h);
	buf_add(&b, (char *)h, sizeof(h));
	for (size_t k = 0; payloads[k]; k++) {
		size_t n = strlen(payloads[k]);
		unsigned char rh[ST_RECORD_HEAD_BYTES];
		stlog_record_head(rh, payloads[k], n);
		buf_add(&b, (char *)rh, sizeof(rh));
		buf_add(&b, payloads[k], n);
	}
	mkdir(dir, 0700);
	{
		struct buf p = BUF_INIT;
		buf_addf(&p, "%s/log", dir);
		fd = open(p.data, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || write(fd, b.data, b.len) != (ssize_t)b.len)
			exit(2);
		close(fd);
		buf_release(&p);
	}
	buf_release(&b);
}

static void test_hand_written(void)
{
	static const char *const payloads[] = {
		"{\"ops\":[{\"put\":\"t\",\"id\":\"a\",\"row\":{\"x\":1}}]}",
		/* keys in another order, whitespace everywhere, an extra key first */
		" { \"note\" : [1,{\"ops\":2}] ,\n\"ops\" :\t[ { \"row\" : { \"y\" : \"}\\\"]\" } , \"id\":\"b\", \"put\":\"t\" } ,"
		" {\"id\":\"c\",\"row\":{},\"put\":\"t\",\"extra\":{\"row\":{\"no\":1}}} ] , \"after\": null } ",
		/* an escaped key and an escaped id */
		"{\"op\\u0073\":[{\"put\":\"t\",\"i\\u0064\":\"d\\u00e9\",\"row\":{\"z\":[true,false,null,-1.5e3]}}]}",
		/* a delete between puts */
		"{\"ops\":[{\"del\":\"t\",\"id\":\"a\"},{\"put\":\"t\",\"id\":\"e\",\"row\":{\"k\":\"v\"}}]}",
		NULL,
	};
	char *dir = dir_named("hand");
	struct st_db *db;
	struct err e;

	write_log(dir, payloads);
	ok(st_open(dir, NULL, &db, &e) == 0, "a hand-written log opens: %s", e.msg);
	ok(holds(db, "t", "a", NULL), "a: deleted");
	ok(holds(db, "t", "b", "{\"y\":\"}\\\"]\"}"), "b: row found before its id, past an extra key");
	ok(holds(db, "t", "c", "{}"), "c: empty row, a nested \"row\" in another key ignored");
	ok(holds(db, "t", "d\xc3\xa9", "{\"z\":[true,false,null,-1500]}"), "d: escaped key and id");
	ok(holds(db, "t", "e", "{\"k\":\"v\"}"), "e: after a delete in the same record");
	st_release(db);
	ok(st_compact(db, &e) == 0 && holds(db, "t", "b", "{\"y\":\"}\\\"]\"}") && holds(db, "t", "c", "{}"),
	   "compaction copies their bytes: %s", e.msg);
	st_close(db);
	ok(st_open(dir, NULL, &db, &e) == 0 && st_count(db, "t", NULL, NULL) == 4 && holds(db, "t", "e", "{\"k\":\"v\"}"),
	   "and the compacted log reopens");
	st_close(db);
	free(dir);
}

/* An index declared after replay is built from the rows' text without
 * parsing it, except where an escape hides a key or a value: both ways
 * must find the same values. Ids here do not follow the log's order and a
 * row is rewritten later, so the build's reads go back and forth. */
static void test_index_build_scan(void)
{
	static const char *const payloads[] = {
		"{\"ops\":[{\"put\":\"t\",\"id\":\"m\",\"row\":{\"Team\":\"t1\",\"n\":{\"Team\":\"no\"}}},"
		"{\"put\":\"t\",\"id\":\"c\",\"row\":{\"x\":[1,\"Team\"],\"Team\":\"t2\"}}]}",
		/* an escaped value, an escaped key, a non-string value, no field */
		"{\"ops\":[{\"put\":\"t\",\"id\":\"a\",\"row\":{\"Team\":\"t\\u0031\"}},"
		"{\"put\":\"t\",\"id\":\"z\",\"row\":{\"T\\u0065am\":\"t2\"}},"
		"{\"put\":\"t\",\"id\":\"b\",\"row\":{\"Team\":7}},"
		"{\"put\":\"t\",\"id\":\"y\",\"row\":{ }}]}",
		/* m moves to t2, after the rows around it */
		"{\"ops\":[{\"put\":\"t\",\"id\":\"m\",\"row\":{ \"Team\" : \"t2\" }}]}",
		NULL,
	};
	char *dir = dir_named("ixscan");
	struct st_db *db;
	struct err e;

	write_log(dir, payloads);
	ok(st_open(dir, NULL, &db, &e) == 0 && st_table(db, "t", ix, &e) == 0, "open, then index: %s", e.msg);
	is_int(st_count(db, "t", "Team", "t1"), 1, "t1: the escaped value (a)");
	is_int(st_count(db, "t", "Team", "t2"), 3, "t2: c, z (escaped key) and m (rewritten)");
	is_int(st_count(db, "t", "Team", "no"), 0, "a nested Team is not the row's");
	is_int(st_count(db, "t", NULL, NULL), 6, "six rows");
	is_int(READS(db), 6, "each row read once");
	st_close(db);
	free(dir);
}

/* A hand-written log replaces the store's: the mark of the one before goes. */
static void no_mark(const char *dir)
{
	struct buf p = BUF_INIT;

	buf_addf(&p, "%s/mark", dir);
	unlink(p.data);
	buf_release(&p);
}

/* Records in the store's own compact form are replayed without a DOM;
 * what that walk does not take (an escape, a bad name or id, a row nested
 * too deep, trailing bytes) must end as the DOM's way would. */
static void test_compact_records(void)
{
	static const char *const good[] = {
		"{\"ops\":[{\"put\":\"t\",\"id\":\"a\",\"row\":{\"k\":\"v\",\"n\":[1,{\"m\":null}]}},"
		"{\"put\":\"t\",\"id\":\"b\",\"row\":{}},{\"put\":\"u\",\"id\":\"c\",\"row\":{\"x\":1}}]}",
		"{\"ops\":[{\"del\":\"t\",\"id\":\"a\"},{\"del\":\"nosuch\",\"id\":\"z\"}]}",
		/* an escaped id in the compact form: the DOM decodes it */
		"{\"ops\":[{\"put\":\"t\",\"id\":\"d\\u00e9\",\"row\":{\"k\":\"\\\"\"}}]}",
		"{\"ops\":[]}",
		/* b rewritten: the later text wins */
		"{\"ops\":[{\"put\":\"t\",\"id\":\"b\",\"row\":{\"k\":2}}]}",
		NULL,
	};
	static const char *const bad[] = {
		"{\"ops\":[{\"put\":\"t\",\"id\":\"\",\"row\":{}}]}",
		"{\"ops\":[{\"put\":\"t" "0123456789012345678901234567890123456789012345678901234567890123\",\"id\":\"a\",\"row\":{}}]}",
		"{\"ops\":[{\"put\":\"t\",\"id\":\"a\",\"row\":[]}]}",
		"{\"ops\":[{\"put\":\"t\",\"id\":\"a\",\"row\":{\"k\":\"\x01\"}}]}",
		"{\"ops\":[{\"put\":\"t\",\"id\":\"a\",\"row\":{}}]}x",
		"{\"ops\":[{\"put\":\"t\",\"id\":\"a\"}]}",
		NULL,
	};
	char *dir = dir_named("compact-form");
	struct st_db *db;
	struct err e;
	struct buf deep = BUF_INIT;

	write_log(dir, good);
	ok(st_open(dir, NULL, &db, &e) == 0, "a log in the compact form opens: %s", e.msg);
	ok(holds(db, "t", "a", NULL), "a: put, then deleted");
	ok(holds(db, "t", "b", "{\"k\":2}"), "b: its second text");
	ok(holds(db, "u", "c", "{\"x\":1}"), "c: in a second table");
	ok(holds(db, "t", "d\xc3\xa9", "{\"k\":\"\\\"\"}"), "an escaped id");
	is_int(st_count(db, "t", NULL, NULL), 2, "t holds b and d");
	st_close(db);
	for (size_t k = 0; bad[k]; k++) {
		const char *one[] = { good[0], bad[k], NULL };
		write_log(dir, one);
		no_mark(dir);
		ok(st_open(dir, NULL, &db, &e) == -1 && strstr(e.msg, "undecodable transaction"),
		   "refused: %s: %s", bad[k], e.msg);
	}
	/* A row one level deeper than a put accepts: refused, not stepped over. */
	buf_adds(&deep, "{\"ops\":[{\"put\":\"t\",\"id\":\"a\",\"row\":");
	for (int d = 0; d < ST_JSON_DEPTH_MAX + 6; d++)
		buf_adds(&deep, "{\"k\":");
	buf_adds(&deep, "1");
	for (int d = 0; d < ST_JSON_DEPTH_MAX + 6; d++)
		buf_adds(&deep, "}");
	buf_adds(&deep, "}]}");
	{
		const char *one[] = { deep.data, NULL };
		write_log(dir, one);
		no_mark(dir);
		ok(st_open(dir, NULL, &db, &e) == -1 && strstr(e.msg, "undecodable transaction"),
		   "a row nested too deep is refused: %s", e.msg);
	}
	buf_release(&deep);
	free(dir);
}

int main(void)
{
	log_set_level(LOG_ERROR);
	test_spans();
	test_lifetime();
	test_read_failure();
	test_index_no_reads();
	test_hand_written();
	test_index_build_scan();
	test_compact_records();
	return tap_done();
}
