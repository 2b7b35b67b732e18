/*
 * store.c: the record log, replay, in-memory tables and indexes, group
 * commit and compaction. See store.h for the file format and the rules.
 */
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "base/buf.h"
#include "base/ev.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/utf8.h"
#include "store/pg.h"

#define MOD "store"

static const char st_magic[8] = { 'd', 'e', 'n', 'v', 's', 't', 'o', 'r' };
static const char st_mark_magic[8] = { 'd', 'e', 'n', 'v', 'm', 'a', 'r', 'k' };
/* What every payload this code writes starts with; the forward scan that
 * tells a torn tail from mid-log corruption uses it as a cheap filter. */
static const char st_payload_prefix[] = "{\"ops\":[";

/* ---- ordered trees (treaps) ---- */

/*
 * One node type serves both the rows of a table (ordered by id) and the
 * entries of an index (ordered by value, then id). A row node has vlen 0;
 * an index node is a struct ixnode with its value stored inline.
 * Priorities are random, so the expected depth is O(log n) whatever the
 * insertion order (ULIDs arrive sorted, which would degenerate a plain BST).
 *
 * Memory is the point of this layout (10,000 environments must fit in a few
 * tens of MiB): a row in memory is its id, where its JSON text lies in the
 * log, and a copy of each indexed value; the row itself is read from the log
 * (and parsed) when someone asks for it.
 */
struct st_row;

struct tnode {
	struct tnode *l, *r;
	struct st_row *row;
	uint32_t prio;
	uint32_t vlen;		/* index value bytes (0 for a row node) */
};

struct ixnode {
	struct tnode t;		/* first: a tnode * of an index node is an ixnode * */
	struct ixnode *next_ix;	/* the row's other index entries */
	int ix;			/* which index of the table */
	char v[];		/* the value, vlen bytes and a NUL */
};

struct st_row {
	struct tnode t;		/* t.row == this row */
	struct ixnode *ixhead;	/* this row's index entries */
	struct json *json;	/* parsed row while cached (see "Pointers" in store.h), or NULL */
	off_t off;		/* the row's JSON text in the log file */
	uint32_t len;
	uint32_t idlen;
	uint32_t cidx;		/* position in db->cache + 1 while cached, else 0 */
	char id[];		/* idlen bytes and a NUL */
};

/* The value a node sorts by: only index nodes have one that is not "". */
static const char *node_v(const struct tnode *n)
{
	return n->vlen ? ((const struct ixnode *)n)->v : "";
}

struct tkey {
	const char *v;
	size_t vlen;
	const char *id;
	size_t idlen;
	bool id_inf;		/* sorts after every id with the same v */
};

static int bytes_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	int c = n ? memcmp(a, b, n) : 0;

	if (c)
		return c;
	return alen < blen ? -1 : alen > blen;
}

/* Compare node n with key k: <0, 0, >0. */
static int node_cmp(const struct tnode *n, const struct tkey *k)
{
	int c = bytes_cmp(node_v(n), n->vlen, k->v, k->vlen);

	if (c)
		return c;
	if (k->id_inf)
		return -1;
	return bytes_cmp(n->row->id, n->row->idlen, k->id, k->idlen);
}

static struct tkey key_of(const struct tnode *n)
{
	struct tkey k = { node_v(n), n->vlen, n->row->id, n->row->idlen, false };
	return k;
}

static struct tnode *t_rot_right(struct tnode *n)
{
	struct tnode *l = n->l;
	n->l = l->r;
	l->r = n;
	return l;
}

static struct tnode *t_rot_left(struct tnode *n)
{
	struct tnode *r = n->r;
	n->r = r->l;
	r->l = n;
	return r;
}

static struct tnode *t_insert(struct tnode *root, struct tnode *n)
{
	struct tkey k;

	if (!root)
		return n;
	k = key_of(n);
	if (node_cmp(root, &k) > 0) {
		root->l = t_insert(root->l, n);
		if (root->l->prio > root->prio)
			root = t_rot_right(root);
	} else {
		root->r = t_insert(root->r, n);
		if (root->r->prio > root->prio)
			root = t_rot_left(root);
	}
	return root;
}

static struct tnode *t_merge(struct tnode *a, struct tnode *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (a->prio > b->prio) {
		a->r = t_merge(a->r, b);
		return a;
	}
	b->l = t_merge(a, b->l);
	return b;
}

static struct tnode *t_remove(struct tnode *root, struct tnode *n)
{
	struct tkey k;

	if (!root)
		return NULL;
	if (root == n)
		return t_merge(root->l, root->r);
	k = key_of(n);
	if (node_cmp(root, &k) > 0)
		root->l = t_remove(root->l, n);
	else
		root->r = t_remove(root->r, n);
	return root;
}

static struct tnode *t_find(struct tnode *n, const struct tkey *k)
{
	while (n) {
		int c = node_cmp(n, k);
		if (c == 0)
			return n;
		n = c > 0 ? n->l : n->r;
	}
	return NULL;
}

/* In-order iteration from a key, ascending (> key) or descending (< key),
 * with an explicit stack: O(1) amortized per step. */
struct titer {
	struct tnode **stack;
	size_t n, cap;
	bool rev;
};

static void it_push(struct titer *it, struct tnode *n)
{
	if (it->n == it->cap) {
		it->cap = it->cap ? it->cap * 2 : 64;
		it->stack = xrealloc(it->stack, it->cap * sizeof(*it->stack));
	}
	it->stack[it->n++] = n;
}

static void it_seek(struct titer *it, struct tnode *root, const struct tkey *k, bool rev)
{
	struct tnode *n = root;

	it->rev = rev;
	it->n = 0;
	while (n) {
		int c = node_cmp(n, k);
		if (!rev) {
			if (c > 0) {
				it_push(it, n);
				n = n->l;
			} else {
				n = n->r;
			}
		} else {
			if (c < 0) {
				it_push(it, n);
				n = n->r;
			} else {
				n = n->l;
			}
		}
	}
}

static struct tnode *it_next(struct titer *it)
{
	struct tnode *x, *m;

	if (!it->n)
		return NULL;
	x = it->stack[--it->n];
	m = it->rev ? x->l : x->r;
	while (m) {
		it_push(it, m);
		m = it->rev ? m->r : m->l;
	}
	return x;
}

static void it_release(struct titer *it)
{
	free(it->stack);
	it->stack = NULL;
	it->n = it->cap = 0;
}

/* ---- the database ---- */

struct st_table {
	char *name;
	struct tnode *root;
	size_t nrows;
	int nix;
	char *ixfield[ST_INDEXES_MAX];
	struct tnode *ixroot[ST_INDEXES_MAX];
};

struct st_pending {
	st_done_fn fn;
	void *arg;
};

/* What the deferred flush holds on to: it may outlive the db (st_close while
 * a flush is queued on the loop), so it is allocated apart and freed by
 * whichever of the two comes last. */
struct st_flush_token {
	struct st_db *db;
	bool queued;		/* an ev_defer of flush_cb is pending */
	bool running;		/* flush_cb is on the stack */
	bool rel_queued;	/* an ev_defer of release_cb is pending */
};

/* One slot of the mark file (store.h, "The mark"). */
struct st_mark {
	uint64_t seq;		/* 0: none */
	uint64_t bytes;		/* the log's length */
	uint64_t records;
	uint32_t last_crc;	/* payload CRC of the log's last record; 0 with none */
	uint32_t flags;		/* ST_MARK_COMPACT */
};

/* What the log must hold at open: the mark read from disk. */
struct mark_want {
	bool on;		/* there is a mark to check */
	bool has_alt;		/* m is a compaction's slot: the other slot is accepted too */
	bool matched;		/* replay has passed a record boundary the mark describes */
	struct st_mark m, alt;
};

struct st_db {
	const struct st_sys *sys;
	struct ev *ev;
	bool repair, auto_compact;
	char *dir, *log_path, *tmp_path, *new_path, *lock_path, *mark_path, *mark_new_path;
	int fd, lock_fd, mark_fd;
	off_t size;			/* bytes of the log written (the next record's offset) */
	uint32_t last_crc;		/* payload CRC of the log's last record (0: none) */
	struct st_mark mark;		/* the newest slot written or read (seq 0: none) */
	bool mark_unsynced;		/* written since its last fdatasync */
	int64_t mark_synced_ms;		/* when it was last fdatasynced (ev_mono_ms) */
	struct ev_timer mark_timer;	/* (with a loop) the fdatasync of an unsynced mark */
	struct mark_want want;		/* at open only */
	uint64_t records, log_ops, live_rows;
	uint64_t fsyncs, compactions, truncated_bytes;
	uint64_t compact_after_ops;	/* back-off after a failed automatic compaction */
	struct st_table *tables;
	size_t ntables, tables_cap;
	struct st_table *last_table;	/* lookup cache: replay hits one table many times */
	uint32_t rng;
	struct buf wbuf;		/* the record being written */
	struct st_pending *pending;
	size_t npending, pending_cap;
	struct st_flush_token *token;
	struct st_row **cache;		/* rows with a parsed row cached (NULL: dropped since) */
	size_t ncache, cache_cap;
	bool release_after_flush;	/* release_cb ran while a flush was queued */
	char *rbuf;			/* where a row's text is read */
	size_t rbuf_cap;
	uint64_t row_reads;
	bool failed, closing;
	struct err fail_err;
	int scanning;
	/* PostgreSQL (st_open with a DSN): pg holds the durable rows; dir is a
	 * scratch copy (no fsyncs, no mark) that the rows are read from. */
	struct stpg *pg;
	bool scratch;
	struct st_pending *inflight;	/* done_fns of the batch on its way to pg */
	size_t ninflight;
	bool pg_waiting;		/* a batch is in flight */
	size_t inflight_cached;		/* rows cached when it was sent: its done_fns may use them */
};

struct st_op {
	bool del;
	const char *table;
	const char *id;
	struct json *row;	/* put: owned by the op until applied (st_commit), or into the record's DOM (replay) */
	size_t rpos, rlen;	/* put: the row's text in the record */
	size_t idlen;		/* replay: the id's bytes, for ops_check (an escaped NUL is refused) */
};

struct st_txn {
	struct st_db *db;
	struct st_op *ops;
	size_t n, cap;
	bool bad;
	struct err err;
};

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
static bool name_ok(const char *s)
{
	size_t n;

	if (!s)
		return false;
	n = strnlen(s, ST_NAME_MAX + 1);
	return n > 0 && n <= ST_NAME_MAX && utf8_valid(s, n);
}

static bool id_ok(const char *s, size_t n)
{
	return s && n > 0 && n <= ST_ID_MAX && !memchr(s, '\0', n) && utf8_valid(s, n);
}

static struct st_table *table_find(struct st_db *db, const char *name)
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
static struct st_table *table_get(struct st_db *db, const char *name)
{
	struct st_table *t = table_find(db, name);

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

static struct st_row *row_find(const struct st_table *t, const char *id, size_t idlen)
{
	struct tkey k = { "", 0, id, idlen, false };
	struct tnode *n = t->root ? t_find(t->root, &k) : NULL;

	return n ? n->row : NULL;
}

static struct ixnode *ix_node_new(struct st_row *r, int i, const char *v, size_t vlen)
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
	n = ix_node_new(r, i, v->u.str.s, v->u.str.len);
	n->t.prio = db_rand(db);
	t->ixroot[i] = t_insert(t->ixroot[i], &n->t);
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
		t->ixroot[n->ix] = t_remove(t->ixroot[n->ix], &n->t);
		free(n);
	}
	r->ixhead = NULL;
}

/* Hand memory freed in bulk (a replay, a big listing) back to the system:
 * glibc keeps it in its arenas otherwise, and the RSS stays at the peak. */
static void trim_memory(void)
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

static void cache_add(struct st_db *db, struct st_row *r, struct json *doc);

/* Free the first n cached rows (those read before a PostgreSQL batch was
 * sent, once its done_fns have run); the later ones move to the front. */
static void cache_release_first(struct st_db *db, size_t n)
{
	size_t keep;

	if (n > db->ncache)
		n = db->ncache;
	for (size_t i = 0; i < n; i++) {
		struct st_row *r = db->cache[i];
		if (!r)
			continue;
		json_free(r->json);
		r->json = NULL;
		r->cidx = 0;
	}
	keep = db->ncache - n;
	memmove(db->cache, db->cache + n, keep * sizeof(*db->cache));
	for (size_t i = 0; i < keep; i++)
		if (db->cache[i])
			db->cache[i]->cidx = (uint32_t)(i + 1);
	db->ncache = keep;
}

/* Free every cached parsed row (the end of their lifetime, store.h). */
static void cache_release(struct st_db *db)
{
	size_t n = db->ncache;

	for (size_t i = 0; i < n; i++) {
		struct st_row *r = db->cache[i];
		if (!r)
			continue;
		json_free(r->json);
		r->json = NULL;
		r->cidx = 0;
	}
	db->ncache = 0;
	if (db->cache_cap > 4096) {
		/* a big scan should not pin its array */
		free(db->cache);
		db->cache = NULL;
		db->cache_cap = 0;
	}
	/* After a pass over many rows, give the freed pages back. */
	if (n >= ST_TRIM_AFTER_ROWS)
		trim_memory();
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
static void apply_op(struct st_db *db, const char *table, const char *id, bool put, const struct json *row,
		     off_t off, size_t len)
{
	struct st_table *t = put ? table_get(db, table) : table_find(db, table);
	size_t idlen = strlen(id);
	struct st_row *r;

	if (!t)
		return;		/* delete from a table that never existed */
	r = row_find(t, id, idlen);
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
		t->root = t_insert(t->root, &r->t);
		t->nrows++;
		db->live_rows++;
		ix_add(db, t, r, row);
		return;
	}
	if (!r)
		return;
	cache_drop(db, r);
	ix_remove(t, r);
	t->root = t_remove(t->root, &r->t);
	t->nrows--;
	db->live_rows--;
	row_free(r);
}

static void tree_free_rows(struct tnode *n)
{
	/* Rows hang off the id tree; index nodes are freed through the rows.
	 * Recursion goes left only (expected depth O(log n)); right is a loop. */
	while (n) {
		struct tnode *right = n->r;
		struct ixnode *x, *next;
		struct st_row *row = n->row;

		tree_free_rows(n->l);
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
static int row_check(const struct json *v, int depth, const char **why)
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
			if (row_check(v->u.arr.items[i], depth + 1, why) < 0)
				return -1;
		return 0;
	}
	for (size_t i = 0; i < v->u.obj.n; i++) {
		if (!utf8_valid(v->u.obj.m[i].key, v->u.obj.m[i].key_len)) {
			*why = "a key is not valid UTF-8";
			return -1;
		}
		if (row_check(v->u.obj.m[i].val, depth + 1, why) < 0)
			return -1;
	}
	return 0;
}

/* ---- system calls, the sqlite way: EINTR retried, O_CLOEXEC, never fds 0-2 ---- */

static int sys_open(struct st_db *db, const char *path, int flags, mode_t mode)
{
	int fd;

	do
		fd = db->sys->open(path, flags | O_CLOEXEC, mode);
	while (fd < 0 && errno == EINTR);
	if (fd >= 0 && fd <= 2) {
		/* A stray write to stdout/stderr must never land in the log. */
		int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		int saved = errno;
		db->sys->close(fd);
		errno = saved;
		fd = nfd;
	}
	return fd;
}

static void sys_close_fd(struct st_db *db, int fd)
{
	int saved = errno;

	if (fd >= 0)
		db->sys->close(fd);
	errno = saved;
}

static int sys_pwrite_all(struct st_db *db, int fd, const void *p, size_t n, off_t off)
{
	const char *c = p;

	while (n > 0) {
		ssize_t w = db->sys->pwrite(fd, c, n, off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (w == 0) {
			errno = EIO;
			return -1;
		}
		c += w;
		n -= (size_t)w;
		off += w;
	}
	return 0;
}

/* Read exactly n bytes at off; -1 with errno (EIO for an early end). */
static int sys_pread_full(struct st_db *db, int fd, void *p, size_t n, off_t off)
{
	char *c = p;

	while (n > 0) {
		ssize_t r = db->sys->pread(fd, c, n, off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0) {
			errno = EIO;
			return -1;
		}
		c += r;
		n -= (size_t)r;
		off += r;
	}
	return 0;
}

static int sys_fsync_fd(struct st_db *db, int fd)
{
	int r;

	if (db->scratch)
		return 0;	/* a scratch copy: PostgreSQL holds the durable one */
	do
		r = db->sys->fsync(fd);
	while (r < 0 && errno == EINTR);
	return r;
}

static int sys_fdatasync_fd(struct st_db *db, int fd)
{
	/* A table made before the member existed syncs the mark with fsync. */
	int (*sync_fn)(int) = db->sys->fdatasync ? db->sys->fdatasync : db->sys->fsync;
	int r;

	do
		r = sync_fn(fd);
	while (r < 0 && errno == EINTR);
	return r;
}

static int sys_ftruncate_fd(struct st_db *db, int fd, off_t len)
{
	int r;

	do
		r = db->sys->ftruncate(fd, len);
	while (r < 0 && errno == EINTR);
	return r;
}

static int fsync_dir(struct st_db *db, struct err *e)
{
	int fd = sys_open(db, db->dir, O_RDONLY | O_DIRECTORY, 0);

	if (fd < 0)
		return err_errno(e, "store: open directory %s", db->dir);
	if (sys_fsync_fd(db, fd) < 0) {
		err_errno(e, "store: fsync directory %s", db->dir);
		sys_close_fd(db, fd);
		return -1;
	}
	sys_close_fd(db, fd);
	return 0;
}

static void put_u32(char *p, uint32_t v)
{
	p[0] = (char)(v & 0xff);
	p[1] = (char)((v >> 8) & 0xff);
	p[2] = (char)((v >> 16) & 0xff);
	p[3] = (char)((v >> 24) & 0xff);
}

static uint32_t get_u32(const char *p)
{
	const unsigned char *u = (const unsigned char *)p;
	return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 | (uint32_t)u[3] << 24;
}

static void put_u64(char *p, uint64_t v)
{
	put_u32(p, (uint32_t)v);
	put_u32(p + 4, (uint32_t)(v >> 32));
}

static uint64_t get_u64(const char *p)
{
	return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static uint32_t crc(const char *p, size_t n)
{
	uLong c = crc32(0L, Z_NULL, 0);

	/* zlib's length is a uInt; records are capped far below 4 GiB anyway */
	while (n > 0) {
		uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
		c = crc32(c, (const Bytef *)p, chunk);
		p += chunk;
		n -= chunk;
	}
	return (uint32_t)c;
}

static void make_header(char *h)
{
	memcpy(h, st_magic, 8);
	put_u32(h + 8, ST_FORMAT_VERSION);
	put_u32(h + 12, crc(h, 12));
}

/* ---- the mark: how much of the log was acknowledged (store.h, "The mark") ---- */

static void mark_header(char *h)
{
	memcpy(h, st_mark_magic, 8);
	put_u32(h + 8, ST_MARK_VERSION);
	put_u32(h + 12, crc(h, 12));
}

static void slot_encode(char *p, const struct st_mark *m)
{
	memset(p, 0, ST_MARK_SLOT_BYTES);
	put_u64(p, m->seq);
	put_u64(p + 8, m->bytes);
	put_u64(p + 16, m->records);
	put_u32(p + 24, m->last_crc);
	put_u32(p + 28, m->flags);
	put_u32(p + 36, crc(p, 36));
}

/* Slot i's bytes at p: true if they hold a write (good CRC, seq of i's parity). */
static bool slot_decode(const char *p, int i, struct st_mark *m)
{
	if (get_u32(p + 36) != crc(p, 36))
		return false;
	m->seq = get_u64(p);
	m->bytes = get_u64(p + 8);
	m->records = get_u64(p + 16);
	m->last_crc = get_u32(p + 24);
	m->flags = get_u32(p + 28);
	return m->seq != 0 && m->seq % 2 == (uint64_t)i && m->bytes >= ST_HEADER_BYTES;
}

/*
 * Read the mark file into db->want (nothing there: want.on stays false and
 * mark_fd -1). A mark that exists but is unusable is refused; with repair it
 * is ignored (mark_finish writes a new one). 0 / -1.
 */
static int mark_load(struct st_db *db, struct err *e)
{
	char buf[ST_MARK_BYTES], h[ST_MARK_HEADER_BYTES];
	struct st_mark s[2];
	bool v[2] = { false, false };
	struct stat st;
	const char *why = NULL;
	int hi;

	db->mark_fd = sys_open(db, db->mark_path, O_RDWR, 0);
	if (db->mark_fd < 0 && errno == ENOENT)
		return 0;
	if (db->mark_fd < 0)
		return err_errno(e, "store: open %s", db->mark_path);
	if (db->sys->fstat(db->mark_fd, &st) < 0)
		return err_errno(e, "store: stat %s", db->mark_path);
	mark_header(h);
	if (st.st_size != ST_MARK_BYTES) {
		why = "wrong size";
	} else if (sys_pread_full(db, db->mark_fd, buf, sizeof(buf), 0) < 0) {
		return err_errno(e, "store: read %s", db->mark_path);
	} else if (memcmp(buf, h, sizeof(h)) != 0) {
		why = "bad header";
	} else {
		for (int i = 0; i < 2; i++)
			v[i] = slot_decode(buf + ST_MARK_HEADER_BYTES + i * ST_MARK_SLOT_BYTES, i, &s[i]);
		if (!v[0] && !v[1])
			why = "no valid slot";
	}
	if (why) {
		if (!db->repair)
			return err_set(e, "store: mark %s is corrupt (%s); start with -db-repair to open the log "
				       "without checking it and write a new mark", db->mark_path, why);
		log_warn(MOD, "mark %s is corrupt (%s): repairing: the log is not checked, a new mark is written",
			 db->mark_path, why);
		sys_close_fd(db, db->mark_fd);
		db->mark_fd = -1;
		return 0;
	}
	hi = v[0] && (!v[1] || s[0].seq > s[1].seq) ? 0 : 1;
	db->mark = s[hi];
	db->mark_unsynced = true;	/* a killed process may have left it in the page cache only */
	db->want.on = true;
	db->want.m = s[hi];
	if ((s[hi].flags & ST_MARK_COMPACT) && v[1 - hi]) {
		db->want.has_alt = true;
		db->want.alt = s[1 - hi];
	}
	return 0;
}

static int mark_sync(struct st_db *db, struct err *e)
{
	if (!db->mark_unsynced)
		return 0;
	if (sys_fdatasync_fd(db, db->mark_fd) < 0)
		return err_errno(e, "store: fdatasync mark %s", db->mark_path);
	db->mark_unsynced = false;
	db->mark_synced_ms = ev_mono_ms();
	return 0;
}

/* Write the next slot (bytes, records, last_crc, flags), and fdatasync it
 * if sync. db->mark follows only on success; a failed write is retried in
 * the same slot, so the other one, the last good write, is never touched. */
static int mark_write(struct st_db *db, off_t bytes, uint64_t records, uint32_t last_crc, uint32_t flags,
		      bool sync, struct err *e)
{
	struct st_mark m = { db->mark.seq + 1, (uint64_t)bytes, records, last_crc, flags };
	char p[ST_MARK_SLOT_BYTES];
	off_t at = ST_MARK_HEADER_BYTES + (off_t)(m.seq % 2) * ST_MARK_SLOT_BYTES;

	slot_encode(p, &m);
	if (sys_pwrite_all(db, db->mark_fd, p, sizeof(p), at) < 0)
		return err_errno(e, "store: write mark %s", db->mark_path);
	db->mark_unsynced = true;
	if (sync && mark_sync(db, e) < 0)
		return -1;
	db->mark = m;
	return 0;
}

/* A new mark file for the log as it is (mark.new, fsync, rename, fsync dir):
 * a crash leaves the old file (or none) or the whole new one. */
static int mark_create(struct st_db *db, struct err *e)
{
	char buf[ST_MARK_BYTES];
	struct st_mark m = { 1, (uint64_t)db->size, db->records, db->last_crc, 0 };
	int fd = sys_open(db, db->mark_new_path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	if (fd < 0)
		return err_errno(e, "store: create %s", db->mark_new_path);
	memset(buf, 0, sizeof(buf));
	mark_header(buf);
	slot_encode(buf + ST_MARK_HEADER_BYTES + ST_MARK_SLOT_BYTES, &m);	/* seq 1: slot 1 */
	if (sys_pwrite_all(db, fd, buf, sizeof(buf), 0) < 0 || sys_fsync_fd(db, fd) < 0) {
		err_errno(e, "store: write %s", db->mark_new_path);
		goto fail;
	}
	if (db->sys->rename(db->mark_new_path, db->mark_path) < 0) {
		err_errno(e, "store: rename %s to %s", db->mark_new_path, db->mark_path);
		goto fail;
	}
	sys_close_fd(db, db->mark_fd);
	db->mark_fd = fd;
	db->mark = m;
	db->mark_unsynced = false;
	db->mark_synced_ms = ev_mono_ms();
	return fsync_dir(db, e);
fail:
	sys_close_fd(db, fd);
	db->sys->unlink(db->mark_new_path);
	return -1;
}

/* The mark could not be written or synced: the store can no longer tell
 * a cut log from a short one, so it takes no more commits. */
static void mark_failed(struct st_db *db, const struct err *e)
{
	if (db->failed)
		return;
	db->failed = true;
	err_set(&db->fail_err, "%s; refusing further commits (restart to replay what is on disk)", e->msg);
	log_error(MOD, "%s", db->fail_err.msg);
}

static void mark_timer_cb(struct ev *ev, void *arg)
{
	struct st_db *db = arg;
	struct err e;

	if (!db->failed && mark_sync(db, &e) < 0)
		mark_failed(db, &e);
}

/*
 * After a good fsync of the log: the mark follows it, before any done_fn
 * runs, so that a process crash (the page cache survives) never finds less
 * marked than was acknowledged. Its fdatasync waits up to ST_MARK_SYNC_MS
 * (a timer with a loop; otherwise the next commit after that, or close):
 * an fdatasync per group would cost a third of the unbatched commit rate,
 * and the mark's data needs no sync to stay true (it only ever claims what
 * was fsynced first). A power loss can thus forget the last interval's
 * marks, never claim too much. If the mark cannot be written, the data is
 * still durable (done_fns hear 0) but the store refuses further commits.
 */
static void mark_advance(struct st_db *db)
{
	struct err e;
	int64_t since;

	if (db->scratch)
		return;
	if (db->failed || ((uint64_t)db->size == db->mark.bytes && db->records == db->mark.records &&
			   db->last_crc == db->mark.last_crc))
		return;
	since = ev_mono_ms() - db->mark_synced_ms;
	if (mark_write(db, db->size, db->records, db->last_crc, 0, since >= ST_MARK_SYNC_MS, &e) < 0) {
		mark_failed(db, &e);
		return;
	}
	if (db->mark_unsynced && db->ev && !ev_timer_armed(&db->mark_timer))
		ev_timer_start(db->ev, &db->mark_timer, ST_MARK_SYNC_MS - since, mark_timer_cb, db);
}

static bool mark_is_here(const struct st_db *db, const struct st_mark *m)
{
	return (uint64_t)db->size == m->bytes && db->records == m->records && db->last_crc == m->last_crc;
}

/* Replay has read up to db->size: is that the boundary the mark describes? */
static void mark_see(struct st_db *db)
{
	struct mark_want *w = &db->want;

	if (w->on && !w->matched)
		w->matched = mark_is_here(db, &w->m) || (w->has_alt && mark_is_here(db, &w->alt));
}

/* Has replay gone past everything that was acknowledged? */
static bool mark_passed(const struct st_db *db)
{
	return !db->want.on || db->want.matched;
}

/* The refusal when the log (good up to db->size, then cut: cut names how,
 * or NULL) does not hold what its mark says was acknowledged. -1. */
static int mark_refuse(struct st_db *db, const char *cut, struct err *e)
{
	const struct st_mark *m = &db->want.m;
	char how[ERR_MSG_MAX / 2] = "";

	if (cut)
		snprintf(how, sizeof(how), ", then a record cut short at offset %lld (%s),", (long long)db->size, cut);
	if ((uint64_t)db->size < m->bytes || db->records < m->records)
		return err_set(e, "store: log %s is shorter than what was acknowledged: it holds %llu transactions "
			       "(%lld bytes)%s but its mark %s says %llu transactions (%llu bytes) were acknowledged; "
			       "start with -db-repair to keep the %llu transactions it holds and reset the mark",
			       db->log_path, (unsigned long long)db->records, (long long)db->size, how, db->mark_path,
			       (unsigned long long)m->records, (unsigned long long)m->bytes,
			       (unsigned long long)db->records);
	return err_set(e, "store: log %s does not match its mark %s: %llu transactions (%llu bytes) were "
		       "acknowledged, but the log (%llu transactions, %lld bytes)%s has no such record boundary: "
		       "it was replaced or rewritten; start with -db-repair to keep the log as it is and reset the mark",
		       db->log_path, db->mark_path, (unsigned long long)m->records, (unsigned long long)m->bytes,
		       (unsigned long long)db->records, (long long)db->size, how);
}

/* After replay: refuse a log that lacks what was acknowledged, or (repair)
 * say what is missing; the mark is then reset by mark_finish. */
static int mark_check(struct st_db *db, struct err *e)
{
	const struct st_mark *m = &db->want.m;
	uint64_t lost_rec, lost_bytes;

	if (mark_passed(db))
		return 0;
	if (!db->repair)
		return mark_refuse(db, NULL, e);
	lost_rec = m->records > db->records ? m->records - db->records : 0;
	lost_bytes = m->bytes > (uint64_t)db->size ? m->bytes - (uint64_t)db->size : 0;
	log_warn(MOD, "log %s: repaired: its mark said %llu transactions (%llu bytes) were acknowledged, the log "
		 "holds %llu (%lld bytes): dropping %llu acknowledged transactions (%llu bytes)%s; the mark is reset",
		 db->log_path, (unsigned long long)m->records, (unsigned long long)m->bytes,
		 (unsigned long long)db->records, (long long)db->size, (unsigned long long)lost_rec,
		 (unsigned long long)lost_bytes, lost_rec || lost_bytes ? "" : " (the log was replaced or rewritten)");
	return 0;
}

/* The end of every open: the log durable as replayed (log_synced: it is
 * already), then a mark for it. */
static int mark_finish(struct st_db *db, bool log_synced, struct err *e)
{
	if (!log_synced && sys_fsync_fd(db, db->fd) < 0)
		return err_errno(e, "store: fsync %s", db->log_path);
	if (db->mark_fd < 0 && db->records)
		log_warn(MOD, "log %s has no mark (a store from before marks, or the mark was removed): "
			 "it cannot be checked for truncation this time; writing %s", db->log_path, db->mark_path);
	/* A mark reset by repair is a new file: its other slot must not keep
	 * describing the log that is gone. */
	if (db->mark_fd < 0 || !mark_passed(db))
		return mark_create(db, e);
	if (mark_is_here(db, &db->mark) && !(db->mark.flags & ST_MARK_COMPACT))
		return mark_sync(db, e);
	return mark_write(db, db->size, db->records, db->last_crc, 0, true, e);
}

/* ---- reading rows from the log ---- */

/*
 * A row's read failed (I/O error, or bytes that no longer parse: the log
 * changed under us). The caller would take the row for absent and might act
 * on that (create it again, say), so the store refuses commits from now on,
 * like after a failed fsync; a restart replays and checks the log.
 */
static void row_failed(struct st_db *db, struct err *e)
{
	log_error(MOD, "%s", e->msg);
	if (!db->failed) {
		db->failed = true;
		err_set(&db->fail_err, "%s; refusing further commits (restart to replay what is on disk)", e->msg);
	}
}

/* The bytes of r's JSON text, in db->rbuf (valid until the next read). */
static const char *row_text(struct st_db *db, struct st_row *r, struct err *e)
{
	if (r->len + 1 > db->rbuf_cap) {
		free(db->rbuf);
		db->rbuf_cap = r->len + 1 > 4096 ? r->len + 1 : 4096;
		db->rbuf = xmalloc(db->rbuf_cap);
	}
	if (sys_pread_full(db, db->fd, db->rbuf, r->len, r->off) < 0) {
		err_errno(e, "store: read row %s at offset %lld of %s", r->id, (long long)r->off, db->log_path);
		return NULL;
	}
	db->rbuf[r->len] = '\0';
	db->row_reads++;
	return db->rbuf;
}

/* Parse text, r's row as read from the log: a new DOM, or NULL (and e). */
static struct json *row_parse(struct st_db *db, struct st_row *r, const char *text, struct err *e)
{
	struct json_limits lim = { ST_JSON_DEPTH_MAX + 8, ST_RECORD_MAX };
	struct json *doc = NULL;
	struct err pe;

	if (json_parse(text, r->len, &lim, &doc, &pe) < 0 || doc->type != JSON_OBJECT) {
		err_set(e, "store: row %s at offset %lld of %s does not parse: %s", r->id, (long long)r->off,
			db->log_path, doc ? "not an object" : pe.msg);
		json_free(doc);
		return NULL;
	}
	if (db->rbuf_cap > ST_COMPACT_RECORD_BYTES) {
		/* one huge row should not pin its buffer */
		free(db->rbuf);
		db->rbuf = NULL;
		db->rbuf_cap = 0;
	}
	return doc;
}

/* Read and parse r (not cached): a new DOM, or NULL (and e). */
static struct json *row_read(struct st_db *db, struct st_row *r, struct err *e)
{
	const char *text = row_text(db, r, e);

	return text ? row_parse(db, r, text, e) : NULL;
}

static void release_cb(struct ev *ev, void *arg);

static void cache_add(struct st_db *db, struct st_row *r, struct json *doc)
{
	if (db->ncache == db->cache_cap) {
		db->cache_cap = db->cache_cap ? db->cache_cap * 2 : 64;
		db->cache = xrealloc(db->cache, db->cache_cap * sizeof(*db->cache));
	}
	db->cache[db->ncache++] = r;
	r->cidx = (uint32_t)db->ncache;
	r->json = doc;
	if (db->ev && !db->token->rel_queued) {
		db->token->rel_queued = true;
		ev_defer(db->ev, release_cb, db->token);
	}
}

/* r's parsed row, from the cache or read now (and cached). NULL and e on failure. */
static const struct json *row_get(struct st_db *db, struct st_row *r, struct err *e)
{
	struct json *doc;

	if (r->json)
		return r->json;
	if (!(doc = row_read(db, r, e))) {
		row_failed(db, e);
		return NULL;
	}
	cache_add(db, r, doc);
	return doc;
}

/* ---- encoding records ---- */

/* Start a record in b: room for len+crc, then the payload's opening. */
static void rec_begin(struct buf *b)
{
	buf_reset(b);
	buf_add(b, "\0\0\0\0\0\0\0\0", ST_RECORD_HEAD_BYTES);
	buf_adds(b, st_payload_prefix);
}

/*
 * Append one op to the record in b ("first" says no comma): a put of row
 * (a DOM) or of text (rtext, rlen bytes of JSON, copied as they are), or a
 * delete when both are NULL. A put's row text lands at b->data + *rpos,
 * *rlen bytes. -1 if b's cap (the record size limit) is reached; b is then
 * in an unknown state.
 */
static int rec_add_op(struct buf *b, bool first, const char *table, const char *id, const struct json *row,
		      const char *rtext, size_t rlen, size_t *rpos, size_t *rlenp)
{
	bool put = row || rtext;

	if (!first && buf_addch(b, ',') < 0)
		return -1;
	if (buf_adds(b, put ? "{\"put\":" : "{\"del\":") < 0 ||
	    json_write_string(b, table, strlen(table)) < 0 ||
	    buf_adds(b, ",\"id\":") < 0 ||
	    json_write_string(b, id, strlen(id)) < 0)
		return -1;
	if (put) {
		if (buf_adds(b, ",\"row\":") < 0)
			return -1;
		*rpos = b->len;
		if (row ? json_write(b, row, JSON_COMPACT) < 0 : buf_add(b, rtext, rlen) < 0)
			return -1;
		*rlenp = b->len - *rpos;
	}
	return buf_addch(b, '}');
}

/* Close the payload and fill in len and crc. -1 if too large. */
static int rec_end(struct buf *b)
{
	size_t plen;

	if (buf_adds(b, "]}") < 0)
		return -1;
	plen = b->len - ST_RECORD_HEAD_BYTES;
	if (plen > ST_RECORD_MAX)
		return -1;
	put_u32(b->data, (uint32_t)plen);
	put_u32(b->data + 4, crc(b->data + ST_RECORD_HEAD_BYTES, plen));
	return 0;
}

/* ---- decoding records ---- */

/*
 * Check a parsed payload and turn it into ops (pointing into doc). The
 * whole transaction is checked before any of it is applied, so that a
 * record is applied all or not at all.
 */
static int ops_check(struct st_db *db, const struct st_op *o, size_t n, struct err *e);

static int decode_ops(struct st_db *db, struct json *doc, struct st_op **ops, size_t *nops, struct err *e)
{
	struct json *arr = json_get(doc, "ops");
	size_t n;
	struct st_op *o;

	if (!doc || doc->type != JSON_OBJECT || !arr || arr->type != JSON_ARRAY)
		return err_set(e, "not a transaction (no \"ops\" array)");
	n = arr->u.arr.n;
	if (n > ST_TXN_OPS_MAX)
		return err_set(e, "%zu operations (at most %d)", n, ST_TXN_OPS_MAX);
	o = xcalloc(n ? n : 1, sizeof(*o));
	for (size_t i = 0; i < n; i++) {
		struct json *op = arr->u.arr.items[i];
		struct json *put = json_get(op, "put"), *del = json_get(op, "del");
		struct json *id = json_get(op, "id"), *row = json_get(op, "row");
		struct json *name = put ? put : del;

		if (!op || op->type != JSON_OBJECT || (put && del) || !name || name->type != JSON_STRING) {
			err_set(e, "operation %zu: neither put nor del", i);
			goto fail;
		}
		if (name->u.str.len != strlen(name->u.str.s)) {
			err_set(e, "operation %zu: bad table name", i);
			goto fail;
		}
		if (!id || id->type != JSON_STRING) {
			err_set(e, "operation %zu: bad id", i);
			goto fail;
		}
		if (put && (!row || row->type != JSON_OBJECT)) {
			err_set(e, "operation %zu: put without an object row", i);
			goto fail;
		}
		o[i].del = !put;
		o[i].table = name->u.str.s;
		o[i].id = id->u.str.s;
		o[i].idlen = id->u.str.len;
		o[i].row = put ? row : NULL;
	}
	if (ops_check(db, o, n, e) < 0)
		goto fail;
	*ops = o;
	*nops = n;
	return 0;
fail:
	free(o);
	return -1;
}

/* The checks every decoded record passes, however it was decoded: table
 * names and ids, and no more tables than
 * ST_TABLES_MAX once its puts have created theirs. */
static int ops_check(struct st_db *db, const struct st_op *o, size_t n, struct err *e)
{
	size_t newtables = 0;

	for (size_t i = 0; i < n; i++) {
		if (!name_ok(o[i].table))
			return err_set(e, "operation %zu: bad table name", i);
		if (!id_ok(o[i].id, o[i].idlen))
			return err_set(e, "operation %zu: bad id", i);
		if (!o[i].del && !table_find(db, o[i].table)) {
			/* Count distinct new tables (n is small per record, tables few). */
			bool seen = false;
			for (size_t j = 0; j < i && !seen; j++)
				seen = !o[j].del && strcmp(o[j].table, o[i].table) == 0;
			if (!seen && db->ntables + ++newtables > ST_TABLES_MAX)
				return err_set(e, "more than %d tables", ST_TABLES_MAX);
		}
	}
	return 0;
}

/*
 * Replay without a DOM. Parsing each record into a DOM only to find where
 * its rows lie cost most of a replay (a million rows: seconds of allocating
 * and freeing nodes). A record as rec_add_op writes it, compact and with no
 * escape in a table name or id, is walked instead: the ops' strings are
 * copied out, each row is stepped over with json_check, which accepts only
 * what json_parse accepts, at the same depth (the record's own three
 * levels less). Anything else (another writer's spacing or key order, an
 * escape, a row json_check will not vouch for, a table that already has
 * indexes) goes the DOM's way, which also names what is wrong with a bad
 * record: a log replays to the same tables, or is refused, either way.
 */
struct rscan {
	struct st_op *ops;
	size_t n, cap;
	struct buf names;	/* each op's table and id, NUL-terminated */
	size_t *noff;		/* per op: offsets of its table and id in names */
};

static bool scan_lit(const char *p, size_t len, size_t *i, const char *lit)
{
	size_t n = strlen(lit);

	if (len - *i < n || memcmp(p + *i, lit, n) != 0)
		return false;
	*i += n;
	return true;
}

/* A string at *i with no escape, copied into names; *off: where. */
static bool scan_name(struct rscan *sc, const char *p, size_t len, size_t *i, size_t *off, size_t *n)
{
	size_t end;

	if (*i >= len || p[*i] != '"' || json_skip(p + *i, len - *i, 1, &end) < 0 ||
	    memchr(p + *i + 1, '\\', end - 2))
		return false;
	*off = sc->names.len;
	*n = end - 2;
	if (buf_add(&sc->names, p + *i + 1, end - 2) < 0 || buf_addch(&sc->names, '\0') < 0)
		return false;
	*i += end;
	return true;
}

static bool scan_op(struct st_db *db, struct rscan *sc, const char *p, size_t len, size_t *i)
{
	struct st_op *o;
	size_t *noff, tlen, end;
	const struct st_table *t;

	if (sc->n == ST_TXN_OPS_MAX)
		return false;
	if (sc->n == sc->cap) {
		sc->cap = sc->cap ? sc->cap * 2 : 1024;
		sc->ops = xrealloc(sc->ops, sc->cap * sizeof(*sc->ops));
		sc->noff = xrealloc(sc->noff, sc->cap * 2 * sizeof(*sc->noff));
	}
	o = &sc->ops[sc->n];
	noff = &sc->noff[2 * sc->n];
	memset(o, 0, sizeof(*o));
	if (scan_lit(p, len, i, "{\"put\":"))
		o->del = false;
	else if (scan_lit(p, len, i, "{\"del\":"))
		o->del = true;
	else
		return false;
	if (!scan_name(sc, p, len, i, &noff[0], &tlen) || !scan_lit(p, len, i, ",\"id\":") ||
	    !scan_name(sc, p, len, i, &noff[1], &o->idlen))
		return false;
	if (!o->del) {
		if (!scan_lit(p, len, i, ",\"row\":") || *i >= len || p[*i] != '{' ||
		    json_check(p + *i, len - *i, ST_JSON_DEPTH_MAX + 5, &end) < 0)
			return false;
		t = table_find(db, sc->names.data + noff[0]);
		if (t && t->nix > 0)
			return false;	/* apply_op needs the row's DOM for the index values */
		o->rpos = *i;
		o->rlen = end;
		*i += end;
	}
	if (!scan_lit(p, len, i, "}"))
		return false;
	sc->n++;
	return true;
}

/* 1: the record at p (len bytes) is in sc, checked; 0: use the DOM. */
static int rec_scan(struct st_db *db, struct rscan *sc, const char *p, size_t len)
{
	size_t i = 0;
	struct err e;

	sc->n = 0;
	buf_reset(&sc->names);
	if (!scan_lit(p, len, &i, st_payload_prefix))
		return 0;
	if (!scan_lit(p, len, &i, "]")) {
		do {
			if (!scan_op(db, sc, p, len, &i))
				return 0;
		} while (scan_lit(p, len, &i, ","));
		if (!scan_lit(p, len, &i, "]"))
			return 0;
	}
	if (!scan_lit(p, len, &i, "}") || i != len)
		return 0;
	for (size_t k = 0; k < sc->n; k++) {
		sc->ops[k].table = sc->names.data + sc->noff[2 * k];
		sc->ops[k].id = sc->names.data + sc->noff[2 * k + 1];
	}
	return ops_check(db, sc->ops, sc->n, &e) < 0 ? 0 : 1;
}

static void rscan_release(struct rscan *sc)
{
	free(sc->ops);
	free(sc->noff);
	buf_release(&sc->names);
}

/* ---- where each row's text lies in a record ---- */

static size_t span_ws(const char *p, size_t len, size_t i)
{
	while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
		i++;
	return i;
}

/* Expect byte c (after whitespace) at *i and step over it. */
static int span_expect(const char *p, size_t len, size_t *i, char c)
{
	*i = span_ws(p, len, *i);
	if (*i >= len || p[*i] != c)
		return -1;
	(*i)++;
	return 0;
}

/* Step over one value (after whitespace); *start gets where it begins. */
static int span_value(const char *p, size_t len, size_t *i, size_t *start)
{
	size_t end;

	*i = span_ws(p, len, *i);
	*start = *i;
	if (json_skip(p + *i, len - *i, JSON_SKIP_DEPTH_MAX, &end) < 0)
		return -1;
	*i += end;
	return 0;
}

/* Step over member m of an object (its key and value; the comma or the
 * closing brace after it is the caller's); vstart gets its value's start. */
static int span_member(const char *p, size_t len, size_t *i, size_t *vstart)
{
	size_t ks;

	if (span_value(p, len, i, &ks) < 0 || p[ks] != '"')
		return -1;
	if (span_expect(p, len, i, ':') < 0)
		return -1;
	return span_value(p, len, i, vstart);
}

/*
 * Find each put's row text in payload p (len bytes), which json_parse made
 * into doc and decode_ops into ops. The DOM keeps an object's members in
 * the order of the text (the parser appends them as it reads them, and
 * refuses duplicates), so "the k-th member" means the same in both and the
 * text is walked by counting. Every step is bounded by len; a mismatch
 * (which a parsed payload cannot have) is an error, never a guess.
 */
static int find_row_spans(const char *p, size_t len, const struct json *doc, struct st_op *ops, size_t n)
{
	const struct json *arr = json_get(doc, "ops");
	size_t i = 0, vs, mops = 0;

	for (; mops < doc->u.obj.n; mops++)
		if (doc->u.obj.m[mops].val == arr)
			break;
	if (mops == doc->u.obj.n || span_expect(p, len, &i, '{') < 0)
		return -1;
	for (size_t m = 0; m < mops; m++)
		if (span_member(p, len, &i, &vs) < 0 || span_expect(p, len, &i, ',') < 0)
			return -1;
	if (span_value(p, len, &i, &vs) < 0 || p[vs] != '"' || span_expect(p, len, &i, ':') < 0 ||
	    span_expect(p, len, &i, '[') < 0)
		return -1;
	for (size_t k = 0; k < n; k++) {
		const struct json *op = doc->u.obj.m[mops].val->u.arr.items[k];
		if ((k > 0 && span_expect(p, len, &i, ',') < 0) || span_expect(p, len, &i, '{') < 0)
			return -1;
		for (size_t m = 0; m < op->u.obj.n; m++) {
			if ((m > 0 && span_expect(p, len, &i, ',') < 0) || span_member(p, len, &i, &vs) < 0)
				return -1;
			if (ops[k].row && op->u.obj.m[m].val == ops[k].row) {
				if (p[vs] != '{' || p[i - 1] != '}')
					return -1;
				ops[k].rpos = vs;
				ops[k].rlen = i - vs;
			}
		}
		if (span_expect(p, len, &i, '}') < 0)
			return -1;
		if (ops[k].row && !ops[k].rlen)
			return -1;
	}
	return span_expect(p, len, &i, ']');
}

/* Apply the decoded record whose payload starts at file offset poff. */
static void apply_decoded(struct st_db *db, off_t poff, struct st_op *ops, size_t n)
{
	for (size_t i = 0; i < n; i++)
		apply_op(db, ops[i].table, ops[i].id, !ops[i].del, ops[i].row, poff + (off_t)ops[i].rpos,
			 ops[i].rlen);
	db->records++;
	db->log_ops += n;
}

/* ---- replay ---- */

/* A window over the log, so replay streams instead of reading it all. */
struct reader {
	struct st_db *db;
	off_t size;
	char *buf;
	size_t cap;
	off_t boff;
	size_t blen;
};

/* Make [off, off+n) readable at *p. The caller has checked off+n <= size. */
static int rd_get(struct reader *r, off_t off, size_t n, const char **p, struct err *e)
{
	size_t want;

	if (off >= r->boff && off + (off_t)n <= r->boff + (off_t)r->blen) {
		*p = r->buf + (off - r->boff);
		return 0;
	}
	want = n > ST_READ_CHUNK ? n : ST_READ_CHUNK;
	if ((off_t)want > r->size - off)
		want = (size_t)(r->size - off);
	if (want > r->cap) {
		free(r->buf);
		r->buf = xmalloc(want);
		r->cap = want;
	}
	r->blen = 0;
	if (sys_pread_full(r->db, r->db->fd, r->buf, want, off) < 0)
		return err_errno(e, "store: read %s at offset %lld", r->db->log_path, (long long)off);
	r->boff = off;
	r->blen = want;
	*p = r->buf;
	return 0;
}

/* An entry of the sort that builds an index in bulk: the value's first
 * bytes and the row's position in id order sit in the array itself, so most
 * comparisons never touch the (cache-cold) rows. */
struct ix_sort {
	uint64_t prefix;	/* first 8 bytes of the value, big-endian, zero-padded */
	uint64_t seq;		/* position in id order: breaks ties between equal values */
	struct tnode *n;
};

static int ix_sort_cmp(const void *a, const void *b)
{
	const struct ix_sort *x = a, *y = b;
	int c;

	if (x->prefix != y->prefix)
		return x->prefix < y->prefix ? -1 : 1;
	if (x->n->vlen > 8 || y->n->vlen > 8) {
		c = bytes_cmp(node_v(x->n), x->n->vlen, node_v(y->n), y->n->vlen);
		if (c)
			return c;
	} else if (x->n->vlen != y->n->vlen) {
		/* same first bytes, both short: the shorter sorts first */
		return x->n->vlen < y->n->vlen ? -1 : 1;
	}
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* A balanced tree from sorted nodes. Priorities fall with depth so that the
 * heap order holds; later inserts (random priorities) settle below. */
static struct tnode *build_balanced(struct tnode **v, size_t lo, size_t hi, uint32_t prio)
{
	size_t mid;
	struct tnode *n;

	if (lo >= hi)
		return NULL;
	mid = lo + (hi - lo) / 2;
	n = v[mid];
	n->prio = prio;
	n->l = build_balanced(v, lo, mid, prio - 1);
	n->r = build_balanced(v, mid + 1, hi, prio - 1);
	return n;
}

/*
 * The string values of fields f[0..n-1] in a row's text, found by walking
 * its top-level members without building a DOM (an index build over a
 * million rows spent most of its time allocating and freeing DOM nodes).
 * Replay has parsed this text once already, so it is valid JSON and its
 * keys are unique. 1: found (val[x] NULL for an absent or non-string
 * field); 0: a key or a wanted value has an escape, so its raw bytes are
 * not its value (the caller parses the row); -1: not an object.
 */
static int ix_scan(const char *p, size_t len, char *const *f, int n, const char **val, size_t *vlen)
{
	size_t i = 0, ks, vs;

	for (int x = 0; x < n; x++)
		val[x] = NULL;
	if (span_expect(p, len, &i, '{') < 0)
		return -1;
	i = span_ws(p, len, i);
	if (i < len && p[i] == '}')
		return 1;
	for (;;) {
		const char *k;
		size_t klen;

		if (span_value(p, len, &i, &ks) < 0 || p[ks] != '"')
			return -1;
		k = p + ks + 1;
		klen = i - ks - 2;
		if (memchr(k, '\\', klen))
			return 0;
		if (span_expect(p, len, &i, ':') < 0 || span_value(p, len, &i, &vs) < 0)
			return -1;
		for (int x = 0; x < n; x++) {
			if (strlen(f[x]) != klen || memcmp(f[x], k, klen) != 0)
				continue;
			if (p[vs] == '"') {
				if (memchr(p + vs + 1, '\\', i - vs - 2))
					return 0;
				val[x] = p + vs + 1;
				vlen[x] = i - vs - 2;
			}
			break;
		}
		i = span_ws(p, len, i);
		if (i < len && p[i] == ',') {
			i++;
			continue;
		}
		return i < len && p[i] == '}' ? 1 : -1;
	}
}

/* r's text for an index build: from window w when r lies in it or just
 * past it (the window then slides forward, so rows in log order read the
 * log once, in chunks), else read alone (rows whose ids do not follow the
 * log's order cost one pread each, never a chunk each). */
static const char *ix_row_text(struct st_db *db, struct reader *w, struct st_row *r, struct err *e)
{
	off_t end = w->boff + (off_t)w->blen;
	const char *p;

	if (r->off >= w->boff && r->off + (off_t)r->len <= end) {
		db->row_reads++;
		return w->buf + (r->off - w->boff);
	}
	if (r->off >= end && r->off - end < (off_t)ST_READ_CHUNK && r->len <= ST_READ_CHUNK &&
	    r->off + (off_t)r->len <= w->size) {
		if (rd_get(w, r->off, r->len, &p, e) < 0)
			return NULL;
		db->row_reads++;
		return p;
	}
	return row_text(db, r, e);
}

/* The values of indexes first.. of r (see ix_scan), from its text or, when
 * that has escapes or r is cached, its DOM (*doc: to free, or NULL). */
static int ix_row_values(struct st_db *db, struct st_table *t, int first, struct reader *w, struct st_row *r,
			 const char **val, size_t *vlen, struct json **doc, struct err *e)
{
	int nix = t->nix - first, k;
	const struct json *d = r->json;
	const char *text;

	*doc = NULL;
	if (!d) {
		if (!(text = ix_row_text(db, w, r, e)))
			return -1;
		k = ix_scan(text, r->len, t->ixfield + first, nix, val, vlen);
		if (k < 0)
			return err_set(e, "store: row %s at offset %lld of %s is not an object", r->id,
				       (long long)r->off, db->log_path);
		if (k > 0)
			return 0;
		if (!(d = *doc = row_parse(db, r, text, e)))
			return -1;
	}
	for (int x = 0; x < nix; x++) {
		const struct json *v = json_get(d, t->ixfield[first + x]);
		val[x] = v && v->type == JSON_STRING ? v->u.str.s : NULL;
		vlen[x] = val[x] ? v->u.str.len : 0;
	}
	return 0;
}

/*
 * Build indexes first..t->nix-1 of a table that already has rows (indexes
 * declared after replay): read each row from the log once for all their
 * values, sort each index's entries and build its tree in one go, several
 * times faster than a million single inserts that each miss the cache all
 * the way down. -1 if a row cannot be read (the indexes then hold the rows
 * read before it).
 */
static int ix_build(struct st_db *db, struct st_table *t, int first, struct err *e)
{
	int nix = t->nix - first;
	struct ix_sort *v[ST_INDEXES_MAX];
	size_t cnt[ST_INDEXES_MAX] = { 0 };
	struct tnode **nodes;
	struct titer it = { 0 };
	struct tkey k = { "", 0, "", 0, false };
	struct reader w = { db, db->size, NULL, 0, 0, 0 };
	struct tnode *rn;
	int rc = 0;

	for (int x = 0; x < nix; x++)
		v[x] = xmalloc((t->nrows ? t->nrows : 1) * sizeof(*v[x]));
	it_seek(&it, t->root, &k, false);
	while ((rn = it_next(&it))) {
		struct st_row *r = rn->row;
		const char *val[ST_INDEXES_MAX];
		size_t vlen[ST_INDEXES_MAX];
		struct json *doc;

		if (ix_row_values(db, t, first, &w, r, val, vlen, &doc, e) < 0) {
			rc = -1;
			break;
		}
		for (int x = 0; x < nix; x++) {
			struct ix_sort *s;
			struct ixnode *n;

			if (!val[x])
				continue;
			n = ix_node_new(r, first + x, val[x], vlen[x]);
			s = &v[x][cnt[x]];
			s->prefix = 0;
			for (size_t b = 0; b < 8; b++)
				s->prefix = s->prefix << 8 | (b < vlen[x] ? (unsigned char)val[x][b] : 0);
			s->seq = cnt[x];
			s->n = &n->t;
			cnt[x]++;
		}
		json_free(doc);
	}
	it_release(&it);
	free(w.buf);
	nodes = xmalloc((t->nrows ? t->nrows : 1) * sizeof(*nodes));
	for (int x = 0; x < nix; x++) {
		qsort(v[x], cnt[x], sizeof(*v[x]), ix_sort_cmp);
		for (size_t j = 0; j < cnt[x]; j++)
			nodes[j] = v[x][j].n;
		t->ixroot[first + x] = build_balanced(nodes, 0, cnt[x], UINT32_MAX);
		free(v[x]);
	}
	free(nodes);
	return rc;
}

enum rec_state { REC_OK, REC_SHORT_HEAD, REC_BAD_LEN, REC_SHORT, REC_BAD_CRC };

static const char *rec_state_name(enum rec_state s)
{
	switch (s) {
	case REC_SHORT_HEAD: return "incomplete record header";
	case REC_BAD_LEN: return "bad length";
	case REC_SHORT: return "incomplete record";
	case REC_BAD_CRC: return "bad crc";
	default: return "ok";
	}
}

/* Check the framing and CRC of the record at off (*crcp: its CRC, when
 * REC_OK). -1 only for read errors. */
static int rec_check(struct reader *r, off_t off, enum rec_state *st, size_t *plen, uint32_t *crcp, struct err *e)
{
	const char *p;
	uint32_t len, want;

	if (r->size - off < ST_RECORD_HEAD_BYTES) {
		*st = REC_SHORT_HEAD;
		return 0;
	}
	if (rd_get(r, off, ST_RECORD_HEAD_BYTES, &p, e) < 0)
		return -1;
	len = get_u32(p);
	want = get_u32(p + 4);
	if (len < ST_RECORD_MIN || len > ST_RECORD_MAX) {
		*st = REC_BAD_LEN;
		return 0;
	}
	if (r->size - off - ST_RECORD_HEAD_BYTES < (off_t)len) {
		*st = REC_SHORT;
		return 0;
	}
	if (rd_get(r, off + ST_RECORD_HEAD_BYTES, len, &p, e) < 0)
		return -1;
	*st = crc(p, len) == want ? REC_OK : REC_BAD_CRC;
	*plen = len;
	*crcp = want;
	return 0;
}

/*
 * Is there a valid record anywhere after a bad one at off? If so the bad one
 * is corruption in the middle (found gets its offset); if not, it is a torn
 * tail. A candidate must frame correctly, start with the payload prefix we
 * write, end with "]}", and match its CRC: random bytes pass that about never.
 */
static int scan_forward(struct reader *r, off_t off, off_t *found, struct err *e)
{
	size_t plen_prefix = sizeof(st_payload_prefix) - 1;

	*found = -1;
	for (off_t p = off + 1; r->size - p >= (off_t)(ST_RECORD_HEAD_BYTES + ST_RECORD_MIN); p++) {
		const char *h;
		char tail[2];
		uint32_t len;
		enum rec_state st;
		size_t plen;
		uint32_t rcrc;

		if (rd_get(r, p, ST_RECORD_HEAD_BYTES, &h, e) < 0)
			return -1;
		len = get_u32(h);
		if (len < plen_prefix + 2 || len > ST_RECORD_MAX ||
		    r->size - p - ST_RECORD_HEAD_BYTES < (off_t)len)
			continue;
		if (r->size - p >= (off_t)(ST_RECORD_HEAD_BYTES + plen_prefix)) {
			if (rd_get(r, p + ST_RECORD_HEAD_BYTES, plen_prefix, &h, e) < 0)
				return -1;
			if (memcmp(h, st_payload_prefix, plen_prefix) != 0)
				continue;
		}
		/* The last two bytes are read apart so that the window does not
		 * jump to the far end for every candidate. */
		if (sys_pread_full(r->db, r->db->fd, tail, 2, p + ST_RECORD_HEAD_BYTES + len - 2) < 0)
			return err_errno(e, "store: read %s", r->db->log_path);
		if (tail[0] != ']' || tail[1] != '}')
			continue;
		if (rec_check(r, p, &st, &plen, &rcrc, e) < 0)
			return -1;
		if (st == REC_OK) {
			*found = p;
			return 0;
		}
	}
	return 0;
}

/* Copy [off, size) of the log into a new file next to it; give its name. */
static int move_aside(struct st_db *db, struct reader *r, off_t off, char *name, size_t name_len, struct err *e)
{
	int fd;
	off_t at = off;

	snprintf(name, name_len, "%s.corrupt-%lld-%lld", db->log_path, (long long)off, (long long)time(NULL));
	fd = sys_open(db, name, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return err_errno(e, "store: create %s", name);
	while (at < r->size) {
		size_t n = r->size - at > (off_t)ST_READ_CHUNK ? ST_READ_CHUNK : (size_t)(r->size - at);
		const char *p;
		if (rd_get(r, at, n, &p, e) < 0)
			goto fail;
		if (sys_pwrite_all(db, fd, p, n, at - off) < 0) {
			err_errno(e, "store: write %s", name);
			goto fail;
		}
		at += (off_t)n;
	}
	if (sys_fsync_fd(db, fd) < 0) {
		err_errno(e, "store: fsync %s", name);
		goto fail;
	}
	sys_close_fd(db, fd);
	return fsync_dir(db, e);
fail:
	sys_close_fd(db, fd);
	db->sys->unlink(name);
	return -1;
}

static int truncate_log(struct st_db *db, off_t off, struct err *e)
{
	if (sys_ftruncate_fd(db, db->fd, off) < 0)
		return err_errno(e, "store: truncate %s to %lld bytes", db->log_path, (long long)off);
	if (sys_fsync_fd(db, db->fd) < 0)
		return err_errno(e, "store: fsync %s", db->log_path);
	return 0;
}

/* Handle a bad record at off: torn tail, or corruption (repair or refuse). */
static int bad_record(struct st_db *db, struct reader *r, off_t off, const char *why, bool undecodable,
		      struct err *e)
{
	off_t next = -1;
	char aside[PATH_MAX + 64];

	/* A record that frames and checksums but does not decode was written
	 * whole by someone: dropping it silently could lose a transaction. */
	if (!undecodable && scan_forward(r, off, &next, e) < 0)
		return -1;
	/* A bad last record is a torn tail only past what was acknowledged:
	 * before the mark it is acknowledged data gone. */
	if (!undecodable && next < 0 && mark_passed(db)) {
		log_warn(MOD, "log %s: torn tail at offset %lld (%s): dropping %lld bytes after %llu good transactions",
			 db->log_path, (long long)off, why, (long long)(r->size - off),
			 (unsigned long long)db->records);
		if (truncate_log(db, off, e) < 0)
			return -1;
		db->truncated_bytes += (uint64_t)(r->size - off);
		db->size = off;
		return 0;
	}
	if (!db->repair && !undecodable && next < 0)
		return mark_refuse(db, why, e);
	if (!db->repair)
		return err_set(e, "store: log %s: corrupt record at offset %lld (%s); start with -db-repair "
			       "to keep the %llu transactions before it and move the rest aside",
			       db->log_path, (long long)off, why, (unsigned long long)db->records);
	if (move_aside(db, r, off, aside, sizeof(aside), e) < 0)
		return -1;
	if (truncate_log(db, off, e) < 0)
		return -1;
	log_warn(MOD, "log %s: corrupt record at offset %lld (%s): repaired: kept the %llu transactions before it, "
		 "moved %lld bytes to %s", db->log_path, (long long)off, why,
		 (unsigned long long)db->records, (long long)(r->size - off), aside);
	db->size = off;
	return 0;
}

static int replay(struct st_db *db, off_t size, struct err *e)
{
	struct reader r = { db, size, NULL, 0, 0, 0 };
	struct json_limits lim = { ST_JSON_DEPTH_MAX + 8, ST_RECORD_MAX };
	struct rscan sc = { 0 };
	off_t off = ST_HEADER_BYTES;
	int rc = 0;

	buf_init(&sc.names, ST_RECORD_MAX);

	while (off < size) {
		enum rec_state st;
		size_t plen = 0;
		const char *p;
		struct json *doc = NULL;
		struct st_op *ops = NULL;
		size_t nops = 0;
		struct err pe;
		char why[ERR_MSG_MAX + 32];
		uint32_t rcrc = 0;

		if (rec_check(&r, off, &st, &plen, &rcrc, e) < 0) {
			rc = -1;
			break;
		}
		if (st != REC_OK) {
			rc = bad_record(db, &r, off, rec_state_name(st), false, e);
			break;
		}
		if (rd_get(&r, off + ST_RECORD_HEAD_BYTES, plen, &p, e) < 0) {
			rc = -1;
			break;
		}
		if (rec_scan(db, &sc, p, plen)) {
			apply_decoded(db, off + ST_RECORD_HEAD_BYTES, sc.ops, sc.n);
		} else if (json_parse(p, plen, &lim, &doc, &pe) < 0 || decode_ops(db, doc, &ops, &nops, &pe) < 0 ||
		    (find_row_spans(p, plen, doc, ops, nops) < 0 &&
		     err_set(&pe, "cannot find the rows in the record's text") < 0)) {
			json_free(doc);
			free(ops);
			snprintf(why, sizeof(why), "undecodable transaction: %s", pe.msg);
			rc = bad_record(db, &r, off, why, true, e);
			break;
		} else {
			apply_decoded(db, off + ST_RECORD_HEAD_BYTES, ops, nops);
			free(ops);
			json_free(doc);
		}
		off += ST_RECORD_HEAD_BYTES + (off_t)plen;
		db->size = off;
		db->last_crc = rcrc;
		mark_see(db);
	}
	free(r.buf);
	rscan_release(&sc);
	return rc;
}

/* ---- opening and closing ---- */

static char *path_join(const char *dir, const char *name)
{
	struct buf b = BUF_INIT;

	buf_addf(&b, "%s/%s", dir, name);
	return buf_detach(&b, NULL);
}

/* Create an empty log atomically: a crash leaves no log or a whole header. */
static int create_log(struct st_db *db, struct err *e)
{
	char h[ST_HEADER_BYTES];
	int fd = sys_open(db, db->new_path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	if (fd < 0)
		return err_errno(e, "store: create %s", db->new_path);
	make_header(h);
	if (sys_pwrite_all(db, fd, h, sizeof(h), 0) < 0 || sys_fsync_fd(db, fd) < 0) {
		err_errno(e, "store: write %s", db->new_path);
		goto fail;
	}
	if (db->sys->rename(db->new_path, db->log_path) < 0) {
		err_errno(e, "store: rename %s to %s", db->new_path, db->log_path);
		goto fail;
	}
	if (fsync_dir(db, e) < 0) {
		sys_close_fd(db, fd);
		return -1;
	}
	db->fd = fd;
	db->size = ST_HEADER_BYTES;
	return 0;
fail:
	sys_close_fd(db, fd);
	db->sys->unlink(db->new_path);
	return -1;
}

static int check_header(struct st_db *db, off_t size, struct err *e)
{
	char h[ST_HEADER_BYTES], want[ST_HEADER_BYTES];

	make_header(want);
	if (size < ST_HEADER_BYTES) {
		/* Only a header that never finished being written (impossible
		 * with create_log's rename, but not on every file system) is
		 * forgiven: its bytes must be a prefix of a good header. */
		if (size > 0 && sys_pread_full(db, db->fd, h, (size_t)size, 0) < 0)
			return err_errno(e, "store: read %s", db->log_path);
		if (size > 0 && memcmp(h, want, (size_t)size) != 0)
			return err_set(e, "store: %s is not a denv store log (%lld bytes, bad magic)",
				       db->log_path, (long long)size);
		log_warn(MOD, "log %s: incomplete header (%lld bytes): starting an empty log",
			 db->log_path, (long long)size);
		if (sys_pwrite_all(db, db->fd, want, sizeof(want), 0) < 0 || sys_fsync_fd(db, db->fd) < 0)
			return err_errno(e, "store: write %s", db->log_path);
		db->size = ST_HEADER_BYTES;
		return 1;
	}
	if (sys_pread_full(db, db->fd, h, sizeof(h), 0) < 0)
		return err_errno(e, "store: read %s", db->log_path);
	if (memcmp(h, st_magic, 8) != 0)
		return err_set(e, "store: %s is not a denv store log (bad magic)", db->log_path);
	if (get_u32(h + 12) != crc(h, 12))
		return err_set(e, "store: %s: header corrupt (bad crc)", db->log_path);
	if (get_u32(h + 8) != ST_FORMAT_VERSION)
		return err_set(e, "store: %s: format version %u; this build reads version %d",
			       db->log_path, get_u32(h + 8), ST_FORMAT_VERSION);
	return 0;
}

static int open_lock(struct st_db *db, struct err *e)
{
	int r;

	db->lock_fd = sys_open(db, db->lock_path, O_RDWR | O_CREAT, 0600);
	if (db->lock_fd < 0)
		return err_errno(e, "store: open %s", db->lock_path);
	do
		r = db->sys->flock(db->lock_fd, LOCK_EX | LOCK_NB);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		if (errno == EWOULDBLOCK)
			return err_set(e, "store: %s is in use by another process", db->dir);
		return err_errno(e, "store: lock %s", db->lock_path);
	}
	return 0;
}

static int open_pg(const char *dsn, const struct st_opts *opts, struct st_db **out, struct err *e);

static int open_dir(const char *path, const struct st_opts *opts, bool scratch, struct st_db **out,
		    struct err *e)
{
	struct st_db *db;
	struct stat st;
	int hr;

	*out = NULL;
	if (!path || !*path)
		return err_set(e, "store: no directory given");
	if (strlen(path) > PATH_MAX - 64)
		return err_set(e, "store: path too long: %s", path);
	if (fs_mkdir_p(path, 0700, e) < 0)
		return err_prefix(e, "store");
	db = xcalloc(1, sizeof(*db));
	db->scratch = scratch;
	db->sys = opts && opts->sys ? opts->sys : st_sys_default();
	db->ev = opts ? opts->ev : NULL;
	db->repair = opts && opts->repair;
	db->auto_compact = !(opts && opts->no_auto_compact);
	db->dir = xstrdup(path);
	db->log_path = path_join(path, "log");
	db->tmp_path = path_join(path, "log.compact");
	db->new_path = path_join(path, "log.new");
	db->lock_path = path_join(path, "lock");
	db->mark_path = path_join(path, "mark");
	db->mark_new_path = path_join(path, "mark.new");
	db->fd = db->lock_fd = db->mark_fd = -1;
	db->rng = (uint32_t)time(NULL) ^ (uint32_t)getpid() ^ 0x9e3779b9u;
	if (!db->rng)
		db->rng = 1;
	buf_init(&db->wbuf, ST_RECORD_MAX + ST_RECORD_HEAD_BYTES + 1);
	db->token = xcalloc(1, sizeof(*db->token));
	db->token->db = db;

	if (open_lock(db, e) < 0)
		goto fail;
	/* Leftovers of a compaction or creation that a crash interrupted: the
	 * log itself was never replaced by them, so they hold nothing needed. */
	if (db->sys->unlink(db->tmp_path) < 0 && errno != ENOENT) {
		err_errno(e, "store: remove %s", db->tmp_path);
		goto fail;
	}
	if (db->sys->unlink(db->new_path) < 0 && errno != ENOENT) {
		err_errno(e, "store: remove %s", db->new_path);
		goto fail;
	}
	if (db->sys->unlink(db->mark_new_path) < 0 && errno != ENOENT) {
		err_errno(e, "store: remove %s", db->mark_new_path);
		goto fail;
	}
	if (mark_load(db, e) < 0)
		goto fail;
	db->size = ST_HEADER_BYTES;	/* what an empty log holds: a mark may ask no more */
	mark_see(db);
	db->fd = sys_open(db, db->log_path, O_RDWR, 0);
	if (db->fd < 0 && errno == ENOENT) {
		if (!mark_passed(db) && !db->repair) {
			err_set(e, "store: log %s is missing, but its mark %s says %llu transactions (%llu bytes) were "
				"acknowledged; start with -db-repair to start an empty store and reset the mark",
				db->log_path, db->mark_path, (unsigned long long)db->want.m.records,
				(unsigned long long)db->want.m.bytes);
			goto fail;
		}
		if (create_log(db, e) < 0 || mark_check(db, e) < 0 || mark_finish(db, true, e) < 0)
			goto fail;
		*out = db;
		return 0;
	}
	if (db->fd < 0) {
		err_errno(e, "store: open %s", db->log_path);
		goto fail;
	}
	if (db->sys->fstat(db->fd, &st) < 0) {
		err_errno(e, "store: stat %s", db->log_path);
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		err_set(e, "store: %s is not a regular file", db->log_path);
		goto fail;
	}
	if (st.st_size < ST_HEADER_BYTES && !mark_passed(db) && !db->repair) {
		/* (before check_header completes the header: refuse untouched) */
		db->size = st.st_size;
		mark_refuse(db, NULL, e);
		goto fail;
	}
	hr = check_header(db, st.st_size, e);
	if (hr < 0)
		goto fail;
	db->size = ST_HEADER_BYTES;
	if (hr == 0 && replay(db, st.st_size, e) < 0)
		goto fail;
	if (mark_check(db, e) < 0 || mark_finish(db, false, e) < 0)
		goto fail;
	trim_memory();	/* replay's parsed records are gone: their pages too */
	*out = db;
	return 0;
fail:
	st_close(db);
	return -1;
}

bool st_is_remote(const char *path)
{
	return stpg_is_dsn(path);
}

char *st_display_name(const char *path)
{
	return stpg_is_dsn(path) ? stpg_redact(path) : xstrdup(path);
}

int st_open(const char *path, const struct st_opts *opts, struct st_db **out, struct err *e)
{
	if (stpg_is_dsn(path))
		return open_pg(path, opts, out, e);
	return open_dir(path, opts, false, out, e);
}

static void flush(struct st_db *db);
static void pg_drain(struct st_db *db);
static void scratch_remove(struct st_db *db);

void st_close(struct st_db *db)
{
	if (!db || db->closing)
		return;		/* (closing: called again from a done_fn during close) */
	db->closing = true;
	if (db->pg)
		pg_drain(db);
	flush(db);
	stpg_close(db->pg);
	if (db->ev)
		ev_timer_stop(db->ev, &db->mark_timer);
	if (!db->failed && db->mark_fd >= 0) {
		struct err e;
		if (mark_sync(db, &e) < 0)
			log_error(MOD, "%s", e.msg);
	}
	if (db->token->queued || db->token->running || db->token->rel_queued)
		db->token->db = NULL;	/* flush_cb or release_cb frees it */
	else
		free(db->token);
	for (size_t i = 0; i < db->ntables; i++) {
		struct st_table *t = &db->tables[i];
		tree_free_rows(t->root);
		for (int j = 0; j < t->nix; j++)
			free(t->ixfield[j]);
		free(t->name);
	}
	free(db->tables);
	free(db->cache);
	free(db->rbuf);
	free(db->pending);
	buf_release(&db->wbuf);
	sys_close_fd(db, db->fd);
	sys_close_fd(db, db->lock_fd);
	sys_close_fd(db, db->mark_fd);
	if (db->scratch)
		scratch_remove(db);
	free(db->inflight);
	free(db->mark_path);
	free(db->mark_new_path);
	free(db->dir);
	free(db->log_path);
	free(db->tmp_path);
	free(db->new_path);
	free(db->lock_path);
	free(db);
}

int st_table(struct st_db *db, const char *table, const char *const index_fields[], struct err *e)
{
	struct st_table *t;
	int first, rc = 0;

	if (!name_ok(table))
		return err_set(e, "store: bad table name");
	t = table_find(db, table);
	if (!t) {
		if (db->ntables >= ST_TABLES_MAX)
			return err_set(e, "store: more than %d tables", ST_TABLES_MAX);
		t = table_get(db, table);
	}
	first = t->nix;
	for (size_t i = 0; index_fields && index_fields[i]; i++) {
		const char *f = index_fields[i];
		bool have = false;
		if (!name_ok(f)) {
			rc = err_set(e, "store: table %s: bad index field name", table);
			break;
		}
		for (int j = 0; j < t->nix && !have; j++)
			have = strcmp(t->ixfield[j], f) == 0;
		if (have)
			continue;
		if (t->nix >= ST_INDEXES_MAX) {
			rc = err_set(e, "store: table %s: more than %d indexes", table, ST_INDEXES_MAX);
			break;
		}
		t->ixfield[t->nix] = xstrdup(f);
		t->ixroot[t->nix] = NULL;
		t->nix++;
	}
	/* The new indexes (those declared before a bad name too) are built
	 * in one pass over the rows: each row is read once for all of them. */
	if (t->root && t->nix > first) {
		struct err be;
		if (ix_build(db, t, first, &be) < 0) {
			row_failed(db, &be);
			*e = be;
			return -1;
		}
		if (t->nrows >= ST_TRIM_AFTER_ROWS)
			trim_memory();	/* the rows it parsed are gone */
	}
	return rc;
}

/* ---- reading ---- */

const struct json *st_get(struct st_db *db, const char *table, const char *id)
{
	struct st_table *t;
	struct st_row *r;
	struct err e;

	if (!table || !id || !(t = table_find(db, table)))
		return NULL;
	r = row_find(t, id, strlen(id));
	return r ? row_get(db, r, &e) : NULL;
}

void st_release(struct st_db *db)
{
	if (db && !db->scanning)
		cache_release(db);
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

	if (!name_ok(table))
		return err_set(e, "store: bad table name");
	if (field && (!name_ok(field) || !value))
		return err_set(e, "store: scan of %s: bad index field or value", table);
	t = table_find(db, table);
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
	it_seek(&it, root, &k, rev);
	db->scanning++;
	while ((n = it_next(&it))) {
		const struct json *row;
		if (n->vlen != k.vlen || memcmp(node_v(n), k.v, k.vlen) != 0)
			break;	/* past the index entry for value */
		if (!(row = row_get(db, n->row, e))) {
			rc = -1;
			break;
		}
		if (fn(n->row->id, row, arg) != 0)
			break;
		if (limit && ++seen >= limit)
			break;
	}
	db->scanning--;
	it_release(&it);
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

	if (!table || !(t = table_find(db, table)))
		return 0;
	if (!field)
		return t->nrows;
	if (!value || (i = find_index(t, field)) < 0)
		return 0;
	k.v = value;
	k.vlen = strlen(value);
	it_seek(&it, t->ixroot[i], &k, false);
	while ((n = it_next(&it)) && n->vlen == k.vlen && memcmp(node_v(n), k.v, k.vlen) == 0)
		count++;
	it_release(&it);
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

/* ---- transactions ---- */

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
	if (!name_ok(table)) {
		json_free(row);
		return txn_poison(t, "store: bad table name \"%.64s\"", table ? table : "(null)");
	}
	if (!id || !id_ok(id, strnlen(id, ST_ID_MAX + 1))) {
		json_free(row);
		return txn_poison(t, "store: %s: bad row id \"%.256s\" (empty, too long or not UTF-8)", table,
				  id ? id : "(null)");
	}
	if (!del && (!row || row->type != JSON_OBJECT)) {
		json_free(row);
		return txn_poison(t, "store: %s/%s: a row must be a JSON object", table, id);
	}
	if (!del && row_check(row, 0, &why) < 0) {
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

	if (sys_pwrite_all(db, db->fd, p, n, off) == 0) {
		db->size += (off_t)n;
		return 0;
	}
	err_errno(e, "store: write %s", db->log_path);
	if (sys_ftruncate_fd(db, db->fd, off) < 0) {
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

static void pg_flush(struct st_db *db);

/* fsync the log and call the queued done_fns. */
static void flush(struct st_db *db)
{
	struct st_pending *list;
	size_t n = db->npending;
	int status = 0;
	struct err e, fail;

	if (db->pg) {
		pg_flush(db);
		return;
	}
	if (!n)
		return;
	if (db->failed) {
		status = -1;
	} else if (sys_fsync_fd(db, db->fd) < 0) {
		set_failed_fsync(db);
		status = -1;
	} else {
		db->fsyncs++;
		mark_advance(db);
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
		pg_drain(db);
	/* done_fns may commit again; a few rounds settle any sane caller. */
	for (int round = 0; round < 16 && db->npending; round++)
		flush(db);
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
	flush(tok->db);
	if (tok->db)
		maybe_compact(tok->db);
	if (tok->db && tok->db->release_after_flush && !tok->db->pg_waiting) {
		tok->db->release_after_flush = false;
		cache_release(tok->db);
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
static void release_cb(struct ev *ev, void *arg)
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
		cache_release(tok->db);
}

/* ---- PostgreSQL (store.h, "PostgreSQL"; pg.h) ---- */

/* The transaction's ops, as written to the scratch log, into pg's batch. */
static void pg_forward(struct st_db *db, const struct st_txn *txn, const struct buf *b)
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
static int pg_send_sync(struct st_db *db, struct err *e)
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
static void pg_flush(struct st_db *db)
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
			cache_release(db);
		} else if (db->release_after_flush) {
			cache_release_first(db, db->inflight_cached);
		}
		if (db->ev && !db->closing)
			pg_flush(db);
	}
	tok->running = was_running;
	if (!tok->db && !tok->running && !tok->queued && !tok->rel_queued)
		free(tok);
}

/* Until nothing is queued or in flight (bounded, as st_flush). */
static void pg_drain(struct st_db *db)
{
	struct st_flush_token *tok = db->token;

	for (int round = 0; round < 32 && tok->db; round++) {
		if (db->pg_waiting)
			stpg_wait(db->pg);
		else if (db->npending)
			pg_flush(db);
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

static void scratch_remove(struct st_db *db)
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
static int open_pg(const char *dsn, const struct st_opts *opts, struct st_db **out, struct err *e)
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
	if (open_dir(dir, &o, true, &db, e) < 0) {
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

int st_commit(struct st_txn *txn, st_done_fn done, void *arg, struct err *e)
{
	struct st_db *db = txn->db;
	struct buf *b = &db->wbuf;
	size_t newtables = 0;
	off_t roff;
	int rc = 0;

	if (txn->bad) {
		*e = txn->err;
		goto refuse;
	}
	if (db->failed) {
		*e = db->fail_err;
		goto refuse;
	}
	if (db->pg && stpg_ready(db->pg, e) < 0)
		goto refuse;
	if (db->closing) {
		err_set(e, "store: commit while the store is closing");
		goto refuse;
	}
	if (db->scanning) {
		err_set(e, "store: commit from inside an st_scan callback");
		goto refuse;
	}
	if (txn->n == 0)
		goto queue;
	for (size_t i = 0; i < txn->n; i++) {
		bool seen = false;
		if (txn->ops[i].del || table_find(db, txn->ops[i].table))
			continue;
		for (size_t j = 0; j < i && !seen; j++)
			seen = !txn->ops[j].del && strcmp(txn->ops[j].table, txn->ops[i].table) == 0;
		if (!seen && db->ntables + ++newtables > ST_TABLES_MAX) {
			err_set(e, "store: more than %d tables", ST_TABLES_MAX);
			goto refuse;
		}
	}
	rec_begin(b);
	for (size_t i = 0; i < txn->n; i++) {
		struct st_op *o = &txn->ops[i];
		if (rec_add_op(b, i == 0, o->table, o->id, o->row, NULL, 0, &o->rpos, &o->rlen) < 0) {
			err_set(e, "store: transaction larger than %zu bytes", ST_RECORD_MAX);
			goto refuse;
		}
	}
	if (rec_end(b) < 0) {
		err_set(e, "store: transaction larger than %zu bytes", ST_RECORD_MAX);
		goto refuse;
	}
	roff = db->size;
	if (log_append(db, b->data, b->len, e) < 0)
		goto refuse;
	db->last_crc = get_u32(b->data + 4);
	if (db->pg)
		pg_forward(db, txn, b);
	if (b->cap > ST_COMPACT_RECORD_BYTES * 2)
		buf_release(b);	/* one huge transaction should not pin its buffer */
	/* The rows stay on disk only: readers parse them from the log, so
	 * that what they see never depends on whether the row was just
	 * written or replayed. st_abort below frees the DOMs. */
	for (size_t i = 0; i < txn->n; i++) {
		struct st_op *o = &txn->ops[i];
		apply_op(db, o->table, o->id, !o->del, o->row, roff + (off_t)o->rpos, o->rlen);
	}
	db->records++;
	db->log_ops += txn->n;
queue:
	if (db->ev) {
		if (db->npending == db->pending_cap) {
			db->pending_cap = db->pending_cap ? db->pending_cap * 2 : 16;
			db->pending = xrealloc(db->pending, db->pending_cap * sizeof(*db->pending));
		}
		db->pending[db->npending++] = (struct st_pending){ done, arg };
		if (!db->token->queued) {
			db->token->queued = true;
			ev_defer(db->ev, flush_cb, db->token);
		}
		st_abort(txn);
		return 0;
	}
	if (txn->n > 0 && db->pg) {
		rc = pg_send_sync(db, e);
	} else if (txn->n > 0) {
		if (sys_fsync_fd(db, db->fd) < 0) {
			set_failed_fsync(db);
			*e = db->fail_err;
			rc = -1;
		} else {
			db->fsyncs++;
			mark_advance(db);
		}
	}
	st_abort(txn);
	/* Compact before done_fn: a done_fn may close the store. */
	if (rc == 0)
		maybe_compact(db);
	if (done)
		done(rc, rc < 0 ? e : NULL, arg);
	return rc;
refuse:
	st_abort(txn);
	if (!db->ev && done)
		done(-1, e, arg);
	return -1;
}

/* ---- compaction ---- */

/* Write the record in b at *off; the rows it holds (their positions in b
 * are in newoff[first..first+n)) become file offsets. */
static int compact_write(struct st_db *db, int fd, off_t *off, struct buf *b, uint64_t *newoff,
			 size_t first, size_t n, uint32_t *last_crc, struct err *e)
{
	if (rec_end(b) < 0)
		return err_set(e, "store: compaction: record too large");	/* cannot happen: see below */
	if (sys_pwrite_all(db, fd, b->data, b->len, *off) < 0)
		return err_errno(e, "store: write %s", db->tmp_path);
	*last_crc = get_u32(b->data + 4);
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
	fd = sys_open(db, db->tmp_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return err_errno(e, "store: create %s", db->tmp_path);
	buf_init(&rec, ST_RECORD_MAX + ST_RECORD_HEAD_BYTES + 1);
	buf_init(&op, ST_RECORD_MAX + 1);
	newoff = xmalloc((db->live_rows ? db->live_rows : 1) * sizeof(*newoff));
	make_header(h);
	if (sys_pwrite_all(db, fd, h, sizeof(h), 0) < 0) {
		err_errno(e, "store: write %s", db->tmp_path);
		goto fail;
	}
	rec_begin(&rec);
	for (size_t i = 0; i < db->ntables; i++) {
		struct st_table *t = &db->tables[i];
		struct titer it = { 0 };
		struct tkey k = { "", 0, "", 0, false };
		struct tnode *n;

		it_seek(&it, t->root, &k, false);
		while ((n = it_next(&it))) {
			struct st_row *r = n->row;
			size_t rpos = 0, rlen = 0;
			const char *text;

			/* The row's bytes as they are in the old log. */
			if (!(text = row_text(db, r, e))) {
				it_release(&it);
				goto fail;
			}
			/* Each put is encoded alone first, so that a record is cut
			 * before it would pass ST_RECORD_MAX. A single put always
			 * fits: it came from a record no larger. */
			buf_reset(&op);
			if (rec_add_op(&op, true, t->name, r->id, NULL, text, r->len, &rpos, &rlen) < 0) {
				it_release(&it);
				err_set(e, "store: compaction: row %s/%s too large", t->name, r->id);
				goto fail;
			}
			if (inrec && rec.len + 1 + op.len + 2 > ST_RECORD_MAX + ST_RECORD_HEAD_BYTES) {
				if (compact_write(db, fd, &off, &rec, newoff, first, inrec, &ccrc, e) < 0) {
					it_release(&it);
					goto fail;
				}
				nrec++;
				first += inrec;
				rec_begin(&rec);
				inrec = 0;
			}
			if ((inrec && buf_addch(&rec, ',') < 0)) {
				it_release(&it);
				err_set(e, "store: compaction: row %s/%s too large", t->name, r->id);
				goto fail;
			}
			newoff[nrows++] = (uint64_t)(rec.len + rpos);	/* made a file offset by compact_write */
			if (buf_add(&rec, op.data, op.len) < 0) {
				it_release(&it);
				err_set(e, "store: compaction: row %s/%s too large", t->name, r->id);
				goto fail;
			}
			inrec++;
			if (rec.len >= ST_COMPACT_RECORD_BYTES || inrec >= ST_TXN_OPS_MAX) {
				if (compact_write(db, fd, &off, &rec, newoff, first, inrec, &ccrc, e) < 0) {
					it_release(&it);
					goto fail;
				}
				nrec++;
				first += inrec;
				rec_begin(&rec);
				inrec = 0;
			}
		}
		it_release(&it);
	}
	if (inrec) {
		if (compact_write(db, fd, &off, &rec, newoff, first, inrec, &ccrc, e) < 0)
			goto fail;
		nrec++;
	}
	if (sys_fsync_fd(db, fd) < 0) {
		err_errno(e, "store: fsync %s", db->tmp_path);
		goto fail;
	}
	/* The mark learns the new file before the rename can take effect: a
	 * crash either side finds a slot that fits whichever log is there. */
	if (mark_write(db, off, nrec, ccrc, ST_MARK_COMPACT, true, e) < 0)
		goto fail;
	marked = true;
	if (db->sys->rename(db->tmp_path, db->log_path) < 0) {
		err_errno(e, "store: rename %s to %s", db->tmp_path, db->log_path);
		goto fail;
	}
	/* From here the new file is the log: switch to it whatever happens. */
	sys_close_fd(db, db->fd);
	db->fd = fd;
	{
		/* The same walk as above: the same rows in the same order. */
		size_t j = 0;
		for (size_t i = 0; i < db->ntables; i++) {
			struct titer it = { 0 };
			struct tkey k = { "", 0, "", 0, false };
			struct tnode *n;
			it_seek(&it, db->tables[i].root, &k, false);
			while ((n = it_next(&it)) && j < nrows)
				n->row->off = (off_t)newoff[j++];
			it_release(&it);
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
	if (fsync_dir(db, e) < 0) {
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
	sys_close_fd(db, fd);
	db->sys->unlink(db->tmp_path);
	if (marked) {
		/* The newest slot describes a file that never became the log: put
		 * the old log's slot on top again, lest a torn next write leave
		 * only that one. */
		struct err me;
		if (mark_write(db, db->size, db->records, db->last_crc, 0, true, &me) < 0)
			mark_failed(db, &me);
	}
	return -1;
}
