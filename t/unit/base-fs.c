/* Unit tests: fs helpers (mkdir -p, atomic write, bounded read, rm -rf). */
#include <dirent.h>
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
#include <sys/wait.h>
#include "tap.h"

static char base[512];

static const char *at(const char *rel)
{
	static char paths[8][1024];
	static int next;
	char *p = paths[next++ % 8];

	snprintf(p, sizeof(paths[0]), "%s/%s", base, rel);
	return p;
}

static void put(const char *path, const char *content)
{
	FILE *f = fopen(path, "w");
	if (f) {
		fputs(content, f);
		fclose(f);
	}
}

static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return n;
}

static void test_mkdir_p(void)
{
	struct err e;
	struct stat st;

	ok(fs_mkdir_p(at("m/a/b/c"), 0750, &e) == 0, "mkdir -p of a new chain");
	ok(stat(at("m/a/b/c"), &st) == 0 && S_ISDIR(st.st_mode), "last directory exists");
	is_int(st.st_mode & 07777, 0750, "with the mode");
	ok(stat(at("m/a"), &st) == 0 && (st.st_mode & 07777) == 0750, "intermediate directories get the mode too");
	ok(fs_mkdir_p(at("m/a/b/c"), 0750, &e) == 0, "existing directories are fine");
	ok(fs_mkdir_p(at("m/a/b/c/"), 0750, &e) == 0, "trailing slash is fine");
	ok(fs_mkdir_p(at("m//a//x"), 0750, &e) == 0 && fs_exists(at("m/a/x")), "doubled slashes are fine");

	put(at("m/file"), "x");
	ok(fs_mkdir_p(at("m/file/sub"), 0750, &e) == -1, "a file in the way fails");
	ok(str_has_suffix(e.msg, "/m/file: exists and is not a directory"), "message: %s", e.msg);
	ok(fs_mkdir_p(at("m/file"), 0750, &e) == -1, "the file itself fails");

	symlink(at("m/a"), at("m/link"));
	ok(fs_mkdir_p(at("m/link/new"), 0750, &e) == 0 && fs_exists(at("m/a/new")), "a symlink to a directory is followed");
	symlink(at("m/nowhere"), at("m/dangling"));
	ok(fs_mkdir_p(at("m/dangling"), 0750, &e) == -1, "a dangling symlink is not a directory");
	ok(str_has_suffix(e.msg, "/m/dangling: No such file or directory"), "message: %s", e.msg);
	ok(fs_mkdir_p("", 0750, &e) == -1, "empty path refused");
}

static void test_write_atomic(void)
{
	struct err e;
	struct stat st;
	struct buf b = BUF_INIT;

	fs_mkdir_p(at("w"), 0755, &e);
	ok(fs_write_atomic(at("w/f"), "hello", 5, 0640, &e) == 0, "write");
	ok(fs_read_file(at("w/f"), &b, 100, &e) == 0, "read back");
	is_str(b.data, "hello", "content");
	ok(stat(at("w/f"), &st) == 0 && (st.st_mode & 07777) == 0640, "mode 0640 exactly (umask does not apply)");
	ok(fs_write_atomic(at("w/f"), "bye", 3, 0600, &e) == 0, "overwrite");
	buf_reset(&b);
	fs_read_file(at("w/f"), &b, 100, &e);
	is_str(b.data, "bye", "new content replaces the old entirely");
	ok(stat(at("w/f"), &st) == 0 && (st.st_mode & 07777) == 0600, "new mode");
	ok(fs_write_atomic(at("w/empty"), "", 0, 0644, &e) == 0 && stat(at("w/empty"), &st) == 0 && st.st_size == 0,
	   "empty file");
	is_int(entries(at("w")), 2, "no temporary file left behind");

	fs_mkdir_p(at("w/dir"), 0755, &e);
	ok(fs_write_atomic(at("w/dir"), "x", 1, 0644, &e) == -1, "writing over a directory fails");
	ok(str_has_prefix(e.msg, "rename "), "at the rename: %s", e.msg);
	is_int(entries(at("w")), 3, "and its temporary file is removed");
	ok(fs_write_atomic(at("w/none/f"), "x", 1, 0644, &e) == -1, "missing directory fails");
	ok(str_has_prefix(e.msg, "create ") && str_has_suffix(e.msg, ": No such file or directory"), "message: %s", e.msg);
	buf_release(&b);
}

static void test_read_file(void)
{
	struct err e;
	struct buf b = BUF_INIT;
	char *big = malloc(200000);

	fs_mkdir_p(at("r"), 0755, &e);
	put(at("r/ten"), "0123456789");
	put(at("r/empty"), "");
	buf_adds(&b, "pre:");
	ok(fs_read_file(at("r/ten"), &b, 10, &e) == 0, "exactly max bytes is fine");
	is_str(b.data, "pre:0123456789", "appended to what was there");
	buf_reset(&b);
	buf_adds(&b, "pre:");
	ok(fs_read_file(at("r/ten"), &b, 9, &e) == -1, "max + 1 bytes is refused");
	ok(str_has_suffix(e.msg, "/r/ten: larger than 9 bytes"), "message: %s", e.msg);
	is_str(b.data, "pre:", "buffer unchanged after the refusal");
	is_int(b.len, 4, "length too");
	ok(fs_read_file(at("r/empty"), &b, 0, &e) == 0 && b.len == 4, "empty file with max 0");
	ok(fs_read_file(at("r/ten"), &b, 0, &e) == -1, "non-empty file with max 0 refused");
	ok(fs_read_file(at("r/missing"), &b, 10, &e) == -1, "missing file");
	ok(str_has_suffix(e.msg, "/r/missing: No such file or directory") && str_has_prefix(e.msg, "open "),
	   "message: %s", e.msg);
	buf_release(&b);

	/* a buffer with a small cap of its own (smaller than one read chunk) */
	buf_init(&b, 100);
	ok(fs_read_file(at("r/ten"), &b, 1000, &e) == 0, "buffer cap 100, 10-byte file: fine");
	is_str(b.data, "0123456789", "content");
	buf_release(&b);
	buf_init(&b, 10);
	ok(fs_read_file(at("r/ten"), &b, 1000, &e) == 0 && b.len == 10, "buffer cap exactly the file size");
	buf_release(&b);
	buf_init(&b, 9);
	ok(fs_read_file(at("r/ten"), &b, 1000, &e) == -1, "buffer cap one short: refused");
	ok(str_has_suffix(e.msg, "larger than 9 bytes") && b.len == 0, "message: %s", e.msg);
	buf_release(&b);

	for (int i = 0; i < 200000; i++)
		big[i] = (char)('a' + i % 26);
	fs_write_atomic(at("r/big"), big, 200000, 0644, &e);
	buf_init(&b, 0);
	ok(fs_read_file(at("r/big"), &b, 200000, &e) == 0 && b.len == 200000 && memcmp(b.data, big, 200000) == 0,
	   "a file of several read chunks, at exactly max");
	buf_reset(&b);
	ok(fs_read_file(at("r/big"), &b, 199999, &e) == -1 && b.len == 0, "and one byte short of it");
	ok(fs_read_file(at("r"), &b, 100, &e) == -1, "a directory is refused");
	ok(str_has_suffix(e.msg, ": Is a directory"), "message: %s", e.msg);
	buf_release(&b);
	free(big);
}

/* Directory and file outside the tree that links point at. */
static void make_outside(void)
{
	struct err e;

	fs_mkdir_p(at("outside/sub"), 0755, &e);
	put(at("outside/keep"), "keep");
	put(at("outside/sub/keep2"), "keep2");
}

static int outside_intact(void)
{
	return fs_exists(at("outside/keep")) && fs_exists(at("outside/sub/keep2")) && entries(at("outside")) == 2;
}

static void test_remove_all(void)
{
	struct err e;

	make_outside();
	fs_mkdir_p(at("tree/a/b/c"), 0755, &e);
	fs_mkdir_p(at("tree/empty"), 0755, &e);
	put(at("tree/f"), "f");
	put(at("tree/a/b/c/g"), "g");
	symlink(at("outside"), at("tree/a/dirlink"));
	symlink(at("outside/keep"), at("tree/a/b/filelink"));
	symlink("../../outside", at("tree/rellink"));
	symlink(at("nowhere"), at("tree/dangling"));
	mkfifo(at("tree/a/fifo"), 0600);
	ok(fs_remove_all(at("tree"), &e) == 0, "remove a tree with files, dirs, symlinks, a fifo");
	ok(!fs_exists(at("tree")), "tree gone");
	ok(outside_intact(), "directory and files the symlinks pointed at survive");

	fs_mkdir_p(at("tree2"), 0755, &e);
	symlink(at("outside"), at("tree2/link"));
	ok(fs_remove_all(at("tree2/link/"), &e) == 0, "remove \"link/\" (trailing slash)");
	ok(!fs_exists(at("tree2/link")), "the link itself is removed");
	ok(outside_intact(), "its target's contents survive");
	ok(fs_remove_all(at("tree2///"), &e) == 0 && !fs_exists(at("tree2")), "trailing slashes on a directory");

	symlink(at("outside"), at("toplink"));
	ok(fs_remove_all(at("toplink"), &e) == 0 && !fs_exists(at("toplink")) && outside_intact(),
	   "a symlink as the argument: only the link goes");
	put(at("single"), "x");
	ok(fs_remove_all(at("single"), &e) == 0 && !fs_exists(at("single")), "a single file");
	ok(fs_remove_all(at("does/not/exist"), &e) == 0, "missing path is not an error");
	ok(fs_remove_all("", &e) == -1, "empty path refused");
}

/* Each spelling of the root must be refused. Never against the real root:
 * a regression here once deleted /etc. A child chroots into a scratch jail
 * first, so the worst a regression can do is empty the jail. */
static void test_remove_root_refused(void)
{
	static const char *const roots[] = { "/", "/.", "//", "/./", "/sub/..", "/sub/../.", NULL };
	int status, failed = 0;
	pid_t pid;

	if (geteuid() != 0) {
		ok(1, "# SKIP root refusal needs root for chroot");
		return;
	}
	mkdir(at("jail"), 0755);
	mkdir(at("jail/sub"), 0755);
	put(at("jail/canary"), "x");
	pid = fork();
	if (pid < 0) {
		ok(0, "fork for the chroot jail");
		return;
	}
	if (pid == 0) {
		struct err ce;
		if (chroot(at("jail")) < 0 || chdir("/") < 0)
			_exit(100);
		for (int i = 0; roots[i]; i++)
			if (fs_remove_all(roots[i], &ce) != -1 || access("/canary", F_OK) != 0)
				_exit(1 + i);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	if (WIFEXITED(status) && WEXITSTATUS(status) > 0 && WEXITSTATUS(status) < 100)
		failed = WEXITSTATUS(status);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "every spelling of / is refused (in a chroot jail)%s%s",
	   failed ? ": not refused: " : "", failed ? roots[failed - 1] : "");
	ok(fs_exists(at("jail/canary")), "  and the jail's contents survive");
}

/* A chain of depth directories named "d123456789" below dir, built with
 * *at calls because its full path is longer than PATH_MAX. */
static int make_deep(const char *dir, int depth)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	for (int i = 0; fd >= 0 && i < depth; i++) {
		int next;
		if (mkdirat(fd, "d123456789", 0755) < 0)
			break;
		if (i % 50 == 0) {
			int f = openat(fd, "file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
			if (f >= 0)
				close(f);
		}
		if (i == depth / 2)
			symlinkat(at("outside"), fd, "escape");
		next = openat(fd, "d123456789", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = next;
		if (i == depth - 1) {
			close(fd);
			return 0;
		}
	}
	if (fd >= 0)
		close(fd);
	return -1;
}

static void test_remove_deep(void)
{
	struct err e;
	struct rlimit old, low;

	fs_mkdir_p(at("deep"), 0755, &e);
	ok(make_deep(at("deep"), 600) == 0, "built a tree 600 levels deep (path over 6000 bytes)");
	/* far fewer fds than levels: the removal must not hold one per level */
	getrlimit(RLIMIT_NOFILE, &old);
	low = old;
	low.rlim_cur = 64;
	setrlimit(RLIMIT_NOFILE, &low);
	if (!ok(fs_remove_all(at("deep"), &e) == 0, "removed with RLIMIT_NOFILE 64"))
		tap_diag("%s", e.msg);
	setrlimit(RLIMIT_NOFILE, &old);
	ok(!fs_exists(at("deep")), "deep tree gone");
	ok(outside_intact(), "the symlink halfway down did not lead outside");
	if (fs_exists(at("deep")))
		fs_remove_all(at("deep"), &e);
}

static int64_t keep_by_name(const char *name)
{
	if (str_has_prefix(name, "keep"))
		return -1;
	return str_has_prefix(name, "short") ? 10 : 1000;
}

static void test_prune(void)
{
	struct timespec old[2] = { { 0, UTIME_OMIT }, { 100, 0 } };
	struct err e;
	int64_t now = 600;	/* files' mtime 100: 500 s old */

	fs_mkdir_p(at("prune/sub"), 0755, &e);
	put(at("prune/short-a"), "x");
	put(at("prune/long-a"), "x");
	put(at("prune/keep-a"), "x");
	put(at("outside"), "x");
	ok(symlink(at("outside"), at("prune/short-link")) == 0, "a link in the dir");
	utimensat(AT_FDCWD, at("prune/short-a"), old, 0);
	utimensat(AT_FDCWD, at("prune/long-a"), old, 0);
	utimensat(AT_FDCWD, at("prune/keep-a"), old, 0);
	utimensat(AT_FDCWD, at("prune/short-link"), old, AT_SYMLINK_NOFOLLOW);
	utimensat(AT_FDCWD, at("prune/sub"), old, 0);
	is_int(fs_prune_files(at("prune"), now, keep_by_name), 1, "one file is older than its keep");
	ok(!fs_exists(at("prune/short-a")) && fs_exists(at("prune/long-a")) && fs_exists(at("prune/keep-a")),
	   "the short-lived old file went; the long-lived one and the kept one stay");
	ok(fs_exists(at("prune/short-link")) && fs_exists(at("outside")) && fs_exists(at("prune/sub")),
	   "links and directories are never removed");
	is_int(fs_prune_files(at("nope"), now, keep_by_name), 0, "a missing dir removes nothing");
	put(at("prune/short-b"), "x");
	utimensat(AT_FDCWD, at("prune/short-b"), old, 0);
	is_int(fs_prune_under(base, "prune", now, keep_by_name), 1, "fs_prune_under prunes top/sub");
	ok(!fs_exists(at("prune/short-b")), "the old short-lived file under top/sub went");
	{
		char top[FS_PATH_MAX];

		memset(top, 'd', sizeof(top) - 1);
		top[sizeof(top) - 1] = '\0';
		is_int(fs_prune_under(top, "prune", now, keep_by_name), 0, "a top/sub too long removes nothing");
	}
}

static void test_path(void)
{
	char path[FS_PATH_MAX], small[16], long_name[FS_PATH_MAX + 10];
	struct err e;

	err_clear(&e);
	is_int(fs_path(path, sizeof(path), &e, "%s/envs/%s/spec.json", "/data", "e1"), 0, "a path that fits");
	is_str(path, "/data/envs/e1/spec.json", "is built whole");
	is_str(e.msg, "", "and sets no error");
	is_int(fs_path(small, sizeof(small), &e, "%s/%s", "/data/env", "abcde"), 0,
	       "exactly 15 bytes fit in 16");
	is_int(fs_path(small, sizeof(small), &e, "%s/%s", "/data/env", "abcdef"), -1,
	       "16 bytes do not fit in 16");
	is_str(small, "", "a path that did not fit leaves \"\", not a shorter path");
	ok(strstr(e.msg, "path too long (15 bytes at most): /data/env/abcdef") == e.msg,
	   "the error names the limit and the path (%s)", e.msg);
	memset(long_name, 'n', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	is_int(fs_path(path, sizeof(path), &e, "/data/%s", long_name), -1, "a name past FS_PATH_MAX fails");
	ok(strlen(e.msg) < FS_PATH_SHOWN + 64, "its error shows only the path's start (%zu bytes)", strlen(e.msg));
}

int main(void)
{
	umask(022);
	snprintf(base, sizeof(base), "%s", tap_tmpdir());
	test_mkdir_p();
	test_write_atomic();
	test_read_file();
	test_remove_all();
	test_remove_root_refused();
	test_remove_deep();
	test_prune();
	test_path();
	{
		struct err e;
		ok(fs_fsync_dir(base, &e) == 0, "fsync a directory");
		ok(fs_fsync_dir(at("nope"), &e) == -1, "fsync a missing directory fails");
		ok(fs_syncfs_dir(base, &e) == 0, "syncfs a directory's filesystem");
		ok(fs_syncfs_dir(at("nope"), &e) == -1 && strstr(e.msg, "nope"), "syncfs a missing directory fails, naming it");
		ok(fs_exists(base) && !fs_exists(at("nope")), "fs_exists");
	}
	return tap_done();
}
