/* storage_dir.c: the dir backend, and filling fresh volumes for every backend.
 *
 * Filling: to behave like Docker's named volumes, a volume that does not
 * exist yet is first filled from the image of the first service that mounts
 * it (docker create + docker cp of the mount path, extracted with owners and
 * modes kept); when the image has nothing there, the new directory belongs
 * to that service's user, so a non-root agent owns its home. The filled tree
 * is built beside the volume and handed to the backend's adopt (dir: a
 * rename), so a half-filled volume is never taken for a ready one.
 *
 * The dir backend: volumes are <data>/envs/<env>/vol/<name>; a snapshot is a
 * copy into <data>/snaps/<env>/<name>/<volume>/ taken while the containers
 * are paused, a fork a copy out of it, a rollback a copy over the volume
 * (built beside it, then swapped in by rename). Correct and slow: the
 * freeze lasts as long as the copy. */
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
#include "sidecar/storage.h"
#include "spec/spec.h"
#include "tar/tar.h"

#define FILL_TIMEOUT_MS (10 * 60 * 1000)

/* The first service (in start order) mounting vol, and the mount path. */
static const struct json *first_mount(const struct json *order, const char *vol, const char **path)
{
	size_t vl = strlen(vol);

	for (size_t i = 0; i < json_len(order); i++) {
		const struct json *vols = json_get(json_at(order, i), "volumes");

		for (size_t k = 0; k < json_len(vols); k++) {
			const char *spec = json_at(vols, k)->u.str.s;

			if (strncmp(spec, vol, vl) == 0 && spec[vl] == ':') {
				*path = spec + vl + 1;
				return json_at(order, i);
			}
		}
	}
	return NULL;
}

/* docker cp of path out of a created (never started) container of image into
 * tarfile. 1 copied, 0 the image has nothing at path, -1 error. */
static int copy_out(const char *project, const char *env, const char *vol, const char *image,
		    const char *path, const char *tarfile, struct err *e)
{
	char name[400], label[300], label2[300], src[4200];
	struct buf id = BUF_INIT;
	const char *argv[] = { "docker", "cp", src, "-", NULL };
	struct proc_spec s;
	struct proc_result r;
	int fd, rc;

	snprintf(name, sizeof(name), "%s-fill-%s", project, vol);
	snprintf(label, sizeof(label), "com.docker.compose.project=%s", project);
	snprintf(label2, sizeof(label2), "ai.denv.env=%s", env);
	dk(NULL, SC_DOCKER_QUICK_MS, e, "rm", "-f", name, NULL);	/* left by a crash */
	if (dk(&id, SC_DOCKER_TIMEOUT_MS, e, "create", "--name", name, "--label", label, "--label", label2,
	       image, "denvd-fill", NULL) < 0) {
		buf_release(&id);
		return err_prefix(e, "volume \"%s\"", vol);
	}
	buf_release(&id);
	snprintf(src, sizeof(src), "%s:%s", name, path);
	if ((fd = open(tarfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0) {
		dk(NULL, SC_DOCKER_QUICK_MS, e, "rm", "-f", name, NULL);
		return err_errno(e, "volume \"%s\": %s", vol, tarfile);
	}
	proc_spec_init(&s, argv);
	s.out.mode = PROC_FD;
	s.out.fd = fd;
	s.timeout_ms = FILL_TIMEOUT_MS;
	rc = proc_run(&s, NULL, 0, &r, e);
	sys_close(fd);
	if (rc == 0 && (r.exit_code != 0 || r.timed_out)) {
		char line[300];

		dk_first_line(r.err.data, line, sizeof(line));
		if (strstr(line, "Could not find the file") || strstr(line, "No such container:path"))
			rc = 0, r.exit_code = 1;
		else
			rc = err_set(e, "volume \"%s\": docker cp %s: %s", vol, path, r.timed_out ? "timed out" : line);
	}
	if (rc == 0)
		rc = r.exit_code == 0 ? 1 : 0;
	proc_result_release(&r);
	{
		struct err e2;

		dk(NULL, SC_DOCKER_QUICK_MS, &e2, "rm", "-f", name, NULL);
	}
	return rc;
}

static int fill_one(const struct stg *stg, const char *project, const char *env, const char *voldir,
		    const char *vol, const struct json *svc, const char *path, struct err *e)
{
	char tmp[4200], tarfile[4300], top[4400], dest[4200];
	const char *base = strrchr(path, '/');
	struct tar_limits lim = { .max_bytes = SC_FILL_MAX_BYTES };
	struct stat st;
	long uid, gid;
	int fd, got;

	base = base ? base + 1 : path;
	snprintf(dest, sizeof(dest), "%s/%s", voldir, vol);
	snprintf(tmp, sizeof(tmp), "%s/.fill-%s", voldir, vol);
	snprintf(tarfile, sizeof(tarfile), "%s/.fill-%s.tar", voldir, vol);
	if (fs_remove_all(tmp, e) < 0 || fs_mkdir_p(tmp, 0700, e) < 0)
		return -1;
	got = !*base ? 0 : copy_out(project, env, vol, json_get_str(svc, "image"), path, tarfile, e);
	if (got < 0) {
		unlink(tarfile);
		return -1;
	}
	snprintf(top, sizeof(top), "%s/%s", tmp, got ? base : "new");
	if (got) {
		fd = open(tarfile, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || tar_extract_fd(fd, tmp, &lim, TAR_X_KEEP_OWNER | TAR_X_KEEP_SPECIAL_BITS |
					     TAR_X_ALLOW_ESCAPING_SYMLINKS | TAR_X_SKIP_SPECIAL, NULL, e) < 0) {
			if (fd >= 0)
				sys_close(fd);
			unlink(tarfile);
			return err_prefix(e, "volume \"%s\": copying %s from %s", vol, path, json_get_str(svc, "image"));
		}
		sys_close(fd);
		unlink(tarfile);
		/* Never bind-mount what is not a real directory (a symlink would point
		 * the mount anywhere on this host). */
		if (lstat(top, &st) < 0 || !S_ISDIR(st.st_mode))
			return err_set(e, "volume \"%s\": %s in image %s is not a directory", vol, path,
				       json_get_str(svc, "image"));
		wk_progress("volume %s: filled from %s:%s", vol, json_get_str(svc, "image"), path);
	} else {
		if (mkdir(top, 0755) < 0)
			return err_errno(e, "volume \"%s\": mkdir", vol);
		if (render_user(json_get_str(svc, "user"), &uid, &gid) == 0 &&
		    chown(top, (uid_t)uid, (gid_t)gid) < 0)
			return err_errno(e, "volume \"%s\": chown %ld:%ld", vol, uid, gid);
		if (chmod(top, 0755) < 0)
			return err_errno(e, "volume \"%s\": chmod", vol);
	}
	if (stg->ops->adopt(stg, env, vol, top, e) < 0)
		return err_prefix(e, "volume \"%s\"", vol);
	return fs_remove_all(tmp, e);
}

int storage_fill_with(const struct stg *stg, const char *project, const char *env, const char *voldir,
		      const struct json *spec, struct err *e)
{
	const struct json *vols = json_get(spec, "volumes");
	struct json *order = render_order(json_get(spec, "services"), e);
	char dest[STG_PATH_MAX + 200], tmp[STG_PATH_MAX + 200];
	int rc = 0;

	if (!order)
		return -1;
	for (size_t i = 0; i < json_len(vols) && rc == 0; i++) {
		const char *vol = json_at(vols, i)->type == JSON_STRING ? json_at(vols, i)->u.str.s : "";
		const char *path = NULL;
		const struct json *svc;

		if (!spec_valid_name(vol)) {
			rc = err_set(e, "bad volume name \"%s\"", vol);
			break;
		}
		snprintf(dest, sizeof(dest), "%s/%s", voldir, vol);
		if (fs_exists(dest))
			continue;	/* not fresh (or cloned from a snapshot): keep its data, as Docker does */
		if (!(svc = first_mount(order, vol, &path))) {
			snprintf(tmp, sizeof(tmp), "%s/.fill-%s", voldir, vol);
			if (fs_remove_all(tmp, e) < 0 || mkdir(tmp, 0755) < 0)
				rc = e->msg[0] ? -1 : err_errno(e, "volume \"%s\": mkdir", vol);
			else if (stg->ops->adopt(stg, env, vol, tmp, e) < 0)
				rc = err_prefix(e, "volume \"%s\"", vol);
			continue;
		}
		rc = fill_one(stg, project, env, voldir, vol, svc, path, e);
	}
	json_free(order);
	return rc;
}

/* ---- the dir backend ---- */

static void dir_snapdir(const struct stg *s, const char *env, const char *name, char *out, size_t n)
{
	snprintf(out, n, "%s/snaps/%s/%s", s->data, env, name);
}

static int dir_env_prepare(const struct stg *s, const char *env, char *voldir, size_t n, struct err *e)
{
	if ((size_t)snprintf(voldir, n, "%s/envs/%s/vol", s->data, env) >= n)
		return err_set(e, "data dir path too long");
	return fs_mkdir_p(voldir, 0755, e);
}

static int dir_adopt(const struct stg *s, const char *env, const char *vol, const char *tree, struct err *e)
{
	char dest[STG_PATH_MAX];

	snprintf(dest, sizeof(dest), "%s/envs/%s/vol/%s", s->data, env, vol);
	if (rename(tree, dest) < 0)
		return err_errno(e, "rename into place");
	return 0;
}

int stg_sync_vols(const char *top, const char *env, struct err *e)
{
	char path[STG_PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/envs/%s/vol", top, env);
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return err_errno(e, "open %s", path);
	if (syncfs(fd) < 0) {
		sys_close(fd);
		return err_errno(e, "syncfs %s", path);
	}
	sys_close(fd);
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
	char tmp[STG_PATH_MAX + 32], old[STG_PATH_MAX + 32];
	const char *slash;

	if (!(slash = strrchr(dest, '/')))
		return err_set(e, "bad volume path %s", dest);
	snprintf(tmp, sizeof(tmp), "%.*s/.copy-%s", (int)(slash - dest), dest, slash + 1);
	snprintf(old, sizeof(old), "%.*s/.old-%s", (int)(slash - dest), dest, slash + 1);
	if (fs_remove_all(tmp, e) < 0 || fs_remove_all(old, e) < 0 || stg_copy_tree(src, tmp, e) < 0)
		return -1;
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
	return fs_remove_all(path, e) < 0 ? -1 : 0;
}

const struct stg_ops stg_dir_ops = {
	"dir", dir_env_prepare, dir_adopt, dir_sync, dir_snapshot, dir_clone, dir_restore,
	dir_drop_snapshot, dir_drop_env,
};
