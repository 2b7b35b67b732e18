/*
 * sys.c: the store's default system-call table (see struct st_sys in
 * store.h), and the wrappers every other file calls through it the sqlite
 * way: EINTR retried, O_CLOEXEC, never fds 0-2.
 */
#include "store/internal.h"

#include <errno.h>

#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* open(2) is variadic; the table wants a fixed signature. */
static int real_open(const char *path, int flags, mode_t mode)
{
	return open(path, flags, mode);
}

static const struct st_sys st_sys_real = {
	.open = real_open,
	.close = close,
	.pread = pread,
	.pwrite = pwrite,
	.fsync = fsync,
	.fdatasync = fdatasync,
	.ftruncate = ftruncate,
	.rename = rename,
	.unlink = unlink,
	.fstat = fstat,
	.flock = flock,
};

const struct st_sys *st_sys_default(void)
{
	return &st_sys_real;
}

int st_sys_open(struct st_db *db, const char *path, int flags, mode_t mode)
{
	int fd;

	do
		fd = db->sys->open(path, flags | O_CLOEXEC, mode);
	while (fd < 0 && errno == EINTR);
	if (fd >= 0 && fd <= 2) {
		/* A stray write to stdout/stderr must never land in the log. */
		int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		int saved = errno;
		db->sys->close(fd);
		errno = saved;
		fd = nfd;
	}
	return fd;
}

void st_sys_close_fd(struct st_db *db, int fd)
{
	int saved = errno;

	if (fd >= 0)
		db->sys->close(fd);
	errno = saved;
}

/* The one loop behind both: pwrite from wp (reading: NULL) or pread into rp
 * until n bytes are moved, EINTR retried; a return of 0 (an early end) fails
 * with EIO. */
static int sys_rw_full(struct st_db *db, int fd, const char *wp, char *rp, size_t n, off_t off)
{
	size_t done = 0;

	while (done < n) {
		ssize_t r = wp ? db->sys->pwrite(fd, wp + done, n - done, off)
			       : db->sys->pread(fd, rp + done, n - done, off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0) {
			errno = EIO;
			return -1;
		}
		done += (size_t)r;
		off += r;
	}
	return 0;
}

int st_sys_pwrite_all(struct st_db *db, int fd, const void *p, size_t n, off_t off)
{
	return sys_rw_full(db, fd, p, NULL, n, off);
}

/* Read exactly n bytes at off; -1 with errno (EIO for an early end). */
int st_sys_pread_full(struct st_db *db, int fd, void *p, size_t n, off_t off)
{
	return sys_rw_full(db, fd, NULL, p, n, off);
}

int st_sys_fsync_fd(struct st_db *db, int fd)
{
	int r;

	if (db->scratch)
		return 0;	/* a scratch copy: PostgreSQL holds the durable one */
	do
		r = db->sys->fsync(fd);
	while (r < 0 && errno == EINTR);
	return r;
}

int st_sys_fdatasync_fd(struct st_db *db, int fd)
{
	/* A table made before the member existed syncs the mark with fsync. */
	int (*sync_fn)(int) = db->sys->fdatasync ? db->sys->fdatasync : db->sys->fsync;
	int r;

	do
		r = sync_fn(fd);
	while (r < 0 && errno == EINTR);
	return r;
}

int st_sys_ftruncate_fd(struct st_db *db, int fd, off_t len)
{
	int r;

	do
		r = db->sys->ftruncate(fd, len);
	while (r < 0 && errno == EINTR);
	return r;
}

int st_fsync_dir(struct st_db *db, struct err *e)
{
	int fd = st_sys_open(db, db->dir, O_RDONLY | O_DIRECTORY, 0);

	if (fd < 0)
		return err_errno(e, "store: open directory %s", db->dir);
	if (st_sys_fsync_fd(db, fd) < 0) {
		err_errno(e, "store: fsync directory %s", db->dir);
		st_sys_close_fd(db, fd);
		return -1;
	}
	st_sys_close_fd(db, fd);
	return 0;
}

int st_sys_install(struct st_db *db, const char *tmp, const char *final, const void *data, size_t len,
		   struct err *e)
{
	int fd = st_sys_open(db, tmp, O_RDWR | O_CREAT | O_TRUNC, 0600);

	if (fd < 0)
		return err_errno(e, "store: create %s", tmp);
	if (st_sys_pwrite_all(db, fd, data, len, 0) < 0 || st_sys_fsync_fd(db, fd) < 0) {
		err_errno(e, "store: write %s", tmp);
		goto fail;
	}
	if (db->sys->rename(tmp, final) < 0) {
		err_errno(e, "store: rename %s to %s", tmp, final);
		goto fail;
	}
	return fd;
fail:
	st_sys_close_fd(db, fd);
	db->sys->unlink(tmp);
	return -1;
}
