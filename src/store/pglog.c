/*
 * pglog.c: the glue between the store and its PostgreSQL log (pg.c)
 * (store.h: the format and the rules).
 */
#include "store/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <unistd.h>

#include "store/pg.h"

/* The transaction's ops, as written to the scratch log, into pg's batch. */
void st_pg_forward(struct st_db *db, const struct st_txn *txn, const struct buf *b)
{
	for (size_t i = 0; i < txn->n; i++) {
		const struct st_op *o = &txn->ops[i];
		if (o->del)
			stpg_del(db->pg, o->table, o->id);
		else
			stpg_put(db->pg, o->table, o->id, b->data + o->rpos, o->rlen);
	}
}

struct pg_sync {
	int status;
	struct err e;
};

static void pg_sync_done(int status, struct err *e, void *arg)
{
	struct pg_sync *s = arg;

	s->status = status;
	if (status < 0)
		s->e = *e;
}

/* Without a loop: this commit's batch, sent and committed before return. */
int st_pg_send_sync(struct st_db *db, struct err *e)
{
	struct pg_sync s = { 0 };

	stpg_send(db->pg, pg_sync_done, &s);
	if (s.status < 0)
		*e = s.e;
	return s.status;
}

static void call_all(struct st_pending *list, size_t n, int status, const struct err *why)
{
	struct err e;

	for (size_t i = 0; i < n; i++) {
		if (!list[i].fn)
			continue;
		if (status < 0) {
			e = *why;	/* each callback may scribble on its copy */
			list[i].fn(-1, &e, list[i].arg);
		} else {
			list[i].fn(0, NULL, list[i].arg);
		}
	}
	free(list);
}

static void pg_sent(int status, struct err *e, void *arg);

/* Send the queued commits as one PostgreSQL transaction, unless one is
 * already on its way (then they go when it ends, in order). */
void st_pg_flush(struct st_db *db)
{
	if (!db->npending || db->pg_waiting)
		return;
	db->inflight = db->pending;
	db->ninflight = db->npending;
	db->pending = NULL;
	db->npending = db->pending_cap = 0;
	if (db->failed) {
		pg_sent(-1, &db->fail_err, db);
		return;
	}
	db->pg_waiting = true;
	db->inflight_cached = db->ncache;
	stpg_send(db->pg, pg_sent, db);
}

/* The batch committed (0) or is not known to have (-1): tell its done_fns,
 * then send what queued meanwhile. On a failure the queued commits hear -1
 * too: pg keeps their ops for after the reconnect, but nobody waits that long. */
static void pg_sent(int status, struct err *e, void *arg)
{
	struct st_db *db = arg;
	struct st_flush_token *tok = db->token;
	bool was_running = tok->running;
	struct err why = { { 0 }, 0 };

	if (status < 0)
		why = *e;
	db->pg_waiting = false;
	tok->running = true;	/* a done_fn may close the store: st_close leaves tok to us */
	{
		struct st_pending *list = db->inflight;
		size_t n = db->ninflight;
		db->inflight = NULL;
		db->ninflight = 0;
		call_all(list, n, status, &why);
	}
	if (tok->db && status < 0 && db->npending) {
		struct st_pending *list = db->pending;
		size_t n = db->npending;
		db->pending = NULL;
		db->npending = db->pending_cap = 0;
		call_all(list, n, -1, &why);
	}
	if (tok->db && !db->pg_waiting) {
		/* The rows read before this batch went out have served its
		 * done_fns. Later ones wait for their own batch, unless none
		 * waits (store.h, "Pointers": a turn's rows outlive its commits'
		 * done_fns, with PostgreSQL as with the file store). */
		if (db->release_after_flush && !tok->queued && !db->npending) {
			db->release_after_flush = false;
			st_cache_release(db);
		} else if (db->release_after_flush) {
			st_cache_release_first(db, db->inflight_cached);
		}
		if (db->ev && !db->closing)
			st_pg_flush(db);
	}
	tok->running = was_running;
	if (!tok->db && !tok->running && !tok->queued && !tok->rel_queued)
		free(tok);
}

/* Until nothing is queued or in flight (bounded, as st_flush). */
void st_pg_drain(struct st_db *db)
{
	struct st_flush_token *tok = db->token;

	for (int round = 0; round < 32 && tok->db; round++) {
		if (db->pg_waiting)
			stpg_wait(db->pg);
		else if (db->npending)
			st_pg_flush(db);
		else
			break;
	}
}

struct pg_load {
	struct st_db *db;
	struct st_txn *txn;
	size_t bytes, ops;
};

/* Rows per loading transaction (well under ST_TXN_OPS_MAX). */
#define PG_LOAD_OPS 10000

static int pg_load_commit(struct pg_load *l, struct err *e)
{
	int rc = st_commit(l->txn, NULL, NULL, e);

	l->txn = st_begin(l->db);
	l->bytes = l->ops = 0;
	return rc;
}

static int pg_load_row(const char *tbl, const char *id, const char *doc, size_t len, void *arg, struct err *e)
{
	struct pg_load *l = arg;
	struct json_limits lim = { ST_JSON_DEPTH_MAX, ST_RECORD_MAX };
	struct json *row;
	struct err pe;

	if (json_parse(doc, len, &lim, &row, &pe) < 0)
		return err_set(e, "store: PostgreSQL row %s/%s is not JSON the store can hold: %s", tbl, id, pe.msg);
	l->bytes += len;
	if (st_put(l->txn, tbl, id, row) < 0 || l->bytes >= ST_COMPACT_RECORD_BYTES || ++l->ops >= PG_LOAD_OPS)
		return pg_load_commit(l, e);
	return 0;
}

void st_scratch_remove(struct st_db *db)
{
	const char *const paths[] = { db->log_path, db->tmp_path, db->new_path, db->lock_path,
				      db->mark_path, db->mark_new_path };

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (paths[i])
			unlink(paths[i]);
	if (db->dir && rmdir(db->dir) < 0)
		log_warn(MOD, "remove scratch directory %s: %s", db->dir, strerror(errno));
}

/* Scratch directories of processes that died without closing (SIGKILL, a
 * crash): their lock file is no longer flock'ed by anyone. A live one's is,
 * so it is left alone. Best effort: a failure only leaves files behind. */
static void scratch_sweep(const char *tmp)
{
	DIR *d = opendir(tmp);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		static const char *const names[] = { "log", "log.compact", "log.new", "mark", "mark.new", "lock" };
		char path[PATH_MAX], lock[PATH_MAX];
		int fd;

		if (strncmp(de->d_name, "denv-cp-pg-", 11) != 0 || strlen(de->d_name) != 17)
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", tmp, de->d_name) >= (int)sizeof(path) ||
		    snprintf(lock, sizeof(lock), "%s/lock", path) >= (int)sizeof(lock))
			continue;
		fd = open(lock, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;	/* no lock file yet: maybe being created right now */
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
				char f[PATH_MAX];
				if (snprintf(f, sizeof(f), "%s/%s", path, names[i]) < (int)sizeof(f))
					unlink(f);
			}
			if (rmdir(path) == 0)
				log_info(MOD, "removed %s, left by a denv-cp that did not close its store", path);
		}
		close(fd);
	}
	closedir(d);
}

/* The scratch directory: TMPDIR (or /tmp)/denv-cp-pg-XXXXXX (after sweeping
 * away those of dead processes). */
static int scratch_dir(char *out, size_t n, struct err *e)
{
	const char *tmp = getenv("TMPDIR");

	tmp = tmp && *tmp ? tmp : "/tmp";
	scratch_sweep(tmp);
	if (snprintf(out, n, "%s/denv-cp-pg-XXXXXX", tmp) >= (int)n)
		return err_set(e, "store: TMPDIR is too long");
	if (!mkdtemp(out))
		return err_errno(e, "store: make a scratch directory %s", out);
	return 0;
}

/* A store on PostgreSQL: a scratch file store filled from the server, with
 * every later commit forwarded to it (store.h, "PostgreSQL"). */
int st_open_pg(const char *dsn, const struct st_opts *opts, struct st_db **out, struct err *e)
{
	struct st_opts o = opts ? *opts : (struct st_opts){ 0 };
	struct pg_load l = { 0 };
	char dir[PATH_MAX];
	struct st_db *db;
	struct stpg *pg;
	int64_t t0 = ev_mono_ms();

	*out = NULL;
	if (o.repair)
		return err_set(e, "store: -db-repair is for the file store; PostgreSQL keeps its own consistency");
	if (stpg_open(dsn, o.ev, &pg, e) < 0)
		return -1;
	if (scratch_dir(dir, sizeof(dir), e) < 0) {
		stpg_close(pg);
		return -1;
	}
	o.ev = NULL;	/* loading commits synchronously */
	if (st_open_dir(dir, &o, true, &db, e) < 0) {
		stpg_close(pg);
		rmdir(dir);
		return -1;
	}
	l.db = db;
	l.txn = st_begin(db);
	if (stpg_load(pg, pg_load_row, &l, e) < 0 || pg_load_commit(&l, e) < 0) {
		st_abort(l.txn);
		stpg_close(pg);
		st_close(db);
		return err_prefix(e, "load");
	}
	st_abort(l.txn);
	db->pg = pg;
	db->ev = opts ? opts->ev : NULL;
	log_info(MOD, "loaded %llu rows from PostgreSQL in %lld ms", (unsigned long long)db->live_rows,
		 (long long)(ev_mono_ms() - t0));
	*out = db;
	return 0;
}
