/*
 * pg.h: the store's PostgreSQL log (inside the store module; callers use
 * store.h and pass st_open a postgres:// DSN).
 *
 * PostgreSQL keeps the durable copy of every row, one row per store row in
 * table denv_rows (tbl, id, doc json). The store's in-memory tables and
 * indexes, and the scratch log its rows are read from, are rebuilt from it
 * at open (stpg_load). Each group commit of the store becomes one
 * PostgreSQL transaction (stpg_put/stpg_del collect it, stpg_send sends
 * it); with a loop it is sent with libpq's non-blocking calls and its
 * result read when the socket is readable, so the loop never waits on the
 * server; reconnects are non-blocking too (PQconnectStartParams and
 * PQconnectPoll on the loop). Only the first connection, at open, blocks.
 *
 * A failed batch (server gone, connection lost, an SQL error) is kept:
 * upserts and deletes of whole rows are idempotent, so after the reconnect
 * (bounded back-off, with a loop) the kept ops go out again before new
 * commits are accepted, and the server converges on what memory holds.
 * Until then stpg_ready says no, and the store refuses commits.
 *
 * One process at a time: the connection holds a session advisory lock
 * (PG_LOCK_KEY) for its life; a second denv-cp on the same database is
 * refused at open (e->code EBUSY: a standby denv-cp waits for it), and so
 * is a reconnect after another took the lock.
 */
#ifndef DENV_STORE_PG_H
#define DENV_STORE_PG_H

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

struct ev;
struct stpg;

/* The schema version this build writes; an older one is migrated at open,
 * a newer one refused. */
#define PG_SCHEMA_VERSION 1
#define PG_LOCK_KEY 0x64656e76L		/* "denv": pg_try_advisory_lock's key */
#define PG_CONNECT_TIMEOUT_S 5		/* each connection attempt (and the wait for a batch at close) */
#define PG_RETRY_MIN_MS 100		/* reconnect back-off: first wait, doubling */
#define PG_RETRY_MAX_MS 5000		/* ... up to this */
#define PG_BATCH_MAX ((size_t)1 << 30)	/* SQL text of one batch */

/* True if s names a PostgreSQL database (postgres:// or postgresql://). */
bool stpg_is_dsn(const char *s);
/* s with the password of a user:password@ part as "***". Caller frees. */
char *stpg_redact(const char *s);

/* Connect, take the lock, create or migrate the schema. ev may be NULL
 * (everything blocks). -1 and e (the password never appears in it). */
int stpg_open(const char *dsn, struct ev *ev, struct stpg **out, struct err *e);
/* Close. A batch in flight is waited for first (its callback runs). */
void stpg_close(struct stpg *p);

/* Call fn for every stored row (blocking). fn's doc is doc_len bytes of
 * JSON text, valid only during the call; fn returns 0 to go on. */
typedef int (*stpg_row_fn)(const char *tbl, const char *id, const char *doc, size_t doc_len, void *arg,
			   struct err *e);
int stpg_load(struct stpg *p, stpg_row_fn fn, void *arg, struct err *e);

/* Add to the next batch (the last op on a table/id wins). */
void stpg_put(struct stpg *p, const char *tbl, const char *id, const char *doc, size_t doc_len);
void stpg_del(struct stpg *p, const char *tbl, const char *id);

/* 0 when commits may be accepted; -1 and e (why not, and that a
 * reconnect is under way) while the server is unreachable or kept ops
 * are being sent again. Without a loop this tries one reconnect itself. */
int stpg_ready(struct stpg *p, struct err *e);
/* A reconnect found the lock taken: another denv-cp is active on this
 * database now, and this one refuses commits for good. */
bool stpg_lost(const struct stpg *p);
/* A batch is in flight (one at a time: stpg_send waits for it to end). */
bool stpg_busy(const struct stpg *p);

/* status 0: the batch is committed. -1: it is not known to be (e). */
typedef void (*stpg_done_fn)(int status, struct err *e, void *arg);
/* Send the collected ops as one transaction; fn runs once when it has
 * committed or failed: later (from the loop) with a loop, before this
 * returns without one or when nothing was collected. Must not be called
 * while stpg_busy. */
void stpg_send(struct stpg *p, stpg_done_fn fn, void *arg);
/* Block until no batch is in flight (its fn has run). */
void stpg_wait(struct stpg *p);

#endif
