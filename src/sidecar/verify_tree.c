/* verify_tree.c: the walk that decides whether a submission may be shown to
 * a grader (compose.md, "Refusal"; protections.md 3). It runs twice per
 * collect: over the frozen agent container's own tree (through
 * /proc/<pid>/root, because `docker cp` silently drops sockets, and so that
 * a device or 50 GiB of zeros is never written to the host), and over the
 * copy under <data>/verify/<id>/submission, which is what the grader sees.
 *
 * Every entry is looked at with fstatat(AT_SYMLINK_NOFOLLOW) and every
 * directory opened with openat(O_NOFOLLOW|O_DIRECTORY) relative to its
 * parent's fd, so no link is ever followed and nothing but a directory is
 * ever opened (a FIFO cannot hang the walk). A directory is checked to be
 * the inode that was stat'ed, so one swapped in between is not walked.
 *
 * Names are relative to the root with no leading slash
 * ("home/agent/answer.txt"), which is also the layout of the copy; depth is
 * the number of components in that name. Size is the apparent size
 * (st_size) of regular files: what a grader reading them would get, so a
 * sparse 257 MiB file is refused like a dense one. Regular files and
 * directories have separate caps of SC_VERIFY_MAX_FILES each. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"

static void refuse(struct vtree *t, const char *name, const char *reason, bool limit);

void vtree_init(struct vtree *t)
{
	memset(t, 0, sizeof(*t));
	t->refused = json_new_array();
}

void vtree_release(struct vtree *t)
{
	json_free(t->refused);
	t->refused = NULL;
}

void vtree_refuse(struct vtree *t, const char *name, const char *reason)
{
	refuse(t, name, reason, false);
}

static void refuse(struct vtree *t, const char *name, const char *reason, bool limit)
{
	struct buf b = BUF_INIT;

	buf_addf(&b, "%s: %s", name, reason);
	json_array_push(t->refused, json_new_str(b.data));
	buf_release(&b);
	/* A crossed limit ends the walk: the copy is refused whatever else is
	 * in it, and walking on is exactly what the limit is there to stop. */
	if (limit || json_len(t->refused) >= SC_VERIFY_REFUSED_MAX)
		t->stop = true;
}

/* An entry the walk cannot look at (errno says why). The host's troubles
 * (an I/O error, no memory or fds left) are errors; anything else comes
 * from what the tree holds, since the walk runs as root, and is refused like
 * any other odd entry: a submission nobody can read scores 0. */
static int cannot_read(struct vtree *t, const char *name, const char *what, struct err *e)
{
	int saved = errno;
	char why[160];

	if (saved == EIO || saved == ENOMEM || saved == EMFILE || saved == ENFILE || saved == ENOBUFS) {
		errno = saved;
		return err_errno(e, "%s %s", what, *name ? name : ".");
	}
	snprintf(why, sizeof(why), "unreadable (%s)", strerror(saved));
	refuse(t, *name ? name : ".", why, false);
	return 0;
}

static int depth_of(const char *name)
{
	int n = 1;

	for (const char *p = name; *p; p++)
		if (*p == '/')
			n++;
	return n;
}

static int walk_dir(int dirfd, char *name, size_t len, int depth, struct vtree *t, struct err *e);

/* One entry "name" (its last component is leaf) inside the directory dirfd. */
static int entry(int dirfd, const char *leaf, char *name, size_t len, int depth, struct vtree *t,
		 struct err *e)
{
	struct stat st, st2;
	int fd, rc;

	if (fstatat(dirfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;	/* gone since readdir: nothing to show a grader */
		return cannot_read(t, name, "lstat", e);
	}
	if (S_ISLNK(st.st_mode)) {
		refuse(t, name, "symlink", false);
		return 0;
	}
	if (S_ISFIFO(st.st_mode)) {
		refuse(t, name, "fifo", false);
		return 0;
	}
	if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
		refuse(t, name, "device", false);
		return 0;
	}
	if (S_ISSOCK(st.st_mode)) {
		refuse(t, name, "socket", false);
		return 0;
	}
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		/* No other type exists on Linux; name it rather than let it pass. */
		refuse(t, name, "not a regular file or directory", false);
		return 0;
	}
	if (depth > SC_VERIFY_MAX_DEPTH) {
		refuse(t, name, "deeper than 32", true);
		return 0;
	}
	if (S_ISREG(st.st_mode)) {
		t->files++;
		t->bytes += (uint64_t)st.st_size;
		if (t->files > SC_VERIFY_MAX_FILES)
			refuse(t, name, "more than 20000 files", true);
		else if (t->bytes > SC_VERIFY_MAX_BYTES)
			refuse(t, name, "submission larger than 256 MiB", true);
		return 0;
	}
	if (++t->dirs > SC_VERIFY_MAX_FILES) {
		refuse(t, name, "more than 20000 files", true);
		return 0;
	}
	fd = openat(dirfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno == ELOOP || errno == ENOTDIR) {	/* replaced by something else since the stat */
			refuse(t, name, "changed while it was checked", false);
			return 0;
		}
		return cannot_read(t, name, "open", e);
	}
	if (fstat(fd, &st2) < 0 || st2.st_dev != st.st_dev || st2.st_ino != st.st_ino) {
		sys_close(fd);
		refuse(t, name, "changed while it was checked", false);
		return 0;
	}
	rc = walk_dir(fd, name, len, depth, t, e);	/* takes fd */
	return rc;
}

/* The children of the directory fd (closed here), named name/child. */
static int walk_dir(int fd, char *name, size_t len, int depth, struct vtree *t, struct err *e)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	int rc = 0;

	if (!d) {
		sys_close(fd);
		return cannot_read(t, len ? name : "", "opendir", e);
	}
	while (rc == 0 && !t->stop) {
		size_t n, l2;

		errno = 0;
		if (!(de = readdir(d))) {
			if (errno)
				rc = cannot_read(t, len ? name : "", "readdir", e);
			break;
		}
		if (str_eq(de->d_name, ".") || str_eq(de->d_name, ".."))
			continue;
		n = strlen(de->d_name);
		l2 = len + (len ? 1 : 0) + n;
		if (l2 >= SC_VERIFY_NAME_MAX) {	/* only reachable past the depth cap; say so */
			refuse(t, name, "deeper than 32", true);
			break;
		}
		if (len)
			name[len] = '/';
		memcpy(name + len + (len ? 1 : 0), de->d_name, n + 1);
		rc = entry(dirfd(d), de->d_name, name, l2, depth + 1, t, e);
		name[len] = '\0';
	}
	closedir(d);
	return rc;
}

int vtree_all(int rootfd, struct vtree *t, struct err *e)
{
	char name[SC_VERIFY_NAME_MAX] = "";
	int fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return err_errno(e, "open the copy");
	return walk_dir(fd, name, 0, 0, t, e);
}

/* The walks below hold one directory fd at a time; rootfd is the caller's. */
static void close_unless_root(int rootfd, int dirfd)
{
	if (dirfd != rootfd)
		sys_close(dirfd);
}

/* Step from dirfd into its subdirectory, opened as fd: fd is the new dirfd. */
static int descend(int rootfd, int dirfd, int fd)
{
	close_unless_root(rootfd, dirfd);
	return fd;
}

int vtree_path(int rootfd, const char *rel, struct vtree *t, bool *missing, struct err *e)
{
	char name[SC_VERIFY_NAME_MAX], comp[256];
	const char *p = rel;
	int dirfd = rootfd, rc = 0;
	size_t len = 0;

	*missing = false;
	if (strlen(rel) >= sizeof(name) || depth_of(rel) > SC_VERIFY_MAX_DEPTH + 1) {
		refuse(t, rel, "deeper than 32", true);
		return 0;
	}
	name[0] = '\0';
	for (;;) {
		size_t n = strcspn(p, "/");
		struct stat st;
		int fd;

		if (n == 0 || n >= sizeof(comp)) {
			rc = err_set(e, "bad path component in \"%s\"", rel);
			break;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		if (len)
			name[len++] = '/';
		memcpy(name + len, comp, n + 1);
		len += n;
		if (!p[n]) {	/* the declared path itself */
			if (fstatat(dirfd, comp, &st, AT_SYMLINK_NOFOLLOW) < 0 && (errno == ENOENT || errno == ENOTDIR))
				*missing = true;
			else
				rc = entry(dirfd, comp, name, len, depth_of(name), t, e);
			break;
		}
		/* A parent on the way: a link there would let the agent point the
		 * declared path anywhere, so it is refused like any other link. */
		if (fstatat(dirfd, comp, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT || errno == ENOTDIR)
				*missing = true;
			else
				rc = cannot_read(t, name, "lstat", e);
			break;
		}
		if (S_ISLNK(st.st_mode)) {
			refuse(t, name, "symlink", false);
			break;
		}
		if (!S_ISDIR(st.st_mode)) {
			*missing = true;
			break;
		}
		fd = openat(dirfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT)
				*missing = true;
			else if (errno == ELOOP || errno == ENOTDIR)
				refuse(t, name, "changed while it was checked", false);
			else
				rc = cannot_read(t, name, "open", e);
			break;
		}
		dirfd = descend(rootfd, dirfd, fd);
		p += n + 1;
	}
	close_unless_root(rootfd, dirfd);
	return rc;
}

bool vtree_missing(int rootfd, const char *rel)
{
	char comp[256];
	const char *p = rel;
	int dirfd = rootfd;
	bool missing = false;

	for (;;) {
		size_t n = strcspn(p, "/");
		struct stat st;
		int fd;

		if (n == 0 || n >= sizeof(comp))
			break;
		memcpy(comp, p, n);
		comp[n] = '\0';
		if (fstatat(dirfd, comp, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			missing = errno == ENOENT || errno == ENOTDIR;
			break;
		}
		if (!p[n])
			break;
		/* A parent that is a link is refused by vtree_path, not missing;
		 * one that is a file means the path cannot exist. */
		if (!S_ISDIR(st.st_mode)) {
			missing = !S_ISLNK(st.st_mode);
			break;
		}
		fd = openat(dirfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			missing = errno == ENOENT;
			break;
		}
		dirfd = descend(rootfd, dirfd, fd);
		p += n + 1;
	}
	close_unless_root(rootfd, dirfd);
	return missing;
}
