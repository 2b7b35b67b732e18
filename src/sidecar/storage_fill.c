/* storage_fill.c: filling fresh volumes, for every backend.
 *
 * To behave like Docker's named volumes, a volume that does not exist yet is
 * first filled from the image of the first service that mounts it (the
 * image's tree at the mount path, extracted with owners and modes kept);
 * when the image has nothing there, the new directory belongs to that
 * service's user, so a non-root agent owns its home. The filled tree is
 * built beside the volume and handed to the backend's adopt (dir: a
 * rename), so a half-filled volume is never taken for a ready one.
 *
 * The image's tree comes out of a created, never started, container with
 * `docker cp` (about 100 ms of Docker work). Images are immutable and named
 * by id, so the archive is kept in <data>/cache/fill/, keyed by the image
 * id and the path (a ".none" entry when the image has nothing there): the
 * next environment from the same image, a sandbox per episode say, skips
 * Docker here. Archives over SC_FILL_CACHE_ENTRY_MAX are not kept; an entry
 * unused for SC_FILL_CACHE_KEEP_S goes in the sweep (storage_fill_prune). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crypto.h"
#include "base/fs.h"
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

/* ---- the cache ---- */

static void cache_dir(const char *data, char *out, size_t n)
{
	snprintf(out, n, "%s/cache/fill", data);
}

/* <dir>/<sha256 of id NUL path><suffix> */
static void cache_entry(const char *dir, const char *image_id, const char *path, const char *suffix,
			char *out, size_t n)
{
	struct buf key = BUF_INIT;
	char hex[SHA256_HEX_LEN + 1];

	buf_adds(&key, image_id);
	buf_addch(&key, '\0');
	buf_adds(&key, path);
	sha256_hex(key.data, key.len, hex);
	buf_release(&key);
	snprintf(out, n, "%s/%s%s", dir, hex, suffix);
}

/* Opened for reading, and its mtime set to now (what the sweep goes by). */
static int open_entry(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd >= 0)
		(void)futimens(fd, NULL);
	return fd;
}

/* The image's tree at path as a tar archive open for reading: from the
 * cache when the image id is known and the entry is there, else copied out
 * of the image (and kept when it is small enough). 1 and *fd, 0 when the
 * image has nothing at path, -1 e. */
static int image_tree(const struct stg *stg, const char *project, const char *env, const char *vol,
		      const char *voldir, const char *image, const char *image_id, const char *path, int *fd,
		      struct err *e)
{
	char dir[STG_PATH_MAX], entry[STG_PATH_MAX + 100], none[STG_PATH_MAX + 100], tmp[STG_PATH_MAX + 300];
	bool cacheable = image_id && *image_id;
	struct stat st;
	int got, nfd;

	if (cacheable) {
		cache_dir(stg->data, dir, sizeof(dir));
		cache_entry(dir, image_id, path, ".tar", entry, sizeof(entry));
		cache_entry(dir, image_id, path, ".none", none, sizeof(none));
		if ((*fd = open_entry(entry)) >= 0)
			return 1;
		if ((nfd = open_entry(none)) >= 0) {
			sys_close(nfd);
			return 0;
		}
		if (fs_mkdir_p(dir, 0700, e) < 0)
			return -1;
		snprintf(tmp, sizeof(tmp), "%s/.tmp-%ld-%s.tar", dir, (long)getpid(), vol);
	} else {
		snprintf(tmp, sizeof(tmp), "%s/.fill-%s.tar", voldir, vol);
	}
	got = copy_out(project, env, vol, image, path, tmp, e);
	if (got <= 0) {
		unlink(tmp);
		if (got == 0 && cacheable && (nfd = open(none, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) >= 0)
			sys_close(nfd);
		return got;
	}
	if (cacheable && stat(tmp, &st) == 0 && (uint64_t)st.st_size <= SC_FILL_CACHE_ENTRY_MAX &&
	    rename(tmp, entry) == 0)
		return (*fd = open_entry(entry)) >= 0 ? 1 : err_errno(e, "volume \"%s\": %s", vol, entry);
	/* Too big to keep: read it once, and it is gone when closed. */
	*fd = open(tmp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	unlink(tmp);
	return *fd >= 0 ? 1 : err_errno(e, "volume \"%s\": %s", vol, tmp);
}

/* Leftover temp files of a killed worker (".tmp-...") go after a day. */
static int64_t fill_keep(const char *name)
{
	if (str_eq(name, ".") || str_eq(name, ".."))
		return -1;
	return name[0] == '.' ? 24 * 3600 : SC_FILL_CACHE_KEEP_S;
}

int storage_fill_prune(const char *data, int64_t now_s)
{
	char dir[STG_PATH_MAX];

	cache_dir(data, dir, sizeof(dir));
	return fs_prune_files(dir, now_s, fill_keep);
}

/* ---- filling ---- */

static int fill_one(const struct stg *stg, const char *project, const char *env, const char *voldir,
		    const char *vol, const struct json *svc, const char *path, const char *image_id,
		    struct err *e)
{
	char tmp[4200], top[4400];
	const char *base = strrchr(path, '/'), *image = json_get_str(svc, "image");
	struct tar_limits lim = { .max_bytes = SC_FILL_MAX_BYTES };
	struct stat st;
	long uid, gid;
	int fd = -1, got;

	base = base ? base + 1 : path;
	snprintf(tmp, sizeof(tmp), "%s/.fill-%s", voldir, vol);
	if (fs_remove_all(tmp, e) < 0 || fs_mkdir_p(tmp, 0700, e) < 0)
		return -1;
	got = !*base ? 0 : image_tree(stg, project, env, vol, voldir, image, image_id, path, &fd, e);
	if (got < 0)
		return -1;
	snprintf(top, sizeof(top), "%s/%s", tmp, got ? base : "new");
	if (got) {
		int rc = tar_extract_fd(fd, tmp, &lim, TAR_X_KEEP_OWNER | TAR_X_KEEP_SPECIAL_BITS |
					TAR_X_ALLOW_ESCAPING_SYMLINKS | TAR_X_SKIP_SPECIAL, NULL, e);

		sys_close(fd);
		if (rc < 0)
			return err_prefix(e, "volume \"%s\": copying %s from %s", vol, path, image);
		/* Never bind-mount what is not a real directory (a symlink would point
		 * the mount anywhere on this host). */
		if (lstat(top, &st) < 0 || !S_ISDIR(st.st_mode))
			return err_set(e, "volume \"%s\": %s in image %s is not a directory", vol, path, image);
		wk_progress("volume %s: filled from %s:%s", vol, image, path);
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
		      const struct json *spec, const struct json *images, struct err *e)
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
		rc = fill_one(stg, project, env, voldir, vol, svc, path,
			      json_get_str(json_get(images, json_get_str(svc, "image")), "id"), e);
	}
	json_free(order);
	return rc;
}
