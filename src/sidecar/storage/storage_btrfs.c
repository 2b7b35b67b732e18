/* storage_btrfs.c: the btrfs backend (--btrfs-root DIR on a btrfs
 * filesystem), our answer for hosts without ZFS.
 *   <root>/envs/<env>/vol/<volume>     a subvolume per volume (bind-mounted)
 *   <root>/snaps/<env>/<name>/<volume> a read-only snapshot of it
 * A snapshot is one read-only subvolume snapshot per volume, all taken while
 * the containers are paused; a fork is a writable snapshot of those
 * (snapshot of a snapshot), a rollback a writable snapshot swapped in for the
 * volume. Each is a metadata operation, milliseconds whatever the data size.
 * btrfs extents are reference-counted: deleting a snapshot never breaks a
 * fork made from it (no origin dependency as with zfs clones). The btrfs CLI
 * is run with argument vectors; dirty data is flushed (syncfs) before the
 * freeze so the snapshots inside it only commit what the freeze adds. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "base/crypto.h"
#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"

#define BTRFS_MAGIC 0x9123683EL
#define BTRFS_SUBVOL_INO 256	/* BTRFS_FIRST_FREE_OBJECTID: the root inode of every subvolume */

bool stg_btrfs_path(const char *path)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && (long)sf.f_type == BTRFS_MAGIC;
}

static bool is_subvol(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_ino == BTRFS_SUBVOL_INO &&
	       stg_btrfs_path(path);
}

static int subvol_delete(const char *path, struct err *e)
{
	const char *argv[] = { "btrfs", "subvolume", "delete", path, NULL };

	return stg_run(argv, NULL, e);
}

/* Delete the subvolumes at or below path (STG_BTRFS_SCAN_DEPTH levels). */
static int delete_subvols(const char *path, int depth, struct err *e)
{
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (is_subvol(path))
		return subvol_delete(path, e);
	if (depth >= STG_BTRFS_SCAN_DEPTH || !(d = opendir(path)))
		return 0;
	while (rc == 0 && (de = readdir(d))) {
		char sub[STG_PATH_MAX];

		if (str_eq(de->d_name, ".") || str_eq(de->d_name, "..") || de->d_type != DT_DIR)
			continue;
		if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= sizeof(sub))
			continue;
		rc = delete_subvols(sub, depth + 1, e);
	}
	closedir(d);
	return rc;
}

int stg_remove_tree(const char *path, struct err *e)
{
	if (!fs_exists(path))
		return 0;
	if (stg_btrfs_path(path) && delete_subvols(path, 0, e) < 0)
		return -1;
	return fs_remove_all(path, e);
}

/* "1/<n>": n from the env's name, 44 bits (qgroup ids are 48). */
static void bt_qgroup(const char *env, char *out, size_t n)
{
	char hex[65];
	uint64_t id = 0;

	if (sha256_hex(env, strlen(env), hex) < 0)
		hex[0] = '\0';
	for (size_t i = 0; i < 11 && hex[i]; i++)
		id = id * 16 + (uint64_t)(hex[i] <= '9' ? hex[i] - '0' : hex[i] - 'a' + 10);
	snprintf(out, n, "1/%llu", (unsigned long long)(id ? id : 1));
}

int stg_btrfs_cap(const struct stg *s, const char *env, int64_t mb, struct err *e)
{
	char group[40], size[32];
	const char *enable[] = { "btrfs", "quota", "enable", s->root, NULL };
	const char *create[] = { "btrfs", "qgroup", "create", group, s->root, NULL };
	const char *limit[] = { "btrfs", "qgroup", "limit", size, group, s->root, NULL };
	struct err e2;

	bt_qgroup(env, group, sizeof(group));
	snprintf(size, sizeof(size), "%lldM", (long long)mb);
	if (stg_run(enable, NULL, e) < 0)
		return err_prefix(e, "disk cap: enabling btrfs quotas");
	(void)stg_run(create, NULL, &e2);	/* there already: a rollback of the env */
	return stg_run(limit, NULL, e) < 0 ? err_prefix(e, "disk cap: qgroup %s", group) : 0;
}

/* A new subvolume of a capped env joins the env's qgroup. */
static int bt_assign(const struct stg *s, const char *env, const char *path, struct err *e)
{
	char group[40], src[40];
	struct buf out = BUF_INIT;
	const char *rootid[] = { "btrfs", "inspect-internal", "rootid", path, NULL };
	const char *assign[] = { "btrfs", "qgroup", "assign", src, group, s->root, NULL };
	int rc;

	if (s->disk_mb <= 0)
		return 0;
	if (stg_run(rootid, &out, e) < 0) {
		buf_release(&out);
		return err_prefix(e, "disk cap");
	}
	snprintf(src, sizeof(src), "0/%s", str_trim(out.data ? out.data : ""));
	buf_release(&out);
	bt_qgroup(env, group, sizeof(group));
	rc = stg_run(assign, NULL, e);
	return rc < 0 ? err_prefix(e, "disk cap: %s into %s", path, group) : 0;
}

static int bt_env_prepare(const struct stg *s, const char *env, char *voldir, size_t n, struct err *e)
{
	return stg_make_vols(s->root, env, voldir, n, e);
}

/* A fresh subvolume filled with a copy of tree (a rename cannot move data
 * into a subvolume). Only image content goes this way, once per volume. */
static int bt_adopt(const struct stg *s, const char *env, const char *vol, const char *tree, struct err *e)
{
	char dest[STG_PATH_MAX];
	const char *argv[] = { "btrfs", "subvolume", "create", dest, NULL };

	snprintf(dest, sizeof(dest), "%s/envs/%s/vol/%s", s->root, env, vol);
	if (stg_run(argv, NULL, e) < 0 || bt_assign(s, env, dest, e) < 0)
		return -1;
	if (stg_copy_tree(tree, dest, e) < 0) {
		struct err e2;

		subvol_delete(dest, &e2);
		return -1;
	}
	return fs_remove_all(tree, e);
}

static int bt_sync(const struct stg *s, const char *env, struct err *e)
{
	return stg_sync_vols(s->root, env, e);
}

static int bt_snapshot(const struct stg *s, const char *env, const char *name, const struct json *vols,
		       struct json *datasets, struct err *e)
{
	char sd[STG_PATH_MAX], src[STG_PATH_MAX + 200], dst[STG_PATH_MAX + 200];
	const char *argv[] = { "btrfs", "subvolume", "snapshot", "-r", src, dst, NULL };

	snprintf(sd, sizeof(sd), "%s/snaps/%s/%s", s->root, env, name);
	if (stg_remove_tree(sd, e) < 0 || fs_mkdir_p(sd, 0700, e) < 0)	/* a crashed attempt's leftovers */
		return -1;
	for (size_t i = 0; i < json_len(vols); i++) {
		const char *vol = json_at(vols, i)->u.str.s;

		snprintf(src, sizeof(src), "%s/envs/%s/vol/%s", s->root, env, vol);
		snprintf(dst, sizeof(dst), "%s/%s", sd, vol);
		if (!is_subvol(src))
			return err_set(e, "volume \"%s\": %s is not a btrfs subvolume", vol, src);
		if (stg_run(argv, NULL, e) < 0)
			return err_prefix(e, "volume \"%s\"", vol);
		json_array_push(datasets, json_new_str(dst));
	}
	return 0;
}

static int bt_clone(const struct stg *s, const char *from_env, const char *name, const char *env,
		    const char *vol, struct err *e)
{
	char src[STG_PATH_MAX], dst[STG_PATH_MAX];
	const char *argv[] = { "btrfs", "subvolume", "snapshot", src, dst, NULL };

	snprintf(src, sizeof(src), "%s/snaps/%s/%s/%s", s->root, from_env, name, vol);
	snprintf(dst, sizeof(dst), "%s/envs/%s/vol/%s", s->root, env, vol);
	if (!is_subvol(src))
		return err_set(e, "snapshot %s has no volume \"%s\" (%s)", name, vol, src);
	if (stg_remove_tree(dst, e) < 0 || stg_run(argv, NULL, e) < 0)
		return -1;
	return bt_assign(s, env, dst, e);
}

/* The new state is snapshotted beside the volume, then swapped in: a
 * crash leaves the old volume or the new one. */
static int bt_restore(const struct stg *s, const char *from_env, const char *name, const char *env,
		      const char *vol, struct err *e)
{
	char src[STG_PATH_MAX], tmp[STG_PATH_MAX], dst[STG_PATH_MAX], old[STG_PATH_MAX];
	const char *argv[] = { "btrfs", "subvolume", "snapshot", src, tmp, NULL };

	snprintf(src, sizeof(src), "%s/snaps/%s/%s/%s", s->root, from_env, name, vol);
	snprintf(tmp, sizeof(tmp), "%s/envs/%s/vol/.restore-%s", s->root, env, vol);
	snprintf(old, sizeof(old), "%s/envs/%s/vol/.old-%s", s->root, env, vol);
	snprintf(dst, sizeof(dst), "%s/envs/%s/vol/%s", s->root, env, vol);
	if (!is_subvol(src))
		return err_set(e, "snapshot %s has no volume \"%s\" (%s)", name, vol, src);
	if (stg_remove_tree(tmp, e) < 0 || stg_remove_tree(old, e) < 0 || stg_run(argv, NULL, e) < 0 ||
	    bt_assign(s, env, tmp, e) < 0)
		return -1;
	if (fs_exists(dst) && rename(dst, old) < 0)
		return err_errno(e, "rename %s", dst);
	if (rename(tmp, dst) < 0)
		return err_errno(e, "rename into %s", dst);
	return stg_remove_tree(old, e);
}

static int bt_drop_snapshot(const struct stg *s, const char *env, const char *name, struct err *e)
{
	char sd[STG_PATH_MAX];

	snprintf(sd, sizeof(sd), "%s/snaps/%s/%s", s->root, env, name);
	return stg_remove_tree(sd, e);
}

static int bt_drop_env(const struct stg *s, const char *env, struct err *e)
{
	char path[STG_PATH_MAX];

	snprintf(path, sizeof(path), "%s/envs/%s", s->root, env);
	return stg_remove_tree(path, e) < 0 ? -1 : 0;
}

const struct stg_ops stg_btrfs_ops = {
	"btrfs", bt_env_prepare, bt_adopt, bt_sync, bt_snapshot, bt_clone, bt_restore,
	bt_drop_snapshot, bt_drop_env, stg_usage_walk,
};
