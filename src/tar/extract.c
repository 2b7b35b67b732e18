/*
 * extract.c: safe extraction into a directory.
 *
 * Every path is split into components checked lexically (no "..", not
 * absolute), then resolved one component at a time with
 * openat(O_NOFOLLOW|O_DIRECTORY) from the destination's fd, so no symlink,
 * whether it was there before or this archive made it, is ever followed.
 * (openat2 RESOLVE_BENEATH would do the walk in one call, but seccomp
 * profiles in containers often deny it; the walk works everywhere.)
 * Final components are created with O_EXCL|O_NOFOLLOW, symlinkat, mkdirat
 * or linkat, none of which follow a symlink in the last component.
 */
#include "tar/tar.h"
#include "tar/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/sys.h"

#define TAR_X_CHUNK 65536

struct comps {
	size_t n;
	const char *p[TAR_MAX_DEPTH];
	size_t len[TAR_MAX_DEPTH];
};

/* A regular file this archive extracted: where hard links may point. */
struct file_rec {
	char *key;		/* normalised path ("a/b") */
	dev_t dev;
	ino_t ino;
};

/* A directory whose mode and mtime are set at the end. */
struct dir_fix {
	char *key;
	uint32_t mode;
	uint64_t uid, gid;
	int64_t mtime;
	uint32_t nsec;
};

struct tar_extract {
	struct tar_reader *r;
	int root;
	struct tar_limits lim;
	unsigned flags;
	struct tar_stats st;
	uint64_t total;		/* sizes of regular files admitted so far */
	/* the regular file being written */
	int fd, parent;
	char name[NAME_MAX + 1];
	struct buf key;
	bool ended, failed;
	struct err fail;
	struct file_rec *files;	/* open-addressing hash table */
	size_t nfiles, fcap;
	struct dir_fix *dirs;
	size_t ndirs, dcap;
};

static int entry_err(struct err *e, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int entry_err(struct err *e, const char *path, const char *fmt, ...)
{
	char q[TAR_QUOTE_MAX], msg[ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return err_set(e, "tar: entry \"%s\": %s", tar_quote(path, q), msg);
}

static int entry_errno(struct err *e, const char *path, const char *what)
{
	int saved = errno;
	char q[TAR_QUOTE_MAX];

	err_set(e, "tar: entry \"%s\": %s: %s", tar_quote(path, q), what, strerror(saved));
	e->code = saved;
	return -1;
}

static void limits_fill(struct tar_limits *out, const struct tar_limits *lim)
{
	out->max_entries = lim && lim->max_entries ? lim->max_entries : TAR_DEFAULT_MAX_ENTRIES;
	out->max_bytes = lim && lim->max_bytes ? lim->max_bytes : TAR_DEFAULT_MAX_BYTES;
	out->max_path = lim && lim->max_path && lim->max_path < TAR_MAX_PATH ? lim->max_path : TAR_MAX_PATH;
	out->max_depth = lim && lim->max_depth && lim->max_depth < TAR_MAX_DEPTH ? lim->max_depth : TAR_MAX_DEPTH;
}

/*
 * Split path into components: empty and "." are dropped, ".." and absolute
 * paths refused, length and depth bounded. `shown` names the entry in errors
 * and `what` says which path of it this is ("path", "hard link target").
 */
static int split(const char *path, const char *shown, const char *what, const struct tar_limits *lim,
		 struct comps *c, struct err *e)
{
	size_t len = strlen(path);
	const char *p = path;

	c->n = 0;
	if (len == 0)
		return entry_err(e, shown, "empty %s", what);
	if (len > lim->max_path)
		return entry_err(e, shown, "%s longer than %zu bytes", what, lim->max_path);
	if (path[0] == '/')
		return entry_err(e, shown, "%s is absolute (refused, not stripped)", what);
	while (*p) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return strcmp(what, "path") == 0
				? entry_err(e, shown, "path escapes the destination")
				: entry_err(e, shown, "%s escapes the destination", what);
		if (n > NAME_MAX)
			return entry_err(e, shown, "%s has a component longer than %d bytes", what, NAME_MAX);
		if (n && !(n == 1 && p[0] == '.')) {
			if (c->n == lim->max_depth)
				return entry_err(e, shown, "%s deeper than %zu levels", what, lim->max_depth);
			c->p[c->n] = p;
			c->len[c->n] = n;
			c->n++;
		}
		p += n;
		while (*p == '/')
			p++;
	}
	return 0;
}

int tar_path_check(const char *path, const struct tar_limits *lim, struct err *e)
{
	struct tar_limits l;
	struct comps c;

	limits_fill(&l, lim);
	return split(path, path, "path", &l, &c, e);
}

static void comp_name(const struct comps *c, size_t i, char *out)
{
	memcpy(out, c->p[i], c->len[i]);
	out[c->len[i]] = '\0';
}

/* The normalised path of the first n components ("a/b"), for the tables. */
static void comps_key(const struct comps *c, size_t n, struct buf *out)
{
	buf_reset(out);
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_addch(out, '/');
		buf_add(out, c->p[i], c->len[i]);
	}
}

/*
 * Open the directory formed by the first n components, from the destination,
 * never following a symlink; create missing ones (0755) when create is set.
 * Returns an fd, or -1 naming the component that is in the way.
 */
static int open_dirs(struct tar_extract *x, const struct comps *c, size_t n, bool create,
		     const char *shown, struct err *e)
{
	char name[NAME_MAX + 1], q[TAR_QUOTE_MAX];
	int fd = fcntl(x->root, F_DUPFD_CLOEXEC, 3);

	if (fd < 0)
		return entry_errno(e, shown, "dup");
	for (size_t i = 0; i < n; i++) {
		int nfd;
		struct stat st;

		comp_name(c, i, name);
		nfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT && create) {
			if (mkdirat(fd, name, 0755) < 0 && errno != EEXIST) {
				entry_errno(e, shown, "mkdir");
				sys_close(fd);
				return -1;
			}
			nfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (nfd < 0) {
			int saved = errno;
			struct buf k = BUF_INIT;
			comps_key(c, i + 1, &k);
			tar_quote(k.data, q);
			buf_release(&k);
			if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
				entry_err(e, shown, "\"%s\" is a symlink; refusing to follow it", q);
			else if (saved == ENOTDIR || saved == ELOOP)
				entry_err(e, shown, "\"%s\" is not a directory", q);
			else {
				errno = saved;
				entry_errno(e, shown, "open parent directory");
			}
			sys_close(fd);
			return -1;
		}
		sys_close(fd);
		fd = nfd;
	}
	return fd;
}

/* Make room for a new entry: an existing non-directory is unlinked (so it is
 * replaced, never written through); an existing directory is an error. */
static int clear_name(int dfd, const char *name, const char *shown, struct err *e)
{
	struct stat st;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : entry_errno(e, shown, "stat");
	if (S_ISDIR(st.st_mode))
		return entry_err(e, shown, "a directory of that name already exists");
	if (unlinkat(dfd, name, 0) < 0)
		return entry_errno(e, shown, "remove the existing entry");
	return 0;
}

static uint64_t hash_key(const char *s)
{
	uint64_t h = 1469598103934665603ULL;	/* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static struct file_rec *file_find(struct tar_extract *x, const char *key)
{
	if (!x->fcap)
		return NULL;
	for (size_t i = hash_key(key) & (x->fcap - 1);; i = (i + 1) & (x->fcap - 1)) {
		if (!x->files[i].key)
			return NULL;
		if (strcmp(x->files[i].key, key) == 0)
			return &x->files[i];
	}
}

static void file_put(struct tar_extract *x, const char *key, dev_t dev, ino_t ino)
{
	struct file_rec *f = file_find(x, key);

	if (f) {
		f->dev = dev;
		f->ino = ino;
		return;
	}
	if ((x->nfiles + 1) * 2 > x->fcap) {
		size_t ncap = x->fcap ? x->fcap * 2 : 64;
		struct file_rec *old = x->files;
		size_t ocap = x->fcap;
		x->files = xcalloc(ncap, sizeof(*x->files));
		x->fcap = ncap;
		for (size_t i = 0; i < ocap; i++) {
			if (!old[i].key)
				continue;
			size_t j = hash_key(old[i].key) & (ncap - 1);
			while (x->files[j].key)
				j = (j + 1) & (ncap - 1);
			x->files[j] = old[i];
		}
		free(old);
	}
	size_t j = hash_key(key) & (x->fcap - 1);
	while (x->files[j].key)
		j = (j + 1) & (x->fcap - 1);
	x->files[j].key = xstrdup(key);
	x->files[j].dev = dev;
	x->files[j].ino = ino;
	x->nfiles++;
}

static mode_t mode_mask(const struct tar_extract *x)
{
	return (x->flags & TAR_X_KEEP_SPECIAL_BITS) ? 07777 : 0777;
}

static struct timespec *times_of(const struct tar_entry *ent, struct timespec ts[2])
{
	ts[0].tv_sec = 0;
	ts[0].tv_nsec = UTIME_OMIT;	/* atime: now, as it was just created */
	ts[1].tv_sec = (time_t)ent->mtime;
	ts[1].tv_nsec = ent->mtime_nsec < 1000000000 ? ent->mtime_nsec : 0;
	return ts;
}

/*
 * A symlink target stays inside the tree when it is relative, its ".."
 * components all come first, and they climb no higher than the link's own
 * directory depth. ".." after a name is refused because the name may itself
 * be a symlink ("sub/../.." with sub -> ".." escapes); with ".." only at the
 * front, every link resolves inside, whatever other links it meets.
 */
static bool link_inside(size_t dir_depth, const char *target)
{
	size_t up = 0;
	bool named = false;

	if (target[0] == '/')
		return false;
	for (const char *p = target; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (named || ++up > dir_depth)
				return false;
		} else if (n && !(n == 1 && p[0] == '.')) {
			named = true;
		}
		p += n;
		while (*p == '/')
			p++;
	}
	return true;
}

/* The current file's data is complete: metadata, then record it. */
static int file_done(struct tar_extract *x, const struct tar_entry *ent, struct err *e)
{
	struct timespec ts[2];
	struct stat st;
	int rc = 0;

	if ((x->flags & TAR_X_KEEP_OWNER) && fchown(x->fd, (uid_t)ent->uid, (gid_t)ent->gid) < 0)
		rc = entry_errno(e, ent->path, "chown");
	/* after chown, which clears setuid/setgid */
	else if (fchmod(x->fd, ent->mode & mode_mask(x)) < 0)
		rc = entry_errno(e, ent->path, "chmod");
	else if (futimens(x->fd, times_of(ent, ts)) < 0)
		rc = entry_errno(e, ent->path, "set mtime");
	else if (fstat(x->fd, &st) < 0)
		rc = entry_errno(e, ent->path, "stat");
	if (close(x->fd) < 0 && rc == 0)
		rc = entry_errno(e, ent->path, "close");
	x->fd = -1;
	if (rc == 0) {
		file_put(x, x->key.data, st.st_dev, st.st_ino);
		x->st.files++;
	} else {
		unlinkat(x->parent, x->name, 0);
	}
	sys_close(x->parent);
	x->parent = -1;
	return rc;
}

static int do_file(struct tar_extract *x, const struct tar_entry *ent, const struct comps *c, struct err *e)
{
	if (ent->size > x->lim.max_bytes - x->total)
		return entry_err(e, ent->path, "files total more than the limit of %llu bytes",
				 (unsigned long long)x->lim.max_bytes);
	x->total += ent->size;
	x->parent = open_dirs(x, c, c->n - 1, true, ent->path, e);
	if (x->parent < 0)
		return -1;
	comp_name(c, c->n - 1, x->name);
	if (clear_name(x->parent, x->name, ent->path, e) < 0)
		return -1;
	x->fd = openat(x->parent, x->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (x->fd < 0)
		return entry_errno(e, ent->path, "create");
	comps_key(c, c->n, &x->key);
	return ent->size ? 0 : file_done(x, ent, e);
}

static int do_dir(struct tar_extract *x, const struct tar_entry *ent, const struct comps *c, struct err *e)
{
	char name[NAME_MAX + 1];
	struct stat st;
	struct dir_fix *d;
	int parent = open_dirs(x, c, c->n - 1, true, ent->path, e), rc = 0;

	if (parent < 0)
		return -1;
	comp_name(c, c->n - 1, name);
	/* 0700 until the end, so that a read-only directory can still be filled */
	if (mkdirat(parent, name, 0700) < 0) {
		if (errno != EEXIST)
			rc = entry_errno(e, ent->path, "mkdir");
		else if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			rc = entry_errno(e, ent->path, "stat");
		else if (!S_ISDIR(st.st_mode) &&
			 (unlinkat(parent, name, 0) < 0 || mkdirat(parent, name, 0700) < 0))
			rc = entry_errno(e, ent->path, "replace the existing entry with a directory");
	}
	sys_close(parent);
	if (rc)
		return rc;
	if (x->ndirs == x->dcap) {
		x->dcap = x->dcap ? x->dcap * 2 : 16;
		x->dirs = xrealloc(x->dirs, x->dcap * sizeof(*x->dirs));
	}
	d = &x->dirs[x->ndirs++];
	comps_key(c, c->n, &x->key);
	d->key = xstrdup(x->key.data);
	d->mode = ent->mode;
	d->uid = ent->uid;
	d->gid = ent->gid;
	d->mtime = ent->mtime;
	d->nsec = ent->mtime_nsec;
	x->st.dirs++;
	return 0;
}

static int do_symlink(struct tar_extract *x, const struct tar_entry *ent, const struct comps *c, struct err *e)
{
	char name[NAME_MAX + 1], q[TAR_QUOTE_MAX];
	struct timespec ts[2];
	int parent, rc = 0;

	if (x->flags & TAR_X_NO_SYMLINKS)
		return entry_err(e, ent->path, "symlinks are not allowed here");
	if (!ent->linkpath[0])
		return entry_err(e, ent->path, "symlink with an empty target");
	if (strlen(ent->linkpath) > x->lim.max_path)
		return entry_err(e, ent->path, "symlink target longer than %zu bytes", x->lim.max_path);
	if (!(x->flags & TAR_X_ALLOW_ESCAPING_SYMLINKS) && !link_inside(c->n - 1, ent->linkpath))
		return entry_err(e, ent->path, "symlink target \"%s\" is absolute or leaves the destination",
				 tar_quote(ent->linkpath, q));
	parent = open_dirs(x, c, c->n - 1, true, ent->path, e);
	if (parent < 0)
		return -1;
	comp_name(c, c->n - 1, name);
	if (clear_name(parent, name, ent->path, e) < 0)
		rc = -1;
	else if (symlinkat(ent->linkpath, parent, name) < 0)
		rc = entry_errno(e, ent->path, "symlink");
	else if ((x->flags & TAR_X_KEEP_OWNER) &&
		 fchownat(parent, name, (uid_t)ent->uid, (gid_t)ent->gid, AT_SYMLINK_NOFOLLOW) < 0)
		rc = entry_errno(e, ent->path, "chown");
	else if (utimensat(parent, name, times_of(ent, ts), AT_SYMLINK_NOFOLLOW) < 0)
		rc = entry_errno(e, ent->path, "set mtime");
	sys_close(parent);
	if (!rc)
		x->st.symlinks++;
	return rc;
}

static int do_hardlink(struct tar_extract *x, const struct tar_entry *ent, const struct comps *c, struct err *e)
{
	char name[NAME_MAX + 1], tname[NAME_MAX + 1], q[TAR_QUOTE_MAX];
	struct comps tc;
	struct file_rec *f;
	struct stat st;
	int tparent, parent, rc = 0;

	if (x->flags & TAR_X_NO_HARDLINKS)
		return entry_err(e, ent->path, "hard links are not allowed here");
	if (split(ent->linkpath, ent->path, "hard link target", &x->lim, &tc, e) < 0)
		return -1;
	if (tc.n == 0)
		return entry_err(e, ent->path, "hard link to the destination itself");
	comps_key(&tc, tc.n, &x->key);
	f = file_find(x, x->key.data);
	if (!f)
		return entry_err(e, ent->path, "hard link target \"%s\" is not a regular file extracted from this archive",
				 tar_quote(ent->linkpath, q));
	{
		struct buf self = BUF_INIT;
		bool same;
		comps_key(c, c->n, &self);
		same = strcmp(self.data, x->key.data) == 0;
		buf_release(&self);
		if (same)
			return entry_err(e, ent->path, "hard link to itself");
	}
	tparent = open_dirs(x, &tc, tc.n - 1, false, ent->path, e);
	if (tparent < 0)
		return -1;
	comp_name(&tc, tc.n - 1, tname);
	/* the same inode we extracted, not whatever a later entry put there */
	if (fstatat(tparent, tname, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_dev != f->dev || st.st_ino != f->ino) {
		sys_close(tparent);
		return entry_err(e, ent->path, "hard link target \"%s\" changed since it was extracted",
				 tar_quote(ent->linkpath, q));
	}
	parent = open_dirs(x, c, c->n - 1, true, ent->path, e);
	if (parent < 0) {
		sys_close(tparent);
		return -1;
	}
	comp_name(c, c->n - 1, name);
	if (clear_name(parent, name, ent->path, e) < 0)
		rc = -1;
	/* flags 0: linkat does not follow a symlink in the target's last component */
	else if (linkat(tparent, tname, parent, name, 0) < 0)
		rc = entry_errno(e, ent->path, "link");
	sys_close(tparent);
	sys_close(parent);
	if (rc)
		return rc;
	comps_key(c, c->n, &x->key);
	file_put(x, x->key.data, st.st_dev, st.st_ino);
	x->st.hardlinks++;
	return 0;
}

static int on_entry(struct tar_extract *x, const struct tar_entry *ent, struct err *e)
{
	struct comps c;

	if (++x->st.entries > x->lim.max_entries)
		return entry_err(e, ent->path, "more than %llu entries", (unsigned long long)x->lim.max_entries);
	if (split(ent->path, ent->path, "path", &x->lim, &c, e) < 0)
		return -1;
	switch (ent->type) {
	case TAR_REG:
	case TAR_HARDLINK:
	case TAR_SYMLINK:
		if (c.n == 0)
			return entry_err(e, ent->path, "names the destination itself");
		if (ent->type == TAR_REG)
			return do_file(x, ent, &c, e);
		return ent->type == TAR_SYMLINK ? do_symlink(x, ent, &c, e) : do_hardlink(x, ent, &c, e);
	case TAR_DIR:
		if (c.n == 0) {
			x->st.skipped++;	/* "./": the destination stays as the caller made it */
			return 0;
		}
		return do_dir(x, ent, &c, e);
	default:
		if (x->flags & TAR_X_SKIP_SPECIAL) {
			x->st.skipped++;
			return 0;
		}
		if (ent->type == TAR_OTHER)
			return entry_err(e, ent->path, "entry type '%c' is not supported",
					 ent->typeflag > 0x20 && ent->typeflag < 0x7f ? ent->typeflag : '?');
		return entry_err(e, ent->path, "%s entries are not allowed", tar_type_name(ent->type));
	}
}

static int on_data(struct tar_extract *x, const struct tar_event *ev, struct err *e)
{
	if (x->fd < 0)
		return 0;	/* a skipped entry's data */
	if (sys_write_all(x->fd, ev->data, ev->len) < 0)
		return entry_errno(e, ev->entry->path, "write");
	x->st.bytes += ev->len;
	return ev->remain ? 0 : file_done(x, ev->entry, e);
}

/* After an error: remove the half-written file, keep the error sticky. */
static int xfail(struct tar_extract *x, struct err *e)
{
	if (x->fd >= 0) {
		sys_close(x->fd);
		x->fd = -1;
		unlinkat(x->parent, x->name, 0);
	}
	if (x->parent >= 0) {
		sys_close(x->parent);
		x->parent = -1;
	}
	x->failed = true;
	x->fail = *e;
	return -1;
}

struct tar_extract *tar_extract_new(const char *dest_dir, const struct tar_limits *lim,
				    unsigned flags, struct err *e)
{
	struct tar_extract *x;
	int root = open(dest_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (root < 0) {
		err_errno(e, "tar: destination %s", dest_dir);
		return NULL;
	}
	x = xcalloc(1, sizeof(*x));
	x->root = root;
	x->fd = x->parent = -1;
	x->flags = flags;
	limits_fill(&x->lim, lim);
	x->r = tar_reader_new();
	buf_init(&x->key, 0);
	return x;
}

int tar_extract_feed(struct tar_extract *x, const void *p, size_t len, struct err *e)
{
	const unsigned char *in = p;
	struct tar_event ev;
	size_t used;

	if (x->failed) {
		*e = x->fail;
		return -1;
	}
	while (len && !x->ended) {
		int rc = tar_reader_feed(x->r, in, len, &used, &ev, e);
		in += used;
		len -= used;
		if (rc < 0)
			return xfail(x, e);
		if (rc == TAR_EV_ENTRY && on_entry(x, ev.entry, e) < 0)
			return xfail(x, e);
		if (rc == TAR_EV_DATA && on_data(x, &ev, e) < 0)
			return xfail(x, e);
		if (rc == TAR_EV_END)
			x->ended = true;
	}
	return 0;
}

/* Directories' final modes and mtimes, after everything inside was written. */
static int fix_dirs(struct tar_extract *x, struct err *e)
{
	for (size_t i = 0; i < x->ndirs; i++) {
		struct dir_fix *d = &x->dirs[i];
		struct comps c;
		struct timespec ts[2];
		int fd, rc = 0;

		if (split(d->key, d->key, "path", &x->lim, &c, e) < 0)
			return -1;
		fd = open_dirs(x, &c, c.n, false, d->key, e);
		if (fd < 0)
			return -1;
		ts[0].tv_sec = 0;
		ts[0].tv_nsec = UTIME_OMIT;
		ts[1].tv_sec = (time_t)d->mtime;
		ts[1].tv_nsec = d->nsec < 1000000000 ? d->nsec : 0;
		if ((x->flags & TAR_X_KEEP_OWNER) && fchown(fd, (uid_t)d->uid, (gid_t)d->gid) < 0)
			rc = entry_errno(e, d->key, "chown");
		else if (fchmod(fd, d->mode & mode_mask(x)) < 0)
			rc = entry_errno(e, d->key, "chmod");
		else if (futimens(fd, ts) < 0)
			rc = entry_errno(e, d->key, "set mtime");
		sys_close(fd);
		if (rc)
			return rc;
	}
	return 0;
}

int tar_extract_finish(struct tar_extract *x, struct err *e)
{
	if (x->failed) {
		*e = x->fail;
		return -1;
	}
	if (tar_reader_finish(x->r, e) < 0 || fix_dirs(x, e) < 0)
		return xfail(x, e);
	return 0;
}

const struct tar_stats *tar_extract_stats(const struct tar_extract *x)
{
	return &x->st;
}

void tar_extract_free(struct tar_extract *x)
{
	if (!x)
		return;
	if (x->fd >= 0) {
		/* abandoned mid-file: do not leave a truncated file looking complete */
		sys_close(x->fd);
		unlinkat(x->parent, x->name, 0);
	}
	if (x->parent >= 0)
		sys_close(x->parent);
	sys_close(x->root);
	tar_reader_free(x->r);
	for (size_t i = 0; i < x->fcap; i++)
		free(x->files[i].key);
	free(x->files);
	for (size_t i = 0; i < x->ndirs; i++)
		free(x->dirs[i].key);
	free(x->dirs);
	buf_release(&x->key);
	free(x);
}

static int extract_done(struct tar_extract *x, int rc, struct tar_stats *st, struct err *e)
{
	if (rc == 0)
		rc = tar_extract_finish(x, e);
	if (st)
		*st = x->st;
	tar_extract_free(x);
	return rc;
}

int tar_extract_fd(int fd, const char *dest_dir, const struct tar_limits *lim, unsigned flags,
		   struct tar_stats *st, struct err *e)
{
	struct tar_extract *x = tar_extract_new(dest_dir, lim, flags, e);
	char *chunk;
	int rc = 0;

	if (!x)
		return -1;
	chunk = xmalloc(TAR_X_CHUNK);
	while (rc == 0 && !x->ended) {
		ssize_t n = sys_read(fd, chunk, TAR_X_CHUNK);
		if (n < 0)
			rc = err_errno(e, "tar: read");
		else if (n == 0)
			break;
		else
			rc = tar_extract_feed(x, chunk, (size_t)n, e);
	}
	free(chunk);
	return extract_done(x, rc, st, e);
}

int tar_extract_mem(const void *p, size_t len, const char *dest_dir, const struct tar_limits *lim,
		    unsigned flags, struct tar_stats *st, struct err *e)
{
	struct tar_extract *x = tar_extract_new(dest_dir, lim, flags, e);

	if (!x)
		return -1;
	return extract_done(x, tar_extract_feed(x, p, len, e), st, e);
}
