/* storage_dir.c: the dir backend. Volumes are <data>/envs/<env>/vol/<name>;
 * a snapshot is a copy into <data>/snaps/<env>/<name>/<volume>/ taken while
 * the containers are frozen, a fork a copy out of it, a rollback a copy over
 * the volume (built beside it, then swapped in by rename). Correct and slow:
 * the freeze lasts as long as the copy. Filling fresh volumes, for every
 * backend, is storage_fill.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"
#include "base/proc.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"
#include "spec/spec.h"
#include "tar/tar.h"

/* ---- the dir backend ---- */

static void dir_snapdir(const struct stg *s, const char *env, const char *name, char *out, size_t n)
{
	snprintf(out, n, "%s/snaps/%s/%s", s->data, env, name);
}

static int dir_env_prepare(const struct stg *s, const char *env, char *voldir, size_t n, struct err *e)
{
	return stg_make_vols(s->data, env, voldir, n, e);
}

static int dir_adopt(const struct stg *s, const char *env, const char *vol, const char *tree, struct err *e)
{
	char dest[STG_PATH_MAX];

	snprintf(dest, sizeof(dest), "%s/envs/%s/vol/%s", s->data, env, vol);
	if (rename(tree, dest) < 0)
		return err_errno(e, "rename into place");
	return 0;
}

static int dir_sync(const struct stg *s, const char *env, struct err *e)
{
	return stg_sync_vols(s->data, env, e);
}

/* Copied into <data>/snaps/<env>/<name>/ while frozen. Leftovers of a crashed
 * attempt are replaced; the snapshot counts only once snapshot.c has written
 * its record beside the copies. */
static int dir_snapshot(const struct stg *s, const char *env, const char *name, const struct json *vols,
			struct json *datasets, struct err *e)
{
	char sd[STG_PATH_MAX], src[STG_PATH_MAX + 200], dst[STG_PATH_MAX + 200];

	dir_snapdir(s, env, name, sd, sizeof(sd));
	if (fs_mkdir_p(sd, 0700, e) < 0)
		return -1;
	for (size_t i = 0; i < json_len(vols); i++) {
		const char *vol = json_at(vols, i)->u.str.s;

		snprintf(src, sizeof(src), "%s/envs/%s/vol/%s", s->data, env, vol);
		snprintf(dst, sizeof(dst), "%s/%s", sd, vol);
		if (fs_remove_all(dst, e) < 0 || stg_copy_tree(src, dst, e) < 0)
			return err_prefix(e, "volume \"%s\"", vol);
		json_array_push(datasets, json_new_str(dst));
	}
	return 0;
}

/* A copy built beside dest and renamed over it: a crash leaves the old
 * volume or the new one, never half of each. */
static int copy_into_place(const char *src, const char *dest, struct err *e)
{
	char tmp[STG_PATH_MAX + 32], old[STG_PATH_MAX + 32], how[160];
	const char *slash;
	struct stg_copy_stats st;
	int64_t t0 = ev_mono_ms();

	if (!(slash = strrchr(dest, '/')))
		return err_set(e, "bad volume path %s", dest);
	snprintf(tmp, sizeof(tmp), "%.*s/.copy-%s", (int)(slash - dest), dest, slash + 1);
	snprintf(old, sizeof(old), "%.*s/.old-%s", (int)(slash - dest), dest, slash + 1);
	if (fs_remove_all(tmp, e) < 0 || fs_remove_all(old, e) < 0 || stg_copy_tree_stats(src, tmp, &st, e) < 0)
		return -1;
	/* Which way the data went (a reflink shares extents; copy_file_range
	 * copies in the kernel; read/write is the slow way): the bench's note. */
	stg_copy_stats_text(&st, how, sizeof(how));
	wk_progress("copied %s in %lld ms", how, (long long)(ev_mono_ms() - t0));
	if (fs_exists(dest) && rename(dest, old) < 0)
		return err_errno(e, "rename %s", dest);
	if (rename(tmp, dest) < 0)
		return err_errno(e, "rename into %s", dest);
	return fs_remove_all(old, e);
}

static int dir_clone(const struct stg *s, const char *from_env, const char *name, const char *env,
		     const char *vol, struct err *e)
{
	char src[STG_PATH_MAX + 200], dest[STG_PATH_MAX + 200];

	snprintf(src, sizeof(src), "%s/snaps/%s/%s/%s", s->data, from_env, name, vol);
	snprintf(dest, sizeof(dest), "%s/envs/%s/vol/%s", s->data, env, vol);
	return copy_into_place(src, dest, e);
}

static int dir_restore(const struct stg *s, const char *from_env, const char *name, const char *env,
		       const char *vol, struct err *e)
{
	return dir_clone(s, from_env, name, env, vol, e);
}

static int dir_drop_snapshot(const struct stg *s, const char *env, const char *name, struct err *e)
{
	char sd[STG_PATH_MAX];

	dir_snapdir(s, env, name, sd, sizeof(sd));
	return fs_remove_all(sd, e);
}

static int dir_drop_env(const struct stg *s, const char *env, struct err *e)
{
	char path[STG_PATH_MAX];

	snprintf(path, sizeof(path), "%s/envs/%s/vol", s->data, env);
	if (disk_release(s->data, env, e) < 0)
		return -1;
	return fs_remove_all(path, e) < 0 ? -1 : 0;
}

const struct stg_ops stg_dir_ops = {
	"dir", dir_env_prepare, dir_adopt, dir_sync, dir_snapshot, dir_clone, dir_restore,
	dir_drop_snapshot, dir_drop_env, stg_usage_walk,
};
