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
#include "sidecar/storage/storage.h"
#include "spec/spec.h"
#include "tar/tar.h"

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

/* A created (never started) container of image, named <project>-fill-<tag>
 * into name; what prefixes errors ("volume \"home\""). 0 or -1. */
static int fill_container(const char *project, const char *env, const char *tag, const char *image,
			  const char *what, char *name, size_t n, struct err *e)
{
	char label[300], label2[300];
	struct buf id = BUF_INIT;
	int rc;

	snprintf(name, n, "%s-fill-%s", project, tag);
	snprintf(label, sizeof(label), "com.docker.compose.project=%s", project);
	snprintf(label2, sizeof(label2), "ai.denv.env=%s", env);
	dk(NULL, SC_DOCKER_QUICK_MS, e, "rm", "-f", name, NULL);	/* left by a crash */
	rc = dk(&id, SC_DOCKER_TIMEOUT_MS, e, "create", "--name", name, "--label", label, "--label", label2,
		image, "denvd-fill", NULL);
	buf_release(&id);
	return rc < 0 ? err_prefix(e, "%s", what) : 0;
}

static void fill_container_rm(const char *name)
{
	struct err e;

	dk(NULL, SC_DOCKER_QUICK_MS, &e, "rm", "-f", name, NULL);
}

/* docker cp [-L] of path out of container name into tarfile. 1 copied, 0 the
 * image has nothing at path, -1 error. */
static int fill_cp(const char *name, const char *path, bool follow, const char *tarfile, const char *what,
		   struct err *e)
{
	char src[4200];
	const char *argv[] = { "docker", "cp", src, "-", NULL, NULL };
	struct proc_spec s;
	struct proc_result r;
	int fd, rc;

	snprintf(src, sizeof(src), "%s:%s", name, path);
	if (follow) {
		argv[2] = "-L";
		argv[3] = src;
		argv[4] = "-";
	}
	if ((fd = open(tarfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
		return err_errno(e, "%s: %s", what, tarfile);
	proc_spec_init(&s, argv);
	s.out.mode = PROC_FD;
	s.out.fd = fd;
	s.timeout_ms = STG_FILL_TIMEOUT_MS;
	rc = proc_run(&s, NULL, 0, &r, e);
	sys_close(fd);
	if (rc == 0 && (r.exit_code != 0 || r.timed_out)) {
		char line[300];

		dk_first_line(r.err.data, line, sizeof(line));
		if (strstr(line, "Could not find the file") || strstr(line, "No such container:path"))
			rc = 0, r.exit_code = 1;
		else
			rc = err_set(e, "%s: docker cp %s: %s", what, path, r.timed_out ? "timed out" : line);
	}
	if (rc == 0)
		rc = r.exit_code == 0 ? 1 : 0;
	proc_result_release(&r);
	return rc;
}

/* docker cp of path out of a created (never started) container of image into
 * tarfile. 1 copied, 0 the image has nothing at path, -1 error. */
static int copy_out(const char *project, const char *env, const char *vol, const char *image,
		    const char *path, const char *tarfile, struct err *e)
{
	char name[400], what[300];
	int rc;

	snprintf(what, sizeof(what), "volume \"%s\"", vol);
	if (fill_container(project, env, vol, image, what, name, sizeof(name), e) < 0)
		return -1;
	rc = fill_cp(name, path, false, tarfile, what, e);
	fill_container_rm(name);
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

/* ---- the image's users ---- */

/* What a fresh volume's owner is resolved from. Cached under their own keys
 * ("user:" and the path), apart from a volume's tree at the same path: these
 * are copied with -L, since Docker reads them through a symlink too. */
static const char *const user_paths[2] = { "/etc/passwd", "/etc/group" };

/* The regular file a `docker cp -L` archive holds, into out (at most
 * PW_FILE_MAX bytes). 1 read, 0 the archive holds no regular file (the path
 * is a directory, say), -1 e. */
static int read_one_file(int fd, const char *what, struct buf *out, struct err *e)
{
	struct tar_reader *r = tar_reader_new();
	const struct tar_entry *ent = NULL;
	char chunk[8192];
	ssize_t n;
	int rc;

	buf_init(out, PW_FILE_MAX);
	rc = tar_reader_next_fd(r, fd, &ent, e);
	if (rc == 1 && ent->type != TAR_REG)
		rc = 0;
	else if (rc == 1 && ent->size > PW_FILE_MAX)
		rc = err_set(e, "over %zu bytes", PW_FILE_MAX);
	while (rc == 1 && (n = tar_reader_data_fd(r, fd, chunk, sizeof(chunk), e)) != 0) {
		if (n < 0 || buf_add(out, chunk, (size_t)n) < 0) {
			rc = n < 0 ? -1 : err_set(e, "over %zu bytes", PW_FILE_MAX);
			break;
		}
	}
	tar_reader_free(r);
	return rc < 0 ? err_prefix(e, "%s", what) : rc;
}

/* The image's /etc/passwd and/or /etc/group (need: PW_NEED_*) into f, whose
 * views point into bufs (the caller releases them): each from the cache
 * when the image id is known and the entry is there, else all those missing
 * out of one created container. 0 or -1. */
static int image_user_files(const struct stg *stg, const char *project, const char *env, const char *voldir,
			    const char *image, const char *image_id, int need, struct buf bufs[2],
			    struct pw_files *f, struct err *e)
{
	char dir[STG_PATH_MAX], key[64], entry[2][STG_PATH_MAX + 100], none[2][STG_PATH_MAX + 100];
	char tmp[STG_PATH_MAX + 300], name[400], what[600];
	bool cacheable = image_id && *image_id, made = false;
	int state[2] = { 0, 0 }, fds[2] = { -1, -1 }, rc = 0, nfd;	/* state: 1 have, 0 none, 2 to copy */

	memset(f, 0, sizeof(*f));
	if (cacheable) {
		cache_dir(stg->data, dir, sizeof(dir));
		if (fs_mkdir_p(dir, 0700, e) < 0)
			return -1;
	}
	for (int i = 0; i < 2; i++) {
		if (!(need & (i ? PW_NEED_GROUP : PW_NEED_PASSWD)))
			continue;
		state[i] = 2;
		if (!cacheable)
			continue;
		snprintf(key, sizeof(key), "user:%s", user_paths[i]);
		cache_entry(dir, image_id, key, ".tar", entry[i], sizeof(entry[i]));
		cache_entry(dir, image_id, key, ".none", none[i], sizeof(none[i]));
		if ((fds[i] = open_entry(entry[i])) >= 0) {
			state[i] = 1;
		} else if ((nfd = open_entry(none[i])) >= 0) {
			sys_close(nfd);
			state[i] = 0;
		}
	}
	for (int i = 0; i < 2 && rc == 0; i++) {
		int got;

		if (state[i] != 2)
			continue;
		snprintf(what, sizeof(what), "image %s: %s", image, user_paths[i]);
		if (!made && fill_container(project, env, "user.files", image, what, name, sizeof(name), e) < 0) {
			rc = -1;
			break;
		}
		made = true;
		if (cacheable)
			snprintf(tmp, sizeof(tmp), "%s/.tmp-%ld-user%d.tar", dir, (long)getpid(), i);
		else
			snprintf(tmp, sizeof(tmp), "%s/.fill.user%d.tar", voldir, i);
		got = fill_cp(name, user_paths[i], true, tmp, what, e);
		state[i] = got > 0 ? 1 : 0;
		if (got <= 0) {
			unlink(tmp);
			if (got < 0)
				rc = -1;
			else if (cacheable && (nfd = open(none[i], O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) >= 0)
				sys_close(nfd);
			continue;
		}
		if (cacheable && rename(tmp, entry[i]) == 0) {
			fds[i] = open_entry(entry[i]);
		} else {
			fds[i] = open(tmp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			unlink(tmp);
		}
		if (fds[i] < 0)
			rc = err_errno(e, "%s", what);
	}
	if (made)
		fill_container_rm(name);
	for (int i = 0; i < 2; i++) {
		if (rc == 0 && state[i] == 1) {
			snprintf(what, sizeof(what), "image %s: %s", image, user_paths[i]);
			state[i] = read_one_file(fds[i], what, &bufs[i], e);
			if (state[i] < 0)
				rc = -1;
		}
		if (fds[i] >= 0)
			sys_close(fds[i]);
	}
	if (rc == 0 && state[0] == 1) {
		f->passwd = bufs[0].data;
		f->passwd_len = bufs[0].len;
	}
	if (rc == 0 && state[1] == 1) {
		f->group = bufs[1].data;
		f->group_len = bufs[1].len;
	}
	return rc;
}

/* Who owns a fresh volume the image has nothing for: svc's user, resolved in
 * svc's image the way Docker will run it. 1 and the ids, 0 when svc has no
 * user (root keeps it), -1 e (a name the image lacks: naming the service,
 * the user and the image). Numbers alone ("1000:1000") need no image file. */
static int volume_owner(const struct stg *stg, const char *project, const char *env, const char *voldir,
			const char *vol, const struct json *svc, const char *image_id, long *uid, long *gid,
			struct err *e)
{
	const char *user = json_get_str(svc, "user"), *image = json_get_str(svc, "image");
	struct buf bufs[2] = { BUF_INIT, BUF_INIT };
	struct pw_files f;
	int need, rc = 0;

	if (!user || !*user)
		return 0;
	memset(&f, 0, sizeof(f));
	if ((need = pw_needs(user)) > 0)
		rc = image_user_files(stg, project, env, voldir, image, image_id, need, bufs, &f, e);
	if (rc == 0)
		rc = pw_resolve(user, &f, uid, gid, e);
	buf_release(&bufs[0]);
	buf_release(&bufs[1]);
	if (rc < 0)
		return err_prefix(e, "volume \"%s\": service \"%s\" (image %s)", vol, json_get_str(svc, "name"),
				  image);
	return 1;
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
		if ((got = volume_owner(stg, project, env, voldir, vol, svc, image_id, &uid, &gid, e)) < 0)
			return -1;
		if (got && chown(top, (uid_t)uid, (gid_t)gid) < 0)
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
