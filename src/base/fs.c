/* fs.c: see fs.h. */
#include "base/fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/sys.h"

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
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return err_errno(e, "mkdir %s", tmp);
		if (errno == EEXIST) {
			struct stat st;
			if (stat(tmp, &st) == 0 && !S_ISDIR(st.st_mode))
				return err_set(e, "mkdir %s: exists and is not a directory", tmp);
		}
		*p = saved;
		if (saved == '\0')
			break;
	}
	return 0;
}

int fs_fsync_dir(const char *path, struct err *e)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return err_errno(e, "open %s", path);
	if (fsync(fd) < 0) {
		sys_close(fd);
		return err_errno(e, "fsync %s", path);
	}
	close(fd);
	return 0;
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
	size_t start = out->len;

	if (fd < 0)
		return err_errno(e, "open %s", path);
	for (;;) {
		ssize_t r;
		if (out->len - start >= max || buf_grow(out, 65536) < 0) {
			/* one more byte would tell us whether the file is larger than max */
			char c;
			if (sys_read(fd, &c, 1) == 0)
				break;
			sys_close(fd);
			buf_truncate(out, start);
			return err_set(e, "read %s: larger than %zu bytes", path, max);
		}
		size_t room = out->cap - out->len - 1;
		if (room > max - (out->len - start))
			room = max - (out->len - start);
		r = sys_read(fd, out->data + out->len, room);
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

/* Remove the entry name inside dirfd, recursing into directories without
 * following symlinks (O_NOFOLLOW on every open, unlinkat on links). */
static int remove_at(int dirfd, const char *name, const char *shown, struct err *e, int depth)
{
	struct stat st;
	DIR *d;
	struct dirent *de;
	int fd, rc = 0;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : err_errno(e, "stat %s", shown);
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
			return err_errno(e, "remove %s", shown);
		return 0;
	}
	if (depth > 4096)
		return err_set(e, "remove %s: directory tree too deep", shown);
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return err_errno(e, "open %s", shown);
	d = fdopendir(fd);
	if (!d) {
		sys_close(fd);
		return err_errno(e, "open %s", shown);
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (remove_at(fd, de->d_name, shown, e, depth + 1) < 0) {
			rc = -1;
			break;
		}
	}
	closedir(d);
	if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return err_errno(e, "remove %s", shown);
	return rc;
}

int fs_remove_all(const char *path, struct err *e)
{
	return remove_at(AT_FDCWD, path, path, e, 0);
}

int fs_exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}
