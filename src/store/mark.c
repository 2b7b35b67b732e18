/*
 * mark.c: the mark file: how much of the log was acknowledged
 * (store.h: the format and the rules).
 */
#include "store/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char st_mark_magic[8] = { 'd', 'e', 'n', 'v', 'm', 'a', 'r', 'k' };

static void mark_header(char *h)
{
	memcpy(h, st_mark_magic, 8);
	st_put_u32(h + 8, ST_MARK_VERSION);
	st_put_u32(h + 12, st_crc(h, 12));
}

static void slot_encode(char *p, const struct st_mark *m)
{
	memset(p, 0, ST_MARK_SLOT_BYTES);
	st_put_u64(p, m->seq);
	st_put_u64(p + 8, m->bytes);
	st_put_u64(p + 16, m->records);
	st_put_u32(p + 24, m->last_crc);
	st_put_u32(p + 28, m->flags);
	st_put_u32(p + 36, st_crc(p, 36));
}

/* Slot i's bytes at p: true if they hold a write (good CRC, seq of i's parity). */
static bool slot_decode(const char *p, int i, struct st_mark *m)
{
	if (st_get_u32(p + 36) != st_crc(p, 36))
		return false;
	m->seq = st_get_u64(p);
	m->bytes = st_get_u64(p + 8);
	m->records = st_get_u64(p + 16);
	m->last_crc = st_get_u32(p + 24);
	m->flags = st_get_u32(p + 28);
	return m->seq != 0 && m->seq % 2 == (uint64_t)i && m->bytes >= ST_HEADER_BYTES;
}

/*
 * Read the mark file into db->want (nothing there: want.on stays false and
 * mark_fd -1). A mark that exists but is unusable is refused; with repair it
 * is ignored (st_mark_finish writes a new one). 0 / -1.
 */
int st_mark_load(struct st_db *db, struct err *e)
{
	char buf[ST_MARK_BYTES], h[ST_MARK_HEADER_BYTES];
	struct st_mark s[2];
	bool v[2] = { false, false };
	struct stat st;
	const char *why = NULL;
	int hi;

	db->mark_fd = st_sys_open(db, db->mark_path, O_RDWR, 0);
	if (db->mark_fd < 0 && errno == ENOENT)
		return 0;
	if (db->mark_fd < 0)
		return err_errno(e, "store: open %s", db->mark_path);
	if (db->sys->fstat(db->mark_fd, &st) < 0)
		return err_errno(e, "store: stat %s", db->mark_path);
	mark_header(h);
	if (st.st_size != ST_MARK_BYTES) {
		why = "wrong size";
	} else if (st_sys_pread_full(db, db->mark_fd, buf, sizeof(buf), 0) < 0) {
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
		st_sys_close_fd(db, db->mark_fd);
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

int st_mark_sync(struct st_db *db, struct err *e)
{
	if (!db->mark_unsynced)
		return 0;
	if (st_sys_fdatasync_fd(db, db->mark_fd) < 0)
		return err_errno(e, "store: fdatasync mark %s", db->mark_path);
	db->mark_unsynced = false;
	db->mark_synced_ms = ev_mono_ms();
	return 0;
}

/* Write the next slot (bytes, records, last_crc, flags), and fdatasync it
 * if sync. db->mark follows only on success; a failed write is retried in
 * the same slot, so the other one, the last good write, is never touched. */
int st_mark_write(struct st_db *db, off_t bytes, uint64_t records, uint32_t last_crc, uint32_t flags,
		  bool sync, struct err *e)
{
	struct st_mark m = { db->mark.seq + 1, (uint64_t)bytes, records, last_crc, flags };
	char p[ST_MARK_SLOT_BYTES];
	off_t at = ST_MARK_HEADER_BYTES + (off_t)(m.seq % 2) * ST_MARK_SLOT_BYTES;

	slot_encode(p, &m);
	if (st_sys_pwrite_all(db, db->mark_fd, p, sizeof(p), at) < 0)
		return err_errno(e, "store: write mark %s", db->mark_path);
	db->mark_unsynced = true;
	if (sync && st_mark_sync(db, e) < 0)
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
	int fd;

	memset(buf, 0, sizeof(buf));
	mark_header(buf);
	slot_encode(buf + ST_MARK_HEADER_BYTES + ST_MARK_SLOT_BYTES, &m);	/* seq 1: slot 1 */
	if ((fd = st_sys_install(db, db->mark_new_path, db->mark_path, buf, sizeof(buf), e)) < 0)
		return -1;
	st_sys_close_fd(db, db->mark_fd);
	db->mark_fd = fd;
	db->mark = m;
	db->mark_unsynced = false;
	db->mark_synced_ms = ev_mono_ms();
	return st_fsync_dir(db, e);
}

/* The mark could not be written or synced: the store can no longer tell
 * a cut log from a short one, so it takes no more commits. */
void st_mark_failed(struct st_db *db, const struct err *e)
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

	if (!db->failed && st_mark_sync(db, &e) < 0)
		st_mark_failed(db, &e);
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
void st_mark_advance(struct st_db *db)
{
	struct err e;
	int64_t since;

	if (db->scratch)
		return;
	if (db->failed || ((uint64_t)db->size == db->mark.bytes && db->records == db->mark.records &&
			   db->last_crc == db->mark.last_crc))
		return;
	since = ev_mono_ms() - db->mark_synced_ms;
	if (st_mark_write(db, db->size, db->records, db->last_crc, 0, since >= ST_MARK_SYNC_MS, &e) < 0) {
		st_mark_failed(db, &e);
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
void st_mark_see(struct st_db *db)
{
	struct mark_want *w = &db->want;

	if (w->on && !w->matched)
		w->matched = mark_is_here(db, &w->m) || (w->has_alt && mark_is_here(db, &w->alt));
}

/* Has replay gone past everything that was acknowledged? */
bool st_mark_passed(const struct st_db *db)
{
	return !db->want.on || db->want.matched;
}

/* The refusal when the log (good up to db->size, then cut: cut names how,
 * or NULL) does not hold what its mark says was acknowledged. -1. */
int st_mark_refuse(struct st_db *db, const char *cut, struct err *e)
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
 * say what is missing; the mark is then reset by st_mark_finish. */
int st_mark_check(struct st_db *db, struct err *e)
{
	const struct st_mark *m = &db->want.m;
	uint64_t lost_rec, lost_bytes;

	if (st_mark_passed(db))
		return 0;
	if (!db->repair)
		return st_mark_refuse(db, NULL, e);
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
int st_mark_finish(struct st_db *db, bool log_synced, struct err *e)
{
	if (!log_synced && st_sys_fsync_fd(db, db->fd) < 0)
		return err_errno(e, "store: fsync %s", db->log_path);
	if (db->mark_fd < 0 && db->records)
		log_warn(MOD, "log %s has no mark (a store from before marks, or the mark was removed): "
			 "it cannot be checked for truncation this time; writing %s", db->log_path, db->mark_path);
	/* A mark reset by repair is a new file: its other slot must not keep
	 * describing the log that is gone. */
	if (db->mark_fd < 0 || !st_mark_passed(db))
		return mark_create(db, e);
	if (mark_is_here(db, &db->mark) && !(db->mark.flags & ST_MARK_COMPACT))
		return st_mark_sync(db, e);
	return st_mark_write(db, db->size, db->records, db->last_crc, 0, true, e);
}
