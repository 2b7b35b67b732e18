/*
 * open.c: opening and closing a database directory
 * (store.h: the format and the rules).
 */
#include "store/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"
#include "store/pg.h"

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
	int fd;

	st_make_header(h);
	if ((fd = st_sys_install(db, db->new_path, db->log_path, h, sizeof(h), e)) < 0)
		return -1;
	if (st_fsync_dir(db, e) < 0) {
		st_sys_close_fd(db, fd);
		return -1;
	}
	db->fd = fd;
	db->size = ST_HEADER_BYTES;
	return 0;
}

static int check_header(struct st_db *db, off_t size, struct err *e)
{
	char h[ST_HEADER_BYTES], want[ST_HEADER_BYTES];

	st_make_header(want);
	if (size < ST_HEADER_BYTES) {
		/* Only a header that never finished being written (impossible
		 * with create_log's rename, but not on every file system) is
		 * forgiven: its bytes must be a prefix of a good header. */
		if (size > 0 && st_sys_pread_full(db, db->fd, h, (size_t)size, 0) < 0)
			return err_errno(e, "store: read %s", db->log_path);
		if (size > 0 && memcmp(h, want, (size_t)size) != 0)
			return err_set(e, "store: %s is not a denv store log (%lld bytes, bad magic)",
				       db->log_path, (long long)size);
		log_warn(MOD, "log %s: incomplete header (%lld bytes): starting an empty log",
			 db->log_path, (long long)size);
		if (st_sys_pwrite_all(db, db->fd, want, sizeof(want), 0) < 0 || st_sys_fsync_fd(db, db->fd) < 0)
			return err_errno(e, "store: write %s", db->log_path);
		db->size = ST_HEADER_BYTES;
		return 1;
	}
	if (st_sys_pread_full(db, db->fd, h, sizeof(h), 0) < 0)
		return err_errno(e, "store: read %s", db->log_path);
	if (memcmp(h, st_magic, 8) != 0)
		return err_set(e, "store: %s is not a denv store log (bad magic)", db->log_path);
	if (st_get_u32(h + 12) != st_crc(h, 12))
		return err_set(e, "store: %s: header corrupt (bad crc)", db->log_path);
	if (st_get_u32(h + 8) != ST_FORMAT_VERSION)
		return err_set(e, "store: %s: format version %u; this build reads version %d",
			       db->log_path, st_get_u32(h + 8), ST_FORMAT_VERSION);
	return 0;
}

static int open_lock(struct st_db *db, struct err *e)
{
	int r;

	db->lock_fd = st_sys_open(db, db->lock_path, O_RDWR | O_CREAT, 0600);
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

/* A db for directory path, nothing opened yet. */
static struct st_db *db_new(const char *path, const struct st_opts *opts, bool scratch)
{
	struct st_db *db;

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
	return db;
}

/* Leftovers of a compaction or creation that a crash interrupted: the log
 * itself was never replaced by them, so they hold nothing needed. */
static int remove_leftovers(struct st_db *db, struct err *e)
{
	const char *const left[] = { db->tmp_path, db->new_path, db->mark_new_path };

	for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); i++)
		if (db->sys->unlink(left[i]) < 0 && errno != ENOENT)
			return err_errno(e, "store: remove %s", left[i]);
	return 0;
}

int st_open_dir(const char *path, const struct st_opts *opts, bool scratch, struct st_db **out,
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
	db = db_new(path, opts, scratch);

	if (open_lock(db, e) < 0)
		goto fail;
	if (remove_leftovers(db, e) < 0)
		goto fail;
	if (st_mark_load(db, e) < 0)
		goto fail;
	db->size = ST_HEADER_BYTES;	/* what an empty log holds: a mark may ask no more */
	st_mark_see(db);
	db->fd = st_sys_open(db, db->log_path, O_RDWR, 0);
	if (db->fd < 0 && errno == ENOENT) {
		if (!st_mark_passed(db) && !db->repair) {
			err_set(e, "store: log %s is missing, but its mark %s says %llu transactions (%llu bytes) were "
				"acknowledged; start with -db-repair to start an empty store and reset the mark",
				db->log_path, db->mark_path, (unsigned long long)db->want.m.records,
				(unsigned long long)db->want.m.bytes);
			goto fail;
		}
		if (create_log(db, e) < 0 || st_mark_check(db, e) < 0 || st_mark_finish(db, true, e) < 0)
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
	if (st.st_size < ST_HEADER_BYTES && !st_mark_passed(db) && !db->repair) {
		/* (before check_header completes the header: refuse untouched) */
		db->size = st.st_size;
		st_mark_refuse(db, NULL, e);
		goto fail;
	}
	hr = check_header(db, st.st_size, e);
	if (hr < 0)
		goto fail;
	db->size = ST_HEADER_BYTES;
	if (hr == 0 && st_replay(db, st.st_size, e) < 0)
		goto fail;
	if (st_mark_check(db, e) < 0 || st_mark_finish(db, false, e) < 0)
		goto fail;
	st_trim_memory();	/* replay's parsed records are gone: their pages too */
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
		return st_open_pg(path, opts, out, e);
	return st_open_dir(path, opts, false, out, e);
}

void st_close(struct st_db *db)
{
	if (!db || db->closing)
		return;		/* (closing: called again from a done_fn during close) */
	db->closing = true;
	if (db->pg)
		st_pg_drain(db);
	st_flush_pending(db);
	stpg_close(db->pg);
	if (db->ev)
		ev_timer_stop(db->ev, &db->mark_timer);
	if (!db->failed && db->mark_fd >= 0) {
		struct err e;
		if (st_mark_sync(db, &e) < 0)
			log_error(MOD, "%s", e.msg);
	}
	if (db->token->queued || db->token->running || db->token->rel_queued)
		db->token->db = NULL;	/* flush_cb or st_release_cb frees it */
	else
		free(db->token);
	for (size_t i = 0; i < db->ntables; i++) {
		struct st_table *t = &db->tables[i];
		st_tree_free_rows(t->root);
		for (int j = 0; j < t->nix; j++)
			free(t->ixfield[j]);
		free(t->name);
	}
	free(db->tables);
	free(db->cache);
	free(db->rbuf);
	free(db->pending);
	buf_release(&db->wbuf);
	st_sys_close_fd(db, db->fd);
	st_sys_close_fd(db, db->lock_fd);
	st_sys_close_fd(db, db->mark_fd);
	if (db->scratch)
		st_scratch_remove(db);
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

	if (!st_name_ok(table))
		return err_set(e, "store: bad table name");
	t = st_table_find(db, table);
	if (!t) {
		if (db->ntables >= ST_TABLES_MAX)
			return err_set(e, "store: more than %d tables", ST_TABLES_MAX);
		t = st_table_get(db, table);
	}
	first = t->nix;
	for (size_t i = 0; index_fields && index_fields[i]; i++) {
		const char *f = index_fields[i];
		bool have = false;
		if (!st_name_ok(f)) {
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
		if (st_ix_build(db, t, first, &be) < 0) {
			st_row_failed(db, &be);
			*e = be;
			return -1;
		}
		if (t->nrows >= ST_TRIM_AFTER_ROWS)
			st_trim_memory();	/* the rows it parsed are gone */
	}
	return rc;
}
