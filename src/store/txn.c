/* txn.c: transactions and the group commit (store.h: the format and the rules). */
#include "store/internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "store/pg.h"

struct st_txn *st_begin(struct st_db *db)
{
	struct st_txn *t = xcalloc(1, sizeof(*t));

	t->db = db;
	return t;
}

static int txn_poison(struct st_txn *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Remember the first bad argument: st_commit reports it. */
static int txn_poison(struct st_txn *t, const char *fmt, ...)
{
	va_list ap;
	struct buf b = BUF_INIT;

	if (t->bad)
		return -1;
	t->bad = true;
	va_start(ap, fmt);
	buf_vaddf(&b, fmt, ap);
	va_end(ap);
	err_set(&t->err, "%s", b.data);
	buf_release(&b);
	return -1;
}

static int txn_add(struct st_txn *t, bool del, const char *table, const char *id, struct json *row)
{
	struct st_op *o;
	const char *why = NULL;

	if (t->bad) {
		json_free(row);
		return -1;
	}
	if (!st_name_ok(table)) {
		json_free(row);
		return txn_poison(t, "store: bad table name \"%.64s\"", table ? table : "(null)");
	}
	if (!id || !st_id_ok(id, strnlen(id, ST_ID_MAX + 1))) {
		json_free(row);
		return txn_poison(t, "store: %s: bad row id \"%.256s\" (empty, too long or not UTF-8)", table,
				  id ? id : "(null)");
	}
	if (!del && (!row || row->type != JSON_OBJECT)) {
		json_free(row);
		return txn_poison(t, "store: %s/%s: a row must be a JSON object", table, id);
	}
	if (!del && st_row_check(row, 0, &why) < 0) {
		json_free(row);
		return txn_poison(t, "store: %s/%s: row refused: %s", table, id, why);
	}
	if (t->n >= ST_TXN_OPS_MAX) {
		json_free(row);
		return txn_poison(t, "store: %s/%s: too many operations in one transaction", table, id);
	}
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 8;
		t->ops = xrealloc(t->ops, t->cap * sizeof(*t->ops));
	}
	o = &t->ops[t->n++];
	o->del = del;
	o->table = xstrdup(table);
	o->id = xstrdup(id);
	o->row = row;
	return 0;
}

int st_put(struct st_txn *txn, const char *table, const char *id, struct json *row)
{
	return txn_add(txn, false, table, id, row);
}

int st_delete(struct st_txn *txn, const char *table, const char *id)
{
	return txn_add(txn, true, table, id, NULL);
}

void st_abort(struct st_txn *txn)
{
	if (!txn)
		return;
	for (size_t i = 0; i < txn->n; i++) {
		free((char *)txn->ops[i].table);
		free((char *)txn->ops[i].id);
		json_free(txn->ops[i].row);
	}
	free(txn->ops);
	free(txn);
}

/* Append bytes to the log. On a failed or short write the log is cut back
 * to where it was, so that no later record lands after half a record; if
 * even that fails, the store refuses further commits. */
static int log_append(struct st_db *db, const char *p, size_t n, struct err *e)
{
	off_t off = db->size;

	if (st_sys_pwrite_all(db, db->fd, p, n, off) == 0) {
		db->size += (off_t)n;
		return 0;
	}
	err_errno(e, "store: write %s", db->log_path);
	if (st_sys_ftruncate_fd(db, db->fd, off) < 0) {
		db->failed = true;
		err_errno(&db->fail_err, "store: write %s failed and it could not be cut back to %lld bytes; "
			  "refusing further commits (restart to replay what is on disk)",
			  db->log_path, (long long)off);
		err_set(e, "%s", db->fail_err.msg);
	}
	return -1;
}

static void flush_cb(struct ev *ev, void *arg);

static void set_failed_fsync(struct st_db *db)
{
	db->failed = true;
	err_errno(&db->fail_err, "store: fsync %s; refusing further commits "
		  "(restart to replay what is on disk)", db->log_path);
}

/* fsync the log and call the queued done_fns. */
void st_flush_pending(struct st_db *db)
{
	struct st_pending *list;
	size_t n = db->npending;
	int status = 0;
	struct err e, fail;

	if (db->pg) {
		st_pg_flush(db);
		return;
	}
	if (!n)
		return;
	if (db->failed) {
		status = -1;
	} else if (st_sys_fsync_fd(db, db->fd) < 0) {
		set_failed_fsync(db);
		status = -1;
	} else {
		db->fsyncs++;
		st_mark_advance(db);
	}
	/* done_fns may commit again (those queue up afresh for the next turn)
	 * or even close the store: nothing below touches db. */
	list = db->pending;
	db->pending = NULL;
	db->npending = db->pending_cap = 0;
	fail = db->fail_err;
	for (size_t i = 0; i < n; i++) {
		if (!list[i].fn)
			continue;
		if (status < 0) {
			e = fail;	/* each callback may scribble on its copy */
			list[i].fn(-1, &e, list[i].arg);
		} else {
			list[i].fn(0, NULL, list[i].arg);
		}
	}
	free(list);
}

int st_flush(struct st_db *db)
{
	if (db->pg)
		st_pg_drain(db);
	/* done_fns may commit again; a few rounds settle any sane caller. */
	for (int round = 0; round < 16 && db->npending; round++)
		st_flush_pending(db);
	return db->failed ? -1 : 0;
}

static void maybe_compact(struct st_db *db)
{
	struct err e;
	uint64_t dead = db->log_ops - db->live_rows;

	if (!db->auto_compact || db->failed || db->closing || db->scanning)
		return;
	if (db->size < ST_COMPACT_MIN_BYTES || dead <= db->live_rows || db->log_ops < db->compact_after_ops)
		return;
	{
		int64_t t0 = ev_mono_ms();
		off_t before = db->size;

		if (st_compact(db, &e) < 0) {
			/* Try again once the log has grown by half as much again. */
			db->compact_after_ops = db->log_ops + db->log_ops / 2 + 1;
			log_warn(MOD, "automatic compaction failed (will retry later): %s", e.msg);
			return;
		}
		log_info(MOD, "compacted %s: %lld -> %lld bytes, %llu rows, %lld ms", db->log_path,
			 (long long)before, (long long)db->size, (unsigned long long)db->live_rows,
			 (long long)(ev_mono_ms() - t0));
	}
}

static void flush_cb(struct ev *ev, void *arg)
{
	struct st_flush_token *tok = arg;

	tok->queued = false;
	if (!tok->db) {
		if (!tok->rel_queued)
			free(tok);	/* the store was closed while this was queued */
		return;
	}
	/* A done_fn may close the store: st_close then leaves the token to us. */
	tok->running = true;
	st_flush_pending(tok->db);
	if (tok->db)
		maybe_compact(tok->db);
	if (tok->db && tok->db->release_after_flush && !tok->db->pg_waiting) {
		tok->db->release_after_flush = false;
		st_cache_release(tok->db);
	}
	tok->running = false;
	if (!tok->db && !tok->queued && !tok->rel_queued)
		free(tok);
}

/*
 * The end of a loop turn for cached rows (store.h, "Pointers"). When a
 * flush is queued too, its done_fns may still use rows read in this turn:
 * then the rows go after it (at the end of flush_cb) instead.
 */
void st_release_cb(struct ev *ev, void *arg)
{
	struct st_flush_token *tok = arg;

	tok->rel_queued = false;
	if (!tok->db) {
		if (!tok->queued && !tok->running)
			free(tok);	/* the store was closed while this was queued */
		return;
	}
	if (tok->queued || tok->db->pg_waiting)
		tok->db->release_after_flush = true;	/* done_fns to come may use this turn's rows */
	else
		st_cache_release(tok->db);
}

/* Why txn may not be committed now (-1 with e), or 0. */
static int commit_refused(struct st_txn *txn, struct err *e)
{
	struct st_db *db = txn->db;
	size_t newtables = 0;

	if (txn->bad) {
		*e = txn->err;
		return -1;
	}
	if (db->failed) {
		*e = db->fail_err;
		return -1;
	}
	if (db->pg && stpg_ready(db->pg, e) < 0)
		return -1;
	if (db->closing)
		return err_set(e, "store: commit while the store is closing");
	if (db->scanning)
		return err_set(e, "store: commit from inside an st_scan callback");
	for (size_t i = 0; i < txn->n; i++) {
		bool seen = false;
		if (txn->ops[i].del || st_table_find(db, txn->ops[i].table))
			continue;
		for (size_t j = 0; j < i && !seen; j++)
			seen = !txn->ops[j].del && strcmp(txn->ops[j].table, txn->ops[i].table) == 0;
		if (!seen && db->ntables + ++newtables > ST_TABLES_MAX)
			return err_set(e, "store: more than %d tables", ST_TABLES_MAX);
	}
	return 0;
}

/* Encode txn as one record, append it to the log and apply it to the
 * tables (not yet durable: the flush or the caller syncs it). */
static int commit_append(struct st_txn *txn, struct err *e)
{
	struct st_db *db = txn->db;
	struct buf *b = &db->wbuf;
	off_t roff;

	st_rec_begin(b);
	for (size_t i = 0; i < txn->n; i++) {
		struct st_op *o = &txn->ops[i];
		if (st_rec_add_op(b, i == 0, o->table, o->id, o->row, NULL, 0, &o->rpos, &o->rlen) < 0)
			return err_set(e, "store: transaction larger than %zu bytes", ST_RECORD_MAX);
	}
	if (st_rec_end(b) < 0)
		return err_set(e, "store: transaction larger than %zu bytes", ST_RECORD_MAX);
	roff = db->size;
	if (log_append(db, b->data, b->len, e) < 0)
		return -1;
	db->last_crc = st_get_u32(b->data + 4);
	if (db->pg)
		st_pg_forward(db, txn, b);
	if (b->cap > ST_COMPACT_RECORD_BYTES * 2)
		buf_release(b);	/* one huge transaction should not pin its buffer */
	/* The rows stay on disk only: readers parse them from the log, so
	 * that what they see never depends on whether the row was just
	 * written or replayed. st_abort frees the DOMs. */
	for (size_t i = 0; i < txn->n; i++) {
		struct st_op *o = &txn->ops[i];
		st_apply_op(db, o->table, o->id, !o->del, o->row, roff + (off_t)o->rpos, o->rlen);
	}
	db->records++;
	db->log_ops += txn->n;
	return 0;
}

/* With a loop: done waits for the group commit that the deferred flush
 * makes of this turn's transactions. */
static void commit_queue(struct st_db *db, st_done_fn done, void *arg)
{
	if (db->npending == db->pending_cap) {
		db->pending_cap = db->pending_cap ? db->pending_cap * 2 : 16;
		db->pending = xrealloc(db->pending, db->pending_cap * sizeof(*db->pending));
	}
	db->pending[db->npending++] = (struct st_pending){ done, arg };
	if (!db->token->queued) {
		db->token->queued = true;
		ev_defer(db->ev, flush_cb, db->token);
	}
}

int st_commit(struct st_txn *txn, st_done_fn done, void *arg, struct err *e)
{
	struct st_db *db = txn->db;
	int rc = 0;

	if (commit_refused(txn, e) < 0 || (txn->n > 0 && commit_append(txn, e) < 0)) {
		st_abort(txn);
		if (!db->ev && done)
			done(-1, e, arg);
		return -1;
	}
	if (db->ev) {
		commit_queue(db, done, arg);
		st_abort(txn);
		return 0;
	}
	if (txn->n > 0 && db->pg) {
		rc = st_pg_send_sync(db, e);
	} else if (txn->n > 0) {
		if (st_sys_fsync_fd(db, db->fd) < 0) {
			set_failed_fsync(db);
			*e = db->fail_err;
			rc = -1;
		} else {
			db->fsyncs++;
			st_mark_advance(db);
		}
	}
	st_abort(txn);
	/* Compact before done_fn: a done_fn may close the store. */
	if (rc == 0)
		maybe_compact(db);
	if (done)
		done(rc, rc < 0 ? e : NULL, arg);
	return rc;
}
