/* storage_copy.c: the tree copier behind the dir backend (and behind
 * filling a btrfs subvolume or zfs dataset). It is `cp -a` written out so
 * the sidecar depends on nothing but the kernel, and so what is kept is
 * stated here:
 *  - owners, modes (set after the owner, since chown clears set-id bits),
 *    access and modification times (directories' last, after their
 *    contents were written);
 *  - symlinks as symlinks, never followed;
 *  - hard links inside the tree stay links (a (dev, ino) table);
 *  - sparse files keep their holes (SEEK_DATA / SEEK_HOLE); data goes with
 *    a reflink (FICLONE) when the filesystem can, else copy_file_range,
 *    else read/write;
 *  - every extended attribute, POSIX ACLs included;
 *  - FIFOs, sockets and device nodes as nodes.
 * It walks with openat(O_NOFOLLOW), so nothing in the source tree can
 * redirect the copy out of it, and without recursion: its stack is on the
 * heap and it keeps two directory fds open however deep the tree goes
 * (back up through "..", checked against the directory it came from), so
 * a tree an agent nested thousands of levels deep is copied like any other. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <linux/fs.h>

#include "base/buf.h"
#include "base/fs.h"
#include "base/proc.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"

struct link_ent {
	dev_t dev;
	ino_t ino;
	char *path;		/* relative to the destination root */
};

struct copy {
	int dst_root;		/* fd of the destination root, for linkat */
	struct link_ent *links;
	size_t nlinks, cap;
	char *buf;		/* read/write fallback */
	struct stg_copy_stats st;
};

static const char *link_find(struct copy *c, dev_t dev, ino_t ino)
{
	for (size_t i = 0; i < c->nlinks; i++)
		if (c->links[i].dev == dev && c->links[i].ino == ino)
			return c->links[i].path;
	return NULL;
}

static void link_add(struct copy *c, dev_t dev, ino_t ino, const char *rel)
{
	if (c->nlinks == c->cap) {
		c->cap = c->cap ? c->cap * 2 : 64;
		c->links = xrealloc(c->links, c->cap * sizeof(*c->links));
	}
	c->links[c->nlinks].dev = dev;
	c->links[c->nlinks].ino = ino;
	c->links[c->nlinks].path = xstrdup(rel);
	c->nlinks++;
}

/* Extended attributes: through fds, or (sfd < 0: symlinks and nodes) with
 * the l*xattr calls on the paths given. */
static int copy_xattrs(int sfd, int dfd, const char *spath, const char *dpath, struct err *e)
{
	char *list = xmalloc(STG_XATTR_LIST_MAX), *val = xmalloc(STG_XATTR_VALUE_MAX);
	ssize_t ln;
	int rc = 0;

	ln = sfd >= 0 ? flistxattr(sfd, list, STG_XATTR_LIST_MAX) : llistxattr(spath, list, STG_XATTR_LIST_MAX);
	if (ln < 0) {
		if (errno != ENOTSUP && errno != ENODATA)
			rc = err_errno(e, "listxattr %s", spath);
		ln = 0;
	}
	for (ssize_t off = 0; off < ln && rc == 0; off += (ssize_t)strlen(list + off) + 1) {
		const char *name = list + off;
		ssize_t vn = sfd >= 0 ? fgetxattr(sfd, name, val, STG_XATTR_VALUE_MAX)
				      : lgetxattr(spath, name, val, STG_XATTR_VALUE_MAX);

		if (vn < 0) {
			if (errno == ENODATA)
				continue;
			rc = err_errno(e, "getxattr %s %s", spath, name);
			break;
		}
		if ((dfd >= 0 ? fsetxattr(dfd, name, val, (size_t)vn, 0)
			      : lsetxattr(dpath, name, val, (size_t)vn, 0)) < 0 && errno != ENOTSUP)
			rc = err_errno(e, "setxattr %s %s", dpath, name);
	}
	free(list);
	free(val);
	return rc;
}

/* Data of a regular file, holes kept. */
static int copy_data(struct copy *c, int sfd, int dfd, off_t size, const char *spath, struct err *e)
{
	off_t pos = 0;

	bool rw = false;

	if (size == 0)
		return 0;
	c->st.bytes += (uint64_t)size;
	if (ioctl(dfd, FICLONE, sfd) == 0) {	/* same filesystem with reflinks: shares the extents */
		c->st.reflinked++;
		return 0;
	}
	while (pos < size) {
		off_t data = lseek(sfd, pos, SEEK_DATA), hole;

		if (data < 0) {
			if (errno == ENXIO)	/* only a hole up to the end */
				break;
			data = pos;	/* no SEEK_DATA here: copy everything */
			hole = size;
		} else if ((hole = lseek(sfd, data, SEEK_HOLE)) < 0) {
			hole = size;
		}
		while (data < hole) {
			size_t want = (size_t)(hole - data) > STG_COPY_CHUNK ? STG_COPY_CHUNK : (size_t)(hole - data);
			off_t in = data, out = data;
			ssize_t n = copy_file_range(sfd, &in, dfd, &out, want, 0);

			if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
				rw = true;
				n = pread(sfd, c->buf, want, data);
				if (n > 0) {
					ssize_t w = 0;

					while (w < n) {
						ssize_t k = pwrite(dfd, c->buf + w, (size_t)(n - w), data + w);

						if (k < 0) {
							if (errno == EINTR)
								continue;
							return err_errno(e, "write copy of %s", spath);
						}
						w += k;
					}
				}
			}
			if (n < 0) {
				if (errno == EINTR)
					continue;
				return err_errno(e, "copy %s", spath);
			}
			if (n == 0)	/* the file shrank under us: stop at what is there */
				break;
			data += n;
		}
		pos = hole;
	}
	if (ftruncate(dfd, size) < 0)	/* a trailing hole */
		return err_errno(e, "truncate copy of %s", spath);
	if (rw)
		c->st.read_write++;
	else
		c->st.copy_range++;
	return 0;
}

static int set_meta_fd(int fd, const struct stat *st, const char *what, struct err *e)
{
	struct timespec ts[2] = { st->st_atim, st->st_mtim };

	if (fchown(fd, st->st_uid, st->st_gid) < 0)
		return err_errno(e, "chown %s", what);
	if (fchmod(fd, st->st_mode & 07777) < 0)
		return err_errno(e, "chmod %s", what);
	if (futimens(fd, ts) < 0)
		return err_errno(e, "set times of %s", what);
	return 0;
}

/* One directory on the walk's stack: the entries still to copy, and who
 * it is (to set its metadata last, and to check ".." on the way back). */
struct level {
	char **names;		/* read whole on the way in: no stream stays open */
	size_t n, next;
	struct stat st;		/* the source directory */
	dev_t ddev;		/* the destination directory */
	ino_t dino;
	size_t rel_len;		/* its path's length in the walk's rel */
};

struct walk {
	struct copy *c;
	int sfd, dfd;		/* the directory being copied, source and destination */
	struct level *lv;
	size_t nlv, cap;
	char rel[STG_PATH_MAX];	/* its path below the root, "" for the root */
};

/* A regular file, symlink or node name of sdir (source) into ddir, as path. */
static int copy_leaf(struct copy *c, int sdir, int ddir, const char *name, const struct stat *stp, const char *path,
		     struct err *e)
{
	struct stat st = *stp;
	int rc = 0;

	if (S_ISREG(st.st_mode)) {
		int sfd = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), dfd;

		if (sfd < 0)
			return err_errno(e, "open %s", path);
		if ((dfd = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
			sys_close(sfd);
			return err_errno(e, "create %s", path);
		}
		rc = copy_data(c, sfd, dfd, st.st_size, path, e);
		if (rc == 0)
			rc = copy_xattrs(sfd, dfd, path, path, e);
		if (rc == 0)
			rc = set_meta_fd(dfd, &st, path, e);
		sys_close(sfd);
		sys_close(dfd);
	} else {
		/* Symlinks and nodes have no fd to work through: their xattrs go by
		 * /proc/self/fd/<dir>/<name>, which names this very entry. */
		struct timespec ts[2] = { st.st_atim, st.st_mtim };
		char sp[128 + 256], dp[128 + 256];

		if (S_ISLNK(st.st_mode)) {
			char target[STG_PATH_MAX];
			ssize_t n = readlinkat(sdir, name, target, sizeof(target) - 1);

			if (n < 0)
				return err_errno(e, "readlink %s", path);
			target[n] = '\0';
			if (symlinkat(target, ddir, name) < 0)
				return err_errno(e, "symlink %s", path);
		} else if (mknodat(ddir, name, st.st_mode & (S_IFMT | 0700), st.st_rdev) < 0) {
			return err_errno(e, "mknod %s", path);
		}
		if (fchownat(ddir, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
			return err_errno(e, "chown %s", path);
		if (!S_ISLNK(st.st_mode) && fchmodat(ddir, name, st.st_mode & 07777, 0) < 0)
			return err_errno(e, "chmod %s", path);
		snprintf(sp, sizeof(sp), "/proc/self/fd/%d/%s", sdir, name);
		snprintf(dp, sizeof(dp), "/proc/self/fd/%d/%s", ddir, name);
		if (strlen(name) < 200 && copy_xattrs(-1, -1, sp, dp, e) < 0)
			return err_prefix(e, "%s", path);
		if (utimensat(ddir, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
			return err_errno(e, "set times of %s", path);
	}
	return rc;
}

/* Every entry name of the directory fd (a dup is read; fd stays put). */
static int read_names(int fd, const char *rel, char ***out, size_t *n, struct err *e)
{
	int d2 = dup(fd);
	DIR *d;
	struct dirent *de;
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	if (d2 < 0 || !(d = fdopendir(d2))) {
		if (d2 >= 0)
			sys_close(d2);
		return err_errno(e, "read directory %s", *rel ? rel : ".");
	}
	rewinddir(d);
	while ((errno = 0, de = readdir(d))) {
		if (str_eq(de->d_name, ".") || str_eq(de->d_name, ".."))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			*out = xrealloc(*out, cap * sizeof(**out));
		}
		(*out)[(*n)++] = xstrdup(de->d_name);
	}
	if (errno) {
		err_errno(e, "read directory %s", *rel ? rel : ".");
		closedir(d);
		return -1;
	}
	closedir(d);
	return 0;
}

static void level_free(struct level *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
}

/* Enter the directory the walk's sfd/dfd now hold (st: its source stat). */
static int push_level(struct walk *w, const struct stat *st, struct err *e)
{
	struct level *l;
	struct stat dst;

	if (fstat(w->dfd, &dst) < 0)
		return err_errno(e, "stat copy of %s", *w->rel ? w->rel : ".");
	if (w->nlv == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 16;
		w->lv = xrealloc(w->lv, w->cap * sizeof(*w->lv));
	}
	l = &w->lv[w->nlv];
	memset(l, 0, sizeof(*l));
	l->st = *st;
	l->ddev = dst.st_dev;
	l->dino = dst.st_ino;
	l->rel_len = strlen(w->rel);
	if (read_names(w->sfd, w->rel, &l->names, &l->n, e) < 0) {
		level_free(l);
		return -1;
	}
	w->nlv++;
	return 0;
}

/* Moved or replaced under the walk: what the tree holds, for
 * stg_volume_fault (ELOOP, as for a link met where a directory was). */
static int changed(struct err *e, const char *path)
{
	err_set(e, "%s changed while it was copied", *path ? path : ".");
	e->code = ELOOP;
	return -1;
}

/* Into the subdirectory name (st: its stat), made in the destination. */
static int descend(struct walk *w, const char *name, const struct stat *st, struct err *e)
{
	struct stat st2;
	int s2, d2;

	if ((s2 = openat(w->sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return errno == ELOOP || errno == ENOTDIR ? changed(e, w->rel) : err_errno(e, "open %s", w->rel);
	if (fstat(s2, &st2) < 0 || st2.st_dev != st->st_dev || st2.st_ino != st->st_ino) {
		sys_close(s2);
		return changed(e, w->rel);
	}
	if (mkdirat(w->dfd, name, 0700) < 0 ||
	    (d2 = openat(w->dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		sys_close(s2);
		return err_errno(e, "mkdir %s", w->rel);
	}
	sys_close(w->sfd);
	sys_close(w->dfd);
	w->sfd = s2;
	w->dfd = d2;
	return push_level(w, st, e);
}

/* Back to the parent through "..", checked to be the directory we came
 * from on both sides: no fd per level is kept, so depth costs no fds. */
static int ascend(struct walk *w, struct err *e)
{
	const struct level *up = &w->lv[w->nlv - 2];
	struct stat a, b;
	int ps, pd;

	if ((ps = openat(w->sfd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return err_errno(e, "open %s/..", w->rel);
	if ((pd = openat(w->dfd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		sys_close(ps);
		return err_errno(e, "open copy of %s/..", w->rel);
	}
	if (fstat(ps, &a) < 0 || fstat(pd, &b) < 0 || a.st_dev != up->st.st_dev || a.st_ino != up->st.st_ino ||
	    b.st_dev != up->ddev || b.st_ino != up->dino) {
		sys_close(ps);
		sys_close(pd);
		return changed(e, w->rel);
	}
	sys_close(w->sfd);
	sys_close(w->dfd);
	w->sfd = ps;
	w->dfd = pd;
	level_free(&w->lv[--w->nlv]);
	w->rel[up->rel_len] = '\0';
	return 0;
}

/* The next entry of the directory on top of the stack. */
static int walk_entry(struct walk *w, const char *name, struct err *e)
{
	struct copy *c = w->c;
	struct stat st;
	size_t len = strlen(w->rel);

	if (len + 1 + strlen(name) >= sizeof(w->rel)) {
		err_set(e, "a path longer than %d bytes under %.200s", STG_PATH_MAX, w->rel);
		e->code = ENAMETOOLONG;	/* what the tree holds: stg_volume_fault */
		return -1;
	}
	if (fstatat(w->sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)	/* removed meanwhile */
			return 0;
		return err_errno(e, "stat %s%s%s", w->rel, len ? "/" : "", name);
	}
	if (len)
		w->rel[len++] = '/';
	memcpy(w->rel + len, name, strlen(name) + 1);
	if (S_ISDIR(st.st_mode))
		return descend(w, name, &st, e);	/* rel stays: the new level's path */
	if (st.st_nlink > 1) {
		const char *first = link_find(c, st.st_dev, st.st_ino);

		if (first) {
			int rc = linkat(c->dst_root, first, w->dfd, name, 0) < 0 ? err_errno(e, "link %s", w->rel) : 0;

			w->rel[w->lv[w->nlv - 1].rel_len] = '\0';
			return rc;
		}
		link_add(c, st.st_dev, st.st_ino, w->rel);
	}
	{
		int rc = copy_leaf(c, w->sfd, w->dfd, name, &st, w->rel, e);

		w->rel[w->lv[w->nlv - 1].rel_len] = '\0';
		return rc;
	}
}

/* The tree below the open directories sfd/dfd (dup'ed: the caller keeps
 * its own), depth first with the stack on the heap: as deep as a path of
 * STG_PATH_MAX bytes goes, with two fds open whatever the depth. Each
 * directory's xattrs and times are set once its entries are in. */
static int copy_walk(struct copy *c, int sfd, int dfd, const struct stat *root, struct err *e)
{
	struct walk w;
	int rc;

	memset(&w, 0, sizeof(w));
	w.c = c;
	w.sfd = dup(sfd);
	w.dfd = dup(dfd);
	if (w.sfd < 0 || w.dfd < 0)
		rc = err_errno(e, "dup");
	else
		rc = push_level(&w, root, e);
	while (rc == 0 && w.nlv) {
		struct level *top = &w.lv[w.nlv - 1];

		if (top->next < top->n) {
			rc = walk_entry(&w, top->names[top->next++], e);
			continue;
		}
		rc = copy_xattrs(w.sfd, w.dfd, *w.rel ? w.rel : ".", *w.rel ? w.rel : ".", e);
		if (rc == 0)	/* times last: the entries changed them */
			rc = set_meta_fd(w.dfd, &top->st, *w.rel ? w.rel : ".", e);
		if (rc == 0 && w.nlv > 1)
			rc = ascend(&w, e);
		else if (rc == 0)
			level_free(&w.lv[--w.nlv]);
	}
	while (w.nlv)
		level_free(&w.lv[--w.nlv]);
	free(w.lv);
	if (w.sfd >= 0)
		sys_close(w.sfd);
	if (w.dfd >= 0)
		sys_close(w.dfd);
	return rc;
}

int stg_copy_tree(const char *src, const char *dst, struct err *e)
{
	return stg_copy_tree_stats(src, dst, NULL, e);
}

int stg_copy_tree_stats(const char *src, const char *dst, struct stg_copy_stats *stats, struct err *e)
{
	struct copy c;
	struct stat st;
	int sfd, dfd, rc;

	memset(&c, 0, sizeof(c));
	if ((sfd = open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return err_errno(e, "open %s", src);
	/* dst may also be an empty directory made by the caller (a btrfs
	 * subvolume, a zfs dataset's mountpoint). */
	if (fstat(sfd, &st) < 0 || (mkdir(dst, 0700) < 0 && errno != EEXIST) ||
	    (dfd = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		rc = err_errno(e, "mkdir %s", dst);
		sys_close(sfd);
		return rc;
	}
	c.dst_root = dfd;
	c.buf = xmalloc(STG_COPY_CHUNK);
	rc = copy_walk(&c, sfd, dfd, &st, e);
	sys_close(sfd);
	sys_close(dfd);
	for (size_t i = 0; i < c.nlinks; i++)
		free(c.links[i].path);
	free(c.links);
	free(c.buf);
	if (stats)
		*stats = c.st;
	return rc < 0 ? err_prefix(e, "copy %s", src) : 0;
}

const char *stg_volume_fault(const struct err *e)
{
	switch (e->code) {
	case ENOSPC:
		return "disk full";
	case EDQUOT:
		return "disk quota exceeded";
	case EFBIG:
		return "file too large";
	case EMLINK:
		return "too many links";
	case ERANGE:
	case E2BIG:
		return "extended attributes too large";
	case ENAMETOOLONG:
		return "path too long";
	case ELOOP:
	case ENOTDIR:
		return "changed while it was copied";
	case EACCES:
	case EPERM:
	case EOVERFLOW:
		return "unreadable";
	default:
		break;
	}
	/* The storage CLIs (btrfs, zfs) say it in words, with no errno. */
	if (strstr(e->msg, "No space left on device") || strstr(e->msg, "out of space"))
		return "disk full";
	if (strstr(e->msg, "Disk quota exceeded") || strstr(e->msg, "quota exceeded"))
		return "disk quota exceeded";
	return NULL;
}

/* argv with stdin from in_fd and stdout to out_fd (-1: /dev/null, and the
 * collected output into out when given). */
static int run_io(const char *const *argv, int in_fd, int out_fd, struct buf *out, struct err *e)
{
	struct proc_spec s;
	struct proc_result r;
	char line[300];
	int rc = 0;

	proc_spec_init(&s, argv);
	s.timeout_ms = STG_CMD_TIMEOUT_MS;
	s.out_max = (size_t)4 << 20;
	s.err_max = 65536;
	if (in_fd >= 0)
		s.in = (struct proc_io){ PROC_FD, in_fd };
	if (out_fd >= 0)
		s.out = (struct proc_io){ PROC_FD, out_fd };
	if (proc_run(&s, NULL, 0, &r, e) < 0)
		return err_prefix(e, "%s", argv[0]);
	if (r.timed_out)
		rc = err_set(e, "%s %s: no answer within %d s", argv[0], argv[1] ? argv[1] : "",
			     STG_CMD_TIMEOUT_MS / 1000);
	else if (r.exit_code != 0) {
		dk_first_line(r.err.len ? r.err.data : r.out.data, line, sizeof(line));
		rc = err_set(e, "%s %s: %s", argv[0], argv[1] ? argv[1] : "", *line ? line : "failed");
	} else if (out) {
		buf_add(out, r.out.data, r.out.len);
	}
	proc_result_release(&r);
	return rc;
}

int stg_run(const char *const *argv, struct buf *out, struct err *e)
{
	return run_io(argv, -1, -1, out, e);
}

int stg_run_file(const char *const *argv, const char *in_path, const char *out_path, struct err *e)
{
	int in = -1, outfd = -1, rc;

	if (in_path && (in = open(in_path, O_RDONLY | O_CLOEXEC)) < 0)
		return err_errno(e, "open %s", in_path);
	if (out_path && (outfd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
		if (in >= 0)
			sys_close(in);
		return err_errno(e, "open %s", out_path);
	}
	rc = run_io(argv, in, outfd, NULL, e);
	if (rc == 0 && outfd >= 0 && fsync(outfd) < 0)
		rc = err_errno(e, "fsync %s", out_path);
	if (in >= 0)
		sys_close(in);
	if (outfd >= 0)
		sys_close(outfd);
	return rc;
}

void stg_copy_stats_text(const struct stg_copy_stats *st, char *out, size_t n)
{
	size_t files = st->reflinked + st->copy_range + st->read_write;

	snprintf(out, n, "%zu file(s), %.1f MiB: %zu reflinked, %zu by copy_file_range, %zu by read/write", files,
		 (double)st->bytes / (1024.0 * 1024.0), st->reflinked, st->copy_range, st->read_write);
}
