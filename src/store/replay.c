/*
 * replay.c: replaying the log at open, and building the indexes
 * (store.h: the format and the rules).
 */
#include "store/internal.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
	if (st_sys_pread_full(r->db, r->db->fd, r->buf, want, off) < 0)
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
		c = st_bytes_cmp(st_node_v(x->n), x->n->vlen, st_node_v(y->n), y->n->vlen);
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
	if (st_span_expect(p, len, &i, '{') < 0)
		return -1;
	i = st_span_ws(p, len, i);
	if (i < len && p[i] == '}')
		return 1;
	for (;;) {
		const char *k;
		size_t klen;

		if (st_span_value(p, len, &i, &ks) < 0 || p[ks] != '"')
			return -1;
		k = p + ks + 1;
		klen = i - ks - 2;
		if (memchr(k, '\\', klen))
			return 0;
		if (st_span_expect(p, len, &i, ':') < 0 || st_span_value(p, len, &i, &vs) < 0)
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
		i = st_span_ws(p, len, i);
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
	return st_row_text(db, r, e);
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
		if (!(d = *doc = st_row_parse(db, r, text, e)))
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
int st_ix_build(struct st_db *db, struct st_table *t, int first, struct err *e)
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
	st_it_seek(&it, t->root, &k, false);
	while ((rn = st_it_next(&it))) {
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
			n = st_ix_node_new(r, first + x, val[x], vlen[x]);
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
	st_it_release(&it);
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
	len = st_get_u32(p);
	want = st_get_u32(p + 4);
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
	*st = st_crc(p, len) == want ? REC_OK : REC_BAD_CRC;
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
		len = st_get_u32(h);
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
		if (st_sys_pread_full(r->db, r->db->fd, tail, 2, p + ST_RECORD_HEAD_BYTES + len - 2) < 0)
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
	fd = st_sys_open(db, name, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return err_errno(e, "store: create %s", name);
	while (at < r->size) {
		size_t n = r->size - at > (off_t)ST_READ_CHUNK ? ST_READ_CHUNK : (size_t)(r->size - at);
		const char *p;
		if (rd_get(r, at, n, &p, e) < 0)
			goto fail;
		if (st_sys_pwrite_all(db, fd, p, n, at - off) < 0) {
			err_errno(e, "store: write %s", name);
			goto fail;
		}
		at += (off_t)n;
	}
	if (st_sys_fsync_fd(db, fd) < 0) {
		err_errno(e, "store: fsync %s", name);
		goto fail;
	}
	st_sys_close_fd(db, fd);
	return st_fsync_dir(db, e);
fail:
	st_sys_close_fd(db, fd);
	db->sys->unlink(name);
	return -1;
}

static int truncate_log(struct st_db *db, off_t off, struct err *e)
{
	if (st_sys_ftruncate_fd(db, db->fd, off) < 0)
		return err_errno(e, "store: truncate %s to %lld bytes", db->log_path, (long long)off);
	if (st_sys_fsync_fd(db, db->fd) < 0)
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
	if (!undecodable && next < 0 && st_mark_passed(db)) {
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
		return st_mark_refuse(db, why, e);
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

int st_replay(struct st_db *db, off_t size, struct err *e)
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
		if (st_rec_scan(db, &sc, p, plen)) {
			st_apply_decoded(db, off + ST_RECORD_HEAD_BYTES, sc.ops, sc.n);
		} else if (json_parse(p, plen, &lim, &doc, &pe) < 0 || st_decode_ops(db, doc, &ops, &nops, &pe) < 0 ||
		    (st_find_row_spans(p, plen, doc, ops, nops) < 0 &&
		     err_set(&pe, "cannot find the rows in the record's text") < 0)) {
			json_free(doc);
			free(ops);
			snprintf(why, sizeof(why), "undecodable transaction: %s", pe.msg);
			rc = bad_record(db, &r, off, why, true, e);
			break;
		} else {
			st_apply_decoded(db, off + ST_RECORD_HEAD_BYTES, ops, nops);
			free(ops);
			json_free(doc);
		}
		off += ST_RECORD_HEAD_BYTES + (off_t)plen;
		db->size = off;
		db->last_crc = rcrc;
		st_mark_see(db);
	}
	free(r.buf);
	st_rscan_release(&sc);
	return rc;
}
