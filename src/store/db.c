/*
 * db.c: tables, rows, indexes and the row cache of an open database
 * (store.h: the format and the rules).
 */
#include "store/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "base/utf8.h"

static uint32_t db_rand(struct st_db *db)
{
	/* xorshift32: priorities only need to be unpredictable to the input order */
	uint32_t x = db->rng;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	db->rng = x;
	return x;
}

/* Names and ids are written as JSON strings: they must survive the trip,
 * so they are valid UTF-8 without NUL bytes. */
bool st_name_ok(const char *s)
{
	size_t n;

	if (!s)
		return false;
	n = strnlen(s, ST_NAME_MAX + 1);
	return n > 0 && n <= ST_NAME_MAX && utf8_valid(s, n);
}

bool st_id_ok(const char *s, size_t n)
{
	return s && n > 0 && n <= ST_ID_MAX && !memchr(s, '\0', n) && utf8_valid(s, n);
}

struct st_table *st_table_find(struct st_db *db, const char *name)
{
	if (db->last_table && strcmp(db->last_table->name, name) == 0)
		return db->last_table;
	for (size_t i = 0; i < db->ntables; i++) {
		if (strcmp(db->tables[i].name, name) == 0) {
			db->last_table = &db->tables[i];
			return db->last_table;
		}
	}
	return NULL;
}

/* Callers have checked ST_TABLES_MAX. */
struct st_table *st_table_get(struct st_db *db, const char *name)
{
	struct st_table *t = st_table_find(db, name);

	if (t)
		return t;
	if (db->ntables == db->tables_cap) {
		db->tables_cap = db->tables_cap ? db->tables_cap * 2 : 16;
		db->tables = xrealloc(db->tables, db->tables_cap * sizeof(*db->tables));
		db->last_table = NULL;	/* the array moved */
	}
	t = &db->tables[db->ntables++];
	memset(t, 0, sizeof(*t));
	t->name = xstrdup(name);
	db->last_table = t;
	return t;
}

struct st_row *st_row_find(const struct st_table *t, const char *id, size_t idlen)
{
	struct tkey k = { "", 0, id, idlen, false };
	struct tnode *n = t->root ? st_t_find(t->root, &k) : NULL;

	return n ? n->row : NULL;
}

struct ixnode *st_ix_node_new(struct st_row *r, int i, const char *v, size_t vlen)
{
	struct ixnode *n = xmalloc(sizeof(*n) + vlen + 1);

	memset(n, 0, sizeof(*n));
	memcpy(n->v, v, vlen);
	n->v[vlen] = '\0';
	n->t.vlen = (uint32_t)vlen;
	n->t.row = r;
	n->ix = i;
	n->next_ix = r->ixhead;
	r->ixhead = n;
	return n;
}

static void ix_add_one(struct st_db *db, struct st_table *t, struct st_row *r, const struct json *row, int i)
{
	struct json *v = json_get(row, t->ixfield[i]);
	struct ixnode *n;

	/* Only string values are indexed: a row without the field, or with a
	 * non-string value, is simply not in the index. */
	if (!v || v->type != JSON_STRING)
		return;
	n = st_ix_node_new(r, i, v->u.str.s, v->u.str.len);
	n->t.prio = db_rand(db);
	t->ixroot[i] = st_t_insert(t->ixroot[i], &n->t);
}

static void ix_add(struct st_db *db, struct st_table *t, struct st_row *r, const struct json *row)
{
	for (int i = 0; i < t->nix; i++)
		ix_add_one(db, t, r, row, i);
}

static void ix_remove(struct st_table *t, struct st_row *r)
{
	struct ixnode *n = r->ixhead, *next;

	for (; n; n = next) {
		next = n->next_ix;
		t->ixroot[n->ix] = st_t_remove(t->ixroot[n->ix], &n->t);
		free(n);
	}
	r->ixhead = NULL;
}

/* Hand memory freed in bulk (a replay, a big listing) back to the system:
 * glibc keeps it in its arenas otherwise, and the RSS stays at the peak. */
void st_trim_memory(void)
{
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

/* Forget r's parsed row (it changed, or goes): the pointer handed out dies. */
static void cache_drop(struct st_db *db, struct st_row *r)
{
	if (r->cidx) {
		db->cache[r->cidx - 1] = NULL;
		r->cidx = 0;
	}
	json_free(r->json);
	r->json = NULL;
}

/* Drop the parsed rows of the first n cache slots (the slots stay). */
static void cache_free_rows(struct st_db *db, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct st_row *r = db->cache[i];
		if (!r)
			continue;
		json_free(r->json);
		r->json = NULL;
		r->cidx = 0;
	}
}

/* Free the first n cached rows (those read before a PostgreSQL batch was
 * sent, once its done_fns have run); the later ones move to the front. */
void st_cache_release_first(struct st_db *db, size_t n)
{
	size_t keep;

	if (n > db->ncache)
		n = db->ncache;
	cache_free_rows(db, n);
	keep = db->ncache - n;
	memmove(db->cache, db->cache + n, keep * sizeof(*db->cache));
	for (size_t i = 0; i < keep; i++)
		if (db->cache[i])
			db->cache[i]->cidx = (uint32_t)(i + 1);
	db->ncache = keep;
}

/* Free every cached parsed row (the end of their lifetime, store.h). */
void st_cache_release(struct st_db *db)
{
	size_t n = db->ncache;

	cache_free_rows(db, n);
	db->ncache = 0;
	if (db->cache_cap > 4096) {
		/* a big scan should not pin its array */
		free(db->cache);
		db->cache = NULL;
		db->cache_cap = 0;
	}
	/* After a pass over many rows, give the freed pages back. */
	if (n >= ST_TRIM_AFTER_ROWS)
		st_trim_memory();
}

static void row_free(struct st_row *r)
{
	json_free(r->json);
	free(r);
}

/*
 * Apply one put or delete to memory. A put gives the row's text in the log
 * (off, len) and its parsed form (row, not taken: only read for the index
 * values; NULL from a replay without a DOM, where no table has an index
 * yet). Cannot fail.
 */
void st_apply_op(struct st_db *db, const char *table, const char *id, bool put, const struct json *row,
		 off_t off, size_t len)
{
	struct st_table *t = put ? st_table_get(db, table) : st_table_find(db, table);
	size_t idlen = strlen(id);
	struct st_row *r;

	if (!t)
		return;		/* delete from a table that never existed */
	r = st_row_find(t, id, idlen);
	if (put) {
		if (r) {
			cache_drop(db, r);
			ix_remove(t, r);
			r->off = off;
			r->len = (uint32_t)len;
			ix_add(db, t, r, row);
			return;
		}
		r = xmalloc(sizeof(*r) + idlen + 1);
		memset(r, 0, sizeof(*r));
		memcpy(r->id, id, idlen + 1);
		r->idlen = (uint32_t)idlen;
		r->off = off;
		r->len = (uint32_t)len;
		r->t.prio = db_rand(db);
		r->t.vlen = 0;
		r->t.row = r;
		t->root = st_t_insert(t->root, &r->t);
		t->nrows++;
		db->live_rows++;
		ix_add(db, t, r, row);
		return;
	}
	if (!r)
		return;
	cache_drop(db, r);
	ix_remove(t, r);
	t->root = st_t_remove(t->root, &r->t);
	t->nrows--;
	db->live_rows--;
	row_free(r);
}

void st_tree_free_rows(struct tnode *n)
{
	/* Rows hang off the id tree; index nodes are freed through the rows.
	 * Recursion goes left only (expected depth O(log n)); right is a loop. */
	while (n) {
		struct tnode *right = n->r;
		struct ixnode *x, *next;
		struct st_row *row = n->row;

		st_tree_free_rows(n->l);
		for (x = row->ixhead; x; x = next) {
			next = x->next_ix;
			free(x);
		}
		row_free(row);
		n = right;
	}
}

/*
 * Can row be written and read back as the same tree? Its nesting must stay
 * within what replay parses, and its strings and keys must be valid UTF-8:
 * the writer would replace bad bytes with U+FFFD and the row in memory
 * would differ from the row on disk. 0 or -1 (with why).
 */
int st_row_check(const struct json *v, int depth, const char **why)
{
	if (v->type == JSON_STRING) {
		if (!utf8_valid(v->u.str.s, v->u.str.len)) {
			*why = "a string is not valid UTF-8";
			return -1;
		}
		return 0;
	}
	if (v->type == JSON_DOUBLE && !isfinite(v->u.d)) {
		*why = "a number is not finite (JSON has no NaN or infinity)";
		return -1;
	}
	if (v->type != JSON_OBJECT && v->type != JSON_ARRAY)
		return 0;
	if (depth >= ST_JSON_DEPTH_MAX) {
		*why = "nested too deeply";
		return -1;
	}
	if (v->type == JSON_ARRAY) {
		for (size_t i = 0; i < v->u.arr.n; i++)
			if (st_row_check(v->u.arr.items[i], depth + 1, why) < 0)
				return -1;
		return 0;
	}
	for (size_t i = 0; i < v->u.obj.n; i++) {
		if (!utf8_valid(v->u.obj.m[i].key, v->u.obj.m[i].key_len)) {
			*why = "a key is not valid UTF-8";
			return -1;
		}
		if (st_row_check(v->u.obj.m[i].val, depth + 1, why) < 0)
			return -1;
	}
	return 0;
}
