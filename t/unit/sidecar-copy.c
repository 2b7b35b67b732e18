/* Unit tests: storage_copy.c's tree copier in a temp dir: a tree nested far
 * deeper than any fd limit copied with 2 directory fds (RLIMIT_NOFILE is
 * lowered to prove it), its metadata, links and holes kept; a path past
 * STG_PATH_MAX fails as a volume fault; and stg_volume_fault's reasons. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"
#include "tap.h"

#define DEEP_OK 1500	/* "d/" x 1500: 3000 bytes, under STG_PATH_MAX */
#define DEEP_TOO 2100	/* 4200 bytes: past it */
#define FD_CAP 64	/* RLIMIT_NOFILE while copying: far below either depth */

/* levels nested directories "d" below root, and a file "leaf" at the bottom;
 * built with openat so no path is ever longer than one name. */
static int nest(const char *root, int levels)
{
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), f;

	for (int i = 0; fd >= 0 && i < levels; i++) {
		int next;

		if (mkdirat(fd, "d", 0750) < 0 || (next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
			close(fd);
			return -1;
		}
		close(fd);
		fd = next;
	}
	if (fd < 0 || (f = openat(fd, "leaf", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640)) < 0 ||
	    write(f, "bottom", 6) != 6) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(f);
	close(fd);
	return 0;
}

/* How many levels of "d" below root, and what the leaf at the bottom holds. */
static int depth_of(const char *root, char *leaf, size_t n)
{
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), depth = 0, f;
	ssize_t got;

	leaf[0] = '\0';
	for (;;) {
		int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		if (next < 0)
			break;
		close(fd);
		fd = next;
		depth++;
	}
	if ((f = openat(fd, "leaf", O_RDONLY | O_CLOEXEC)) >= 0) {
		got = read(f, leaf, n - 1);
		leaf[got > 0 ? got : 0] = '\0';
		close(f);
	}
	close(fd);
	return depth;
}

static void deep(const char *tmp)
{
	char src[1024], dst[1024], dst2[1024], leaf[32];
	struct rlimit old, low;
	struct err e;
	int rc;

	snprintf(src, sizeof(src), "%s/deep", tmp);
	snprintf(dst, sizeof(dst), "%s/deep-copy", tmp);
	mkdir(src, 0755);
	ok(nest(src, DEEP_OK) == 0, "a tree %d levels deep", DEEP_OK);
	getrlimit(RLIMIT_NOFILE, &old);
	low = old;
	low.rlim_cur = FD_CAP;
	setrlimit(RLIMIT_NOFILE, &low);
	rc = stg_copy_tree(src, dst, &e);
	setrlimit(RLIMIT_NOFILE, &old);
	if (!ok(rc == 0, "copied with at most %d fds open", FD_CAP))
		tap_diag("%s", e.msg);
	is_int(depth_of(dst, leaf, sizeof(leaf)), DEEP_OK, "the copy is as deep");
	is_str(leaf, "bottom", "the file at the bottom came along");

	snprintf(src, sizeof(src), "%s/deeper", tmp);
	snprintf(dst2, sizeof(dst2), "%s/deeper-copy", tmp);
	mkdir(src, 0755);
	ok(nest(src, DEEP_TOO) == 0, "a tree %d levels deep", DEEP_TOO);
	rc = stg_copy_tree(src, dst2, &e);
	ok(rc < 0 && e.code == ENAMETOOLONG, "past STG_PATH_MAX: ENAMETOOLONG (%s)", e.msg);
	is_str(stg_volume_fault(&e), "path too long", "a volume fault: path too long");
}

static void meta(const char *tmp)
{
	char src[1024], dst[1024], path[1200], target[1200];
	struct stat a, b, h1, h2;
	struct timespec ts[2] = { { 1000000000, 0 }, { 1000000000, 0 } };
	struct err e;
	int fd;
	ssize_t n;

	snprintf(src, sizeof(src), "%s/meta", tmp);
	snprintf(dst, sizeof(dst), "%s/meta-copy", tmp);
	mkdir(src, 0755);
	snprintf(path, sizeof(path), "%s/sub", src);
	mkdir(path, 0710);
	snprintf(path, sizeof(path), "%s/sub/sparse", src);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	if (fd >= 0) {
		if (pwrite(fd, "x", 1, (off_t)64 << 20) != 1)
			tap_diag("pwrite failed");
		close(fd);
	}
	snprintf(target, sizeof(target), "%s/sub/hard", src);
	if (link(path, target) < 0)
		tap_diag("link failed");
	snprintf(path, sizeof(path), "%s/sub/link", src);
	if (symlink("/etc/passwd", path) < 0)
		tap_diag("symlink failed");
	snprintf(path, sizeof(path), "%s/sub", src);
	utimensat(AT_FDCWD, path, ts, 0);
	if (!ok(stg_copy_tree(src, dst, &e) == 0, "a tree with a sparse file, a hard link and a symlink"))
		tap_diag("%s", e.msg);
	snprintf(path, sizeof(path), "%s/sub", dst);
	ok(stat(path, &a) == 0 && (a.st_mode & 07777) == 0710 && a.st_mtime == 1000000000,
	   "a directory's mode and time are kept (set after its entries)");
	snprintf(path, sizeof(path), "%s/sub/sparse", dst);
	ok(stat(path, &b) == 0 && b.st_size == ((off_t)64 << 20) + 1 && b.st_blocks < 1024, "the hole stays a hole");
	snprintf(target, sizeof(target), "%s/sub/hard", dst);
	ok(stat(path, &h1) == 0 && stat(target, &h2) == 0 && h1.st_ino == h2.st_ino, "the hard link stays a link");
	snprintf(path, sizeof(path), "%s/sub/link", dst);
	n = readlink(path, target, sizeof(target) - 1);
	target[n > 0 ? n : 0] = '\0';
	is_str(target, "/etc/passwd", "the symlink is copied, not followed");
}

static void faults(void)
{
	static const struct {
		int code;
		const char *msg, *want;
	} cases[] = {
		{ ENOSPC, "create x: No space left on device", "disk full" },
		{ EDQUOT, "write x", "disk quota exceeded" },
		{ ERANGE, "listxattr x", "extended attributes too large" },
		{ ENAMETOOLONG, "a path longer", "path too long" },
		{ ELOOP, "x changed while it was copied", "changed while it was copied" },
		{ EACCES, "open x", "unreadable" },
		{ 0, "btrfs subvolume: ERROR: cannot snapshot: No space left on device", "disk full" },
		{ EIO, "read x: Input/output error", NULL },
		{ ENOMEM, "x", NULL },
		{ 0, "docker pause: Error response from daemon", NULL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct err e;
		const char *got;

		err_set(&e, "%s", cases[i].msg);
		e.code = cases[i].code;
		got = stg_volume_fault(&e);
		is_str(got ? got : "(none)", cases[i].want ? cases[i].want : "(none)", cases[i].msg);
	}
}

/* The stats say how many files had data and which way each went: the
 * empty file, the directory and the symlink are not counted. */
static void stats(const char *tmp)
{
	char src[4096], dst[4096], path[4200], text[200];
	static const char data[] = "twelve bytes";
	struct stg_copy_stats st;
	struct err e;

	snprintf(src, sizeof(src), "%s/stats-src", tmp);
	snprintf(dst, sizeof(dst), "%s/stats-dst", tmp);
	snprintf(path, sizeof(path), "%s/sub", src);
	if (fs_mkdir_p(path, 0700, &e) < 0) {
		ok(0, "mkdir: %s", e.msg);
		return;
	}
	snprintf(path, sizeof(path), "%s/a", src);
	fs_write_atomic(path, data, sizeof(data) - 1, 0600, &e);
	snprintf(path, sizeof(path), "%s/sub/b", src);
	fs_write_atomic(path, data, sizeof(data) - 1, 0600, &e);
	snprintf(path, sizeof(path), "%s/empty", src);
	fs_write_atomic(path, "", 0, 0600, &e);
	snprintf(path, sizeof(path), "%s/link", src);
	if (symlink("a", path) < 0)
		tap_diag("symlink: %s", strerror(errno));
	memset(&st, 0xff, sizeof(st));
	ok(stg_copy_tree_stats(src, dst, &st, &e) == 0, "copy with stats");
	is_int(st.reflinked + st.copy_range + st.read_write, 2, "two files with data counted");
	is_int(st.bytes, 2 * (sizeof(data) - 1), "their bytes");
	stg_copy_stats_text(&st, text, sizeof(text));
	ok(strstr(text, "2 file(s)") && strstr(text, "reflinked") && strstr(text, "copy_file_range"), "text: %s", text);
	tap_diag("%s (%s)", text, tmp);
}

int main(void)
{
	const char *tmp = tap_tmpdir();

	if (!tmp)
		return tap_skip_all("no temp dir");
	deep(tmp);
	meta(tmp);
	faults();
	stats(tmp);
	return tap_done();
}
