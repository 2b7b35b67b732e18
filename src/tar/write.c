/*
 * write.c: the writer (ustar, with pax records only where ustar cannot hold a
 * value) and tar_write_tree.
 */
#include "tar/tar.h"
#include "tar/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/sys.h"

/* Read size of tar_write_file_fd. */
#define TAR_COPY_CHUNK 65536
/* Largest value in an 8-byte octal field (7 digits): uid, gid, mode. */
#define TAR_OCT7_MAX 07777777ULL

struct tar_writer {
	struct buf *out;	/* NULL when writing to fd */
	int fd;
	uint64_t off;
	uint64_t remain;	/* data bytes the current entry still needs */
	uint64_t pad;
	bool failed;
	struct err fail;
	struct buf name;	/* the current entry's path, for messages */
};

static struct tar_writer *writer_new(struct buf *out, int fd)
{
	struct tar_writer *w = xcalloc(1, sizeof(*w));

	w->out = out;
	w->fd = fd;
	buf_init(&w->name, 0);
	return w;
}

struct tar_writer *tar_writer_new_buf(struct buf *out)
{
	return writer_new(out, -1);
}

struct tar_writer *tar_writer_new_fd(int fd)
{
	return writer_new(NULL, fd);
}

void tar_writer_free(struct tar_writer *w)
{
	if (!w)
		return;
	buf_release(&w->name);
	free(w);
}

uint64_t tar_writer_offset(const struct tar_writer *w)
{
	return w->off;
}

/* Once a write failed the archive is inconsistent: every later call fails. */
static int wfail(struct tar_writer *w, struct err *e)
{
	w->failed = true;
	w->fail = *e;
	return -1;
}

static int emit(struct tar_writer *w, const void *p, size_t n, struct err *e)
{
	if (w->out) {
		if (buf_add(w->out, p, n) < 0)
			return wfail(w, (err_set(e, "tar: archive would be larger than its limit of %zu bytes",
						 w->out->max), e));
	} else if (sys_write_all(w->fd, p, n) < 0) {
		return wfail(w, (err_errno(e, "tar: write"), e));
	}
	w->off += n;
	return 0;
}

static int emit_zeros(struct tar_writer *w, size_t n, struct err *e)
{
	static const unsigned char zero[TAR_BLOCK_SIZE];

	while (n) {
		size_t k = n < sizeof(zero) ? n : sizeof(zero);
		if (emit(w, zero, k, e) < 0)
			return -1;
		n -= k;
	}
	return 0;
}

/* Octal in w-1 digits and a NUL, or -1 if it does not fit. */
static int put_oct(unsigned char *f, size_t w, uint64_t v)
{
	f[w - 1] = '\0';
	for (size_t i = w - 1; i-- > 0;) {
		f[i] = (unsigned char)('0' + (v & 7));
		v >>= 3;
	}
	return v ? -1 : 0;
}

/* Octal if it fits, else GNU base-256 (0x80/0xff lead byte, big-endian). */
static void put_num(unsigned char *f, size_t w, int64_t sv, uint64_t uv, bool is_signed)
{
	uint64_t v = is_signed ? (uint64_t)sv : uv;

	if ((!is_signed || sv >= 0) && put_oct(f, w, v) == 0)
		return;
	memset(f, is_signed && sv < 0 ? 0xff : 0, w);
	for (size_t i = w; i-- > 1 && (w - i) <= 8;) {
		f[i] = (unsigned char)(v & 0xff);
		v >>= 8;
	}
	f[0] = is_signed && sv < 0 ? 0xff : 0x80;
}

static bool ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s >= 0x80)
			return false;
	return true;
}

/* Split path into ustar prefix (<= 155) and name (<= 100) at a '/'. */
static bool ustar_split(const char *path, size_t len, size_t *cut)
{
	if (len <= 100) {
		*cut = 0;
		return true;
	}
	for (size_t i = len > 101 ? len - 101 : 0; i < len && i <= 155; i++) {
		if (path[i] == '/' && i > 0 && len - i - 1 <= 100 && len - i - 1 > 0) {
			*cut = i;
			return true;
		}
	}
	return false;
}

/* A name for the ustar field when the real one is in a pax record: for old
 * readers that ignore pax. It must never be more dangerous than the path, so
 * it is the last component, non-ASCII bytes as '_', cut to 99 bytes. */
static void fallback_name(const char *path, char *out, size_t outn)
{
	size_t len = strlen(path), n = 0;
	const char *base;

	while (len > 1 && path[len - 1] == '/')
		len--;
	base = path + len;
	while (base > path && base[-1] != '/')
		base--;
	for (; base < path + len && n + 1 < outn && n < 99; base++)
		out[n++] = (unsigned char)*base >= 0x80 ? '_' : *base;
	out[n] = '\0';
	if (!n || strcmp(out, ".") == 0 || strcmp(out, "..") == 0)
		snprintf(out, outn, "_");
}

/* "<len> key=value\n", len counting itself. */
static int pax_add(struct buf *b, const char *key, const char *val, size_t vlen)
{
	size_t base = strlen(key) + vlen + 3, len = base, digits;

	do {
		digits = (size_t)snprintf(NULL, 0, "%zu", len);
		len = base + digits;
	} while ((size_t)snprintf(NULL, 0, "%zu", len) != digits);
	if (buf_addf(b, "%zu %s=", len, key) < 0 || buf_add(b, val, vlen) < 0)
		return -1;
	return buf_addch(b, '\n');
}

static char typeflag_of(const struct tar_entry *ent)
{
	static const char flags[] = {
		[TAR_REG] = '0', [TAR_HARDLINK] = '1', [TAR_SYMLINK] = '2', [TAR_CHAR] = '3',
		[TAR_BLOCK] = '4', [TAR_DIR] = '5', [TAR_FIFO] = '6', [TAR_CONTIG] = '7',
		[TAR_SPARSE] = 'S',
	};

	if (ent->type == TAR_OTHER || (unsigned)ent->type >= sizeof(flags))
		return ent->typeflag;
	return flags[ent->type];
}

static void finish_block(unsigned char *blk)
{
	unsigned sum = 0;

	memset(blk + 148, ' ', 8);
	for (size_t i = 0; i < TAR_BLOCK_SIZE; i++)
		sum += blk[i];
	put_oct(blk + 148, 7, sum);	/* six digits, NUL, then the space left above */
}

/* Fill a ustar header block (no checksum yet). */
static void fill_block(unsigned char *blk, const char *name, size_t cut, const char *link,
		       char type, const struct tar_entry *ent, uint64_t size, int64_t mtime)
{
	size_t len = strlen(name);

	memset(blk, 0, TAR_BLOCK_SIZE);
	if (cut) {
		memcpy(blk + 345, name, cut);
		memcpy(blk, name + cut + 1, len - cut - 1);
	} else {
		memcpy(blk, name, len < 100 ? len : 100);
	}
	put_oct(blk + 100, 8, ent->mode & 07777);
	put_num(blk + 108, 8, 0, ent->uid, false);
	put_num(blk + 116, 8, 0, ent->gid, false);
	put_num(blk + 124, 12, 0, size, false);
	put_num(blk + 136, 12, mtime, 0, true);
	blk[156] = (unsigned char)type;
	memcpy(blk + 157, link, strnlen(link, 100));
	memcpy(blk + 257, "ustar\0" "00", 8);
	put_num(blk + 329, 8, 0, ent->devmajor, false);
	put_num(blk + 337, 8, 0, ent->devminor, false);
}

int tar_write_header(struct tar_writer *w, const struct tar_entry *ent, struct err *e)
{
	unsigned char blk[TAR_BLOCK_SIZE];
	struct buf pax;
	char fb[100], num[32], q[TAR_QUOTE_MAX];
	const char *name = ent->path, *link = ent->linkpath ? ent->linkpath : "";
	size_t plen = strlen(ent->path), llen = strlen(link), cut = 0;
	int rc = -1;

	if (w->failed) {
		*e = w->fail;
		return -1;
	}
	if (w->remain)
		return err_set(e, "tar: entry \"%s\": %llu bytes of data still owed", tar_quote(w->name.data, q),
			       (unsigned long long)w->remain);
	if (plen == 0 || plen > TAR_MAX_PATH || llen > TAR_MAX_PATH)
		return err_set(e, "tar: entry \"%s\": path or link target empty or longer than %d bytes",
			       tar_quote(ent->path, q), TAR_MAX_PATH);
	buf_reset(&w->name);
	buf_add(&w->name, ent->path, plen);
	buf_init(&pax, TAR_MAX_PAX_SIZE);

	/* pax records only for what ustar cannot say */
	if (!ascii(ent->path) || !ustar_split(ent->path, plen, &cut)) {
		if (pax_add(&pax, "path", ent->path, plen) < 0)
			goto toolong;
		fallback_name(ent->path, fb, sizeof(fb));
		name = fb;
		cut = 0;
	}
	if (llen > 100 || !ascii(link)) {
		if (pax_add(&pax, "linkpath", link, llen) < 0)
			goto toolong;
		link = "";
	}
	if (ent->size > TAR_USTAR_MAX_SIZE) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)ent->size);
		if (pax_add(&pax, "size", num, strlen(num)) < 0)
			goto toolong;
	}
	if (ent->uid > TAR_OCT7_MAX) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)ent->uid);
		if (pax_add(&pax, "uid", num, strlen(num)) < 0)
			goto toolong;
	}
	if (ent->gid > TAR_OCT7_MAX) {
		snprintf(num, sizeof(num), "%llu", (unsigned long long)ent->gid);
		if (pax_add(&pax, "gid", num, strlen(num)) < 0)
			goto toolong;
	}
	if (ent->mtime < 0 || (uint64_t)ent->mtime > TAR_USTAR_MAX_SIZE) {
		snprintf(num, sizeof(num), "%lld", (long long)ent->mtime);
		if (pax_add(&pax, "mtime", num, strlen(num)) < 0)
			goto toolong;
	}

	if (pax.len) {
		struct tar_entry x = { .type = TAR_OTHER, .mode = 0644 };
		char pname[100];
		/* named like GNU tar's, from the harmless fallback name */
		fallback_name(ent->path, fb, sizeof(fb));
		snprintf(pname, sizeof(pname), "PaxHeaders/%.80s", fb);
		x.mtime = ent->mtime < 0 || (uint64_t)ent->mtime > TAR_USTAR_MAX_SIZE ? 0 : ent->mtime;
		fill_block(blk, pname, 0, "", 'x', &x, pax.len, x.mtime);
		finish_block(blk);
		if (emit(w, blk, sizeof(blk), e) < 0 || emit(w, pax.data, pax.len, e) < 0 ||
		    emit_zeros(w, (TAR_BLOCK_SIZE - pax.len % TAR_BLOCK_SIZE) % TAR_BLOCK_SIZE, e) < 0)
			goto out;
	}
	fill_block(blk, name, cut, link, typeflag_of(ent), ent, ent->size, ent->mtime);
	finish_block(blk);
	if (emit(w, blk, sizeof(blk), e) < 0)
		goto out;
	w->remain = ent->size;
	w->pad = (TAR_BLOCK_SIZE - ent->size % TAR_BLOCK_SIZE) % TAR_BLOCK_SIZE;
	rc = 0;
	goto out;
toolong:
	err_set(e, "tar: entry \"%s\": pax header over %d bytes", tar_quote(ent->path, q), TAR_MAX_PAX_SIZE);
out:
	buf_release(&pax);
	return rc;
}

int tar_write_data(struct tar_writer *w, const void *p, size_t n, struct err *e)
{
	char q[TAR_QUOTE_MAX];

	if (w->failed) {
		*e = w->fail;
		return -1;
	}
	if (n > w->remain)
		return err_set(e, "tar: entry \"%s\": more data than its size", tar_quote(w->name.data, q));
	if (n && emit(w, p, n, e) < 0)
		return -1;
	w->remain -= n;
	if (!w->remain && w->pad) {
		uint64_t pad = w->pad;
		w->pad = 0;
		return emit_zeros(w, (size_t)pad, e);
	}
	return 0;
}

static struct tar_entry meta_entry(enum tar_type t, const char *path, const char *link,
				   const struct tar_meta *m, uint32_t def_mode)
{
	struct tar_entry ent = { .type = t, .path = path, .linkpath = link ? link : "" };

	ent.mode = m && m->mode ? m->mode & 07777 : def_mode;
	if (m) {
		ent.uid = m->uid;
		ent.gid = m->gid;
		ent.mtime = m->mtime;
	}
	return ent;
}

int tar_write_file(struct tar_writer *w, const char *path, const struct tar_meta *m,
		   const void *data, uint64_t size, struct err *e)
{
	struct tar_entry ent = meta_entry(TAR_REG, path, NULL, m, 0644);

	ent.size = size;
	if (tar_write_header(w, &ent, e) < 0)
		return -1;
	return size ? tar_write_data(w, data, (size_t)size, e) : 0;
}

int tar_write_file_fd(struct tar_writer *w, const char *path, const struct tar_meta *m,
		      int fd, uint64_t size, struct err *e)
{
	struct tar_entry ent = meta_entry(TAR_REG, path, NULL, m, 0644);
	char *chunk, q[TAR_QUOTE_MAX];
	uint64_t left = size;
	int rc = 0;

	ent.size = size;
	if (tar_write_header(w, &ent, e) < 0)
		return -1;
	chunk = xmalloc(TAR_COPY_CHUNK);
	while (left && rc == 0) {
		size_t want = left < TAR_COPY_CHUNK ? (size_t)left : TAR_COPY_CHUNK;
		ssize_t n = sys_read(fd, chunk, want);
		if (n < 0) {
			rc = wfail(w, (err_errno(e, "tar: read \"%s\"", tar_quote(path, q)), e));
		} else if (n == 0) {
			/* the header already promised size bytes: the archive is unusable */
			rc = wfail(w, (err_set(e, "tar: \"%s\" shrank while being archived (%llu of %llu bytes)",
					       tar_quote(path, q), (unsigned long long)(size - left),
					       (unsigned long long)size), e));
		} else {
			rc = tar_write_data(w, chunk, (size_t)n, e);
			left -= (uint64_t)n;
		}
	}
	free(chunk);
	return rc;
}

/* Directory entries carry a trailing '/' (as GNU tar and Go write them). */
int tar_write_dir(struct tar_writer *w, const char *path, const struct tar_meta *m, struct err *e)
{
	struct buf p = BUF_INIT;
	struct tar_entry ent;
	int rc;

	if (!path[0])
		return err_set(e, "tar: a directory entry needs a name");
	buf_adds(&p, path);
	if (p.data[p.len - 1] != '/')
		buf_addch(&p, '/');
	ent = meta_entry(TAR_DIR, p.data, NULL, m, 0755);
	rc = tar_write_header(w, &ent, e);
	buf_release(&p);
	return rc;
}

int tar_write_symlink(struct tar_writer *w, const char *path, const char *target,
		      const struct tar_meta *m, struct err *e)
{
	struct tar_entry ent = meta_entry(TAR_SYMLINK, path, target, m, 0777);

	return tar_write_header(w, &ent, e);
}

int tar_write_hardlink(struct tar_writer *w, const char *path, const char *target,
		       const struct tar_meta *m, struct err *e)
{
	struct tar_entry ent = meta_entry(TAR_HARDLINK, path, target, m, 0644);

	return tar_write_header(w, &ent, e);
}

int tar_writer_finish(struct tar_writer *w, struct err *e)
{
	char q[TAR_QUOTE_MAX];

	if (w->failed) {
		*e = w->fail;
		return -1;
	}
	if (w->remain)
		return err_set(e, "tar: entry \"%s\": %llu bytes of data still owed", tar_quote(w->name.data, q),
			       (unsigned long long)w->remain);
	return emit_zeros(w, 2 * TAR_BLOCK_SIZE, e);
}

/* ---- tar_write_tree ---- */

struct tree {
	struct tar_writer *w;
	struct tar_limits lim;
	unsigned flags;
	uint64_t entries, bytes;
	struct buf path;	/* archive path of the current entry */
	tar_skip_fn skip;	/* NULL: every entry */
	void *skip_arg;
};

static struct tar_meta tree_meta(const struct tree *t, const struct stat *st)
{
	struct tar_meta m = {
		.mode = st->st_mode & 07777, .uid = st->st_uid, .gid = st->st_gid, .mtime = st->st_mtim.tv_sec,
	};

	/* TAR_W_STABLE: the archive says what the tree holds, not who wrote it when. */
	if (t->flags & TAR_W_STABLE)
		m.uid = m.gid = 0, m.mtime = 0;

	/* mode 0 means "default" to the writers; keep a real 0000 as 0000 */
	if (!m.mode)
		m.mode = 010000;
	return m;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int tree_entry(struct tree *t, int dfd, const char *name, size_t depth, struct err *e);

static int tree_dir(struct tree *t, int dfd, size_t depth, struct err *e)
{
	char **names = NULL, q[TAR_QUOTE_MAX];
	size_t n = 0, cap = 0, base = t->path.len;
	int fd2 = dup(dfd), rc = 0;
	DIR *d;
	struct dirent *de;

	if (fd2 < 0)
		return err_errno(e, "tar: dup");
	d = fdopendir(fd2);
	if (!d) {
		sys_close(fd2);
		return err_errno(e, "tar: open directory \"%s\"", tar_quote(t->path.data, q));
	}
	errno = 0;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (t->entries + n >= t->lim.max_entries) {
			rc = err_set(e, "tar: \"%s\": more than %llu entries", tar_quote(t->path.data, q),
				     (unsigned long long)t->lim.max_entries);
			break;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			names = xrealloc(names, cap * sizeof(*names));
		}
		names[n++] = xstrdup(de->d_name);
	}
	if (!rc && errno)
		rc = err_errno(e, "tar: read directory \"%s\"", tar_quote(t->path.data, q));
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n && !rc; i++) {
		if (t->path.len)
			buf_addch(&t->path, '/');
		if (buf_adds(&t->path, names[i]) < 0 || t->path.len > t->lim.max_path)
			rc = err_set(e, "tar: \"%s/%s\": path longer than %zu bytes", tar_quote(t->path.data, q),
				     names[i], t->lim.max_path);
		else
			rc = tree_entry(t, dfd, names[i], depth + 1, e);
		buf_truncate(&t->path, base);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

static int tree_file(struct tree *t, int fd, const struct stat *st, struct err *e)
{
	struct tar_meta m = tree_meta(t, st);
	char q[TAR_QUOTE_MAX];

	if ((uint64_t)st->st_size > t->lim.max_bytes - t->bytes)
		return err_set(e, "tar: \"%s\": files total more than %llu bytes", tar_quote(t->path.data, q),
			       (unsigned long long)t->lim.max_bytes);
	t->bytes += (uint64_t)st->st_size;
	return tar_write_file_fd(t->w, t->path.data, &m, fd, (uint64_t)st->st_size, e);
}

/* Walk into directory name without writing its own entry. */
static int tree_subdir(struct tree *t, int dfd, const char *name, const struct stat *st, size_t depth,
		       struct err *e)
{
	struct stat fst;
	char q[TAR_QUOTE_MAX];
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_DIRECTORY), rc;

	if (fd < 0)
		return err_errno(e, "tar: open \"%s\"", tar_quote(t->path.data, q));
	if (fstat(fd, &fst) < 0 || fst.st_dev != st->st_dev || fst.st_ino != st->st_ino) {
		sys_close(fd);
		return err_set(e, "tar: \"%s\" changed while being archived", tar_quote(t->path.data, q));
	}
	rc = tree_dir(t, fd, depth, e);
	sys_close(fd);
	return rc;
}

static int tree_entry(struct tree *t, int dfd, const char *name, size_t depth, struct err *e)
{
	struct stat st, fst;
	struct tar_meta m;
	char q[TAR_QUOTE_MAX], *target;
	int fd, rc;
	ssize_t n;

	if (depth > t->lim.max_depth)
		return err_set(e, "tar: \"%s\": deeper than %zu levels", tar_quote(t->path.data, q), t->lim.max_depth);
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return err_errno(e, "tar: stat \"%s\"", tar_quote(t->path.data, q));
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
		if (t->flags & TAR_W_REFUSE_SPECIAL)
			return err_set(e, "tar: \"%s\": is a socket, FIFO or device; refusing to archive it",
				       tar_quote(t->path.data, q));
		return 0;
	}
	if (t->skip) {
		bool descend = false;

		if (t->skip(t->skip_arg, t->path.data, S_ISDIR(st.st_mode), &descend) && !(descend && S_ISDIR(st.st_mode)))
			return 0;
		if (descend && S_ISDIR(st.st_mode))	/* left out itself; an exception may take a child */
			return tree_subdir(t, dfd, name, &st, depth, e);
	}
	t->entries++;
	m = tree_meta(t, &st);
	if (S_ISLNK(st.st_mode)) {
		target = xmalloc(TAR_MAX_PATH + 1);
		n = readlinkat(dfd, name, target, TAR_MAX_PATH + 1);
		if (n < 0)
			rc = err_errno(e, "tar: readlink \"%s\"", tar_quote(t->path.data, q));
		else if (n == 0 || (size_t)n > t->lim.max_path)
			rc = err_set(e, "tar: \"%s\": symlink target empty or longer than %zu bytes",
				     tar_quote(t->path.data, q), t->lim.max_path);
		else {
			target[n] = '\0';
			rc = tar_write_symlink(t->w, t->path.data, target, &m, e);
		}
		free(target);
		return rc;
	}
	/* O_NOFOLLOW and the dev/ino check: what we open is what we stat'ed,
	 * even if the tree changes under us. O_NONBLOCK so a FIFO swapped in
	 * cannot hang the open. */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
		    (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
	if (fd < 0)
		return err_errno(e, "tar: open \"%s\"", tar_quote(t->path.data, q));
	if (fstat(fd, &fst) < 0 || fst.st_dev != st.st_dev || fst.st_ino != st.st_ino ||
	    (fst.st_mode & S_IFMT) != (st.st_mode & S_IFMT)) {
		sys_close(fd);
		return err_set(e, "tar: \"%s\" changed while being archived", tar_quote(t->path.data, q));
	}
	if (S_ISDIR(st.st_mode)) {
		rc = tar_write_dir(t->w, t->path.data, &m, e);
		if (!rc)
			rc = tree_dir(t, fd, depth, e);
	} else {
		rc = tree_file(t, fd, &fst, e);
	}
	sys_close(fd);
	return rc;
}

int tar_write_tree(const char *dir, const char *prefix, struct tar_writer *w,
		   const struct tar_limits *lim, unsigned flags, struct err *e)
{
	return tar_write_tree_filtered(dir, prefix, w, lim, flags, NULL, NULL, e);
}

int tar_write_tree_filtered(const char *dir, const char *prefix, struct tar_writer *w,
			    const struct tar_limits *lim, unsigned flags, tar_skip_fn skip, void *skip_arg,
			    struct err *e)
{
	struct tree t = { .w = w, .flags = flags, .skip = skip, .skip_arg = skip_arg };
	struct stat st;
	struct tar_meta m;
	int fd, rc;

	t.lim.max_entries = lim && lim->max_entries ? lim->max_entries : TAR_DEFAULT_MAX_ENTRIES;
	t.lim.max_bytes = lim && lim->max_bytes ? lim->max_bytes : TAR_DEFAULT_MAX_BYTES;
	t.lim.max_path = lim && lim->max_path && lim->max_path < TAR_MAX_PATH ? lim->max_path : TAR_MAX_PATH;
	t.lim.max_depth = lim && lim->max_depth && lim->max_depth < TAR_MAX_DEPTH ? lim->max_depth : TAR_MAX_DEPTH;
	buf_init(&t.path, TAR_MAX_PATH + 1);
	buf_adds(&t.path, prefix ? prefix : "");
	while (t.path.len && t.path.data[t.path.len - 1] == '/')
		buf_truncate(&t.path, t.path.len - 1);

	fd = open(dir, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		rc = err_errno(e, "tar: open %s", dir);
		goto out;
	}
	if (fstat(fd, &st) < 0) {
		rc = err_errno(e, "tar: stat %s", dir);
	} else if (S_ISREG(st.st_mode)) {
		t.entries = 1;
		rc = t.path.len ? tree_file(&t, fd, &st, e)
				: err_set(e, "tar: %s is a file: an archive name (prefix) is needed", dir);
	} else if (S_ISDIR(st.st_mode)) {
		rc = 0;
		if (t.path.len) {
			m = tree_meta(&t, &st);
			t.entries = 1;
			rc = tar_write_dir(w, t.path.data, &m, e);
		}
		if (!rc)
			rc = tree_dir(&t, fd, 0, e);
	} else {
		rc = err_set(e, "tar: %s is not a file or directory", dir);
	}
	sys_close(fd);
out:
	buf_release(&t.path);
	return rc;
}
