/* storage_vols.c: what every backend shares about an environment's volume
 * directories (<top>/envs/<env>/vol): making them, syncing them, and
 * measuring a volume for env.metrics. A leaf: it calls no backend, so each
 * backend (and disk.c under them) may call it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "base/fs.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"

/* ---- the volume directories ---- */

int stg_make_vols(const char *top, const char *env, char *voldir, size_t n, struct err *e)
{
	if (fs_path(voldir, n, e, "%s/envs/%s/vol", top, env) < 0)
		return -1;
	return fs_mkdir_p(voldir, 0755, e);
}

int stg_sync_vols(const char *top, const char *env, struct err *e)
{
	char path[STG_PATH_MAX];

	if (fs_path(path, sizeof(path), e, "%s/envs/%s/vol", top, env) < 0)
		return -1;
	return fs_syncfs_dir(path, e);
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
