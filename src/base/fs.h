/*
 * fs.h: file-system helpers with the safety rules the sidecar and store need.
 */
#ifndef DENV_FS_H
#define DENV_FS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/buf.h"
#include "base/err.h"

/* Bytes read per read(2) in fs_read_file. */
#define FS_READ_CHUNK 65536
/* fs_remove_all: deepest tree it removes, and how many levels keep their
 * directory fd open (deeper ones are reopened through "..", so a deep tree
 * never runs into RLIMIT_NOFILE). */
#define FS_REMOVE_DEPTH_MAX 4096
#define FS_REMOVE_FDS 32

/* Room for any path the programs build, NUL included (Linux's PATH_MAX). */
#define FS_PATH_MAX 4096
/* How much of a path that did not fit fs_path's error shows. */
#define FS_PATH_SHOWN 80

/* Build a path from a printf format into dst (of size n, usually
 * FS_PATH_MAX). A result that does not fit is an error that names the
 * start of the path, never a shorter path that names another file; dst is
 * then "". 0 / -1. */
int fs_path(char *dst, size_t n, struct err *e, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* mkdir -p with mode for the directories it creates. Existing dirs are fine. */
int fs_mkdir_p(const char *path, mode_t mode, struct err *e);

/* Write a whole file atomically: temp file in the same directory, fsync,
 * rename(2) over path, fsync the directory. Readers see old or new, never half. */
int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode, struct err *e);

/* Read a whole file into out (appending). Fails if it is larger than max
 * bytes, or than the room left under out's own cap; out is then unchanged. */
int fs_read_file(const char *path, struct buf *out, size_t max, struct err *e);

/* rm -rf that never follows a symlink: links are removed, not their targets
 * (also for "link/": trailing slashes are ignored). A missing path is not an
 * error; "/" is refused. */
int fs_remove_all(const char *path, struct err *e);

/* fsync a directory, so that entries created or renamed in it are durable. */
int fs_fsync_dir(const char *path, struct err *e);
/* syncfs the filesystem that holds the directory path. */
int fs_syncfs_dir(const char *path, struct err *e);

/* 1 if path exists (lstat), 0 if not. */
int fs_exists(const char *path);

/* Unlink the regular files directly in dir (never through a link, never a
 * subdirectory) last modified more than keep_s(name) seconds before now_s;
 * keep_s returns a negative number to keep a file. How many went; a
 * missing or unreadable dir removes none. */
int fs_prune_files(const char *dir, int64_t now_s, int64_t (*keep_s)(const char *name));
/* The same in the directory top/sub (a path too long to exist removes none). */
int fs_prune_under(const char *top, const char *sub, int64_t now_s, int64_t (*keep_s)(const char *name));

#endif
