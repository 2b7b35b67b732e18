/*
 * store-fuzz.h: the scaffolding the store's fuzz targets share (store-rows.c,
 * store-replay.c; a header, since every .c under fuzz/ is a target): one
 * temporary directory per process, made on the first input and removed at
 * exit.
 */
#ifndef DENV_FUZZ_STORE_FUZZ_H
#define DENV_FUZZ_STORE_FUZZ_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"

static char fuzz_dir[256];

static inline void fuzz_cleanup(void)
{
	struct err e;

	if (fuzz_dir[0])
		fs_remove_all(fuzz_dir, &e);
}

/* The process's temporary directory, $TMPDIR/<name>.XXXXXX, made on the first
 * call (which also quiets the store's log); aborts if it cannot be made. */
static inline const char *fuzz_setup(const char *name)
{
	const char *base = getenv("TMPDIR");

	if (fuzz_dir[0])
		return fuzz_dir;
	/* tmpfs when there is one: the targets fsync on every run */
	if (!base || !*base)
		base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/%s.XXXXXX", base, name);
	if (!mkdtemp(fuzz_dir))
		abort();
	atexit(fuzz_cleanup);
	log_set_level(LOG_ERROR);
	return fuzz_dir;
}

#endif
