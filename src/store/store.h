/*
 * store.h: the control plane's embedded database (DESIGN.md, "Store").
 *
 * A store is a directory holding one append-only log of records. Every record
 * is one transaction; replay at open rebuilds in-memory tables (rows are JSON
 * objects keyed by a string id, kept in id order) and their secondary indexes
 * (exact match on a top-level string field).
 *
 * What stays in memory is the index of the data, not the data: for each row
 * its id, where its JSON text lies in the log (offset and length), and a copy
 * of each indexed field's value. A row is read from the log (pread through
 * the st_sys table) and parsed when st_get or st_scan hands it out; it is
 * then cached for a while (see "Pointers"). Indexes and st_count never read
 * rows; an index declared on a table that has rows reads each row once.
 *
 * Files in the directory:
 *   log            the record log (see "File format" below)
 *   lock           flock(2)ed while a process has the store open
 *   log.new        temp file while a fresh log is created (removed at open)
 *   log.compact    temp file while compaction runs (removed at open)
 *   log.corrupt-<offset>-<unix time>
 *                  what -db-repair moved aside: the bytes from the first
 *                  corrupt record to the end of the log, kept for a person
 *   mark           the high-water mark: how much of the log was
 *                  acknowledged (see "The mark" below)
 *   mark.new       temp file while a fresh mark is created (removed at open)
 *
 * File format (all integers little-endian):
 *   header   16 bytes: "denvstor" (8), version u32 (= ST_FORMAT_VERSION),
 *            crc32 of the first 12 bytes u32
 *   record   len u32 | crc32 u32 (zlib crc32 of payload) | payload (len bytes)
 *   payload  one JSON object describing one transaction:
 *              {"ops":[{"put":"<table>","id":"<id>","row":{...}},
 *                      {"del":"<table>","id":"<id>"}, ...]}
 *            ops apply in order; a transaction is all-or-nothing on replay
 *            because its CRC covers all of it. Compaction writes the live rows
 *            as put-only records of at most ST_COMPACT_RECORD_BYTES.
 *
 * The mark (96 bytes, little-endian): a log cut short at a record boundary
 * looks like a shorter log, so the store keeps apart how much of it was
 * acknowledged, and refuses to start on less.
 *   header   16 bytes: "denvmark" (8), version u32 (= ST_MARK_VERSION),
 *            crc32 of the first 12 bytes u32
 *   2 slots  40 bytes each, at 16 and 56: seq u64 | log bytes u64 |
 *            records u64 | crc u32 of the last record's payload (0: none) |
 *            flags u32 | 0 u32 | crc32 of the slot's first 36 bytes u32.
 *            Slot seq % 2 takes write seq, so a torn write leaves the other
 *            (older, still true) slot; the valid slot with the higher seq is
 *            the mark, seq 0 means empty.
 * After each group fsync (and each sync commit) the store writes the next
 * slot with the log's length, records and last CRC, before any done_fn
 * runs: the log's data is durable first, then the mark, so the mark never
 * claims more than the disk holds, and after a process crash everything
 * acknowledged is covered. The mark is fdatasynced at most every
 * ST_MARK_SYNC_MS (by a timer with a loop, else at the next commit after
 * that), and always at compaction, open and close: after a power loss the
 * mark may have forgotten up to that long of acknowledged commits (those
 * are then checked as a torn tail is), never claim more. At open the log
 * must contain the mark's record boundary with the same count and CRC; a
 * bad or short record before it is not a torn tail but lost acknowledged
 * data. A log shorter than the mark,
 * or not containing it (replaced, rewritten), is refused with the numbers
 * unless opts->repair, which keeps what the log holds, says how many
 * acknowledged transactions and bytes are missing, and resets the mark.
 * Compaction writes a slot flagged ST_MARK_COMPACT describing the new file
 * (fdatasynced) before the rename: at open such a slot also accepts the log
 * that the other slot describes (a crash before the rename took effect).
 * No mark file (a store from before the mark, or a crash while creating
 * it) is created at open, with a warning if the log has records; a mark
 * file with no valid slot is refused unless opts->repair (which, like a
 * reset, writes a new file: no slot of the old log survives). Every open
 * ends by fsyncing the log and writing (or syncing) a mark for it.
 *
 * Durability (group commit):
 *  - with an ev loop (st_opts.ev), st_commit writes the record (no fsync),
 *    applies it to memory and queues done_fn; one ev_defer callback per loop
 *    turn fsyncs once and then calls every queued done_fn. A reply that
 *    depends on a commit must be sent from done_fn.
 *  - without a loop, st_commit fsyncs before it returns and calls done_fn
 *    before returning (tools and tests).
 *  - a committed row is visible to st_get/st_scan as soon as st_commit
 *    returns, before its fsync. This is deliberate: the writer's reply still
 *    waits for done_fn, and a reader in the same turn can at worst see a row
 *    that a crash in the next few milliseconds loses and that nobody was told
 *    was saved. If the fsync then fails the store goes read-only for commits
 *    (st_failed) and the process should restart, replaying what is on disk.
 *  - if the mark cannot be written or synced after a good fsync, the
 *    group's done_fns still hear 0 (their data is durable) and the store
 *    refuses commits from then on, the same way.
 *
 * Pointers: st_get and st_scan hand out rows owned by the store: parsed from
 * the log on first use and cached on the row. A row pointer stays valid until
 * the first of:
 *  - a commit that puts or deletes that row;
 *  - st_close;
 *  - st_release (explicit: tools and tests without a loop call it, or keep
 *    the rows until the row changes or the store closes);
 *  - with an ev loop (st_opts.ev): the end of the loop turn in which it was
 *    read. The store frees the turn's rows in an end-of-turn (ev_defer)
 *    callback it queues at the first read of a turn; if a group-commit flush
 *    is queued as well, after that flush's done_fns have run. Rows read in a
 *    done_fn or another end-of-turn callback live until the end of the next
 *    turn.
 * So: use a row within the callback that read it. Whatever must outlive it
 * (a struct that waits for a reply, a timer, an async step) keeps a json_dup
 * or the id, and reads the row again later. Compaction does not move cached
 * rows. Callers must not modify rows; st_put takes a row the caller built
 * (or json_dup'ed).
 *
 * Read failures: a row that cannot be read back (pread error, or bytes that
 * no longer parse: the log was changed under the store) is logged, st_get
 * returns NULL and st_scan fails with the reason; and the store refuses
 * commits from then on (st_failed), because a caller may act on the row's
 * apparent absence. Restart to replay (and check) the log.
 *
 * Not re-entrant: st_scan callbacks must not commit (st_commit fails if they
 * try), compact or close. done_fn callbacks may commit (the commit lands in
 * the next turn) and may close the store.
 *
 * PostgreSQL: st_open given a postgres:// or postgresql:// DSN (libpq's URI
 * form) instead of a directory keeps the durable rows in PostgreSQL
 * (src/store/pg.h: table denv_rows, schema created and migrated at open, a
 * newer schema refused, one process per database by an advisory lock).
 * Everything above about reading holds unchanged, because the rows are
 * loaded at open into a scratch file store (a fresh directory under
 * $TMPDIR, removed at close, and swept at the next open when a process
 * died without closing; no fsyncs, no mark) that answers every read
 * with the same tables and indexes. Writing differs in what "durable"
 * means: a group of commits (one loop turn's, or all that queued while
 * the previous group was in flight) is one PostgreSQL transaction, sent
 * without blocking the loop, and the done_fns run after it has committed;
 * without a loop st_commit returns after COMMIT. When the server is lost
 * the group's done_fns (and those queued behind it) hear -1, st_commit
 * refuses with the reason while the store reconnects (with a loop: after
 * 100 ms, doubling to 5 s), and the lost group is sent again before any
 * new commit is accepted, so PostgreSQL converges on what memory holds.
 * st_failed stays false for that: it is about the local files. opts->repair
 * is refused; compaction rewrites only the scratch log.
 *
 * Crashes: a SIGKILL at any point, compaction included, loses nothing that
 * was acknowledged and never leaves a mark that refuses the log
 * (t/unit/store-crash.c). After a power loss, the disk may hold the later
 * records of the last fsync group but not an earlier one; that looks like
 * mid-log corruption and start-up asks for -db-repair, which then drops
 * only transactions whose fsync never completed.
 */
#ifndef DENV_STORE_H
#define DENV_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "base/err.h"
#include "json/json.h"

struct ev;

/* ---- limits ---- */

#define ST_FORMAT_VERSION 1
#define ST_HEADER_BYTES 16
#define ST_RECORD_HEAD_BYTES 8		/* len + crc */
/* Largest record payload (one transaction). Also bounds one row. A length
 * field above this is treated as corruption, never as a size to allocate. */
#define ST_RECORD_MAX ((size_t)16 << 20)
#define ST_RECORD_MIN 2			/* "{}": rejects zero-filled tails (len 0, crc 0) */
#define ST_NAME_MAX 64			/* table and index field names */
#define ST_ID_MAX 256			/* row ids */
#define ST_TABLES_MAX 256
#define ST_INDEXES_MAX 8		/* per table */
#define ST_TXN_OPS_MAX 100000		/* puts + deletes in one transaction */
#define ST_JSON_DEPTH_MAX 64		/* nesting of a row (plus the record's own two levels) */
/* Compaction rewrites the live rows into records of about this size. */
#define ST_COMPACT_RECORD_BYTES ((size_t)1 << 20)
/* Automatic compaction: when the log holds more dead ops (overwritten or
 * deleted puts, and deletes) than live rows, and is at least this large. */
#define ST_COMPACT_MIN_BYTES ((off_t)4 << 20)
#define ST_MARK_VERSION 1
#define ST_MARK_HEADER_BYTES 16
#define ST_MARK_SLOT_BYTES 40
#define ST_MARK_BYTES (ST_MARK_HEADER_BYTES + 2 * ST_MARK_SLOT_BYTES)
#define ST_MARK_COMPACT 1u		/* slot flag: written just before a compaction's rename */
/* The mark is written after every group fsync, fdatasynced at most this
 * often (and at compaction, open and close). */
#define ST_MARK_SYNC_MS 1000
/* Replay reads the log through a window of this many bytes (or one record). */
#define ST_READ_CHUNK ((size_t)1 << 20)
/* Releasing at least this many cached rows at once also hands freed memory
 * back to the system (glibc malloc_trim), so that one big listing does not
 * leave the process at its peak size. */
#define ST_TRIM_AFTER_ROWS 1024

/* ---- the system-call table ---- */

/*
 * Every system call on the log goes through this table (after sqlite's
 * unix VFS syscall table) so that tests can fail the Nth write or fsync, or
 * kill the process at an exact point. Members follow the libc calls; each
 * returns what libc returns and sets errno. The store retries EINTR and
 * loops over short writes itself.
 */
struct st_sys {
	int (*open)(const char *path, int flags, mode_t mode);
	int (*close)(int fd);
	ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
	ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
	int (*fsync)(int fd);
	int (*fdatasync)(int fd);	/* the mark (an overwrite in place); NULL: fsync */
	int (*ftruncate)(int fd, off_t len);
	int (*rename)(const char *from, const char *to);
	int (*unlink)(const char *path);
	int (*fstat)(int fd, struct stat *st);
	int (*flock)(int fd, int op);
};

/* The real calls. Tests copy it, replace members, and pass the copy. */
const struct st_sys *st_sys_default(void);

/* ---- opening ---- */

struct st_opts {
	bool repair;			/* -db-repair: keep the good prefix of a corrupt or short log, reset the mark */
	struct ev *ev;			/* group commit on this loop; NULL: fsync in every st_commit */
	const struct st_sys *sys;	/* NULL: st_sys_default() */
	bool no_auto_compact;		/* tests and benchmarks: compact only on st_compact */
};

struct st_db;

/* Open (creating if absent) the store in directory path. opts may be NULL.
 * A torn tail is truncated with a warning; a corrupt record followed by good
 * ones fails (naming the offset) unless opts->repair; so does a log that
 * holds less than its mark says was acknowledged (naming both counts).
 * -1 and e on failure (e->code EBUSY: another denv-cp holds the
 * PostgreSQL store's lock; a standby waits on that, cp/standby.c). */
int st_open(const char *path, const struct st_opts *opts, struct st_db **out, struct err *e);

/* True if path is a PostgreSQL DSN (see "PostgreSQL" above). */
bool st_is_remote(const char *path);
/* path for messages: a DSN's password replaced by ***. Caller frees. */
char *st_display_name(const char *path);

/* Close. Pending commits (with a loop) are fsynced and their done_fn called
 * first. Safe with NULL. With a loop, a flush may still be queued on it: let
 * the loop turn once more before ev_free, or that small token leaks. */
void st_close(struct st_db *db);

/* Declare a table and its indexes (NULL-terminated list of top-level string
 * fields, or NULL for none). Tables also spring into existence on first put.
 * Indexes are not stored in the log: declare them after st_open, on every
 * start; an index added to a table with rows is built from them. */
int st_table(struct st_db *db, const char *table, const char *const index_fields[], struct err *e);
/* (A new index on a table with rows reads every row: -1 if one cannot be
 * read, and the store refuses commits, as under "Read failures".) */

/* ---- reading ---- */

/* The row, owned by the store (see "Pointers" above), or NULL if absent or
 * unreadable (see "Read failures"). */
const struct json *st_get(struct st_db *db, const char *table, const char *id);

/* Free the cached rows now: every pointer st_get and st_scan handed out
 * dies (see "Pointers"). Safe with NULL; ignored inside an st_scan callback.
 * With a loop the store does this itself at the end of each turn. */
void st_release(struct st_db *db);

/* Called for each row of a scan, in id order. Return 0 to go on, anything
 * else to stop. Must not commit. */
typedef int (*st_scan_fn)(const char *id, const struct json *row, void *arg);

/* Which part of a scan: rows strictly after `after` (strictly before, when
 * reverse) in id order, at most limit (0 = no limit). NULL range = all. */
struct st_range {
	const char *after;
	size_t limit;
	bool reverse;			/* descending id order: newest first for ULIDs */
};

/* Visit the rows of table (field NULL) or those whose string field `field`
 * equals value exactly (field must be indexed with st_table). A missing
 * table is empty. Only the visited rows are read from the log. 0, or -1
 * (field not indexed, bad names, a row could not be read). */
int st_scan(struct st_db *db, const char *table, const char *field, const char *value,
	    const struct st_range *range, st_scan_fn fn, void *arg, struct err *e);

/* Rows in table (field NULL) or in the index entry field = value. An
 * unknown table or unindexed field counts 0. */
size_t st_count(struct st_db *db, const char *table, const char *field, const char *value);

/* Call fn with the name of every table (declared or with rows), in name
 * order; fn returns 0 to go on. 0, or what fn returned. */
int st_tables(struct st_db *db, int (*fn)(const char *table, void *arg), void *arg);

/* ---- writing ---- */

struct st_txn;

/* status 0: the transaction is durable. -1: it is not known to be (e says
 * why); the store refuses commits from then on. */
typedef void (*st_done_fn)(int status, struct err *e, void *arg);

struct st_txn *st_begin(struct st_db *db);

/* Put row (a JSON object; ownership taken, even on failure) as table/id.
 * The row must survive a write and a parse unchanged: valid UTF-8 in every
 * string and key, no NaN or infinity, at most ST_JSON_DEPTH_MAX deep.
 * Reads inside the transaction do not see its own writes. A bad argument
 * (name, id, non-object, too many ops) fails here and poisons the txn so
 * that st_commit fails with the same message. 0 / -1. */
int st_put(struct st_txn *txn, const char *table, const char *id, struct json *row);
/* Delete table/id (deleting an absent row is not an error). 0 / -1. */
int st_delete(struct st_txn *txn, const char *table, const char *id);

/*
 * Commit and free txn. With an ev loop: -1 means refused (nothing written,
 * nothing applied, done_fn never called); 0 means applied in memory and
 * done_fn (if not NULL) will be called exactly once at the end of this
 * turn with the fsync status. Without a loop: the status of the whole
 * commit including its fsync is returned, and also handed to done_fn (if
 * not NULL) before st_commit returns. An empty transaction commits nothing
 * and succeeds.
 */
int st_commit(struct st_txn *txn, st_done_fn done, void *arg, struct err *e);
/* Drop txn without writing. Safe with NULL. */
void st_abort(struct st_txn *txn);

/* Fsync queued commits now and call their done_fns, again while those
 * commit more (bounded). For shutdown: flush while everything the callbacks
 * point at is still alive, then free it, then st_close. 0, or -1 if the
 * store has failed. */
int st_flush(struct st_db *db);

/* Rewrite the log with only the live rows, now (temp file, fsync, rename,
 * fsync dir). Queued done_fns stay queued; they are covered. Synchronous:
 * with a loop it blocks the turn (about 1-2 s for a million rows here). It
 * also runs by itself after a flush or sync commit when dead ops outnumber
 * live rows and the log is at least ST_COMPACT_MIN_BYTES (unless
 * st_opts.no_auto_compact). A failure before the rename leaves the store as
 * it was; a failed directory fsync after it makes the store refuse commits. */
int st_compact(struct st_db *db, struct err *e);

/* ---- moving a store (denv-cp -db-copy; src/store/copy.c) ---- */

/* Rows per transaction when copying (well under ST_TXN_OPS_MAX). */
#define ST_COPY_TXN_OPS 10000

/* What a store holds, for comparing two: rows, tables with rows, and the
 * SHA-256 (hex) of every table name, id and row (as json_write writes it)
 * in name and id order. Two stores with the same rows digest the same
 * whatever their backends and histories. */
struct st_digest {
	uint64_t rows;
	size_t tables;
	char sha256[65];
};
int st_digest(struct st_db *db, struct st_digest *out, struct err *e);

/* Put every row of from into to (which must hold no rows), in
 * transactions of at most ST_COPY_TXN_OPS rows. Both opened without a loop.
 * 0 / -1 (to may then hold part of the rows). */
int st_copy(struct st_db *from, struct st_db *to, struct err *e);

/* ---- state ---- */

/* True after an fsync (or an unrecoverable write) failed: commits are refused. */
bool st_failed(const struct st_db *db);
/* PostgreSQL only: the connection was lost and, when it came back, another
 * process held the lock: it is the active one now, this one must stop. */
bool st_lease_lost(const struct st_db *db);

struct st_stats {
	off_t log_bytes;	/* size of the log file */
	uint64_t records;	/* records (transactions) in the log */
	uint64_t live_rows;	/* rows in all tables */
	uint64_t log_ops;	/* puts and deletes in the log */
	uint64_t fsyncs;	/* fsyncs of the log since open */
	uint64_t compactions;	/* since open */
	uint64_t truncated_bytes;	/* torn tail dropped at open */
	uint64_t row_reads;	/* rows read from the log since open */
	uint64_t cached_rows;	/* parsed rows held right now */
};
void st_stats(const struct st_db *db, struct st_stats *out);

#endif
