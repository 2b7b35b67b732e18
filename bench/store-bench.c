/*
 * store-bench: figures for the store (bench/store.sh runs it). Asserts nothing.
 *
 *   store-bench commit DIR [N]     commits/s: batched (many commits per loop
 *                                  turn, one fsync) and unbatched (one fsync each)
 *   store-bench load DIR N         put N environment-like rows (1000 per transaction)
 *   store-bench replay DIR         open: replay time, rows, peak RSS
 *   store-bench compact DIR        open, then time one st_compact
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/buf.h"
#include "base/ev.h"
#include "base/log.h"
#include "base/str.h"
#include "json/json.h"
#include "store/store.h"

static struct json *env_row(uint64_t i)
{
	struct json *r = json_new_object();
	char id[32], team[32], proj[32], name[32], ver[32];

	snprintf(id, sizeof(id), "01J%023llu", (unsigned long long)i);
	snprintf(team, sizeof(team), "team_%llu", (unsigned long long)(i % 100));
	snprintf(proj, sizeof(proj), "proj_%llu", (unsigned long long)(i % 5000));
	snprintf(name, sizeof(name), "env-%llu", (unsigned long long)i);
	snprintf(ver, sizeof(ver), "01V%023llu", (unsigned long long)i);
	json_object_set_str(r, "ID", id);
	json_object_set_str(r, "TeamID", team);
	json_object_set_str(r, "ProjectID", proj);
	json_object_set_str(r, "Name", name);
	json_object_set_str(r, "Stage", "dev");
	json_object_set_str(r, "Status", "running");
	json_object_set_str(r, "CurrentVersionID", ver);
	json_object_set_str(r, "CreatedAt", "2026-11-29T13:43:30.123456Z");
	return r;
}

static const char *const env_ix[] = { "TeamID", "ProjectID", NULL };

static double peak_rss_mb(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_maxrss / 1024.0;	/* Linux: KiB */
}

/* CPU time (user + system) of this process so far, in ms: on a loaded
 * machine the wall time of a phase says more about the neighbours. */
static long long cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

static int open_or_die(const char *dir, struct ev *ev, struct st_db **db)
{
	struct st_opts o = { .ev = ev, .no_auto_compact = true };
	struct err e;

	if (st_open(dir, &o, db, &e) < 0) {
		fprintf(stderr, "store-bench: %s\n", e.msg);
		return -1;
	}
	return 0;
}

static int acked;

static void on_done(int status, struct err *e, void *arg)
{
	if (status < 0) {
		fprintf(stderr, "store-bench: commit: %s\n", e->msg);
		exit(1);
	}
	acked++;
}

static int bench_commit(const char *dir, uint64_t n)
{
	struct ev *ev = ev_new();
	struct st_db *db;
	struct err e;
	int64_t t0;
	uint64_t i = 0;
	const int per_turn = 100;
	struct st_stats s;

	if (open_or_die(dir, ev, &db) < 0)
		return 1;
	st_table(db, "environments", env_ix, &e);
	t0 = ev_mono_ms();
	while (i < n) {
		for (int k = 0; k < per_turn && i < n; k++, i++) {
			struct st_txn *t = st_begin(db);
			{
				struct json *r = env_row(i);
				char *id = xstrdup(json_get_str(r, "ID"));
				st_put(t, "environments", id, r);
				free(id);
			}
			if (st_commit(t, on_done, NULL, &e) < 0) {
				fprintf(stderr, "store-bench: %s\n", e.msg);
				return 1;
			}
		}
		ev_run_once(ev, 0);
	}
	while (acked < (int)n)
		ev_run_once(ev, 0);
	st_stats(db, &s);
	printf("store: batched commits (%d per loop turn, one fsync per turn): %llu commits in %lld ms = %.0f commits/s, %llu fsyncs\n",
	       per_turn, (unsigned long long)n, (long long)(ev_mono_ms() - t0),
	       (double)n * 1000.0 / (double)(ev_mono_ms() - t0 + 1), (unsigned long long)s.fsyncs);
	st_close(db);
	ev_run_once(ev, 0);
	ev_free(ev);

	/* Unbatched: no loop, every st_commit fsyncs. */
	if (open_or_die(dir, NULL, &db) < 0)
		return 1;
	{
		uint64_t m = n / 10 ? n / 10 : 1;
		t0 = ev_mono_ms();
		for (uint64_t j = 0; j < m; j++) {
			struct st_txn *t = st_begin(db);
			struct json *r = env_row(n + j);
			char *id = xstrdup(json_get_str(r, "ID"));
			st_put(t, "environments", id, r);
			free(id);
			if (st_commit(t, NULL, NULL, &e) < 0) {
				fprintf(stderr, "store-bench: %s\n", e.msg);
				return 1;
			}
		}
		printf("store: unbatched commits (one fsync each): %llu commits in %lld ms = %.0f commits/s\n",
		       (unsigned long long)m, (long long)(ev_mono_ms() - t0),
		       (double)m * 1000.0 / (double)(ev_mono_ms() - t0 + 1));
	}
	st_close(db);
	return 0;
}

static int bench_load(const char *dir, uint64_t n)
{
	struct st_db *db;
	struct err e;
	int64_t t0 = ev_mono_ms();
	struct st_stats s;

	if (open_or_die(dir, NULL, &db) < 0)
		return 1;
	for (uint64_t i = 0; i < n;) {
		struct st_txn *t = st_begin(db);
		for (int k = 0; k < 1000 && i < n; k++, i++) {
			struct json *r = env_row(i);
			char *id = xstrdup(json_get_str(r, "ID"));
			st_put(t, "environments", id, r);
			free(id);
		}
		if (st_commit(t, NULL, NULL, &e) < 0) {
			fprintf(stderr, "store-bench: %s\n", e.msg);
			return 1;
		}
	}
	st_stats(db, &s);
	printf("store: loaded %llu rows in %lld ms (1000 rows per transaction); log %.1f MB\n",
	       (unsigned long long)n, (long long)(ev_mono_ms() - t0), (double)s.log_bytes / 1e6);
	st_close(db);
	return 0;
}

static int bench_replay(const char *dir)
{
	struct st_db *db;
	struct err e;
	int64_t t0 = ev_mono_ms(), t1;
	long long c0 = cpu_ms(), c1;
	struct st_stats s;
	double rss0 = peak_rss_mb(), rss1;

	if (open_or_die(dir, NULL, &db) < 0)
		return 1;
	t1 = ev_mono_ms();
	c1 = cpu_ms();
	rss1 = peak_rss_mb();
	st_table(db, "environments", env_ix, &e);
	st_stats(db, &s);
	printf("store: replay of %llu rows (%.1f MB log): %lld ms; building 2 indexes: %lld ms; peak RSS %.0f MB (%.0f MB before open)"
	       "; cpu %lld ms + %lld ms; peak RSS after replay %.0f MB\n",
	       (unsigned long long)s.live_rows, (double)s.log_bytes / 1e6, (long long)(t1 - t0),
	       (long long)(ev_mono_ms() - t1), peak_rss_mb(), rss0, c1 - c0, cpu_ms() - c1, rss1);
	t0 = ev_mono_ms();
	printf("store: st_count(TeamID=team_7) = %zu in %lld ms\n", st_count(db, "environments", "TeamID", "team_7"),
	       (long long)(ev_mono_ms() - t0));
	st_close(db);
	return 0;
}

static int bench_compact(const char *dir)
{
	struct st_db *db;
	struct err e;
	int64_t t0;
	struct st_stats s;

	if (open_or_die(dir, NULL, &db) < 0)
		return 1;
	t0 = ev_mono_ms();
	if (st_compact(db, &e) < 0) {
		fprintf(stderr, "store-bench: %s\n", e.msg);
		return 1;
	}
	st_stats(db, &s);
	printf("store: compaction of %llu rows: %lld ms (new log %.1f MB, %llu records)\n",
	       (unsigned long long)s.live_rows, (long long)(ev_mono_ms() - t0), (double)s.log_bytes / 1e6,
	       (unsigned long long)s.records);
	st_close(db);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t n = 0;

	log_set_level(LOG_WARN);
	if (argc < 3) {
		fprintf(stderr, "usage: store-bench commit|load|replay|compact DIR [N]\n");
		return 2;
	}
	if (argc > 3 && str_to_u64(argv[3], &n) < 0) {
		fprintf(stderr, "store-bench: bad count %s\n", argv[3]);
		return 2;
	}
	if (strcmp(argv[1], "commit") == 0)
		return bench_commit(argv[2], n ? n : 20000);
	if (strcmp(argv[1], "load") == 0)
		return bench_load(argv[2], n ? n : 1000000);
	if (strcmp(argv[1], "replay") == 0)
		return bench_replay(argv[2]);
	if (strcmp(argv[1], "compact") == 0)
		return bench_compact(argv[2]);
	fprintf(stderr, "store-bench: unknown mode %s\n", argv[1]);
	return 2;
}
