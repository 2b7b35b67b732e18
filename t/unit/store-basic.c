/* Unit tests: store tables, indexes, scans, transactions, replay, group commit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/ev.h"
#include "base/log.h"
#include "json/json.h"
#include "store/store.h"
#include "tap.h"
#include "store-util.h"

static const char *const env_ix[] = { "TeamID", "ProjectID", NULL };

/* A scan's ids joined with commas. */
struct collect {
	struct buf ids;
	int stop_after;
};

static int collect_fn(const char *id, const struct json *r, void *arg)
{
	struct collect *c = arg;

	if (c->ids.len)
		buf_addch(&c->ids, ',');
	buf_adds(&c->ids, id);
	return c->stop_after && --c->stop_after == 0;
}

static char *scan_ids(struct st_db *db, const char *table, const char *field, const char *value,
		      const struct st_range *range)
{
	struct collect c = { BUF_INIT, 0 };
	struct err e;

	if (st_scan(db, table, field, value, range, collect_fn, &c, &e) < 0) {
		buf_release(&c.ids);
		return xstrdup(e.msg);
	}
	return buf_detach(&c.ids, NULL);
}

static void is_scan(struct st_db *db, const char *table, const char *field, const char *value,
		    const struct st_range *range, const char *want, const char *name)
{
	char *got = scan_ids(db, table, field, value, range);
	is_str(got, want, name);
	free(got);
}

static void fill_envs(struct st_db *db)
{
	put1(db, "environments", "e05", "{\"ID\":\"e05\",\"TeamID\":\"t1\",\"ProjectID\":\"p1\"}");
	put1(db, "environments", "e01", "{\"ID\":\"e01\",\"TeamID\":\"t1\",\"ProjectID\":\"p2\"}");
	put1(db, "environments", "e03", "{\"ID\":\"e03\",\"TeamID\":\"t2\",\"ProjectID\":\"p1\"}");
	put1(db, "environments", "e02", "{\"ID\":\"e02\",\"TeamID\":\"t1\"}");
	put1(db, "environments", "e04", "{\"ID\":\"e04\",\"TeamID\":7,\"ProjectID\":\"p1\"}");
}

static void check_envs(struct st_db *db, const char *when)
{
	char name[128];

#define NAME(s) (snprintf(name, sizeof(name), "%s: %s", when, s), name)
	is_int(st_count(db, "environments", NULL, NULL), 5, NAME("count all"));
	is_scan(db, "environments", NULL, NULL, NULL, "e01,e02,e03,e04,e05", NAME("all rows in id order"));
	is_scan(db, "environments", "TeamID", "t1", NULL, "e01,e02,e05", NAME("index TeamID=t1 in id order"));
	is_scan(db, "environments", "TeamID", "t2", NULL, "e03", NAME("index TeamID=t2"));
	is_scan(db, "environments", "ProjectID", "p1", NULL, "e03,e04,e05", NAME("index ProjectID=p1"));
	is_scan(db, "environments", "ProjectID", "p", NULL, "", NAME("no prefix matches in an exact index"));
	is_int(st_count(db, "environments", "TeamID", "t1"), 3, NAME("count TeamID=t1"));
	is_int(st_count(db, "environments", "TeamID", "7"), 0, NAME("non-string value is not indexed"));
	is_int(st_count(db, "environments", "ProjectID", "p2"), 1, NAME("count ProjectID=p2"));
#undef NAME
}

static void test_tables_and_indexes(void)
{
	char *dir = dir_named("basic");
	struct st_db *db;
	struct err e;
	const struct json *r;
	struct st_range rg;
	struct st_stats s;

	ok(st_open(dir, NULL, &db, &e) == 0, "open a new store (creates the directory)");
	ok(st_table(db, "environments", env_ix, &e) == 0, "declare a table with two indexes");
	fill_envs(db);
	check_envs(db, "fresh");

	rg = (struct st_range){ "e02", 0, false };
	is_scan(db, "environments", NULL, NULL, &rg, "e03,e04,e05", "after cursor");
	rg = (struct st_range){ "e02", 2, false };
	is_scan(db, "environments", NULL, NULL, &rg, "e03,e04", "after cursor with limit");
	rg = (struct st_range){ "e025", 1, false };
	is_scan(db, "environments", NULL, NULL, &rg, "e03", "after an id that is not there");
	rg = (struct st_range){ NULL, 0, true };
	is_scan(db, "environments", NULL, NULL, &rg, "e05,e04,e03,e02,e01", "reverse scan");
	rg = (struct st_range){ "e04", 2, true };
	is_scan(db, "environments", NULL, NULL, &rg, "e03,e02", "reverse scan before a cursor, limited");
	rg = (struct st_range){ NULL, 0, true };
	is_scan(db, "environments", "TeamID", "t1", &rg, "e05,e02,e01", "reverse index scan");
	rg = (struct st_range){ "e02", 0, false };
	is_scan(db, "environments", "TeamID", "t1", &rg, "e05", "index scan after a cursor");
	rg = (struct st_range){ "e02", 0, true };
	is_scan(db, "environments", "TeamID", "t1", &rg, "e01", "reverse index scan before a cursor");
	is_scan(db, "environments", "Name", "x", NULL, "store: table environments has no index on Name",
		"scanning an unindexed field is an error");
	is_scan(db, "nosuch", NULL, NULL, NULL, "", "a missing table scans empty");
	{
		struct collect c = { BUF_INIT, 2 };
		st_scan(db, "environments", NULL, NULL, NULL, collect_fn, &c, &e);
		is_str(c.ids.data, "e01,e02", "a callback returning non-zero stops the scan");
		buf_release(&c.ids);
	}

	r = st_get(db, "environments", "e03");
	is_str(json_get_str(r, "TeamID"), "t2", "st_get returns the row");
	ok(st_get(db, "environments", "e99") == NULL, "st_get of a missing id is NULL");
	ok(st_get(db, "nosuch", "e01") == NULL, "st_get of a missing table is NULL");

	/* Update moves a row between index entries; removing a field drops it. */
	put1(db, "environments", "e03", "{\"ID\":\"e03\",\"TeamID\":\"t1\",\"ProjectID\":\"p9\"}");
	is_scan(db, "environments", "TeamID", "t1", NULL, "e01,e02,e03,e05", "update moved e03 into t1");
	is_scan(db, "environments", "TeamID", "t2", NULL, "", "and out of t2");
	is_scan(db, "environments", "ProjectID", "p1", NULL, "e04,e05", "and out of p1");
	is_scan(db, "environments", "ProjectID", "p9", NULL, "e03", "into p9");
	put1(db, "environments", "e05", "{\"ID\":\"e05\",\"TeamID\":\"t1\"}");
	is_scan(db, "environments", "ProjectID", "p1", NULL, "e04", "an update without the field leaves the index");
	put1(db, "environments", "e05", "{\"ID\":\"e05\",\"TeamID\":\"t1\",\"ProjectID\":\"p1\"}");
	ok(del1(db, "environments", "e01") == 0, "delete");
	ok(st_get(db, "environments", "e01") == NULL, "deleted row is gone");
	is_scan(db, "environments", "TeamID", "t1", NULL, "e02,e03,e05", "deleted row left the index");
	ok(del1(db, "environments", "e01") == 0, "deleting an absent row is not an error");
	ok(del1(db, "nosuch", "x") == 0, "deleting from a missing table is not an error");

	/* A multi-op transaction, including put then delete of the same id. */
	{
		struct st_txn *t = st_begin(db);
		st_put(t, "teams", "t1", row("{\"ID\":\"t1\",\"Name\":\"a\"}"));
		st_put(t, "teams", "t2", row("{\"ID\":\"t2\",\"Name\":\"b\"}"));
		st_put(t, "teams", "t3", row("{\"ID\":\"t3\"}"));
		st_delete(t, "teams", "t3");
		st_put(t, "teams", "t1", row("{\"ID\":\"t1\",\"Name\":\"c\"}"));
		ok(st_get(db, "teams", "t1") == NULL, "a transaction's writes are not visible before commit");
		ok(st_commit(t, NULL, NULL, &e) == 0, "commit a transaction of five ops");
		is_scan(db, "teams", NULL, NULL, NULL, "t1,t2", "ops applied in order");
		is_str(json_get_str(st_get(db, "teams", "t1"), "Name"), "c", "the last put wins");
	}
	{
		struct st_txn *t = st_begin(db);
		st_put(t, "teams", "t4", row("{}"));
		st_abort(t);
		ok(st_get(db, "teams", "t4") == NULL, "an aborted transaction leaves nothing");
	}
	st_stats(db, &s);
	is_int(s.live_rows, 6, "stats: live rows");
	st_close(db);

	/* Replay rebuilds the same rows and indexes. */
	ok(st_open(dir, NULL, &db, &e) == 0, "reopen");
	ok(st_table(db, "environments", env_ix, &e) == 0, "declare indexes after replay (built from rows)");
	is_scan(db, "environments", NULL, NULL, NULL, "e02,e03,e04,e05", "replayed rows");
	is_scan(db, "environments", "TeamID", "t1", NULL, "e02,e03,e05", "replayed index TeamID");
	is_scan(db, "environments", "ProjectID", "p1", NULL, "e04,e05", "replayed index ProjectID");
	is_scan(db, "environments", "ProjectID", "p9", NULL, "e03", "replayed index ProjectID=p9");
	is_scan(db, "teams", NULL, NULL, NULL, "t1,t2", "replayed multi-op transaction");
	is_str(json_get_str(st_get(db, "teams", "t1"), "Name"), "c", "replayed last put");

	/* Compaction keeps everything. */
	ok(st_compact(db, &e) == 0, "compact");
	st_stats(db, &s);
	is_int(s.log_ops, s.live_rows, "after compaction the log holds only live rows");
	is_scan(db, "environments", "TeamID", "t1", NULL, "e02,e03,e05", "index intact after compaction");
	st_close(db);
	ok(st_open(dir, NULL, &db, &e) == 0, "reopen after compaction");
	st_table(db, "environments", env_ix, &e);
	is_scan(db, "environments", "TeamID", "t1", NULL, "e02,e03,e05", "index rebuilt from the compacted log");
	is_scan(db, "teams", NULL, NULL, NULL, "t1,t2", "rows of every table survive compaction");
	st_close(db);

	/* An index declared before the rows arrive and one declared after
	 * agree, whichever order: same answers on the same data. */
	free(dir);
	dir = dir_named("basic2");
	ok(st_open(dir, NULL, &db, &e) == 0, "open a second store");
	fill_envs(db);
	ok(st_table(db, "environments", env_ix, &e) == 0, "declare indexes after the rows");
	check_envs(db, "index built late");
	st_close(db);
	free(dir);
}

static void test_refusals(void)
{
	char *dir = dir_named("refuse");
	struct st_db *db, *db2;
	struct err e;
	struct st_txn *t;
	char longid[ST_ID_MAX + 2];
	static const char *const too_many[] = { "a", "b", "c", "d", "e", "f", "g", "h", "i", NULL };
	struct json *deep, *cur;

	ok(st_open(dir, NULL, &db, &e) == 0, "open");
	ok(st_open(dir, NULL, &db2, &e) == -1 && strstr(e.msg, "in use by another process"),
	   "a second open of the same store is refused: %s", e.msg);

	t = st_begin(db);
	ok(st_put(t, "a", "x", row("[1]")) == -1, "a non-object row is refused at st_put");
	ok(st_put(t, "a", "y", row("{}")) == -1, "a poisoned transaction refuses more ops");
	ok(st_commit(t, NULL, NULL, &e) == -1 && strstr(e.msg, "must be a JSON object"),
	   "and st_commit reports the first error: %s", e.msg);
	ok(st_get(db, "a", "y") == NULL, "nothing of it was applied");

	memset(longid, 'x', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	t = st_begin(db);
	ok(st_put(t, "a", longid, row("{}")) == -1, "an id longer than ST_ID_MAX is refused");
	st_abort(t);
	t = st_begin(db);
	ok(st_put(t, "a", "", row("{}")) == -1, "an empty id is refused");
	st_abort(t);
	t = st_begin(db);
	ok(st_put(t, "a", "bad\xff", row("{}")) == -1, "an id that is not UTF-8 is refused");
	st_abort(t);
	t = st_begin(db);
	ok(st_put(t, "", "x", row("{}")) == -1, "an empty table name is refused");
	st_abort(t);
	t = st_begin(db);
	{
		struct json *r = json_new_object();
		json_object_set(r, "s", json_new_strn("\xc3\x28", 2));
		ok(st_put(t, "a", "x", r) == -1, "a row holding invalid UTF-8 is refused (it could not round-trip)");
	}
	st_abort(t);
	t = st_begin(db);
	{
		struct json *r = json_new_object();
		json_object_set(r, "d", json_new_double(1.0 / 0.0));
		ok(st_put(t, "a", "x", r) == -1, "a row holding infinity is refused");
	}
	st_abort(t);

	/* Nesting: exactly the limit round-trips through replay; one more is refused. */
	deep = json_new_object();
	cur = deep;
	for (int i = 1; i < ST_JSON_DEPTH_MAX; i++) {
		struct json *n = json_new_object();
		json_object_set(cur, "k", n);
		cur = n;
	}
	t = st_begin(db);
	ok(st_put(t, "a", "deep", json_dup(deep)) == 0, "a row nested ST_JSON_DEPTH_MAX deep is accepted");
	ok(st_commit(t, NULL, NULL, &e) == 0, "and committed");
	json_object_set(cur, "k", json_new_array());
	t = st_begin(db);
	ok(st_put(t, "a", "deeper", deep) == -1, "one level deeper is refused");
	st_abort(t);

	ok(st_table(db, "a", too_many, &e) == -1 && strstr(e.msg, "more than"), "too many indexes: %s", e.msg);

	/* The row size limit. */
	{
		struct json *big = json_new_object();
		char *s = xmalloc(ST_RECORD_MAX + 1);
		memset(s, 'a', ST_RECORD_MAX);
		s[ST_RECORD_MAX] = '\0';
		json_object_set(big, "s", json_new_str(s));
		free(s);
		t = st_begin(db);
		st_put(t, "a", "big", big);
		ok(st_commit(t, NULL, NULL, &e) == -1 && strstr(e.msg, "larger than"),
		   "a transaction over ST_RECORD_MAX is refused: %s", e.msg);
		ok(st_get(db, "a", "big") == NULL, "and not applied");
		ok(put1(db, "a", "small", "{\"ok\":true}") == 0, "the store still commits after refusing one");
	}
	st_close(db);
	ok(st_open(dir, NULL, &db, &e) == 0, "reopen: %s", db ? "ok" : e.msg);
	ok(st_get(db, "a", "deep") != NULL, "the deepest allowed row replays");
	ok(st_get(db, "a", "small") != NULL && st_get(db, "a", "big") == NULL, "the refused transaction is not in the log");
	st_close(db);
	free(dir);
}

/* ---- group commit ---- */

struct acks {
	int ok, failed;
	int order[64];
	int n;
	struct st_db *db;
	bool visible_before_ack;
};

static struct acks acks;

static void on_done(int status, struct err *e, void *arg)
{
	int i = (int)(intptr_t)arg;

	if (status == 0)
		acks.ok++;
	else
		acks.failed++;
	if (acks.n < 64)
		acks.order[acks.n++] = i;
}

static void test_group_commit(void)
{
	char *dir = dir_named("group");
	struct ev *ev = ev_new();
	struct st_opts o = { .ev = ev };
	struct st_db *db;
	struct err e;
	struct st_stats s0, s1;

	ok(st_open(dir, &o, &db, &e) == 0, "open with an event loop");
	st_stats(db, &s0);
	memset(&acks, 0, sizeof(acks));
	for (int i = 0; i < 10; i++) {
		char id[16];
		struct st_txn *t = st_begin(db);
		snprintf(id, sizeof(id), "r%02d", i);
		st_put(t, "a", id, row("{\"v\":1}"));
		ok(st_commit(t, on_done, (void *)(intptr_t)i, &e) == 0, "commit %d queued", i);
	}
	is_int(acks.ok, 0, "no done_fn before the end of the turn");
	ok(st_get(db, "a", "r05") != NULL, "committed rows are visible before the fsync (documented)");
	ev_run_once(ev, 0);
	is_int(acks.ok, 10, "all ten done_fns called at the end of the turn");
	{
		bool in_order = true;
		for (int i = 0; i < 10; i++)
			in_order = in_order && acks.order[i] == i;
		ok(in_order, "done_fns called in commit order");
	}
	st_stats(db, &s1);
	is_int(s1.fsyncs - s0.fsyncs, 1, "one fsync covered the ten commits");

	/* An empty transaction still gets its done_fn. */
	memset(&acks, 0, sizeof(acks));
	ok(st_commit(st_begin(db), on_done, NULL, &e) == 0, "empty transaction accepted");
	ev_run_once(ev, 0);
	is_int(acks.ok, 1, "empty transaction's done_fn called");

	/* st_flush lands pending commits now, before the end of the turn. */
	memset(&acks, 0, sizeof(acks));
	{
		struct st_txn *t = st_begin(db);
		st_put(t, "a", "flushed", row("{}"));
		st_commit(t, on_done, NULL, &e);
	}
	st_stats(db, &s0);
	ok(st_flush(db) == 0 && acks.ok == 1, "st_flush calls the pending done_fn at once");
	st_stats(db, &s1);
	is_int(s1.fsyncs - s0.fsyncs, 1, "  after one fsync");
	ev_run_once(ev, 0);
	is_int(acks.ok, 1, "  and the end of the turn does not call it again");

	/* st_close flushes what is pending. */
	memset(&acks, 0, sizeof(acks));
	{
		struct st_txn *t = st_begin(db);
		st_put(t, "a", "last", row("{}"));
		st_commit(t, on_done, NULL, &e);
	}
	st_close(db);
	is_int(acks.ok, 1, "st_close fsyncs and acknowledges pending commits");
	ev_run_once(ev, 0);	/* lets the orphaned flush free its token */
	ok(st_open(dir, NULL, &db, &e) == 0 && st_count(db, "a", NULL, NULL) == 12, "all rows after reopen (ten, flushed, last)");
	st_close(db);
	ev_free(ev);
	free(dir);
}

/* ---- a randomized model check of indexes ---- */

#define MIDS 300
#define MVALS 7

/* Field values: short ones, ones sharing a long prefix (past the 8 bytes the
 * bulk build compares inline), one with a NUL-free prefix of another. */
static const char *const mvals[MVALS] = {
	"a", "ab", "b", "project-0000000001", "project-0000000002", "project-00000000012", "",
};

struct model {
	int f[MIDS];	/* value index of field F, -1 absent, -2 a number, -3 "ab\0" */
	bool present[MIDS];
};

static bool model_matches(struct st_db *db, const struct model *m, const char *when)
{
	bool good = true;

	for (int v = 0; v < MVALS && good; v++) {
		struct buf want = BUF_INIT;
		char *got;
		for (int i = 0; i < MIDS; i++) {
			if (!m->present[i] || m->f[i] != v)
				continue;
			if (want.len)
				buf_addch(&want, ',');
			buf_addf(&want, "id%04d", i);
		}
		got = scan_ids(db, "m", "F", mvals[v], NULL);
		if (strcmp(got, want.data) != 0) {
			tap_diag("%s: F=\"%s\": got %s, want %s", when, mvals[v], got, want.data);
			good = false;
		}
		free(got);
		buf_release(&want);
	}
	return good;
}

static void test_random_model(void)
{
	char *dir = dir_named("model");
	static const char *const ix[] = { "F", NULL };
	struct model m;
	struct st_db *db;
	struct err e;
	bool good = true;
	size_t live = 0;

	memset(&m, 0, sizeof(m));
	srand(7);
	st_open(dir, NULL, &db, &e);
	st_table(db, "m", ix, &e);
	for (int round = 0; round < 40; round++) {
		struct st_txn *t = st_begin(db);
		for (int k = 0; k < 50; k++) {
			int i = rand() % MIDS, what = rand() % 10;
			char id[16];
			snprintf(id, sizeof(id), "id%04d", i);
			if (what < 2) {
				st_delete(t, "m", id);
				m.present[i] = false;
			} else {
				struct json *r = json_new_object();
				int v = rand() % (MVALS + 3) - 3;
				if (v >= 0)
					json_object_set_str(r, "F", mvals[v]);
				else if (v == -3)	/* "ab" plus a NUL: sorts right after "ab" */
					json_object_set(r, "F", json_new_strn("ab\0", 3));
				else if (v == -2)
					json_object_set_int(r, "F", 5);
				json_object_set_int(r, "k", k);
				st_put(t, "m", id, r);
				m.present[i] = true;
				m.f[i] = v;
			}
		}
		st_commit(t, NULL, NULL, &e);
		good = good && model_matches(db, &m, "live");
	}
	ok(good, "2000 random puts, updates and deletes: every index entry matches a model");
	for (int i = 0; i < MIDS; i++)
		live += m.present[i];
	is_int(st_count(db, "m", NULL, NULL), live, "row count matches the model");
	st_close(db);
	st_open(dir, NULL, &db, &e);
	st_table(db, "m", ix, &e);
	ok(model_matches(db, &m, "replayed"), "replay and a bulk-built index match the model");
	st_compact(db, &e);
	st_close(db);
	st_open(dir, NULL, &db, &e);
	st_table(db, "m", ix, &e);
	ok(model_matches(db, &m, "compacted"), "after compaction too");
	/* The bulk-built tree must take later updates like any other. */
	{
		struct st_txn *t = st_begin(db);
		for (int i = 0; i < MIDS; i += 3) {
			char id[16];
			struct json *r = json_new_object();
			snprintf(id, sizeof(id), "id%04d", i);
			json_object_set_str(r, "F", mvals[i % MVALS]);
			st_put(t, "m", id, r);
			m.present[i] = true;
			m.f[i] = i % MVALS;
		}
		st_commit(t, NULL, NULL, &e);
	}
	ok(model_matches(db, &m, "updated after bulk build"), "updates after a bulk build match the model");
	st_close(db);
	free(dir);
}

static void close_in_done(int status, struct err *e, void *arg)
{
	acks.ok++;
	st_close(arg);
}

/* A done_fn that closes the store (a shutdown path): no use after free. */
static void test_close_from_done(void)
{
	char *dir = dir_named("closedone");
	struct ev *ev = ev_new();
	struct st_opts o = { .ev = ev };
	struct st_db *db;
	struct err e;
	struct st_txn *t;

	memset(&acks, 0, sizeof(acks));
	ok(st_open(dir, &o, &db, &e) == 0, "open");
	t = st_begin(db);
	st_put(t, "a", "x", row("{}"));
	st_commit(t, close_in_done, db, &e);
	t = st_begin(db);
	st_put(t, "a", "y", row("{}"));
	st_commit(t, on_done, NULL, &e);
	ev_run_once(ev, 0);
	ev_run_once(ev, 0);
	is_int(acks.ok, 2, "both done_fns ran, the first of them closing the store");
	ok(st_open(dir, NULL, &db, &e) == 0 && st_count(db, "a", NULL, NULL) == 2, "both rows are there");
	t = st_begin(db);
	st_put(t, "a", "z", row("{}"));
	ok(st_commit(t, close_in_done, db, &e) == 0, "without a loop, a done_fn may close the store too");
	ev_free(ev);
	free(dir);
}

/* Automatic compaction once dead records outweigh live rows past ST_COMPACT_MIN_BYTES. */
static void test_auto_compaction(void)
{
	for (int with_loop = 0; with_loop < 2; with_loop++) {
		char *dir = dir_named(with_loop ? "autoc-ev" : "autoc");
		struct ev *ev = with_loop ? ev_new() : NULL;
		struct st_opts o = { .ev = ev };
		struct st_db *db;
		struct err e;
		struct st_stats s;
		char *big = xmalloc(65537);
		int commits = 0;

		memset(big, 'x', 65536);
		big[65536] = '\0';
		st_open(dir, &o, &db, &e);
		do {
			struct st_txn *t = st_begin(db);
			struct json *r = json_new_object();
			char id[16];
			snprintf(id, sizeof(id), "r%d", commits % 4);
			json_object_set_str(r, "big", big);
			st_put(t, "a", id, r);
			st_commit(t, NULL, NULL, &e);
			if (ev)
				ev_run_once(ev, 0);
			st_stats(db, &s);
		} while (++commits < 200 && s.compactions == 0);
		ok(s.compactions == 1, "%s: rewriting 4 rows of 64 KiB compacts automatically (after %d commits)",
		   with_loop ? "with a loop" : "without a loop", commits);
		ok(s.log_bytes < ST_COMPACT_MIN_BYTES / 2, "the log shrank to %lld bytes", (long long)s.log_bytes);
		is_int(s.log_ops, 4, "and holds the 4 live rows");
		st_close(db);
		ok(st_open(dir, NULL, &db, &e) == 0 && st_count(db, "a", NULL, NULL) == 4, "reopens with the 4 rows");
		st_close(db);
		if (ev) {
			ev_run_once(ev, 0);
			ev_free(ev);
		}
		free(big);
		free(dir);
	}
}

int main(void)
{
	log_set_level(LOG_ERROR);
	test_tables_and_indexes();
	test_random_model();
	test_refusals();
	test_group_commit();
	test_close_from_done();
	test_auto_compaction();
	return tap_done();
}
