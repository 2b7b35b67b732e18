/* read.c: lookups, scans and counts (store.h: the format and the rules). */
#include "store/internal.h"

#include <stdlib.h>
#include <string.h>

#include "store/pg.h"

const struct json *st_get(struct st_db *db, const char *table, const char *id)
{
	struct st_table *t;
	struct st_row *r;
	struct err e;

	if (!table || !id || !(t = st_table_find(db, table)))
		return NULL;
	r = st_row_find(t, id, strlen(id));
	return r ? st_row_get(db, r, &e) : NULL;
}

void st_release(struct st_db *db)
{
	if (db && !db->scanning)
		st_cache_release(db);
}

static int find_index(const struct st_table *t, const char *field)
{
	for (int i = 0; i < t->nix; i++)
		if (strcmp(t->ixfield[i], field) == 0)
			return i;
	return -1;
}

int st_scan(struct st_db *db, const char *table, const char *field, const char *value,
	    const struct st_range *range, st_scan_fn fn, void *arg, struct err *e)
{
	struct st_table *t;
	struct tnode *root, *n;
	struct titer it = { 0 };
	struct tkey k = { "", 0, "", 0, false };
	bool rev = range && range->reverse;
	size_t limit = range ? range->limit : 0, seen = 0;
	int rc = 0;

	if (!st_name_ok(table))
		return err_set(e, "store: bad table name");
	if (field && (!st_name_ok(field) || !value))
		return err_set(e, "store: scan of %s: bad index field or value", table);
	t = st_table_find(db, table);
	if (!t)
		return 0;
	root = t->root;
	if (field) {
		int i = find_index(t, field);
		if (i < 0)
			return err_set(e, "store: table %s has no index on %s", table, field);
		root = t->ixroot[i];
		k.v = value;
		k.vlen = strlen(value);
	}
	if (range && range->after) {
		k.id = range->after;
		k.idlen = strlen(range->after);
	} else if (rev) {
		k.id_inf = true;
	}
	st_it_seek(&it, root, &k, rev);
	db->scanning++;
	while ((n = st_it_next(&it))) {
		const struct json *row;
		if (n->vlen != k.vlen || memcmp(st_node_v(n), k.v, k.vlen) != 0)
			break;	/* past the index entry for value */
		if (!(row = st_row_get(db, n->row, e))) {
			rc = -1;
			break;
		}
		if (fn(n->row->id, row, arg) != 0)
			break;
		if (limit && ++seen >= limit)
			break;
	}
	db->scanning--;
	st_it_release(&it);
	return rc;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int st_tables(struct st_db *db, int (*fn)(const char *table, void *arg), void *arg)
{
	const char **names = xcalloc(db->ntables ? db->ntables : 1, sizeof(*names));
	int rc = 0;

	for (size_t i = 0; i < db->ntables; i++)
		names[i] = db->tables[i].name;
	qsort(names, db->ntables, sizeof(*names), name_cmp);
	for (size_t i = 0; i < db->ntables && rc == 0; i++)
		rc = fn(names[i], arg);
	free(names);
	return rc;
}

size_t st_count(struct st_db *db, const char *table, const char *field, const char *value)
{
	struct st_table *t;
	struct tnode *n;
	struct titer it = { 0 };
	struct tkey k = { "", 0, "", 0, false };
	size_t count = 0;
	int i;

	if (!table || !(t = st_table_find(db, table)))
		return 0;
	if (!field)
		return t->nrows;
	if (!value || (i = find_index(t, field)) < 0)
		return 0;
	k.v = value;
	k.vlen = strlen(value);
	st_it_seek(&it, t->ixroot[i], &k, false);
	while ((n = st_it_next(&it)) && n->vlen == k.vlen && memcmp(st_node_v(n), k.v, k.vlen) == 0)
		count++;
	st_it_release(&it);
	return count;
}

bool st_failed(const struct st_db *db)
{
	return db->failed;
}

bool st_lease_lost(const struct st_db *db)
{
	return db->pg && stpg_lost(db->pg);
}

void st_stats(const struct st_db *db, struct st_stats *out)
{
	out->log_bytes = db->size;
	out->records = db->records;
	out->live_rows = db->live_rows;
	out->log_ops = db->log_ops;
	out->fsyncs = db->fsyncs;
	out->compactions = db->compactions;
	out->truncated_bytes = db->truncated_bytes;
	out->row_reads = db->row_reads;
	out->cached_rows = 0;
	for (size_t i = 0; i < db->ncache; i++)
		out->cached_rows += db->cache[i] != NULL;
}
