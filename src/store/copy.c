/* copy.c: a store's digest, and copying one store into another (store.h,
 * "moving a store"): what denv-cp -db-copy moves between the file store
 * and PostgreSQL, and how it checks that both hold the same. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/crypto.h"
#include "store/store.h"

struct digest_walk {
	struct st_db *db;
	struct sha256_ctx ctx;
	struct st_digest *out;
	struct buf text;
	const char *table;
	bool counted;		/* this table has had a row */
	struct err *e;
};

static int digest_row(const char *id, const struct json *row, void *arg)
{
	struct digest_walk *w = arg;
	struct buf *b = &w->text;

	buf_reset(b);
	/* NUL-separated: names and ids hold no NUL, so no two rows run together. */
	buf_add(b, w->table, strlen(w->table) + 1);
	buf_add(b, id, strlen(id) + 1);
	if (json_write(b, row, 0) < 0 || buf_addch(b, '\n') < 0)
		return err_set(w->e, "store: digest: row %s/%s cannot be written", w->table, id);
	if (sha256_update(&w->ctx, b->data, b->len) < 0)
		return err_set(w->e, "store: digest: sha256 failed");
	w->out->rows++;
	if (!w->counted) {
		w->counted = true;
		w->out->tables++;
	}
	return 0;
}

static int digest_table(const char *table, void *arg)
{
	struct digest_walk *w = arg;

	w->table = table;
	w->counted = false;
	if (st_scan(w->db, table, NULL, NULL, NULL, digest_row, w, w->e) < 0)
		return -1;
	st_release(w->db);	/* no loop: the rows read go now, not at close */
	return 0;
}

int st_digest(struct st_db *db, struct st_digest *out, struct err *e)
{
	struct digest_walk w = { .db = db, .ctx = SHA256_CTX_INIT, .out = out, .e = e };
	uint8_t sum[SHA256_LEN];
	int rc = -1;

	memset(out, 0, sizeof(*out));
	buf_init(&w.text, ST_RECORD_MAX + 2 * ST_ID_MAX);
	if (sha256_init(&w.ctx) < 0) {
		err_set(e, "store: digest: sha256 failed");
		goto out;
	}
	if (st_tables(db, digest_table, &w) != 0)
		goto out;
	if (sha256_final(&w.ctx, sum) < 0) {
		err_set(e, "store: digest: sha256 failed");
		goto out;
	}
	for (int i = 0; i < SHA256_LEN; i++)
		snprintf(out->sha256 + 2 * i, 3, "%02x", sum[i]);
	rc = 0;
out:
	sha256_release(&w.ctx);
	buf_release(&w.text);
	return rc;
}

struct copy_walk {
	struct st_db *from, *to;
	struct st_txn *txn;
	size_t ops;			/* rows in txn */
	const char *table;
	char after[ST_ID_MAX + 1];	/* the last id put: the next window starts after it */
	struct err *e;
};

static int copy_row(const char *id, const struct json *row, void *arg)
{
	struct copy_walk *c = arg;

	if (st_put(c->txn, c->table, id, json_dup(row)) < 0)
		return 1;	/* the txn is poisoned: st_commit says why */
	snprintf(c->after, sizeof(c->after), "%s", id);
	c->ops++;
	return 0;
}

static int copy_table(const char *table, void *arg)
{
	struct copy_walk *c = arg;
	struct st_range r = { NULL, ST_COPY_TXN_OPS, false };

	c->table = table;
	c->after[0] = '\0';
	/* A window of rows per transaction: st_scan callbacks may not commit. */
	for (;;) {
		r.after = c->after[0] ? c->after : NULL;
		c->ops = 0;
		c->txn = st_begin(c->to);
		if (st_scan(c->from, table, NULL, NULL, &r, copy_row, c, c->e) < 0) {
			st_abort(c->txn);
			return -1;
		}
		if (st_commit(c->txn, NULL, NULL, c->e) < 0)
			return err_prefix(c->e, "copy %s", table);
		st_release(c->from);
		st_release(c->to);
		if (c->ops < ST_COPY_TXN_OPS)
			return 0;
	}
}

static int count_rows(const char *table, void *arg)
{
	struct copy_walk *c = arg;

	if (st_count(c->to, table, NULL, NULL) > 0) {
		snprintf(c->after, sizeof(c->after), "%s", table);
		return 1;
	}
	return 0;
}

int st_copy(struct st_db *from, struct st_db *to, struct err *e)
{
	struct copy_walk c = { .from = from, .to = to, .e = e };

	if (st_tables(to, count_rows, &c) != 0)
		return err_set(e, "store: the target already holds rows (table %s): copy only into an empty store",
			       c.after);
	if (st_tables(from, copy_table, &c) != 0)
		return -1;
	return st_flush(to) < 0 ? err_set(e, "store: the target failed after the copy") : 0;
}
