/*
 * compact.c: compaction: the live rows rewritten into a new log
 * (store.h: the format and the rules).
 */
#include "store/internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* A compaction under way: the new log being written at tmp_path. */
struct compact {
	struct st_db *db;
	int fd;
	struct buf rec;		/* the record being filled */
	struct buf op;		/* one put, encoded alone first */
	off_t off;		/* where the next record goes */
	uint64_t nrec;
	size_t inrec;		/* puts in rec */
	size_t nrows;		/* puts so far */
	size_t first;		/* the first of rec's puts in newoff */
	/* Where each live row lands in the new file, in the order the walk
	 * visits them: the rows keep their old spans until the rename. */
	uint64_t *newoff;
	uint32_t ccrc;		/* the new log's last record CRC */
	bool marked;		/* the mark describes the new file */
};

/* Write the record in c->rec at c->off and start the next: the rows it
 * holds (their positions in rec are in newoff[first..first+inrec)) become
 * file offsets. */
static int compact_cut(struct compact *c, struct err *e)
{
	struct st_db *db = c->db;

	if (st_rec_end(&c->rec) < 0)
		return err_set(e, "store: compaction: record too large");	/* cannot happen: see below */
	if (st_sys_pwrite_all(db, c->fd, c->rec.data, c->rec.len, c->off) < 0)
		return err_errno(e, "store: write %s", db->tmp_path);
	c->ccrc = st_get_u32(c->rec.data + 4);
	for (size_t i = c->first; i < c->first + c->inrec; i++)
		c->newoff[i] += (uint64_t)c->off;
	c->off += (off_t)c->rec.len;
	c->nrec++;
	c->first += c->inrec;
	st_rec_begin(&c->rec);
	c->inrec = 0;
	return 0;
}

/* Create the new file with its header; -1 with nothing to undo but what
 * compact_fail undoes. */
static int compact_begin(struct st_db *db, struct compact *c, struct err *e)
{
	char h[ST_HEADER_BYTES];

	c->db = db;
	c->off = ST_HEADER_BYTES;
	c->fd = st_sys_open(db, db->tmp_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (c->fd < 0)
		return err_errno(e, "store: create %s", db->tmp_path);
	buf_init(&c->rec, ST_RECORD_MAX + ST_RECORD_HEAD_BYTES + 1);
	buf_init(&c->op, ST_RECORD_MAX + 1);
	c->newoff = xmalloc((db->live_rows ? db->live_rows : 1) * sizeof(*c->newoff));
	st_make_header(h);
	if (st_sys_pwrite_all(db, c->fd, h, sizeof(h), 0) < 0)
		return err_errno(e, "store: write %s", db->tmp_path);
	st_rec_begin(&c->rec);
	return 0;
}

/* Add row r of table t to the record, cutting the record before it would
 * pass ST_RECORD_MAX and when it is full. */
static int compact_row(struct compact *c, const struct st_table *t, struct st_row *r, struct err *e)
{
	size_t rpos = 0, rlen = 0;
	const char *text;

	/* The row's bytes as they are in the old log. */
	if (!(text = st_row_text(c->db, r, e)))
		return -1;
	/* Each put is encoded alone first, so that a record is cut before it
	 * would pass ST_RECORD_MAX. A single put always fits: it came from a
	 * record no larger. */
	buf_reset(&c->op);
	if (st_rec_add_op(&c->op, true, t->name, r->id, NULL, text, r->len, &rpos, &rlen) < 0)
		return err_set(e, "store: compaction: row %s/%s too large", t->name, r->id);
	if (c->inrec && c->rec.len + 1 + c->op.len + 2 > ST_RECORD_MAX + ST_RECORD_HEAD_BYTES &&
	    compact_cut(c, e) < 0)
		return -1;
	if ((c->inrec && buf_addch(&c->rec, ',') < 0))
		return err_set(e, "store: compaction: row %s/%s too large", t->name, r->id);
	c->newoff[c->nrows++] = (uint64_t)(c->rec.len + rpos);	/* made a file offset by compact_cut */
	if (buf_add(&c->rec, c->op.data, c->op.len) < 0)
		return err_set(e, "store: compaction: row %s/%s too large", t->name, r->id);
	c->inrec++;
	if (c->rec.len >= ST_COMPACT_RECORD_BYTES || c->inrec >= ST_TXN_OPS_MAX)
		return compact_cut(c, e);
	return 0;
}

/* Every live row, table by table in id order, into the new file. */
static int compact_rows(struct compact *c, struct err *e)
{
	struct st_db *db = c->db;

	for (size_t i = 0; i < db->ntables; i++) {
		struct st_table *t = &db->tables[i];
		struct titer it = { 0 };
		struct tkey k = { "", 0, "", 0, false };
		struct tnode *n;

		st_it_seek(&it, t->root, &k, false);
		while ((n = st_it_next(&it))) {
			if (compact_row(c, t, n->row, e) < 0) {
				st_it_release(&it);
				return -1;
			}
		}
		st_it_release(&it);
	}
	if (c->inrec && compact_cut(c, e) < 0)
		return -1;
	return 0;
}

/* Make the new file durable, tell the mark, and rename it over the log. */
static int compact_install(struct compact *c, struct err *e)
{
	struct st_db *db = c->db;

	if (st_sys_fsync_fd(db, c->fd) < 0)
		return err_errno(e, "store: fsync %s", db->tmp_path);
	/* The mark learns the new file before the rename can take effect: a
	 * crash either side finds a slot that fits whichever log is there. */
	if (st_mark_write(db, c->off, c->nrec, c->ccrc, ST_MARK_COMPACT, true, e) < 0)
		return -1;
	c->marked = true;
	if (db->sys->rename(db->tmp_path, db->log_path) < 0)
		return err_errno(e, "store: rename %s to %s", db->tmp_path, db->log_path);
	return 0;
}

/* Point every row at its text in the new file: the same walk as
 * compact_rows, so the same rows in the same order. */
static void compact_repoint(struct st_db *db, const uint64_t *newoff, size_t nrows)
{
	size_t j = 0;

	for (size_t i = 0; i < db->ntables; i++) {
		struct titer it = { 0 };
		struct tkey k = { "", 0, "", 0, false };
		struct tnode *n;
		st_it_seek(&it, db->tables[i].root, &k, false);
		while ((n = st_it_next(&it)) && j < nrows)
			n->row->off = (off_t)newoff[j++];
		st_it_release(&it);
	}
}

/* The new file became the log: switch to it whatever happens. */
static void compact_switch(struct compact *c)
{
	struct st_db *db = c->db;

	st_sys_close_fd(db, db->fd);
	db->fd = c->fd;
	compact_repoint(db, c->newoff, c->nrows);
	free(c->newoff);
	c->newoff = NULL;
	db->size = c->off;
	db->records = c->nrec;
	db->last_crc = c->ccrc;
	db->log_ops = db->live_rows;
	db->compactions++;
	db->compact_after_ops = 0;
	buf_release(&c->rec);
	buf_release(&c->op);
}

/* Undo a compaction that did not reach the rename. */
static void compact_fail(struct compact *c)
{
	struct st_db *db = c->db;

	free(c->newoff);
	buf_release(&c->rec);
	buf_release(&c->op);
	st_sys_close_fd(db, c->fd);
	db->sys->unlink(db->tmp_path);
	if (c->marked) {
		/* The newest slot describes a file that never became the log: put
		 * the old log's slot on top again, lest a torn next write leave
		 * only that one. */
		struct err me;
		if (st_mark_write(db, db->size, db->records, db->last_crc, 0, true, &me) < 0)
			st_mark_failed(db, &me);
	}
}

int st_compact(struct st_db *db, struct err *e)
{
	struct compact c = { 0 };
	int64_t t0 = ev_mono_ms();

	if (db->failed) {
		*e = db->fail_err;
		return -1;
	}
	if (db->scanning)
		return err_set(e, "store: compaction from inside an st_scan callback");
	if (compact_begin(db, &c, e) < 0) {
		if (c.fd >= 0)
			compact_fail(&c);
		return -1;
	}
	if (compact_rows(&c, e) < 0 || compact_install(&c, e) < 0) {
		compact_fail(&c);
		return -1;
	}
	compact_switch(&c);
	if (st_fsync_dir(db, e) < 0) {
		/* Without a durable rename, commits appended to the new file
		 * could vanish with it in a crash: nothing more may be promised. */
		db->failed = true;
		db->fail_err = *e;
		return -1;
	}
	log_debug(MOD, "compacted %s: %llu rows, %lld bytes, %lld ms", db->log_path,
		  (unsigned long long)db->live_rows, (long long)c.off, (long long)(ev_mono_ms() - t0));
	return 0;
}
