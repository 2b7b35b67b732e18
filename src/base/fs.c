/* fs.c: see fs.h. */
#include "base/fs.h"

#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/str.h"
#include "base/sys.h"

int fs_path(char *dst, size_t n, struct err *e, const char *fmt, ...)
{
	char shown[FS_PATH_SHOWN + 1];
	va_list ap, again;
	int rc;

	va_start(ap, fmt);
	va_copy(again, ap);
	rc = str_vfmt(dst, n, fmt, ap);
	va_end(ap);
	if (rc < 0) {
		/* the preview is cut on purpose: it only has to say which path */
		vsnprintf(shown, sizeof(shown), fmt, again);
		err_set(e, "path too long (%zu bytes at most): %s...", n ? n - 1 : 0, shown);
	}
	va_end(again);
	return rc;
}

int fs_mkdir_p(const char *path, mode_t mode, struct err *e)
{
	char tmp[PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(tmp))
		return err_set(e, "mkdir %s: path empty or too long", path);
	memcpy(tmp, path, len + 1);
	for (char *p = tmp + 1; ; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char saved = *p;
		*p = '\0';
		if (mkdir(tmp, mode) < 0) {
			struct stat st;
			if (errno != EEXIST)
				return err_errno(e, "mkdir %s", tmp);
			/* stat, not lstat: a symlink to a directory is fine, a
			 * dangling one is not */
			if (stat(tmp, &st) < 0)
				return err_errno(e, "mkdir %s", tmp);
			if (!S_ISDIR(st.st_mode))
				return err_set(e, "mkdir %s: exists and is not a directory", tmp);
		}
		*p = saved;
		if (saved == '\0')
			break;
	}
	return 0;
}

/* fsync (whole_fs false) or syncfs the directory path. */
static int sync_dir(const char *path, bool whole_fs, struct err *e)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return err_errno(e, "open %s", path);
	if ((whole_fs ? syncfs(fd) : fsync(fd)) < 0) {
		sys_close(fd);
		return err_errno(e, "%s %s", whole_fs ? "syncfs" : "fsync", path);
	}
	sys_close(fd);
	return 0;
}

int fs_fsync_dir(const char *path, struct err *e)
{
	return sync_dir(path, false, e);
}

int fs_syncfs_dir(const char *path, struct err *e)
{
	return sync_dir(path, true, e);
}

static void dir_of(const char *path, char *dir, size_t n)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(dir, n, ".");
	else if (slash == path)
		snprintf(dir, n, "/");
	else
		snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode, struct err *e)
{
	char tmp[PATH_MAX], dir[PATH_MAX];
	int fd;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(tmp))
		return err_set(e, "write %s: path too long", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return err_errno(e, "create %s", tmp);
	if (fchmod(fd, mode) < 0 || sys_write_all(fd, data, len) < 0 || fsync(fd) < 0) {
		err_errno(e, "write %s", tmp);
		sys_close(fd);
		unlink(tmp);
		return -1;
	}
	if (close(fd) < 0) {
		err_errno(e, "close %s", tmp);
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, path) < 0) {
		err_errno(e, "rename %s to %s", tmp, path);
		unlink(tmp);
		return -1;
	}
	dir_of(path, dir, sizeof(dir));
	return fs_fsync_dir(dir, e);
}

int fs_read_file(const char *path, struct buf *out, size_t max, struct err *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t start = out->len, limit = max;

	if (fd < 0)
		return err_errno(e, "open %s", path);
	/* the buffer's own cap can be the tighter limit */
	if (out->max - out->len < limit)
		limit = out->max - out->len;
	for (;;) {
		size_t want = limit - (out->len - start);
		ssize_t r;
		if (want == 0) {
			/* one more byte tells whether the file is larger than the limit */
			char c;
			r = sys_read(fd, &c, 1);
			if (r == 0)
				break;
			if (r < 0)
				err_errno(e, "read %s", path);
			else
				err_set(e, "read %s: larger than %zu bytes", path, limit);
			sys_close(fd);
			buf_truncate(out, start);
			return -1;
		}
		if (want > FS_READ_CHUNK)
			want = FS_READ_CHUNK;
		if (buf_grow(out, want) < 0) {	/* cannot happen: want fits under max */
			err_set(e, "read %s: larger than %zu bytes", path, limit);
			sys_close(fd);
			buf_truncate(out, start);
			return -1;
		}
		r = sys_read(fd, out->data + out->len, want);
		if (r < 0) {
			err_errno(e, "read %s", path);
			sys_close(fd);
			buf_truncate(out, start);
			return -1;
		}
		if (r == 0)
			break;
		buf_setlen(out, out->len + (size_t)r);
	}
	close(fd);
	return 0;
}

/* Names in the directory open at dirfd, as a malloc'd list (str_list_free). */
static char **list_dir(int dirfd, const char *shown, struct err *e)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	size_t n = 0, cap = 16;
	char **names;
	struct dirent *de;
	DIR *d;

	if (fd < 0) {
		err_errno(e, "open %s", shown);
		return NULL;
	}
	d = fdopendir(fd);
	if (!d) {
		err_errno(e, "open %s", shown);
		sys_close(fd);
		return NULL;
	}
	names = xmalloc(cap * sizeof(*names));
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n + 2 > cap) {
			cap *= 2;
			names = xrealloc(names, cap * sizeof(*names));
		}
		names[n++] = xstrdup(de->d_name);
	}
	names[n] = NULL;
	if (errno) {
		err_errno(e, "read directory %s", shown);
		closedir(d);
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		free(names);
		return NULL;
	}
	closedir(d);
	return names;
}

/* Empty the directory open at *dirfd, never following a symlink (fstatat
 * with AT_SYMLINK_NOFOLLOW, O_NOFOLLOW on every open, unlinkat on links).
 * Past FS_REMOVE_FDS levels the parent's fd is closed while a child is
 * emptied and reopened through ".." after (checked by device and inode), so
 * a deep tree does not need one open fd per level. *dirfd may change. */
static int clear_dir(int *dirfd, const char *shown, int depth, struct err *e)
{
	char **names;
	int rc = 0;

	if (depth > FS_REMOVE_DEPTH_MAX)
		return err_set(e, "remove %s: directory tree deeper than %d levels", shown, FS_REMOVE_DEPTH_MAX);
	names = list_dir(*dirfd, shown, e);
	if (!names)
		return -1;
	for (char **np = names; *np && rc == 0; np++) {
		const char *name = *np;
		struct stat st, parent;
		int child;

		if (fstatat(*dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				rc = err_errno(e, "remove %s: stat %s", shown, name);
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (unlinkat(*dirfd, name, 0) < 0 && errno != ENOENT)
				rc = err_errno(e, "remove %s: %s", shown, name);
			continue;
		}
		child = openat(*dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (child < 0) {
			rc = err_errno(e, "remove %s: open %s", shown, name);
			continue;
		}
		if (depth >= FS_REMOVE_FDS) {
			if (fstat(*dirfd, &parent) < 0) {
				rc = err_errno(e, "remove %s: stat", shown);
				close(child);
				continue;
			}
			close(*dirfd);
			*dirfd = -1;
		}
		rc = clear_dir(&child, shown, depth + 1, e);
		if (*dirfd < 0) {
			struct stat now;
			*dirfd = openat(child, "..", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (*dirfd < 0) {
				if (rc == 0)
					rc = err_errno(e, "remove %s: reopen parent of %s", shown, name);
			} else if (fstat(*dirfd, &now) < 0 || now.st_dev != parent.st_dev ||
				   now.st_ino != parent.st_ino) {
				if (rc == 0)
					rc = err_set(e, "remove %s: directory moved during removal", shown);
			}
		}
		close(child);
		if (rc == 0 && unlinkat(*dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
			rc = err_errno(e, "remove %s: %s", shown, name);
	}
	str_list_free(names);
	return rc;
}

static bool is_root_dir(const struct stat *st)
{
	struct stat root;

	return S_ISDIR(st->st_mode) && stat("/", &root) == 0 &&
	       root.st_dev == st->st_dev && root.st_ino == st->st_ino;
}

int fs_remove_all(const char *path, struct err *e)
{
	char p[PATH_MAX];
	size_t len = strlen(path);
	struct stat st;
	int fd, rc;

	/* "link/" would resolve the symlink: remove the link itself instead */
	while (len > 1 && path[len - 1] == '/')
		len--;
	if (len == 0 || len >= sizeof(p))
		return err_set(e, "remove %s: path empty or too long", path);
	memcpy(p, path, len);
	p[len] = '\0';
	if (fstatat(AT_FDCWD, p, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : err_errno(e, "stat %s", p);
	/* Compare identities, not spellings: "/", "/.", "/etc/.." are all the root. */
	if (is_root_dir(&st))
		return err_set(e, "remove %s: refusing to remove the root directory", path);
	if (!S_ISDIR(st.st_mode)) {
		if (unlink(p) < 0 && errno != ENOENT)
			return err_errno(e, "remove %s", p);
		return 0;
	}
	fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return err_errno(e, "open %s", p);
	rc = clear_dir(&fd, p, 0, e);
	sys_close(fd);
	if (rc == 0 && rmdir(p) < 0 && errno != ENOENT)
		return err_errno(e, "remove %s", p);
	return rc;
}

int fs_exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

int fs_prune_files(const char *dir, int64_t now_s, int64_t (*keep_s)(const char *name))
{
	char path[PATH_MAX];
	struct dirent *de;
	struct stat st;
	DIR *dp;
	int n = 0;

	if (!(dp = opendir(dir)))
		return 0;
	while ((de = readdir(dp))) {
		int64_t keep = keep_s(de->d_name);

		if (keep < 0 || (size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= sizeof(path))
			continue;
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) && now_s - (int64_t)st.st_mtime > keep &&
		    unlink(path) == 0)
			n++;
	}
	closedir(dp);
	return n;
}

int fs_prune_under(const char *top, const char *sub, int64_t now_s, int64_t (*keep_s)(const char *name))
{
	char dir[FS_PATH_MAX];
	struct err e;

	if (fs_path(dir, sizeof(dir), &e, "%s/%s", top, sub) < 0)
		return 0;
	return fs_prune_files(dir, now_s, keep_s);
}
