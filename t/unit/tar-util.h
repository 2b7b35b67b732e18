/*
 * tar-util.h: helpers shared by the tar unit tests (static inline so each
 * test file takes what it uses): run a program, write files, and describe a
 * directory tree as text so two trees compare with one is_str.
 */
#ifndef DENV_T_TAR_UTIL_H
#define DENV_T_TAR_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/sys.h"

/* Run argv (searched in PATH) in cwd (NULL: ours); stdout into out if not
 * NULL, stdin from /dev/null. Returns the exit code, or -1. No shell. */
static inline int run(const char *const *argv, const char *cwd, struct buf *out)
{
	int pfd[2], status;
	pid_t pid;

	if (pipe(pfd) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);
		dup2(nul, 0);
		dup2(pfd[1], 1);
		if (!getenv("TAR_T_VERBOSE"))
			dup2(open("/dev/null", O_WRONLY), 2);
		close(pfd[0]);
		if (cwd && chdir(cwd) < 0)
			_exit(126);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		char tmp[4096];
		ssize_t n = sys_read(pfd[0], tmp, sizeof(tmp));
		if (n <= 0)
			break;
		if (out)
			buf_add(out, tmp, (size_t)n);
	}
	close(pfd[0]);
	while (waitpid(pid, &status, 0) < 0)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static inline int have_prog(const char *name)
{
	const char *argv[] = { name, "--version", NULL };
	return run(argv, NULL, NULL) == 0;
}

static inline void write_file(const char *path, const char *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0 || sys_write_all(fd, data, len) < 0) {
		perror(path);
		exit(2);
	}
	fchmod(fd, mode);
	close(fd);
}

static inline int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One line per entry, sorted: "path type mode size hash mtime target". */
static inline void manifest_at(const char *root, const char *rel, struct buf *out, int with_mtime)
{
	char path[8192], **names = NULL;
	size_t n = 0, cap = 0;
	DIR *d;
	struct dirent *de;

	snprintf(path, sizeof(path), "%s%s%s", root, rel[0] ? "/" : "", rel);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			names = realloc(names, cap * sizeof(*names));
		}
		names[n++] = strdup(de->d_name);
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		char sub[8192], full[8192], target[8192] = "";
		struct stat st;
		uint64_t h = 1469598103934665603ULL;
		snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", names[i]);
		if (snprintf(full, sizeof(full), "%s/%s", root, sub) >= (int)sizeof(full))
			abort();
		lstat(full, &st);
		if (S_ISREG(st.st_mode)) {
			int fd = open(full, O_RDONLY);
			char tmp[4096];
			ssize_t k;
			while ((k = read(fd, tmp, sizeof(tmp))) > 0)
				for (ssize_t j = 0; j < k; j++)
					h = (h ^ (unsigned char)tmp[j]) * 1099511628211ULL;
			close(fd);
		} else if (S_ISLNK(st.st_mode)) {
			ssize_t k = readlink(full, target, sizeof(target) - 1);
			target[k > 0 ? k : 0] = '\0';
		}
		buf_addf(out, "%s %c %04o %lld %016llx %lld %s\n", sub,
			 S_ISREG(st.st_mode) ? 'f' : S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' : '?',
			 S_ISLNK(st.st_mode) ? 0 : (unsigned)(st.st_mode & 07777),
			 S_ISDIR(st.st_mode) ? 0LL : (long long)st.st_size, (unsigned long long)(S_ISREG(st.st_mode) ? h : 0),
			 with_mtime && !S_ISLNK(st.st_mode) ? (long long)st.st_mtime : 0LL, target);
		if (S_ISDIR(st.st_mode))
			manifest_at(root, sub, out, with_mtime);
		free(names[i]);
	}
	free(names);
}

static inline char *manifest(const char *root, int with_mtime)
{
	struct buf b = BUF_INIT;
	manifest_at(root, "", &b, with_mtime);
	return buf_detach(&b, NULL);
}

/* A sample tree: long names (>100, >255), a long symlink target, unicode,
 * empty file, empty dir, nested dirs, odd modes, fixed mtimes. */
static inline void make_sample_tree(const char *root)
{
	char p[8192], longdir[200], longfile[200], target[512];
	struct timespec ts[2] = { { 0, UTIME_OMIT }, { 1600000000, 0 } };

	memset(longdir, 'd', 120);
	longdir[120] = '\0';
	memset(longfile, 'f', 150);
	longfile[150] = '\0';
	mkdir(root, 0755);
	snprintf(p, sizeof(p), "%s/a.txt", root);
	write_file(p, "hello\n", 6, 0644);
	snprintf(p, sizeof(p), "%s/empty", root);
	write_file(p, "", 0, 0600);
	snprintf(p, sizeof(p), "%s/emptydir", root);
	mkdir(p, 0750);
	snprintf(p, sizeof(p), "%s/x", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/x/script.sh", root);
	write_file(p, "#!/bin/sh\necho hi\n", 18, 0755);
	snprintf(p, sizeof(p), "%s/%s", root, longdir);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/%s/%s", root, longdir, longfile);	/* 271 bytes: pax */
	write_file(p, "long\n", 5, 0640);
	snprintf(p, sizeof(p), "%s/%s/short", root, longdir);		/* splits into prefix/name */
	write_file(p, "s\n", 2, 0644);
	snprintf(p, sizeof(p), "%s/\xc3\xbcnic\xc3\xb6" "de-\xe6\x97\xa5\xe6\x9c\xac.txt", root);
	write_file(p, "unicode\n", 8, 0644);
	snprintf(p, sizeof(p), "%s/link", root);
	symlink("a.txt", p);
	snprintf(target, sizeof(target), "%s/%s", longdir, longfile);	/* > 100: pax linkpath */
	snprintf(p, sizeof(p), "%s/longlink", root);
	symlink(target, p);
	snprintf(p, sizeof(p), "%s/x/up", root);
	symlink("../a.txt", p);
	/* a big-ish file that crosses many blocks */
	{
		struct buf big = BUF_INIT;
		for (int i = 0; i < 20000; i++)
			buf_addf(&big, "%d,", i);
		snprintf(p, sizeof(p), "%s/x/big.bin", root);
		write_file(p, big.data, big.len, 0644);
		buf_release(&big);
	}
	/* fixed mtimes, leaves first, so that comparisons include them */
	const char *names[] = { "a.txt", "empty", "emptydir", "x/script.sh", "x/big.bin", "x", NULL };
	for (int i = 0; names[i]; i++) {
		snprintf(p, sizeof(p), "%s/%s", root, names[i]);
		utimensat(AT_FDCWD, p, ts, 0);
	}
}

#endif
