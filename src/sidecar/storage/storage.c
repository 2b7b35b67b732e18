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

/* ---- usage (env.metrics) ---- */

struct usage_walk {
	int64_t bytes;
	size_t entries;
	dev_t dev;
};

static int tree_bytes_at(int fd0, int depth, struct usage_walk *w, struct err *e)
{
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (depth > STG_USAGE_DEPTH_MAX) {
		sys_close(fd0);
		return err_set(e, "deeper than %d directories", STG_USAGE_DEPTH_MAX);
	}
	if (!(d = fdopendir(fd0))) {
		sys_close(fd0);
		return err_errno(e, "fdopendir");
	}
	while (rc == 0 && (de = readdir(d))) {
		struct stat st;
		int fd;

		if (str_eq(de->d_name, ".") || str_eq(de->d_name, ".."))
			continue;
		if (++w->entries > STG_USAGE_ENTRIES_MAX) {
			rc = err_set(e, "more than %d entries", STG_USAGE_ENTRIES_MAX);
			break;
		}
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;	/* removed while we walk: not counted */
		w->bytes += (int64_t)st.st_blocks * 512;
		if (!S_ISDIR(st.st_mode) || st.st_dev != w->dev)
			continue;
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			rc = tree_bytes_at(fd, depth + 1, w, e);
	}
	closedir(d);
	return rc;
}

int stg_tree_bytes(const char *path, int64_t *bytes, struct err *e)
{
	struct usage_walk w = { 0, 0, 0 };
	struct stat st;
	int fd;

	*bytes = 0;
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return errno == ENOENT ? 0 : err_errno(e, "open %s", path);
	if (fstat(fd, &st) < 0) {
		sys_close(fd);
		return err_errno(e, "stat %s", path);
	}
	w.dev = st.st_dev;
	w.bytes = (int64_t)st.st_blocks * 512;
	if (tree_bytes_at(fd, 0, &w, e) < 0)
		return err_prefix(e, "usage of %s", path);
	*bytes = w.bytes;
	return 0;
}

int stg_usage_walk(const struct stg *s, const char *env, const char *vol, int64_t *bytes, struct err *e)
{
	char voldir[STG_PATH_MAX], path[STG_PATH_MAX];

	if (s->ops->env_prepare(s, env, voldir, sizeof(voldir), e) < 0)
		return -1;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", voldir, vol) >= sizeof(path))
		return err_set(e, "volume path too long");
	return stg_tree_bytes(path, bytes, e);
}
