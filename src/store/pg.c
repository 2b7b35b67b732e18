/* pg.c: the store's durable log on PostgreSQL (see pg.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "base/buf.h"
#include "base/ev.h"
#include "base/log.h"
#include "base/str.h"
#include "store/pg.h"

#define MOD "store"
#define PG_INSERT_ROWS 1000		/* rows per INSERT statement of a batch */

/* Schema migrations: entry k-1 takes the schema from version k-1 to k. Each
 * runs in one transaction with the version bump. Append only. */
static const char *const migrations[] = {
	"CREATE TABLE denv_rows (tbl text NOT NULL, id text NOT NULL, doc json NOT NULL, "
	"PRIMARY KEY (tbl, id))",
};
_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == PG_SCHEMA_VERSION,
	       "one migration per schema version");

struct pgop {
	char *tbl, *id;
	char *doc;		/* NULL: delete */
	size_t len;
	uint64_t seq;		/* later ops win */
};

struct opvec {
	struct pgop *v;
	size_t n, cap;
};

enum pg_state { PG_UP, PG_DOWN, PG_RESYNC, PG_DEAD };

struct stpg {
	char *dsn;		/* as given (libpq reads it) */
	char *safe;		/* the same with the password replaced, for messages */
	struct ev *ev;
	PGconn *conn;
	int fd;			/* watched on the loop; -1 none */
	enum pg_state state;
	struct opvec cur;	/* collected, not sent */
	struct opvec sent;	/* in flight */
	uint64_t seq;
	bool busy, want_write, failed_result;
	struct err res_err;	/* the batch's first error */
	stpg_done_fn fn;
	void *arg;
	struct ev_timer retry;
	int64_t backoff_ms;
	struct err down_err;	/* why commits are refused */
	bool connecting;	/* a non-blocking reconnect is under way */
	int dispatching;	/* inside a callback: stpg_close waits */
	bool close_pending;
};

bool stpg_is_dsn(const char *s)
{
	return s && (str_has_prefix(s, "postgres://") || str_has_prefix(s, "postgresql://"));
}

/* The DSN with any password shown as "***" (config.md: redacted in logs). */
char *stpg_redact(const char *dsn)
{
	const char *s = strstr(dsn, "://"), *at, *colon;
	struct buf b = BUF_INIT;

	if (!s)
		return xstrdup(dsn);
	s += 3;
	at = strchr(s, '@');
	colon = at ? memchr(s, ':', (size_t)(at - s)) : NULL;
	if (!colon)
		return xstrdup(dsn);
	buf_add(&b, dsn, (size_t)(colon + 1 - dsn));
	buf_adds(&b, "***");
	buf_adds(&b, at);
	return buf_detach(&b, NULL);
}

/* libpq's message, first line only (they end in newlines, some have hints). */
static int pg_err(struct stpg *p, struct err *e, const char *what, const char *msg)
{
	size_t n = strcspn(msg ? msg : "", "\n");

	return err_set(e, "store: PostgreSQL %s: %s: %.*s", p->safe, what, (int)n, msg ? msg : "");
}

static void ops_free(struct opvec *o)
{
	for (size_t i = 0; i < o->n; i++) {
		free(o->v[i].tbl);
		free(o->v[i].id);
		free(o->v[i].doc);
	}
	free(o->v);
	*o = (struct opvec){ 0 };
}

static void ops_add(struct stpg *p, const char *tbl, const char *id, const char *doc, size_t len)
{
	struct opvec *o = &p->cur;

	if (o->n == o->cap) {
		o->cap = o->cap ? o->cap * 2 : 64;
		o->v = xrealloc(o->v, o->cap * sizeof(*o->v));
	}
	o->v[o->n++] = (struct pgop){ xstrdup(tbl), xstrdup(id), doc ? xstrndup(doc, len) : NULL, len, ++p->seq };
}

/* cur = sent ++ cur: a failed batch's ops go out again, under later ones. */
static void ops_keep_sent(struct stpg *p)
{
	struct opvec *s = &p->sent, *c = &p->cur;

	if (!s->n)
		return;
	s->v = xrealloc(s->v, (s->n + c->n) * sizeof(*s->v));
	if (c->n)
		memcpy(s->v + s->n, c->v, c->n * sizeof(*c->v));
	s->n += c->n;
	s->cap = s->n;
	free(c->v);
	*c = *s;
	*s = (struct opvec){ 0 };
}

void stpg_put(struct stpg *p, const char *tbl, const char *id, const char *doc, size_t doc_len)
{
	ops_add(p, tbl, id, doc, doc_len);
}

void stpg_del(struct stpg *p, const char *tbl, const char *id)
{
	ops_add(p, tbl, id, NULL, 0);
}

static int exec_ok(struct stpg *p, const char *sql, PGresult **out, struct err *e)
{
	PGresult *r = PQexec(p->conn, sql);
	ExecStatusType st = PQresultStatus(r);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		pg_err(p, e, "query failed", r ? PQresultErrorMessage(r) : PQerrorMessage(p->conn));
		PQclear(r);
		return -1;
	}
	if (out)
		*out = r;
	else
		PQclear(r);
	return 0;
}

/* Create the schema or bring it up to PG_SCHEMA_VERSION; refuse a newer one. */
static int migrate(struct stpg *p, struct err *e)
{
	PGresult *r;
	int v;

	if (exec_ok(p, "CREATE TABLE IF NOT EXISTS denv_schema (version integer NOT NULL)", NULL, e) < 0 ||
	    exec_ok(p, "SELECT coalesce(max(version), 0) FROM denv_schema", &r, e) < 0)
		return -1;
	if (str_to_int(PQgetvalue(r, 0, 0), &v) < 0)
		v = -1;
	PQclear(r);
	if (v < 0)
		return err_set(e, "store: PostgreSQL %s: denv_schema holds no readable version", p->safe);
	if (v > PG_SCHEMA_VERSION)
		return err_set(e, "store: PostgreSQL %s has schema version %d, newer than the %d this denv-cp knows; "
			       "upgrade denv-cp (the database was left untouched)", p->safe, v, PG_SCHEMA_VERSION);
	for (int k = v + 1; k <= PG_SCHEMA_VERSION; k++) {
		struct buf b = BUF_INIT;
		int rc;

		buf_addf(&b, "BEGIN; %s; INSERT INTO denv_schema (version) VALUES (%d); COMMIT", migrations[k - 1], k);
		rc = exec_ok(p, b.data, NULL, e);
		buf_release(&b);
		if (rc < 0) {
			PQclear(PQexec(p->conn, "ROLLBACK"));
			return err_prefix(e, "schema migration to version %d", k);
		}
		log_info(MOD, "PostgreSQL %s: schema migrated to version %d", p->safe, k);
	}
	return 0;
}

static void on_fd(struct ev *ev, int fd, int revents, void *arg);

/* The server's notices ("already exists, skipping") are for people at psql. */
static void on_notice(void *arg, const char *msg)
{
	log_debug(MOD, "PostgreSQL: %.*s", (int)strcspn(msg, "\n"), msg);
}

/* Connect (blocking, at most PG_CONNECT_TIMEOUT_S) and take the lock. */
/* Ours first, the DSN last: what the DSN says wins (libpq: later overrides
 * earlier). TCP keepalives notice a dead server or path on an idle
 * connection within about 30 s. */
static const char *const conn_kw[] = { "connect_timeout", "application_name", "keepalives_idle",
				       "keepalives_interval", "keepalives_count", "dbname", NULL };

/* On a fresh connection: take the lock, then watch the socket (with a loop). */
static int connected(struct stpg *p, struct err *e)
{
	PGresult *r;
	bool locked;

	PQsetNoticeProcessor(p->conn, on_notice, NULL);
	{
		char sql[96];

		snprintf(sql, sizeof(sql), "SELECT pg_try_advisory_lock(%ld)", PG_LOCK_KEY);
		if (exec_ok(p, sql, &r, e) < 0)
			goto fail;
	}
	locked = str_eq(PQgetvalue(r, 0, 0), "t");
	PQclear(r);
	if (!locked) {
		err_set(e, "store: PostgreSQL %s: another denv-cp has this database open (advisory lock %ld)",
			p->safe, PG_LOCK_KEY);
		e->code = EBUSY;	/* a standby waits on exactly this (cp/standby.c) */
		goto fail;
	}
	if (p->ev) {
		p->fd = PQsocket(p->conn);
		if (PQsetnonblocking(p->conn, 1) < 0 || ev_fd_add(p->ev, p->fd, EV_READ, on_fd, p) < 0) {
			p->fd = -1;
			pg_err(p, e, "cannot watch the connection", PQerrorMessage(p->conn));
			goto fail;
		}
	}
	return 0;
fail:
	PQfinish(p->conn);
	p->conn = NULL;
	return -1;
}

/* Connect, blocking (at most PG_CONNECT_TIMEOUT_S): at open, and for tools. */
static int pg_connect(struct stpg *p, struct err *e)
{
	char timeout[16];
	const char *val[] = { timeout, "denv-cp", "15", "5", "3", p->dsn, NULL };

	snprintf(timeout, sizeof(timeout), "%d", PG_CONNECT_TIMEOUT_S);
	p->conn = PQconnectdbParams(conn_kw, val, 1);
	if (!p->conn || PQstatus(p->conn) != CONNECTION_OK) {
		pg_err(p, e, "cannot connect", p->conn ? PQerrorMessage(p->conn) : "out of memory");
		PQfinish(p->conn);
		p->conn = NULL;
		return -1;
	}
	return connected(p, e);
}

static void disconnect(struct stpg *p)
{
	p->connecting = false;
	if (p->fd >= 0 && p->ev)
		ev_fd_del(p->ev, p->fd);
	p->fd = -1;
	PQfinish(p->conn);
	p->conn = NULL;
}

int stpg_open(const char *dsn, struct ev *ev, struct stpg **out, struct err *e)
{
	struct stpg *p = xcalloc(1, sizeof(*p));

	*out = NULL;
	p->dsn = xstrdup(dsn);
	p->safe = stpg_redact(dsn);
	p->ev = ev;
	p->fd = -1;
	p->backoff_ms = PG_RETRY_MIN_MS;
	if (pg_connect(p, e) < 0 || migrate(p, e) < 0) {
		stpg_close(p);
		return -1;
	}
	p->state = PG_UP;
	*out = p;
	return 0;
}

int stpg_load(struct stpg *p, stpg_row_fn fn, void *arg, struct err *e)
{
	PGresult *r;
	int rc = 0;

	/* Row by row: a big store is never one result in memory. */
	if (!PQsendQuery(p->conn, "SELECT tbl, id, doc FROM denv_rows") || !PQsetSingleRowMode(p->conn))
		return pg_err(p, e, "cannot read the rows", PQerrorMessage(p->conn));
	while ((r = PQgetResult(p->conn))) {
		ExecStatusType st = PQresultStatus(r);

		if (rc == 0 && st == PGRES_SINGLE_TUPLE)
			rc = fn(PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2),
				(size_t)PQgetlength(r, 0, 2), arg, e);
		else if (rc == 0 && st != PGRES_TUPLES_OK)
			rc = pg_err(p, e, "cannot read the rows", PQresultErrorMessage(r));
		PQclear(r);
	}
	return rc < 0 ? -1 : 0;
}

static int op_cmp(const void *a, const void *b)
{
	const struct pgop *x = *(const struct pgop *const *)a, *y = *(const struct pgop *const *)b;
	int c = strcmp(x->tbl, y->tbl);

	if (!c)
		c = strcmp(x->id, y->id);
	if (!c)
		c = x->seq < y->seq ? 1 : x->seq > y->seq ? -1 : 0;	/* newest first */
	return c;
}

static void add_lit(struct stpg *p, struct buf *b, const char *s, size_t n)
{
	size_t at;

	buf_addch(b, '\'');
	if (buf_grow(b, 2 * n + 2) < 0)
		return;		/* over PG_BATCH_MAX: caught by the caller's length check */
	at = b->len;
	buf_setlen(b, at + PQescapeStringConn(p->conn, b->data + at, s, n, NULL));
	buf_addch(b, '\'');
}

/* The batch as SQL: a DELETE and INSERT ... ON CONFLICT statements of the
 * last op per row, sent as one simple query: one implicit transaction. */
static int build_sql(struct stpg *p, const struct opvec *o, struct buf *b, struct err *e)
{
	const struct pgop **v = xcalloc(o->n ? o->n : 1, sizeof(*v));
	size_t nput = 0, ndel = 0;

	for (size_t i = 0; i < o->n; i++)
		v[i] = &o->v[i];
	qsort(v, o->n, sizeof(*v), op_cmp);
	for (size_t i = 0; i < o->n; i++) {
		const struct pgop *op = v[i];
		if (i && strcmp(op->tbl, v[i - 1]->tbl) == 0 && strcmp(op->id, v[i - 1]->id) == 0)
			continue;	/* an older op on the same row */
		if (op->doc)
			continue;
		buf_adds(b, ndel++ ? "," : "DELETE FROM denv_rows WHERE (tbl, id) IN (");
		buf_addch(b, '(');
		add_lit(p, b, op->tbl, strlen(op->tbl));
		buf_addch(b, ',');
		add_lit(p, b, op->id, strlen(op->id));
		buf_addch(b, ')');
	}
	if (ndel)
		buf_adds(b, ");");
	for (size_t i = 0; i < o->n; i++) {
		const struct pgop *op = v[i];
		if (i && strcmp(op->tbl, v[i - 1]->tbl) == 0 && strcmp(op->id, v[i - 1]->id) == 0)
			continue;
		if (!op->doc)
			continue;
		buf_adds(b, nput++ % PG_INSERT_ROWS ? "," : "INSERT INTO denv_rows (tbl, id, doc) VALUES ");
		buf_addch(b, '(');
		add_lit(p, b, op->tbl, strlen(op->tbl));
		buf_addch(b, ',');
		add_lit(p, b, op->id, strlen(op->id));
		buf_addch(b, ',');
		add_lit(p, b, op->doc, op->len);
		buf_addch(b, ')');
		if (nput % PG_INSERT_ROWS == 0)
			buf_adds(b, " ON CONFLICT (tbl, id) DO UPDATE SET doc = EXCLUDED.doc;");
	}
	if (nput % PG_INSERT_ROWS)
		buf_adds(b, " ON CONFLICT (tbl, id) DO UPDATE SET doc = EXCLUDED.doc;");
	free(v);
	if (b->len >= PG_BATCH_MAX - 1)
		return err_set(e, "store: PostgreSQL batch larger than %zu bytes", PG_BATCH_MAX);
	return 0;
}

static void retry_cb(struct ev *ev, void *arg);
static void pg_free(struct stpg *p);

/* Call a batch's fn. It may close the store (and so p): stpg_close then
 * leaves the freeing to here, and callers return right after this. */
static void dispatch(struct stpg *p, stpg_done_fn fn, int status, struct err *e, void *arg)
{
	p->dispatching++;
	fn(status, e, arg);
	if (--p->dispatching == 0 && p->close_pending)
		pg_free(p);
}

/* The connection is gone or a batch failed: keep the batch's ops, refuse
 * commits, reconnect later. The batch's fn hears -1. */
static void go_down(struct stpg *p, const char *why)
{
	stpg_done_fn fn = p->busy ? p->fn : NULL;
	void *arg = p->arg;
	struct err e;

	err_set(&p->down_err, "store: PostgreSQL %s is unreachable (%s); refusing writes while reconnecting",
		p->safe, why);
	log_warn(MOD, "%s", p->down_err.msg);
	ops_keep_sent(p);
	p->busy = false;
	p->fn = NULL;
	disconnect(p);
	if (p->state != PG_DEAD)
		p->state = PG_DOWN;
	if (p->ev && p->state == PG_DOWN)
		ev_timer_start(p->ev, &p->retry, p->backoff_ms, retry_cb, p);
	if (fn) {
		e = p->down_err;
		err_set(&e, "store: PostgreSQL %s: the write is not known to be committed (%s)", p->safe, why);
		dispatch(p, fn, -1, &e, arg);
	}
}

static void resync_done(int status, struct err *e, void *arg)
{
	struct stpg *p = arg;

	if (status == 0) {
		p->state = PG_UP;
		log_info(MOD, "PostgreSQL %s: reconnected; writes accepted again", p->safe);
	}
}

static void start_send(struct stpg *p, stpg_done_fn fn, void *arg);

/* Back-off reconnect; once connected, the kept ops go out before anything new. */
static int reconnect_done(struct stpg *p, int rc, struct err *ep)
{
	struct err e = *ep;

	if (rc < 0) {
		log_warn(MOD, "%s", e.msg);
		if (e.code == EBUSY) {	/* another process holds the lease now */
			p->state = PG_DEAD;
			err_set(&p->down_err, "%s; refusing writes (restart this denv-cp)", e.msg);
		}
		return -1;
	}
	p->backoff_ms = PG_RETRY_MIN_MS;
	if (!p->cur.n) {
		resync_done(0, NULL, p);	/* nothing was lost on the way */
		return 0;
	}
	p->state = PG_RESYNC;
	start_send(p, resync_done, p);
	return 0;
}

static int reconnect(struct stpg *p)
{
	struct err e;
	int rc = pg_connect(p, &e);

	return reconnect_done(p, rc, &e);
}

static void retry_later(struct stpg *p)
{
	if (p->state != PG_DOWN)
		return;
	p->backoff_ms = p->backoff_ms * 2 > PG_RETRY_MAX_MS ? PG_RETRY_MAX_MS : p->backoff_ms * 2;
	ev_timer_start(p->ev, &p->retry, p->backoff_ms, retry_cb, p);
}

/* With a loop the reconnect never blocks it: PQconnectStartParams, then
 * PQconnectPoll whenever the socket is ready, the retry timer as deadline
 * (PQconnectPoll ignores connect_timeout). */
static void connect_fail(struct stpg *p, const char *msg)
{
	struct err e;

	pg_err(p, &e, "cannot connect", msg);
	if (p->fd >= 0)
		ev_fd_del(p->ev, p->fd);
	p->fd = -1;
	p->connecting = false;
	ev_timer_stop(p->ev, &p->retry);
	PQfinish(p->conn);
	p->conn = NULL;
	reconnect_done(p, -1, &e);
	retry_later(p);
}

static void on_connect(struct ev *ev, int fd, int revents, void *arg)
{
	struct stpg *p = arg;
	PostgresPollingStatusType st = PQconnectPoll(p->conn);
	struct err e;
	int rc;

	if (st == PGRES_POLLING_FAILED) {
		connect_fail(p, PQerrorMessage(p->conn));
		return;
	}
	if (PQsocket(p->conn) != p->fd) {
		/* libpq may move to another socket (the next address, SSL off). */
		ev_fd_del(ev, p->fd);
		p->fd = PQsocket(p->conn);
		if (ev_fd_add(ev, p->fd, EV_READ, on_connect, p) < 0) {
			connect_fail(p, "cannot watch the socket");
			return;
		}
	}
	if (st == PGRES_POLLING_READING || st == PGRES_POLLING_WRITING) {
		ev_fd_set(ev, p->fd, st == PGRES_POLLING_READING ? EV_READ : EV_WRITE);
		return;
	}
	ev_fd_del(ev, p->fd);
	p->fd = -1;
	p->connecting = false;
	ev_timer_stop(ev, &p->retry);
	rc = connected(p, &e);
	if (reconnect_done(p, rc, &e) < 0)
		retry_later(p);
}

static void connect_start(struct stpg *p)
{
	const char *val[] = { "0", "denv-cp", "15", "5", "3", p->dsn, NULL };

	p->conn = PQconnectStartParams(conn_kw, val, 1);
	if (!p->conn || PQstatus(p->conn) == CONNECTION_BAD) {
		connect_fail(p, p->conn ? PQerrorMessage(p->conn) : "out of memory");
		return;
	}
	p->fd = PQsocket(p->conn);
	if (p->fd < 0 || ev_fd_add(p->ev, p->fd, EV_WRITE, on_connect, p) < 0) {
		p->fd = -1;
		connect_fail(p, "cannot watch the socket");
		return;
	}
	p->connecting = true;
	ev_timer_start(p->ev, &p->retry, PG_CONNECT_TIMEOUT_S * 1000, retry_cb, p);
}

static void retry_cb(struct ev *ev, void *arg)
{
	struct stpg *p = arg;

	if (p->connecting) {
		connect_fail(p, "timed out");
		return;
	}
	if (p->state == PG_DOWN)
		connect_start(p);
}

int stpg_ready(struct stpg *p, struct err *e)
{
	if (p->state == PG_DOWN && !p->ev)
		reconnect(p);	/* no loop, no timer: tools try once per commit */
	if (p->state == PG_UP)
		return 0;
	if (p->state == PG_RESYNC)
		return err_set(e, "store: PostgreSQL %s: reconnected, sending writes kept from before; "
			       "refusing new ones until they commit", p->safe);
	*e = p->down_err;
	return -1;
}

bool stpg_lost(const struct stpg *p)
{
	return p->state == PG_DEAD;
}

bool stpg_busy(const struct stpg *p)
{
	return p->busy;
}

/* The batch's results are all in: commit or failure. */
static void batch_end(struct stpg *p)
{
	stpg_done_fn fn = p->fn;
	void *arg = p->arg;

	if (p->failed_result) {
		/* The server said no (not a lost connection): the transaction
		 * rolled back; keep the ops and reconnect as for a loss. */
		char why[ERR_MSG_MAX];
		snprintf(why, sizeof(why), "%s", p->res_err.msg);
		go_down(p, why);
		return;
	}
	ops_free(&p->sent);
	p->busy = false;
	p->fn = NULL;
	dispatch(p, fn, 0, NULL, arg);
}

/* Read what has arrived; with block, wait for all of the batch. */
static void read_results(struct stpg *p, bool block)
{
	PGresult *r;

	while (p->busy) {
		if (!block && PQisBusy(p->conn))
			return;
		r = PQgetResult(p->conn);
		if (!r) {
			if (PQstatus(p->conn) != CONNECTION_OK)
				go_down(p, "connection lost");
			else
				batch_end(p);
			return;
		}
		if (PQresultStatus(r) != PGRES_COMMAND_OK && !p->failed_result) {
			size_t n;
			const char *m = PQresultErrorMessage(r);
			p->failed_result = true;
			n = strcspn(m, "\n");
			err_set(&p->res_err, "%.*s", (int)n, *m ? m : "transaction failed");
		}
		PQclear(r);
	}
}

static void on_fd(struct ev *ev, int fd, int revents, void *arg)
{
	struct stpg *p = arg;

	if (revents & EV_WRITE) {
		int f = PQflush(p->conn);
		if (f < 0) {
			go_down(p, "connection lost while sending");
			return;
		}
		if (f == 0 && p->want_write) {
			p->want_write = false;
			ev_fd_set(ev, fd, EV_READ);
		}
	}
	if (!(revents & EV_READ))
		return;
	if (!PQconsumeInput(p->conn)) {
		go_down(p, "connection lost");
		return;
	}
	for (PGnotify *n; (n = PQnotifies(p->conn));)
		PQfreemem(n);
	if (p->busy) {
		read_results(p, false);
	} else if (PQstatus(p->conn) != CONNECTION_OK) {
		go_down(p, "connection lost");
	} else {
		/* Idle: the server only speaks to say it is going away. */
		PGresult *r = PQisBusy(p->conn) ? NULL : PQgetResult(p->conn);
		if (r) {
			PQclear(r);
			go_down(p, "server closed the session");
		}
	}
}

/* Send cur (p is UP or RESYNC, connected). */
static void start_send(struct stpg *p, stpg_done_fn fn, void *arg)
{
	struct buf b;
	struct err e;
	int f;

	buf_init(&b, PG_BATCH_MAX);
	p->sent = p->cur;
	p->cur = (struct opvec){ 0 };
	p->busy = true;
	p->fn = fn;
	p->arg = arg;
	p->failed_result = false;
	if (build_sql(p, &p->sent, &b, &e) < 0) {
		/* Cannot happen below the store's own limits; never ack it. */
		buf_release(&b);
		go_down(p, e.msg);
		return;
	}
	if (!PQsendQuery(p->conn, b.data)) {
		buf_release(&b);
		go_down(p, "cannot send");
		return;
	}
	buf_release(&b);
	if (!p->ev) {
		read_results(p, true);
		return;
	}
	f = PQflush(p->conn);
	if (f < 0) {
		go_down(p, "connection lost while sending");
	} else if (f == 1) {
		p->want_write = true;
		ev_fd_set(p->ev, p->fd, EV_READ | EV_WRITE);
	}
}

void stpg_send(struct stpg *p, stpg_done_fn fn, void *arg)
{
	struct err e;

	if (p->state != PG_UP) {
		e = p->down_err;
		if (p->state == PG_RESYNC)
			err_set(&e, "store: PostgreSQL %s: still sending writes kept from before", p->safe);
		fn(-1, &e, arg);
		return;
	}
	if (!p->cur.n) {
		fn(0, NULL, arg);
		return;
	}
	start_send(p, fn, arg);
}

void stpg_wait(struct stpg *p)
{
	while (p->busy) {
		if (p->ev && PQflush(p->conn) != 0) {
			/* Non-blocking mode: wait until the socket takes the rest. */
			if (ev_wait_fd(p->fd, EV_WRITE, ev_mono_ms() + PG_CONNECT_TIMEOUT_S * 1000) <= 0) {
				go_down(p, "timed out sending at close");
				return;
			}
			continue;
		}
		read_results(p, true);
	}
}

void stpg_close(struct stpg *p)
{
	if (!p)
		return;
	if (p->conn)
		stpg_wait(p);
	if (p->dispatching) {
		p->close_pending = true;	/* from inside a batch's fn: dispatch frees */
		return;
	}
	pg_free(p);
}

static void pg_free(struct stpg *p)
{
	if (p->ev)
		ev_timer_stop(p->ev, &p->retry);
	if (p->cur.n)
		log_warn(MOD, "PostgreSQL %s: closing with %zu writes not committed", p->safe, p->cur.n);
	disconnect(p);
	ops_free(&p->cur);
	ops_free(&p->sent);
	free(p->dsn);
	free(p->safe);
	free(p);
}
