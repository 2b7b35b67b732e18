/*
 * compact.c: compaction: the live rows rewritten into a new log
 * (store.h: the format and the rules).
 */
#include "store/internal.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* Write the record in b at *off; the rows it holds (their positions in b
 * are in newoff[first..first+n)) become file offsets. */
static int compact_write(struct st_db *db, int fd, off_t *off, struct buf *b, uint64_t *newoff,
			 size_t first, size_t n, uint32_t *last_crc, struct err *e)
{
	if (st_rec_end(b) < 0)
		return err_set(e, "store: compaction: record too large");	/* cannot happen: see below */
	if (st_sys_pwrite_all(db, fd, b->data, b->len, *off) < 0)
		return err_errno(e, "store: write %s", db->tmp_path);
	*last_crc = st_get_u32(b->data + 4);
	for (size_t i = first; i < first + n; i++)
		newoff[i] += (uint64_t)*off;
	*off += (off_t)b->len;
	return 0;
}

int st_compact(struct st_db *db, struct err *e)
{
	char h[ST_HEADER_BYTES];
	struct buf rec, op;
	off_t off = ST_HEADER_BYTES;
	uint64_t nrec = 0;
	size_t inrec = 0, nrows = 0, first = 0;
	/* Where each live row lands in the new file, in the order the loop
	 * below visits them: the rows keep their old spans until the rename. */
	uint64_t *newoff = NULL;
	int fd;
	int64_t t0 = ev_mono_ms();
	uint32_t ccrc = 0;	/* the new log's last record CRC */
	bool marked = false;

	if (db->failed) {
		*e = db->fail_err;
		return -1;
	}
	if (db->scanning)
		return err_set(e, "store: compaction from inside an st_scan callback");
	fd = st_sys_open(db, db->tmp_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return err_errno(e, "store: create %s", db->tmp_path);
	buf_init(&rec, ST_RECORD_MAX + ST_RECORD_HEAD_BYTES + 1);
	buf_init(&op, ST_RECORD_MAX + 1);
	newoff = xmalloc((db->live_rows ? db->live_rows : 1) * sizeof(*newoff));
	st_make_header(h);
	if (st_sys_pwrite_all(db, fd, h, sizeof(h), 0) < 0) {
		err_errno(e, "store: write %s", db->tmp_path);
		goto fail;
	}
	st_rec_begin(&rec);
	for (size_t i = 0; i < db->ntables; i++) {
		struct st_table *t = &db->tables[i];
		struct titer it = { 0 };
		struct tkey k = { "", 0, "", 0, false };
		struct tnode *n;

		st_it_seek(&it, t->root, &k, false);
		while ((n = st_it_next(&it))) {
			struct st_row *r = n->row;
			size_t rpos = 0, rlen = 0;
			const char *text;

			/* The row's bytes as they are in the old log. */
			if (!(text = st_row_text(db, r, e))) {
				st_it_release(&it);
				goto fail;
			}
			/* Each put is encoded alone first, so that a record is cut
			 * before it would pass ST_RECORD_MAX. A single put always
			 * fits: it came from a record no larger. */
			buf_reset(&op);
			if (st_rec_add_op(&op, true, t->name, r->id, NULL, text, r->len, &rpos, &rlen) < 0) {
				st_it_release(&it);
				err_set(e, "store: compaction: row %s/%s too large", t->name, r->id);
				goto fail;
			}
			if (inrec && rec.len + 1 + op.len + 2 > ST_RECORD_MAX + ST_RECORD_HEAD_BYTES) {
				if (compact_write(db, fd, &off, &rec, newoff, first, inrec, &ccrc, e) < 0) {
					st_it_release(&it);
					goto fail;
				}
				nrec++;
				first += inrec;
				st_rec_begin(&rec);
				inrec = 0;
			}
			if ((inrec && buf_addch(&rec, ',') < 0)) {
				st_it_release(&it);
				err_set(e, "store: compaction: row %s/%s too large", t->name, r->id);
				goto fail;
			}
			newoff[nrows++] = (uint64_t)(rec.len + rpos);	/* made a file offset by compact_write */
			if (buf_add(&rec, op.data, op.len) < 0) {
				st_it_release(&it);
				err_set(e, "store: compaction: row %s/%s too large", t->name, r->id);
				goto fail;
			}
			inrec++;
			if (rec.len >= ST_COMPACT_RECORD_BYTES || inrec >= ST_TXN_OPS_MAX) {
				if (compact_write(db, fd, &off, &rec, newoff, first, inrec, &ccrc, e) < 0) {
					st_it_release(&it);
					goto fail;
				}
				nrec++;
				first += inrec;
				st_rec_begin(&rec);
				inrec = 0;
			}
		}
		st_it_release(&it);
	}
	if (inrec) {
		if (compact_write(db, fd, &off, &rec, newoff, first, inrec, &ccrc, e) < 0)
			goto fail;
		nrec++;
	}
	if (st_sys_fsync_fd(db, fd) < 0) {
		err_errno(e, "store: fsync %s", db->tmp_path);
		goto fail;
	}
	/* The mark learns the new file before the rename can take effect: a
	 * crash either side finds a slot that fits whichever log is there. */
	if (st_mark_write(db, off, nrec, ccrc, ST_MARK_COMPACT, true, e) < 0)
		goto fail;
	marked = true;
	if (db->sys->rename(db->tmp_path, db->log_path) < 0) {
		err_errno(e, "store: rename %s to %s", db->tmp_path, db->log_path);
		goto fail;
	}
	/* From here the new file is the log: switch to it whatever happens. */
	st_sys_close_fd(db, db->fd);
	db->fd = fd;
	{
		/* The same walk as above: the same rows in the same order. */
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
	free(newoff);
	newoff = NULL;
	db->size = off;
	db->records = nrec;
	db->last_crc = ccrc;
	db->log_ops = db->live_rows;
	db->compactions++;
	db->compact_after_ops = 0;
	buf_release(&rec);
	buf_release(&op);
	if (st_fsync_dir(db, e) < 0) {
		/* Without a durable rename, commits appended to the new file
		 * could vanish with it in a crash: nothing more may be promised. */
		db->failed = true;
		db->fail_err = *e;
		return -1;
	}
	log_debug(MOD, "compacted %s: %llu rows, %lld bytes, %lld ms", db->log_path,
		  (unsigned long long)db->live_rows, (long long)off, (long long)(ev_mono_ms() - t0));
	return 0;
fail:
	free(newoff);
	buf_release(&rec);
	buf_release(&op);
	st_sys_close_fd(db, fd);
	db->sys->unlink(db->tmp_path);
	if (marked) {
		/* The newest slot describes a file that never became the log: put
		 * the old log's slot on top again, lest a torn next write leave
		 * only that one. */
		struct err me;
		if (st_mark_write(db, db->size, db->records, db->last_crc, 0, true, &me) < 0)
			st_mark_failed(db, &me);
	}
	return -1;
}
