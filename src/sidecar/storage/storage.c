/* storage.c: choosing a backend (storage.h). The host's backend applies to
 * new environments only: an environment keeps the backend it was created
 * with (recorded as "storage" in its spec.json), and a fork takes its
 * snapshot's, since a btrfs snapshot cannot be cloned into a zfs pool. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/fs.h"
#include "base/proc.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"

static bool zpool_present(const char *pool)
{
	const char *argv[] = { "zpool", "list", "-H", pool, NULL };
	struct proc_spec s;
	struct proc_result r;
	struct err e;
	bool ok;

	proc_spec_init(&s, argv);
	s.timeout_ms = STG_ZPOOL_PROBE_TIMEOUT_MS;
	s.out_max = s.err_max = 65536;
	ok = proc_run(&s, NULL, 0, &r, &e) == 0 && r.exit_code == 0 && !r.timed_out;
	proc_result_release(&r);
	return ok;
}

const char *stg_host_backend(const char *zfs_pool, const char *btrfs_root)
{
	if (zfs_pool && *zfs_pool && zpool_present(zfs_pool))
		return "zfs";
	if (btrfs_root && *btrfs_root && stg_btrfs_path(btrfs_root))
		return "btrfs";
	return "dir";
}

int stg_open(struct stg *s, const struct wk *w, const char *name, struct err *e)
{
	memset(s, 0, sizeof(*s));
	s->data = w->data;
	if (str_eq(name, "dir")) {
		s->ops = &stg_dir_ops;
		return 0;
	}
	if (str_eq(name, "btrfs")) {
		if (!w->btrfs_root || !*w->btrfs_root)
			return err_set(e, "storage btrfs: this denvd has no --btrfs-root");
		if (!stg_btrfs_path(w->btrfs_root))
			return err_set(e, "storage btrfs: --btrfs-root %s is not on a btrfs filesystem", w->btrfs_root);
		s->ops = &stg_btrfs_ops;
		s->root = w->btrfs_root;
		return 0;
	}
	if (str_eq(name, "zfs")) {
		if (!w->zfs_pool || !*w->zfs_pool)
			return err_set(e, "storage zfs: this denvd has no --zfs-pool");
		s->ops = &stg_zfs_ops;
		s->root = w->zfs_pool;
		return 0;
	}
	return err_set(e, "unknown storage backend \"%s\"", name ? name : "");
}

int stg_for_env(struct stg *s, const struct wk *w, const char *env, struct err *e)
{
	struct json *j = NULL;
	const char *name;
	int rc = sc_spec_load(w->data, env, &j, e);

	if (rc < 0)
		return -1;
	if (rc == 0)
		return stg_open(s, w, stg_host_backend(w->zfs_pool, w->btrfs_root), e);
	name = json_get_str(j, "storage");
	/* Environments made before backends were recorded are dir. */
	rc = stg_open(s, w, name && *name ? name : "dir", e);
	json_free(j);
	return rc;
}
