/* pgfork.c: a forked (or restored) PostgreSQL starts faster. Its volume is
 * a copy of a live data directory taken after a CHECKPOINT (snapshot.c), so
 * it starts in crash recovery with almost nothing to replay; but crash
 * recovery begins by fsyncing every file of the data directory
 * (recovery_init_sync_method = fsync, the default), and on btrfs every
 * fsync is a log-tree commit: 5.6 s for the quickstart's ~1000 files on the
 * 2-core VM, against 0.00 s of replay (notes of bench/fork-pg.sh). PostgreSQL
 * 14 and later can make the same promise with one syncfs(2) of the
 * filesystem instead (recovery_init_sync_method = syncfs, Linux only): the
 * start-up went from 5.7 s to 0.3 s. So a service started from a snapshot
 * whose command is PostgreSQL's own ("postgres" and its options, which the
 * official image's entrypoint and denv-test/debian's pass on) and whose
 * data directory (PGDATA, by default /var/lib/postgresql/data) lies in one
 * of its volumes with a PG_VERSION of 14 or later gets
 * "-c recovery_init_sync_method=syncfs" added to its command line. The Spec
 * and spec.json keep the command as written; the setting only matters at a
 * crash-recovery start, and a server that is not PostgreSQL >= 14 is left
 * alone (an unknown -c would stop it from starting). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"

#define PGF_DEFAULT_PGDATA "/var/lib/postgresql/data"
#define PGF_MIN_MAJOR 14		/* the first with recovery_init_sync_method */

/* The host path of PG_VERSION in the service's PGDATA when one of its
 * volume mounts holds it: 0 and path, -1 when none does. */
static int version_path(const struct json *svc, const char *voldir, char *path, size_t n)
{
	const char *pgdata = json_get_str(json_get(svc, "env"), "PGDATA");
	const struct json *mounts = json_get(svc, "volumes");

	if (!pgdata || !*pgdata)
		pgdata = PGF_DEFAULT_PGDATA;
	for (size_t i = 0; i < json_len(mounts); i++) {
		const char *m = json_at(mounts, i)->u.str.s, *colon = strchr(m, ':'), *slash = strchr(m, '/');
		char target[PATH_MAX];
		size_t tl;

		if (!colon || colon == m || (slash && slash < colon))	/* a named volume only */
			continue;
		str_copy(target, sizeof(target), colon + 1);
		if (strchr(target, ':'))
			*strchr(target, ':') = '\0';	/* :ro and the like */
		tl = strlen(target);
		while (tl > 1 && target[tl - 1] == '/')
			target[--tl] = '\0';
		if (strncmp(pgdata, target, tl) != 0 || (pgdata[tl] != '\0' && pgdata[tl] != '/'))
			continue;
		if (snprintf(path, n, "%s/%.*s%s/PG_VERSION", voldir, (int)(colon - m), m, pgdata + tl) >= (int)n)
			return -1;
		return 0;
	}
	return -1;
}

int pgf_major(const char *text)
{
	int major = 0;
	const char *p = text;

	while (*p >= '0' && *p <= '9' && major < 1000)
		major = major * 10 + (*p++ - '0');
	return p == text || (*p != '\0' && *p != '\n' && *p != '.') ? -1 : major;
}

bool pgf_is_postgres(const struct json *svc)
{
	const struct json *cmd = json_get(svc, "command");
	const char *first = json_len(cmd) ? json_at(cmd, 0)->u.str.s : "", *slash = strrchr(first, '/');

	return str_eq(slash ? slash + 1 : first, "postgres");
}

void pgf_prepare(struct json *order, const char *voldir, struct json *res)
{
	struct json *done = NULL;

	for (size_t i = 0; i < json_len(order); i++) {
		struct json *svc = json_at(order, i);
		char path[PATH_MAX + 32];
		struct buf v = BUF_INIT;
		struct err e;
		int major;

		if (!pgf_is_postgres(svc) || version_path(svc, voldir, path, sizeof(path)) < 0)
			continue;
		major = fs_read_file(path, &v, SC_PGFORK_VERSION_MAX, &e) == 0 ? pgf_major(v.data) : -1;
		buf_release(&v);
		if (major < PGF_MIN_MAJOR)
			continue;
		json_array_push(json_get(svc, "command"), json_new_str("-c"));
		json_array_push(json_get(svc, "command"), json_new_str(PGF_SYNC_ARG));
		wk_progress("%s: PostgreSQL %d starts its recovery with one syncfs, not an fsync per file",
			    json_get_str(svc, "name"), major);
		if (!done)
			done = json_new_array();
		json_array_push(done, json_new_str(json_get_str(svc, "name")));
	}
	if (done)
		json_object_set(res, "pg_syncfs", done);
}
