/*
 * internal.h: what the files of the store share (not for callers: they use
 * store.h). The log's format and the rules are in store.h; this header has
 * the in-memory layout and the functions one file of the store calls in
 * another.
 */
#ifndef DENV_STORE_INTERNAL_H
#define DENV_STORE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/ev.h"
#include "base/log.h"
#include "store/store.h"

#define MOD "store"

extern const char st_magic[8];
/* What every payload this code writes starts with; the forward scan that
 * tells a torn tail from mid-log corruption uses it as a cheap filter. */
extern const char st_payload_prefix[9];

struct stpg;

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

struct tkey {
	const char *v;
	size_t vlen;
	const char *id;
	size_t idlen;
	bool id_inf;		/* sorts after every id with the same v */
};

/* In-order iteration from a key, ascending (> key) or descending (< key),
 * with an explicit stack: O(1) amortized per step. */
struct titer {
	struct tnode **stack;
	size_t n, cap;
	bool rev;
};

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
	bool rel_queued;	/* an ev_defer of st_release_cb is pending */
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
	bool release_after_flush;	/* st_release_cb ran while a flush was queued */
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

/*
 * Replay without a DOM. Parsing each record into a DOM only to find where
 * its rows lie cost most of a replay (a million rows: seconds of allocating
 * and freeing nodes). A record as st_rec_add_op writes it, compact and with no
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

/* tree.c */
const char *st_node_v(const struct tnode *n);
int st_bytes_cmp(const char *a, size_t alen, const char *b, size_t blen);
struct tnode *st_t_insert(struct tnode *root, struct tnode *n);
struct tnode *st_t_remove(struct tnode *root, struct tnode *n);
struct tnode *st_t_find(struct tnode *n, const struct tkey *k);
void st_it_seek(struct titer *it, struct tnode *root, const struct tkey *k, bool rev);
struct tnode *st_it_next(struct titer *it);
void st_it_release(struct titer *it);

/* db.c */
bool st_name_ok(const char *s);
bool st_id_ok(const char *s, size_t n);
struct st_table *st_table_find(struct st_db *db, const char *name);
struct st_table *st_table_get(struct st_db *db, const char *name);
struct st_row *st_row_find(const struct st_table *t, const char *id, size_t idlen);
struct ixnode *st_ix_node_new(struct st_row *r, int i, const char *v, size_t vlen);
void st_trim_memory(void);
void st_cache_release_first(struct st_db *db, size_t n);
void st_cache_release(struct st_db *db);
void st_apply_op(struct st_db *db, const char *table, const char *id, bool put, const struct json *row,
		 off_t off, size_t len);
void st_tree_free_rows(struct tnode *n);
int st_row_check(const struct json *v, int depth, const char **why);

/* sys.c */
int st_sys_open(struct st_db *db, const char *path, int flags, mode_t mode);
void st_sys_close_fd(struct st_db *db, int fd);
int st_sys_pwrite_all(struct st_db *db, int fd, const void *p, size_t n, off_t off);
int st_sys_pread_full(struct st_db *db, int fd, void *p, size_t n, off_t off);
int st_sys_fsync_fd(struct st_db *db, int fd);
int st_sys_fdatasync_fd(struct st_db *db, int fd);
int st_sys_ftruncate_fd(struct st_db *db, int fd, off_t len);
int st_fsync_dir(struct st_db *db, struct err *e);
/* Write data to a new file at tmp, fsync it and rename it over final: a
 * crash leaves the old final (or none) or the whole new one. The open fd
 * (the caller fsyncs the directory, then keeps or closes it); -1 with e and
 * tmp removed. */
int st_sys_install(struct st_db *db, const char *tmp, const char *final, const void *data, size_t len,
		   struct err *e);

/* mark.c */
int st_mark_load(struct st_db *db, struct err *e);
int st_mark_sync(struct st_db *db, struct err *e);
int st_mark_write(struct st_db *db, off_t bytes, uint64_t records, uint32_t last_crc, uint32_t flags,
		  bool sync, struct err *e);
void st_mark_failed(struct st_db *db, const struct err *e);
void st_mark_advance(struct st_db *db);
void st_mark_see(struct st_db *db);
bool st_mark_passed(const struct st_db *db);
int st_mark_refuse(struct st_db *db, const char *cut, struct err *e);
int st_mark_check(struct st_db *db, struct err *e);
int st_mark_finish(struct st_db *db, bool log_synced, struct err *e);

/* rows.c */
void st_row_failed(struct st_db *db, struct err *e);
const char *st_row_text(struct st_db *db, struct st_row *r, struct err *e);
struct json *st_row_parse(struct st_db *db, struct st_row *r, const char *text, struct err *e);
void st_cache_add(struct st_db *db, struct st_row *r, struct json *doc);
const struct json *st_row_get(struct st_db *db, struct st_row *r, struct err *e);

/* record.c */
void st_put_u32(char *p, uint32_t v);
uint32_t st_get_u32(const char *p);
void st_put_u64(char *p, uint64_t v);
uint64_t st_get_u64(const char *p);
uint32_t st_crc(const char *p, size_t n);
void st_make_header(char *h);
void st_rec_begin(struct buf *b);
int st_rec_add_op(struct buf *b, bool first, const char *table, const char *id, const struct json *row,
		  const char *rtext, size_t rlen, size_t *rpos, size_t *rlenp);
int st_rec_end(struct buf *b);
int st_decode_ops(struct st_db *db, struct json *doc, struct st_op **ops, size_t *nops, struct err *e);
int st_rec_scan(struct st_db *db, struct rscan *sc, const char *p, size_t len);
void st_rscan_release(struct rscan *sc);
size_t st_span_ws(const char *p, size_t len, size_t i);
int st_span_expect(const char *p, size_t len, size_t *i, char c);
int st_span_value(const char *p, size_t len, size_t *i, size_t *start);
int st_find_row_spans(const char *p, size_t len, const struct json *doc, struct st_op *ops, size_t n);
void st_apply_decoded(struct st_db *db, off_t poff, struct st_op *ops, size_t n);

/* replay.c */
int st_ix_build(struct st_db *db, struct st_table *t, int first, struct err *e);
int st_replay(struct st_db *db, off_t size, struct err *e);

/* open.c */
int st_open_dir(const char *path, const struct st_opts *opts, bool scratch, struct st_db **out,
		struct err *e);

/* txn.c */
void st_flush_pending(struct st_db *db);
void st_release_cb(struct ev *ev, void *arg);

/* pglog.c */
void st_pg_forward(struct st_db *db, const struct st_txn *txn, const struct buf *b);
int st_pg_send_sync(struct st_db *db, struct err *e);
void st_pg_flush(struct st_db *db);
void st_pg_drain(struct st_db *db);
void st_scratch_remove(struct st_db *db);
int st_open_pg(const char *dsn, const struct st_opts *opts, struct st_db **out, struct err *e);

#endif
