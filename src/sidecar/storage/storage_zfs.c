/* storage_zfs.c: the zfs backend (--zfs-pool POOL; used only when
 * `zpool list POOL` succeeds).
 *   POOL/envs/<env>/vol            parent of the volumes; its mountpoint is
 *                                  the env's volume dir (inherited by each)
 *   POOL/envs/<env>/vol/<volume>   a dataset per volume (bind-mounted)
 *   POOL/envs/<env>/old/<volume>.<ms>  a volume replaced by a rollback to an
 *                                  older snapshot, kept for its snapshots
 * A snapshot is one `zfs snapshot -r POOL/envs/<env>/vol@<name>`: atomic
 * across every volume. A fork is `zfs clone` of each volume's snapshot. A
 * rollback to the newest snapshot of the volume is `zfs rollback`; to an
 * older one (or to the snapshot a fork came from) the snapshot is cloned
 * beside the volume and swapped in by rename, the old dataset moving to
 * old/ with its snapshots, so no version is lost. Snapshots are found by
 * name (version ids are unique) wherever the rename put them.
 * A clone depends on its origin snapshot: a destroy never uses -R on a tree
 * that has clones outside it; it keeps the tree and says so (1), and the
 * snapshot layer reclaims it when the last fork is gone. */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"

/* zfs with the NULL-terminated arguments in ap. */
static int zfs_va(struct buf *out, struct err *e, va_list ap)
{
	const char *argv[STG_ZFS_ARGS_MAX + 2] = { "zfs" };
	size_t n = 1;

	while (n < STG_ZFS_ARGS_MAX && (argv[n] = va_arg(ap, const char *)))
		n++;
	argv[n] = NULL;
	return stg_run(argv, out, e);
}

/* zfs with the NULL-terminated arguments after e. */
static int zfs_v(struct buf *out, struct err *e, ...)
{
	va_list ap;
	int rc;

	va_start(ap, e);
	rc = zfs_va(out, e, ap);
	va_end(ap);
	return rc;
}
#define Z(out, e, ...) zfs_v(out, e, __VA_ARGS__, (const char *)NULL)

/* The output of `zfs list -H <the NULL-terminated arguments after e>` split
 * at any of seps (str_list_free it); *cnt the number of fields. NULL on error. */
static char **zfs_list_v(const char *seps, size_t *cnt, struct err *e, ...)
{
	struct buf b = BUF_INIT;
	char **fields = NULL;
	va_list ap;
	int rc;

	buf_init(&b, STG_ZFS_LIST_MAX);
	va_start(ap, e);
	rc = zfs_va(&b, e, ap);
	va_end(ap);
	if (rc == 0)
		fields = str_split(b.data, seps, cnt);
	buf_release(&b);
	return fields;
}
#define ZLIST(seps, cnt, e, ...) zfs_list_v(seps, cnt, e, "list", "-H", __VA_ARGS__, (const char *)NULL)

static void ds_env(const struct stg *s, const char *env, const char *sub, char *out, size_t n)
{
	snprintf(out, n, "%s/envs/%s%s%s", s->root, env, sub ? "/" : "", sub ? sub : "");
}

static bool ds_exists(const char *ds)
{
	struct err e;

	return Z(NULL, &e, "list", "-H", "-o", "name", ds) == 0;
}

static int mountpoint(const char *ds, char *out, size_t n, struct err *e)
{
	struct buf b = BUF_INIT;

	if (Z(&b, e, "get", "-H", "-o", "value", "mountpoint", ds) < 0) {
		buf_release(&b);
		return -1;
	}
	dk_first_line(b.data, out, n);
	buf_release(&b);
	if (out[0] != '/')
		return err_set(e, "zfs: %s is not mounted (mountpoint %s)", ds, out);
	return 0;
}

static int z_env_prepare(const struct stg *s, const char *env, char *voldir, size_t n, struct err *e)
{
	char ds[STG_ZFS_NAME_MAX];

	ds_env(s, env, "vol", ds, sizeof(ds));
	if (!ds_exists(ds) && Z(NULL, e, "create", "-p", ds) < 0)
		return -1;
	return mountpoint(ds, voldir, n, e);
}

static int z_adopt(const struct stg *s, const char *env, const char *vol, const char *tree, struct err *e)
{
	char ds[STG_ZFS_NAME_MAX], mp[STG_PATH_MAX];

	snprintf(ds, sizeof(ds), "%s/envs/%s/vol/%s", s->root, env, vol);
	if (Z(NULL, e, "create", ds) < 0 || mountpoint(ds, mp, sizeof(mp), e) < 0)
		return -1;
	if (stg_copy_tree(tree, mp, e) < 0)
		return -1;
	return fs_remove_all(tree, e);
}

/* syncfs on each volume's mount (each dataset is its own filesystem). */
static int z_sync(const struct stg *s, const char *env, struct err *e)
{
	char ds[STG_ZFS_NAME_MAX];
	char **lines;
	size_t n = 0;

	ds_env(s, env, "vol", ds, sizeof(ds));
	if (!(lines = ZLIST("\n", &n, e, "-o", "mountpoint", "-r", ds)))
		return -1;
	for (size_t i = 0; i < n; i++) {
		int fd = lines[i][0] == '/' ? open(lines[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;

		if (fd >= 0) {
			(void)syncfs(fd);
			sys_close(fd);
		}
	}
	str_list_free(lines);
	return 0;
}

static int z_snapshot(const struct stg *s, const char *env, const char *name, const struct json *vols,
		      struct json *datasets, struct err *e)
{
	char ds[STG_ZFS_NAME_MAX], snap[STG_ZFS_NAME_MAX + 200];
	struct err e2;

	ds_env(s, env, "vol", ds, sizeof(ds));
	snprintf(snap, sizeof(snap), "%s@%s", ds, name);
	Z(NULL, &e2, "destroy", "-r", snap);	/* a crashed attempt's leftover; usually "could not find" */
	if (Z(NULL, e, "snapshot", "-r", snap) < 0)
		return -1;
	for (size_t i = 0; i < json_len(vols); i++) {
		snprintf(snap, sizeof(snap), "%s/%s@%s", ds, json_at(vols, i)->u.str.s, name);
		json_array_push(datasets, json_new_str(snap));
	}
	return 0;
}

/* The snapshot name of volume vol of env: vol/<vol>@name, or where a
 * rollback moved it (old/<vol>.<ms>@name). */
static int find_snap(const struct stg *s, const char *env, const char *vol, const char *name, char *out,
		     size_t n, struct err *e)
{
	char top[STG_ZFS_NAME_MAX], want[STG_ZFS_NAME_MAX + 200], oldp[STG_ZFS_NAME_MAX + 200], at[200];
	char **lines;
	size_t cnt = 0;
	int rc = -1;

	ds_env(s, env, NULL, top, sizeof(top));
	snprintf(want, sizeof(want), "%s/vol/%s@%s", top, vol, name);
	snprintf(oldp, sizeof(oldp), "%s/old/%s.", top, vol);
	snprintf(at, sizeof(at), "@%s", name);
	if (!(lines = ZLIST("\n", &cnt, e, "-t", "snapshot", "-o", "name", "-r", top)))
		return -1;
	for (size_t i = 0; i < cnt && rc < 0; i++)
		if (str_eq(lines[i], want))
			rc = str_copy(out, n, lines[i]);
	for (size_t i = 0; i < cnt && rc < 0; i++)
		if (str_has_prefix(lines[i], oldp) && str_has_suffix(lines[i], at))
			rc = str_copy(out, n, lines[i]);
	str_list_free(lines);
	if (rc < 0)
		err_set(e, "zfs: no snapshot %s of volume \"%s\" under %s", name, vol, top);
	return rc;
}

static int z_clone(const struct stg *s, const char *from_env, const char *name, const char *env,
		   const char *vol, struct err *e)
{
	char snap[STG_ZFS_NAME_MAX + 200], ds[STG_ZFS_NAME_MAX];

	if (find_snap(s, from_env, vol, name, snap, sizeof(snap), e) < 0)
		return -1;
	snprintf(ds, sizeof(ds), "%s/envs/%s/vol/%s", s->root, env, vol);
	if (ds_exists(ds) && Z(NULL, e, "destroy", "-r", ds) < 0)	/* an earlier attempt of this fork */
		return -1;
	return Z(NULL, e, "clone", snap, ds);
}

/* The newest snapshot of ds (its short name after '@'), "" if none. */
static int newest(const char *ds, char *out, size_t n, struct err *e)
{
	char **lines;
	size_t cnt = 0;
	const char *at;

	out[0] = '\0';
	if (!(lines = ZLIST("\n", &cnt, e, "-t", "snapshot", "-o", "name", "-s", "creation", "-d", "1", ds)))
		return -1;
	if (cnt && (at = strchr(lines[cnt - 1], '@')))
		str_copy(out, n, at + 1);
	str_list_free(lines);
	return 0;
}

static int z_restore(const struct stg *s, const char *from_env, const char *name, const char *env,
		     const char *vol, struct err *e)
{
	char ds[STG_ZFS_NAME_MAX], snap[STG_ZFS_NAME_MAX + 200], last[256], tmp[STG_ZFS_NAME_MAX + 16];
	char oldp[STG_ZFS_NAME_MAX], old[STG_ZFS_NAME_MAX + 64], own[STG_ZFS_NAME_MAX + 200];

	snprintf(ds, sizeof(ds), "%s/envs/%s/vol/%s", s->root, env, vol);
	snprintf(own, sizeof(own), "%s@%s", ds, name);
	if (find_snap(s, from_env, vol, name, snap, sizeof(snap), e) < 0)
		return -1;
	if (str_eq(snap, own) && newest(ds, last, sizeof(last), e) == 0 && str_eq(last, name))
		return Z(NULL, e, "rollback", snap);
	/* Older, or another env's (a fork returning to its origin): clone and swap. */
	snprintf(tmp, sizeof(tmp), "%s/envs/%s/vol/.new-%s", s->root, env, vol);
	ds_env(s, env, "old", oldp, sizeof(oldp));
	snprintf(old, sizeof(old), "%s/%s.%lld", oldp, vol, (long long)clock_now_ms());
	if (ds_exists(tmp) && Z(NULL, e, "destroy", "-r", tmp) < 0)
		return -1;
	if (Z(NULL, e, "clone", snap, tmp) < 0)
		return -1;
	if (!ds_exists(oldp) && Z(NULL, e, "create", "-p", "-o", "mountpoint=none", oldp) < 0)
		return -1;
	if (ds_exists(ds) && Z(NULL, e, "rename", ds, old) < 0)
		return -1;
	return Z(NULL, e, "rename", tmp, ds);
}

static int z_drop_snapshot(const struct stg *s, const char *env, const char *name, struct err *e)
{
	char top[STG_ZFS_NAME_MAX], at[200];
	char **lines;
	size_t cnt = 0;
	int rc = 0;

	ds_env(s, env, NULL, top, sizeof(top));
	if (!ds_exists(top))
		return 0;
	snprintf(at, sizeof(at), "@%s", name);
	if (!(lines = ZLIST("\n", &cnt, e, "-t", "snapshot", "-o", "name", "-r", top)))
		return -1;
	/* Children first: the parent vol@name has no data, but keep the order of -r. */
	for (size_t i = cnt; i-- > 0 && rc == 0;)
		if (str_has_suffix(lines[i], at))
			rc = Z(NULL, e, "destroy", lines[i]);
	str_list_free(lines);
	return rc;
}

/* 1 (kept) when a snapshot under the env has a clone outside it. */
static int z_drop_env(const struct stg *s, const char *env, struct err *e)
{
	char top[STG_ZFS_NAME_MAX], inside[STG_ZFS_NAME_MAX + 2];
	char **lines;
	size_t cnt = 0;
	bool outside = false;

	ds_env(s, env, NULL, top, sizeof(top));
	if (!ds_exists(top))
		return 0;
	snprintf(inside, sizeof(inside), "%s/", top);
	if (!(lines = ZLIST("\n,", &cnt, e, "-t", "snapshot", "-o", "clones", "-r", top)))
		return -1;
	for (size_t i = 0; i < cnt && !outside; i++) {
		char *c = str_trim(lines[i]);

		outside = *c && !str_eq(c, "-") && !str_has_prefix(c, inside);
	}
	str_list_free(lines);
	if (outside) {
		wk_progress("keeping %s: a fork elsewhere is a clone of one of its snapshots", top);
		return 1;
	}
	/* -R reaches only clones inside this env's own tree (checked above). */
	return Z(NULL, e, "destroy", "-R", top) < 0 ? -1 : 0;
}

/* ---- moves (move.c): one volume's snapshot as a zfs stream ---- */

int stg_zfs_send(const struct stg *s, const char *env, const char *vol, const char *name, const char *path,
		 struct err *e)
{
	char snap[STG_ZFS_NAME_MAX + 200];
	const char *argv[] = { "zfs", "send", snap, NULL };

	if (find_snap(s, env, vol, name, snap, sizeof(snap), e) < 0)
		return -1;
	return stg_run_file(argv, NULL, path, e);
}

/* Received beside anything live, under old/<vol>.moved<ms>, where
 * find_snap looks after vol/: a rollback's target env keeps its volume. */
int stg_zfs_recv(const struct stg *s, const char *env, const char *vol, const char *name, const char *path,
		 char *snap_out, size_t n, struct err *e)
{
	char oldp[STG_ZFS_NAME_MAX], snap[STG_ZFS_NAME_MAX + 200];
	const char *argv[] = { "zfs", "receive", "-u", snap, NULL };

	ds_env(s, env, "old", oldp, sizeof(oldp));
	if (str_fmt(snap, sizeof(snap), "%s/%s.moved%lld@%s", oldp, vol, (long long)clock_now_ms(), name) < 0)
		return err_set(e, "zfs: the dataset name for volume \"%s\" is too long", vol);
	if (!ds_exists(oldp) && Z(NULL, e, "create", "-p", "-o", "mountpoint=none", oldp) < 0)
		return -1;
	if (stg_run_file(argv, path, NULL, e) < 0)
		return -1;
	return str_copy(snap_out, n, snap) < 0 ? err_set(e, "zfs: snapshot name too long") : 0;
}

/* The dataset's own "used" (its snapshots included); a walk of its mount
 * when zfs cannot say. */
static int z_usage(const struct stg *s, const char *env, const char *vol, int64_t *bytes, struct err *e)
{
	char sub[STG_ZFS_NAME_MAX / 4], ds[STG_ZFS_NAME_MAX], line[64];
	struct buf b = BUF_INIT;
	struct err ze;
	int rc;

	snprintf(sub, sizeof(sub), "vol/%s", vol);
	ds_env(s, env, sub, ds, sizeof(ds));
	rc = Z(&b, &ze, "get", "-Hp", "-o", "value", "used", ds);
	dk_first_line(b.data ? b.data : "", line, sizeof(line));
	buf_release(&b);
	if (rc == 0 && str_to_i64(line, bytes) == 0 && *bytes >= 0)
		return 0;
	return stg_usage_walk(s, env, vol, bytes, e);
}

const struct stg_ops stg_zfs_ops = {
	"zfs", z_env_prepare, z_adopt, z_sync, z_snapshot, z_clone, z_restore, z_drop_snapshot, z_drop_env,
	z_usage,
};
