/*
 * read.c: the streaming reader, a push parser over any chunking of the input.
 *
 * States follow the archive's layout: a header block (gathered in blk when it
 * arrives in pieces), then the entry's data (handed out as views into the
 * caller's bytes), then padding to the next block. Meta headers (pax 'x',
 * GNU 'L'/'K') have their data gathered into bounded buffers and apply to the
 * next real entry.
 */
#include "tar/tar.h"
#include "tar/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sys.h"

/* Input buffer of the fd conveniences. */
#define TAR_FD_CHUNK 65536

enum rstate {
	RS_HEADER,	/* gathering a header block */
	RS_DATA,	/* an entry's data */
	RS_META,	/* a meta header's data, kept */
	RS_SKIP,	/* a global header's data, dropped */
	RS_PAD,		/* padding up to the next block */
	RS_SPARSE_EXT,	/* GNU sparse extension blocks */
	RS_ZERO,	/* one zero block seen */
	RS_END,
	RS_FAILED,
};

struct tar_reader {
	enum rstate st;
	unsigned char blk[TAR_BLOCK_SIZE];
	size_t blk_len;
	uint64_t off;		/* bytes consumed */
	uint64_t remain;	/* data bytes left in the entry or meta header */
	uint64_t pad;
	bool pad_after_meta;
	uint64_t sparse_ext;
	char meta_type;
	struct buf meta;
	int meta_chain;		/* meta headers waiting for their entry */
	uint64_t entry_off;	/* offset of the first header of the next entry */
	/* overrides from meta headers, for the next entry */
	bool have_xpath, have_xlink, have_lpath, have_llink;
	bool have_xsize, have_xuid, have_xgid, have_xmtime, xsparse;
	struct buf xpath, xlink, lpath, llink;
	uint64_t xsize, xuid, xgid;
	int64_t xmtime;
	uint32_t xmtime_nsec;
	/* the current entry */
	struct buf path, link;
	struct tar_entry ent;
	bool have_ent;
	uint64_t nent;
	struct err fail;
	/* the fd conveniences' input */
	unsigned char *in;
	size_t in_off, in_len;
};

struct tar_reader *tar_reader_new(void)
{
	struct tar_reader *r = xcalloc(1, sizeof(*r));

	buf_init(&r->meta, TAR_MAX_PAX_SIZE + 1);
	buf_init(&r->xpath, TAR_MAX_PATH + 1);
	buf_init(&r->xlink, TAR_MAX_PATH + 1);
	buf_init(&r->lpath, TAR_MAX_PATH + 1);
	buf_init(&r->llink, TAR_MAX_PATH + 1);
	buf_init(&r->path, TAR_MAX_PATH + 1);
	buf_init(&r->link, TAR_MAX_PATH + 1);
	r->ent.path = r->path.data;
	r->ent.linkpath = r->link.data;
	return r;
}

void tar_reader_free(struct tar_reader *r)
{
	if (!r)
		return;
	buf_release(&r->meta);
	buf_release(&r->xpath);
	buf_release(&r->xlink);
	buf_release(&r->lpath);
	buf_release(&r->llink);
	buf_release(&r->path);
	buf_release(&r->link);
	free(r->in);
	free(r);
}

const struct tar_entry *tar_reader_entry(const struct tar_reader *r)
{
	return r->have_ent ? &r->ent : NULL;
}

/* Make the error sticky: every later call reports the same message. */
static int fail(struct tar_reader *r, struct err *e)
{
	r->fail = *e;
	r->st = RS_FAILED;
	return -1;
}

/* "after entry "x"" or "at the start", for messages about headers. */
static const char *where(const struct tar_reader *r, char *out, size_t n)
{
	char q[TAR_QUOTE_MAX];

	if (!r->have_ent)
		snprintf(out, n, "before the first entry");
	else
		snprintf(out, n, "after entry \"%s\"", tar_quote(r->ent.path, q));
	return out;
}

static int set_path(struct buf *b, const char *p, size_t n)
{
	buf_reset(b);
	return buf_add(b, p, n);
}

/* Whole-field decimal (pax values): digits only, no overflow. */
static int dec_u64(const char *p, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -1;
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	*out = v;
	return 0;
}

/* pax mtime: -?digits(.digits)? -> seconds and nanoseconds. */
static int pax_time(const char *p, size_t n, int64_t *sec, uint32_t *nsec)
{
	bool neg = n > 0 && p[0] == '-';
	const char *dot;
	size_t ilen;
	uint64_t v, ns = 0;

	if (neg) {
		p++;
		n--;
	}
	dot = memchr(p, '.', n);
	ilen = dot ? (size_t)(dot - p) : n;
	if (dec_u64(p, ilen, &v) < 0 || v > (uint64_t)INT64_MAX)
		return -1;
	if (dot) {
		size_t flen = n - ilen - 1;
		if (flen == 0)
			return -1;
		for (size_t i = 0; i < flen; i++) {
			char c = dot[1 + i];
			if (c < '0' || c > '9')
				return -1;
			if (i < 9)
				ns = ns * 10 + (uint64_t)(c - '0');
		}
		for (size_t i = flen; i < 9; i++)
			ns *= 10;
	}
	/* -1.5 means 1.5 s before the epoch: sec -2, nsec 500000000 */
	if (neg && ns) {
		*sec = -(int64_t)v - 1;
		*nsec = (uint32_t)(1000000000 - ns);
	} else {
		*sec = neg ? -(int64_t)v : (int64_t)v;
		*nsec = (uint32_t)ns;
	}
	return 0;
}

static bool key_is(const char *k, size_t kn, const char *want)
{
	return kn == strlen(want) && memcmp(k, want, kn) == 0;
}

static int pax_apply(struct tar_reader *r, const char *k, size_t kn, const char *v, size_t vn,
		     struct err *e)
{
	bool is_path = key_is(k, kn, "path"), is_link = key_is(k, kn, "linkpath");

	if (is_path || is_link) {
		struct buf *b = is_path ? &r->xpath : &r->xlink;
		bool *have = is_path ? &r->have_xpath : &r->have_xlink;
		/* an empty value removes the override (POSIX) */
		*have = vn > 0;
		if (vn == 0)
			return 0;
		if (memchr(v, '\0', vn))
			return err_set(e, "pax %.*s contains a NUL byte", (int)kn, k);
		if (vn > TAR_MAX_PATH || set_path(b, v, vn) < 0)
			return err_set(e, "pax %.*s is longer than %d bytes", (int)kn, k, TAR_MAX_PATH);
		return 0;
	}
	if (key_is(k, kn, "size") || key_is(k, kn, "uid") || key_is(k, kn, "gid")) {
		uint64_t *dst = k[0] == 's' ? &r->xsize : k[0] == 'u' ? &r->xuid : &r->xgid;
		bool *have = k[0] == 's' ? &r->have_xsize : k[0] == 'u' ? &r->have_xuid : &r->have_xgid;
		*have = vn > 0;
		if (vn && dec_u64(v, vn, dst) < 0)
			return err_set(e, "pax %.*s is not a number", (int)kn, k);
		return 0;
	}
	if (key_is(k, kn, "mtime")) {
		r->have_xmtime = vn > 0;
		if (vn && pax_time(v, vn, &r->xmtime, &r->xmtime_nsec) < 0)
			return err_set(e, "pax mtime is not a time");
		return 0;
	}
	/* GNU's pax sparse formats: the data is a map plus fragments, not the file */
	if (kn > 11 && memcmp(k, "GNU.sparse.", 11) == 0)
		r->xsparse = true;
	return 0;
}

/* Records are "<len> <key>=<value>\n", len counting the whole record. */
static int pax_parse(struct tar_reader *r, const char *p, size_t n, struct err *e)
{
	size_t i = 0;

	while (i < n) {
		uint64_t len = 0;
		size_t j = i;
		const char *kv, *eq;
		size_t kvn;

		while (j < n && p[j] >= '0' && p[j] <= '9') {
			len = len * 10 + (uint64_t)(p[j] - '0');
			if (len > n)
				return err_set(e, "pax record length runs past the header");
			j++;
		}
		if (j == i || j >= n || p[j] != ' ')
			return err_set(e, "pax record has no length");
		if (len > n - i || len < (j - i) + 4)
			return err_set(e, "pax record length %llu is wrong", (unsigned long long)len);
		if (p[i + len - 1] != '\n')
			return err_set(e, "pax record does not end in a newline");
		kv = p + j + 1;
		kvn = (size_t)(p + i + len - 1 - kv);
		eq = memchr(kv, '=', kvn);
		if (!eq || eq == kv)
			return err_set(e, "pax record has no key");
		if (pax_apply(r, kv, (size_t)(eq - kv), eq + 1, kvn - (size_t)(eq - kv) - 1, e) < 0)
			return -1;
		i += len;
	}
	return 0;
}

static void clear_overrides(struct tar_reader *r)
{
	r->have_xpath = r->have_xlink = r->have_lpath = r->have_llink = false;
	r->have_xsize = r->have_xuid = r->have_xgid = r->have_xmtime = r->xsparse = false;
	r->meta_chain = 0;
}

/* A meta header's data is complete. */
static int meta_done(struct tar_reader *r, struct err *e)
{
	const char *p = r->meta.data;
	size_t n = r->meta.len;

	if (r->meta_type == 'x')
		return pax_parse(r, p, n, e);
	/* GNU long name/link: the name, then a NUL (and maybe more NULs) */
	n = strnlen(p, n);
	if (n == 0)
		return err_set(e, "GNU long %s is empty", r->meta_type == 'L' ? "name" : "link name");
	if (r->meta_type == 'L') {
		r->have_lpath = true;
		return set_path(&r->lpath, p, n);
	}
	r->have_llink = true;
	return set_path(&r->llink, p, n);
}

static enum tar_type type_of(char t, bool sparse, const char *path)
{
	switch (t) {
	case '0': return sparse ? TAR_SPARSE : TAR_REG;
	case '\0':
		if (sparse)
			return TAR_SPARSE;
		/* pre-POSIX archives mark directories by a trailing slash */
		return path[0] && path[strlen(path) - 1] == '/' ? TAR_DIR : TAR_REG;
	case '1': return TAR_HARDLINK;
	case '2': return TAR_SYMLINK;
	case '3': return TAR_CHAR;
	case '4': return TAR_BLOCK;
	case '5': return TAR_DIR;
	case '6': return TAR_FIFO;
	case '7': return TAR_CONTIG;
	case 'S': return TAR_SPARSE;
	}
	return TAR_OTHER;
}

static bool header_only(enum tar_type t)
{
	return t == TAR_HARDLINK || t == TAR_SYMLINK || t == TAR_CHAR || t == TAR_BLOCK ||
	       t == TAR_DIR || t == TAR_FIFO;
}

static void start_data(struct tar_reader *r, uint64_t size)
{
	r->remain = size;
	r->pad = (TAR_BLOCK_SIZE - size % TAR_BLOCK_SIZE) % TAR_BLOCK_SIZE;
	r->pad_after_meta = false;
	r->st = size ? RS_DATA : RS_HEADER;
}

/*
 * A full block is in r->blk. Returns an event to report (TAR_EV_ENTRY,
 * TAR_EV_END), TAR_EV_MORE to keep going, or -1.
 */
static int on_block(struct tar_reader *r, struct err *e)
{
	struct tar_header h;
	const char *path, *link;
	char w[TAR_QUOTE_MAX + 32], q[TAR_QUOTE_MAX];
	uint64_t hoff = r->off - TAR_BLOCK_SIZE;

	if (r->st == RS_SPARSE_EXT) {
		if (++r->sparse_ext > TAR_MAX_SPARSE_EXT)
			return err_set(e, "tar: entry \"%s\": more than %d sparse extension blocks",
				       tar_quote(r->ent.path, q), TAR_MAX_SPARSE_EXT);
		if (r->blk[504])
			return TAR_EV_MORE;
		start_data(r, r->ent.size);
		return TAR_EV_ENTRY;
	}
	if (tar_block_is_zero(r->blk)) {
		if (r->st == RS_ZERO) {
			r->st = RS_END;
			return TAR_EV_END;
		}
		if (r->meta_chain)
			return err_set(e, "tar: extended header at offset %llu is not followed by an entry",
				       (unsigned long long)r->entry_off);
		r->st = RS_ZERO;
		return TAR_EV_MORE;
	}
	if (r->st == RS_ZERO)
		return err_set(e, "tar: data after an end-of-archive block at offset %llu (%s)",
			       (unsigned long long)hoff - TAR_BLOCK_SIZE, where(r, w, sizeof(w)));
	if (tar_header_parse(r->blk, &h, e) < 0)
		return err_prefix(e, "tar: header at offset %llu (%s)", (unsigned long long)hoff,
				  where(r, w, sizeof(w)));
	if (!r->meta_chain)
		r->entry_off = hoff;

	switch (h.typeflag) {
	case 'x': case 'L': case 'K': {
		uint64_t cap = h.typeflag == 'x' ? TAR_MAX_PAX_SIZE : TAR_MAX_PATH + 1;
		if (++r->meta_chain > TAR_MAX_META_CHAIN)
			return err_set(e, "tar: more than %d extended headers in a row at offset %llu",
				       TAR_MAX_META_CHAIN, (unsigned long long)hoff);
		if (h.size > cap)
			return err_set(e, "tar: %s at offset %llu is %llu bytes, over the limit of %llu",
				       h.typeflag == 'x' ? "pax extended header" : "GNU long name",
				       (unsigned long long)hoff, (unsigned long long)h.size,
				       (unsigned long long)cap);
		r->meta_type = h.typeflag;
		buf_reset(&r->meta);
		start_data(r, h.size);
		r->pad_after_meta = true;
		if (h.size) {
			r->st = RS_META;
		} else if (meta_done(r, e) < 0) {
			return err_prefix(e, "tar: extended header at offset %llu", (unsigned long long)hoff);
		}
		return TAR_EV_MORE;
	}
	case 'g':
		/* Global headers would change every later entry: they are skipped,
		 * never applied, and need no memory however large they are. */
		start_data(r, h.size);
		r->pad_after_meta = true;
		if (h.size)
			r->st = RS_SKIP;
		return TAR_EV_MORE;
	}

	path = r->have_xpath ? r->xpath.data : r->have_lpath ? r->lpath.data : h.name;
	link = r->have_xlink ? r->xlink.data : r->have_llink ? r->llink.data : h.linkname;
	if (set_path(&r->path, path, strlen(path)) < 0 || set_path(&r->link, link, strlen(link)) < 0)
		return err_set(e, "tar: entry at offset %llu: name too long", (unsigned long long)hoff);
	memset(&r->ent, 0, sizeof(r->ent));
	r->ent.path = r->path.data;
	r->ent.linkpath = r->link.data;
	r->ent.typeflag = h.typeflag;
	r->ent.type = type_of(h.typeflag, r->xsparse, r->ent.path);
	r->ent.size = r->have_xsize ? r->xsize : h.size;
	r->ent.mode = h.mode;
	r->ent.uid = r->have_xuid ? r->xuid : h.uid;
	r->ent.gid = r->have_xgid ? r->xgid : h.gid;
	r->ent.mtime = r->have_xmtime ? r->xmtime : h.mtime;
	r->ent.mtime_nsec = r->have_xmtime ? r->xmtime_nsec : 0;
	r->ent.devmajor = h.devmajor;
	r->ent.devminor = h.devminor;
	r->ent.offset = r->entry_off;
	r->ent.index = r->nent++;
	r->have_ent = true;
	clear_overrides(r);

	if (!r->ent.path[0])
		return err_set(e, "tar: entry at offset %llu has an empty name", (unsigned long long)hoff);
	if (header_only(r->ent.type) && r->ent.size)
		return err_set(e, "tar: entry \"%s\": a %s with a non-zero size (%llu)",
			       tar_quote(r->ent.path, q), tar_type_name(r->ent.type),
			       (unsigned long long)r->ent.size);
	if (h.sparse_ext) {
		r->sparse_ext = 0;
		r->st = RS_SPARSE_EXT;
		return TAR_EV_MORE;	/* reported once the extension blocks are read */
	}
	start_data(r, r->ent.size);
	return TAR_EV_ENTRY;
}

int tar_reader_feed(struct tar_reader *r, const void *p, size_t len, size_t *used,
		    struct tar_event *ev, struct err *e)
{
	const unsigned char *in = p;
	size_t pos = 0, n;
	int rc;

	memset(ev, 0, sizeof(*ev));
	ev->entry = r->have_ent ? &r->ent : NULL;
	*used = 0;
	for (;;) {
		switch (r->st) {
		case RS_FAILED:
			*e = r->fail;
			return -1;
		case RS_END:
			/* record padding after the end marker */
			r->off += len - pos;
			*used = len;
			return TAR_EV_END;
		case RS_HEADER:
		case RS_ZERO:
		case RS_SPARSE_EXT:
			n = TAR_BLOCK_SIZE - r->blk_len;
			if (n > len - pos)
				n = len - pos;
			memcpy(r->blk + r->blk_len, in + pos, n);
			r->blk_len += n;
			pos += n;
			r->off += n;
			if (r->blk_len < TAR_BLOCK_SIZE) {
				*used = pos;
				return TAR_EV_MORE;
			}
			r->blk_len = 0;
			rc = on_block(r, e);
			if (rc < 0) {
				*used = pos;
				return fail(r, e);
			}
			if (rc == TAR_EV_END) {
				/* everything after the end marker is ignored */
				r->off += len - pos;
				pos = len;
			}
			if (rc != TAR_EV_MORE) {
				ev->entry = r->have_ent ? &r->ent : NULL;
				*used = pos;
				return rc;
			}
			break;
		case RS_DATA:
			if (pos == len) {
				*used = pos;
				return TAR_EV_MORE;
			}
			n = r->remain < len - pos ? (size_t)r->remain : len - pos;
			ev->data = in + pos;
			ev->len = n;
			r->remain -= n;
			ev->remain = r->remain;
			pos += n;
			r->off += n;
			if (!r->remain)
				r->st = r->pad ? RS_PAD : RS_HEADER;
			*used = pos;
			return TAR_EV_DATA;
		case RS_META:
		case RS_SKIP:
			if (pos == len) {
				*used = pos;
				return TAR_EV_MORE;
			}
			n = r->remain < len - pos ? (size_t)r->remain : len - pos;
			/* the size was checked against the buffer's cap at the header */
			if (r->st == RS_META && buf_add(&r->meta, in + pos, n) < 0) {
				err_set(e, "tar: extended header too large");
				return fail(r, e);
			}
			r->remain -= n;
			pos += n;
			r->off += n;
			if (r->remain)
				break;
			if (r->st == RS_META && meta_done(r, e) < 0) {
				err_prefix(e, "tar: extended header at offset %llu", (unsigned long long)r->entry_off);
				*used = pos;
				return fail(r, e);
			}
			r->st = r->pad ? RS_PAD : RS_HEADER;
			break;
		case RS_PAD:
			if (pos == len) {
				*used = pos;
				return TAR_EV_MORE;
			}
			n = r->pad < len - pos ? (size_t)r->pad : len - pos;
			r->pad -= n;
			pos += n;
			r->off += n;
			if (!r->pad)
				r->st = RS_HEADER;
			break;
		}
	}
}

int tar_reader_finish(struct tar_reader *r, struct err *e)
{
	char q[TAR_QUOTE_MAX], w[TAR_QUOTE_MAX + 32];

	switch (r->st) {
	case RS_END:
	case RS_ZERO:	/* a lone zero block then EOF: accepted, as GNU tar does */
		return 0;
	case RS_FAILED:
		*e = r->fail;
		return -1;
	case RS_HEADER:
		if (r->meta_chain)
			err_set(e, "tar: archive truncated after an extended header at offset %llu",
				(unsigned long long)r->entry_off);
		else if (r->blk_len)
			err_set(e, "tar: archive truncated inside a header at offset %llu (%s)",
				(unsigned long long)(r->off - r->blk_len), where(r, w, sizeof(w)));
		else if (r->off == 0)
			err_set(e, "tar: empty input: not a tar archive");
		else
			err_set(e, "tar: archive truncated: no end-of-archive marker (%s)",
				where(r, w, sizeof(w)));
		break;
	case RS_DATA:
		err_set(e, "tar: entry \"%s\": archive truncated in its data (%llu of %llu bytes)",
			tar_quote(r->ent.path, q), (unsigned long long)(r->ent.size - r->remain),
			(unsigned long long)r->ent.size);
		break;
	case RS_PAD:
		if (r->pad_after_meta)
			err_set(e, "tar: archive truncated after an extended header at offset %llu",
				(unsigned long long)r->entry_off);
		else
			err_set(e, "tar: entry \"%s\": archive truncated in the padding after its data",
				tar_quote(r->ent.path, q));
		break;
	case RS_META:
	case RS_SKIP:
		err_set(e, "tar: archive truncated inside an extended header at offset %llu",
			(unsigned long long)r->entry_off);
		break;
	case RS_SPARSE_EXT:
		err_set(e, "tar: entry \"%s\": archive truncated in its sparse map", tar_quote(r->ent.path, q));
		break;
	}
	return fail(r, e);
}

/* 1 with input available, 0 at EOF, -1 on a read error. */
static int fill(struct tar_reader *r, int fd, struct err *e)
{
	ssize_t n;

	if (r->in_off < r->in_len)
		return 1;
	if (!r->in)
		r->in = xmalloc(TAR_FD_CHUNK);
	n = sys_read(fd, r->in, TAR_FD_CHUNK);
	if (n < 0)
		return err_errno(e, "tar: read");
	r->in_off = 0;
	r->in_len = (size_t)n;
	return n > 0;
}

/* More input from fd for the readers below: 1 when there is some; else
 * what the caller returns (0 at a clean end of the archive, -1 e). */
static int fill_or_finish(struct tar_reader *r, int fd, struct err *e)
{
	int f = fill(r, fd, e);

	if (f <= 0)
		return f < 0 ? -1 : tar_reader_finish(r, e);
	return 1;
}

int tar_reader_next_fd(struct tar_reader *r, int fd, const struct tar_entry **ent, struct err *e)
{
	struct tar_event ev;
	size_t used;

	for (;;) {
		int f, rc;
		if (r->st == RS_END)
			return 0;
		if ((f = fill_or_finish(r, fd, e)) <= 0)
			return f;
		rc = tar_reader_feed(r, r->in + r->in_off, r->in_len - r->in_off, &used, &ev, e);
		r->in_off += used;
		if (rc < 0)
			return -1;
		if (rc == TAR_EV_ENTRY) {
			*ent = ev.entry;
			return 1;
		}
		if (rc == TAR_EV_END)
			return 0;
		/* TAR_EV_DATA the caller did not read, or TAR_EV_MORE */
	}
}

ssize_t tar_reader_data_fd(struct tar_reader *r, int fd, void *dst, size_t n, struct err *e)
{
	struct tar_event ev;
	size_t used, avail;
	int f, rc;

	if (r->st == RS_FAILED) {
		*e = r->fail;
		return -1;
	}
	if (r->st != RS_DATA || n == 0)
		return 0;
	if ((f = fill_or_finish(r, fd, e)) <= 0)
		return f;
	avail = r->in_len - r->in_off;
	if (avail > n)
		avail = n;
	rc = tar_reader_feed(r, r->in + r->in_off, avail, &used, &ev, e);
	r->in_off += used;
	if (rc < 0)
		return -1;
	if (rc != TAR_EV_DATA)
		return 0;
	memcpy(dst, ev.data, ev.len);
	return (ssize_t)ev.len;
}
