/*
 * rows.c: reading a row's JSON text from the log, and the row cache
 * (store.h: the format and the rules).
 */
#include "store/internal.h"

#include <stdlib.h>

/*
 * A row's read failed (I/O error, or bytes that no longer parse: the log
 * changed under us). The caller would take the row for absent and might act
 * on that (create it again, say), so the store refuses commits from now on,
 * like after a failed fsync; a restart replays and checks the log.
 */
void st_row_failed(struct st_db *db, struct err *e)
{
	log_error(MOD, "%s", e->msg);
	if (!db->failed) {
		db->failed = true;
		err_set(&db->fail_err, "%s; refusing further commits (restart to replay what is on disk)", e->msg);
	}
}

/* The bytes of r's JSON text, in db->rbuf (valid until the next read). */
const char *st_row_text(struct st_db *db, struct st_row *r, struct err *e)
{
	if (r->len + 1 > db->rbuf_cap) {
		free(db->rbuf);
		db->rbuf_cap = r->len + 1 > 4096 ? r->len + 1 : 4096;
		db->rbuf = xmalloc(db->rbuf_cap);
	}
	if (st_sys_pread_full(db, db->fd, db->rbuf, r->len, r->off) < 0) {
		err_errno(e, "store: read row %s at offset %lld of %s", r->id, (long long)r->off, db->log_path);
		return NULL;
	}
	db->rbuf[r->len] = '\0';
	db->row_reads++;
	return db->rbuf;
}

/* Parse text, r's row as read from the log: a new DOM, or NULL (and e). */
struct json *st_row_parse(struct st_db *db, struct st_row *r, const char *text, struct err *e)
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
	const char *text = st_row_text(db, r, e);

	return text ? st_row_parse(db, r, text, e) : NULL;
}

void st_cache_add(struct st_db *db, struct st_row *r, struct json *doc)
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
		ev_defer(db->ev, st_release_cb, db->token);
	}
}

/* r's parsed row, from the cache or read now (and cached). NULL and e on failure. */
const struct json *st_row_get(struct st_db *db, struct st_row *r, struct err *e)
{
	struct json *doc;

	if (r->json)
		return r->json;
	if (!(doc = row_read(db, r, e))) {
		st_row_failed(db, e);
		return NULL;
	}
	st_cache_add(db, r, doc);
	return doc;
}
