/* disk.c: an environment's disk cap (x-denv.disk, or denvd --disk-limit),
 * and the reserve denvd keeps for itself.
 *
 * On the dir backend the env's volume directory <data>/envs/<env>/vol is
 * the mount point of an ext4 image of the cap's size,
 * <data>/envs/<env>/disk.img, loop-mounted nodev,nosuid. Picked over an XFS
 * project quota, which needs the data dir on XFS mounted with prjquota
 * (this host's is ext4, as most are): an image works on any filesystem, is
 * made and mounted in ~40 ms, is sparse (a 1 GiB cap costs 0.7 MiB until
 * written), and a full volume is ENOSPC inside the environment only. All
 * volumes of an env share the one image, so the cap is the environment's.
 * Snapshots are copies out of it, forks copies into their own image; the
 * image goes with the env. On btrfs the cap is a qgroup over the env's
 * subvolumes (stg_btrfs_cap). zfs does not enforce one yet: an env that
 * declares one is refused there, a host default is noted in the evidence
 * as not enforced.
 *
 * The reserve: env.create refuses new work while the data dir has less
 * than SC_DISK_RESERVE_MB free, so that the command log and the records of
 * running environments always have room. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/str.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"

int64_t disk_cap_mb(const struct wk *w, const struct json *spec)
{
	int64_t mb = json_get_int(spec, "disk_mb", 0);

	return mb > 0 ? mb : w->disk_limit_mb;
}

int disk_reserve_check(const char *data, struct err *e)
{
	struct statvfs sv;
	int64_t free_mb, size_mb, reserve;

	if (statvfs(data, &sv) < 0)
		return err_errno(e, "statvfs %s", data);
	free_mb = (int64_t)((uint64_t)sv.f_bavail * sv.f_frsize >> 20);
	size_mb = (int64_t)((uint64_t)sv.f_blocks * sv.f_frsize >> 20);
	/* A small filesystem (a test's image) keeps a share, not the whole reserve. */
	reserve = size_mb / SC_DISK_RESERVE_SHARE < SC_DISK_RESERVE_MB ? size_mb / SC_DISK_RESERVE_SHARE
								      : SC_DISK_RESERVE_MB;
	if (free_mb >= reserve && free_mb > 0)
		return 0;
	err_set(e, "the data directory %s has %lld MiB free, below the %lld MiB denvd keeps for its command log "
		"and records: no new environments until space is freed", data, (long long)free_mb, (long long)reserve);
	/* What filled it is most likely an agent: a verify scores it as a full disk (stg_volume_fault). */
	e->code = ENOSPC;
	return -1;
}

/* Is path the root of a mount (a device other than its parent's)? */
static int is_mount(const char *path)
{
	char parent[STG_PATH_MAX + 4];
	struct stat a, b;

	snprintf(parent, sizeof(parent), "%s/..", path);
	if (stat(path, &a) < 0 || stat(parent, &b) < 0)
		return 0;
	return a.st_dev != b.st_dev;
}

/* Nothing in path (or no path): the voldir env_prepare just made. */
static bool dir_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	bool empty = true;

	if (!d)
		return true;
	while (empty && (de = readdir(d)))
		empty = str_eq(de->d_name, ".") || str_eq(de->d_name, "..");
	closedir(d);
	return empty;
}

static void evidence(struct json *ev, int64_t mb, const char *mechanism, bool enforced, const char *voldir)
{
	struct statvfs sv;

	json_object_set_int(ev, "limit_mb", mb);
	json_object_set_str(ev, "mechanism", mechanism);
	json_object_set_bool(ev, "enforced", enforced);
	if (enforced && statvfs(voldir, &sv) == 0)
		json_object_set_int(ev, "used_mb",
				    (int64_t)(((uint64_t)sv.f_blocks - sv.f_bfree) * sv.f_frsize >> 20));
}

static int make_image(const char *img, const char *voldir, int64_t mb, struct err *e)
{
	char size[32], lost[FS_PATH_MAX];
	const char *mkfs[] = { "mkfs.ext4", "-q", "-F", "-m", "0", "-E",
			       "nodiscard,lazy_itable_init=1,lazy_journal_init=1", img, NULL };
	const char *mount[] = { "mount", "-o", "loop,nodev,nosuid", img, voldir, NULL };
	const char *trunc[] = { "truncate", "-s", size, img, NULL };

	snprintf(size, sizeof(size), "%lldM", (long long)mb);
	/* An image that is there but not mounted (the host rebooted) holds
	 * the volumes: mounted again, never made anew. */
	if (fs_exists(img))
		return stg_run(mount, NULL, e) < 0 ? err_prefix(e, "mounting the disk cap's image again") : 0;
	if (stg_run(trunc, NULL, e) < 0 || stg_run(mkfs, NULL, e) < 0 || stg_run(mount, NULL, e) < 0) {
		unlink(img);
		return err_prefix(e, "disk cap of %lld MiB", (long long)mb);
	}
	/* ext4's lost+found is not a volume. */
	if (fs_path(lost, sizeof(lost), e, "%s/lost+found", voldir) == 0)
		(void)rmdir(lost);
	return chmod(voldir, 0755) < 0 ? err_errno(e, "chmod %s", voldir) : 0;
}

int disk_prepare(const struct wk *w, const struct stg *s, const char *env, const char *voldir, int64_t mb,
		 bool declared, struct json *res, struct err *e)
{
	char img[STG_PATH_MAX];
	struct json *ev;

	if (mb <= 0)
		return 0;
	ev = json_new_object();
	json_object_set(res, "disk", ev);
	if (str_eq(s->ops->name, "btrfs")) {
		if (stg_btrfs_cap(s, env, mb, e) < 0)
			return -1;
		evidence(ev, mb, "btrfs qgroup", true, voldir);
		json_object_del(ev, "used_mb");	/* statvfs sees the filesystem, not the qgroup */
		wk_progress("disk cap %lld MiB: a btrfs qgroup over the env's subvolumes", (long long)mb);
		return 0;
	}
	if (!str_eq(s->ops->name, "dir")) {
		if (declared)
			return err_set(e, "x-denv.disk: storage %s does not enforce a disk cap yet (dir does)", s->ops->name);
		evidence(ev, mb, s->ops->name, false, voldir);
		wk_progress("disk cap %lld MiB (host default): not enforced on storage %s", (long long)mb, s->ops->name);
		return 0;
	}
	if (fs_path(img, sizeof(img), e, "%s/envs/%s/disk.img", w->data, env) < 0)
		return err_prefix(e, "disk cap");
	if (!is_mount(voldir)) {
		if (!dir_empty(voldir)) {
			evidence(ev, mb, "ext4 image (loop)", false, voldir);
			wk_progress("disk cap %lld MiB: the volumes exist without one (made before the cap)", (long long)mb);
			return 0;
		}
		if (make_image(img, voldir, mb, e) < 0)
			return -1;
		wk_progress("disk cap %lld MiB: volumes on an ext4 image (loop-mounted)", (long long)mb);
	}
	evidence(ev, mb, "ext4 image (loop)", true, voldir);
	return 0;
}

int disk_release(const char *data, const char *env, struct err *e)
{
	char voldir[STG_PATH_MAX], img[STG_PATH_MAX];
	const char *umount[] = { "umount", voldir, NULL };

	if (fs_path(voldir, sizeof(voldir), e, "%s/envs/%s/vol", data, env) < 0 ||
	    fs_path(img, sizeof(img), e, "%s/envs/%s/disk.img", data, env) < 0)
		return err_prefix(e, "disk cap");
	if (is_mount(voldir) && stg_run(umount, NULL, e) < 0)
		return err_prefix(e, "unmounting the disk cap's image");
	if (unlink(img) < 0 && errno != ENOENT)
		return err_errno(e, "remove %s", img);
	return 0;
}
