/* storage_dir.c: volumes as plain directories, <env>/vol/<name>, bind-mounted
 * into the containers. To behave like Docker's named volumes, a volume that
 * does not exist yet is first filled from the image of the first service that
 * mounts it (docker create + docker cp of the mount path, extracted with
 * owners and modes kept); when the image has nothing there, the new directory
 * belongs to that service's user, so a non-root agent owns its home. The
 * filled tree is built beside the volume and renamed into place, so a
 * half-filled volume is never taken for a ready one. */
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
#include "spec/spec.h"
#include "tar/tar.h"

#define FILL_TIMEOUT_MS (10 * 60 * 1000)

int storage_prepare(const char *envdir, const struct json *spec, struct err *e)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/vol", envdir);
	if (fs_mkdir_p(path, 0755, e) < 0)
		return -1;
	for (size_t i = 0; i < json_len(json_get(spec, "volumes")); i++) {
		const struct json *v = json_at(json_get(spec, "volumes"), i);

		if (v->type != JSON_STRING || !spec_valid_name(v->u.str.s))
			return err_set(e, "bad volume name");
	}
	return 0;
}

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

static int fill_one(const char *project, const char *env, const char *voldir, const char *vol,
		    const struct json *svc, const char *path, struct err *e)
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
	if (rename(top, dest) < 0)
		return err_errno(e, "volume \"%s\": rename into place", vol);
	return fs_remove_all(tmp, e);
}

int storage_fill(const char *project, const char *envdir, const struct json *spec, struct err *e)
{
	const struct json *vols = json_get(spec, "volumes");
	struct json *order = render_order(json_get(spec, "services"), e);
	char voldir[4096], dest[4200];
	const char *env = json_get_str(spec, "env_id");
	int rc = 0;

	if (!order)
		return -1;
	snprintf(voldir, sizeof(voldir), "%s/vol", envdir);
	for (size_t i = 0; i < json_len(vols) && rc == 0; i++) {
		const char *vol = json_at(vols, i)->u.str.s, *path = NULL;
		const struct json *svc;

		snprintf(dest, sizeof(dest), "%s/%s", voldir, vol);
		if (fs_exists(dest))
			continue;	/* not fresh: keep its data, as Docker does */
		if (!(svc = first_mount(order, vol, &path))) {
			if (mkdir(dest, 0755) < 0)
				rc = err_errno(e, "volume \"%s\": mkdir", vol);
			continue;
		}
		rc = fill_one(project, env ? env : project, voldir, vol, svc, path, e);
	}
	json_free(order);
	return rc;
}
