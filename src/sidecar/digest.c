/* digest.c: env.digest, the content digest of each volume of one snapshot
 * (promote's gate.consistency, deployments.md). Payload {snapshot}: the
 * snapshot (a version id) found as snap_find finds it. Result {storage,
 * datasets: {vol: "sha256:<hex>"}, files, bytes, took_ms}; on zfs, whose
 * captures are not directories here, datasets is {} and unsupported says
 * why.
 *
 * A volume's digest is one SHA-256 over its tree in a fixed order (names
 * sorted bytewise below each directory): per entry the path below the
 * volume, its type, mode, owner and size, then a regular file's bytes or
 * a symlink's target. Times are left out: a copy keeps them, but a restore
 * need not for the data to be the same. The tree is the capture, which
 * nothing writes once its record exists, so a digest taken twice differs
 * only when the captured data changed. Nothing is followed or opened but
 * regular files (O_NOFOLLOW): a capture may hold an agent's FIFOs and
 * links. No descriptor is held per level, so depth is bounded by the path
 * (STG_PATH_MAX), as for the copier. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/crypto.h"
#include "base/enc.h"
#include "base/ev.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"

struct dg {
	struct sha256_ctx h;
	struct buf path;	/* absolute; the volume's root is its first root_len bytes */
	size_t root_len;
	uint64_t files, bytes;
	char *chunk;
};

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names of the directory at d->path (without . and ..). */
static int list_dir(struct dg *d, char ***names, size_t *n, struct err *e)
{
	DIR *dir = opendir(d->path.data);
	struct dirent *de;
	size_t cap = 0;

	*names = NULL;
	*n = 0;
	if (!dir)
		return err_errno(e, "open %s", d->path.data);
	while ((errno = 0, de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (*n == STG_DIGEST_DIR_ENTRIES_MAX) {
			closedir(dir);
			return err_set(e, "%s holds more than %zu entries", d->path.data, STG_DIGEST_DIR_ENTRIES_MAX);
		}
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			*names = xrealloc(*names, cap * sizeof(char *));
		}
		(*names)[(*n)++] = xstrdup(de->d_name);
	}
	closedir(dir);
	qsort(*names, *n, sizeof(char *), cmp_names);
	return 0;
}

static int hash_file(struct dg *d, struct err *e)
{
	int fd = open(d->path.data, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	ssize_t got;

	if (fd < 0)
		return err_errno(e, "open %s", d->path.data);
	while ((got = sys_read(fd, d->chunk, STG_DIGEST_READ_CHUNK)) > 0)
		sha256_update(&d->h, d->chunk, (size_t)got);
	if (got < 0) {
		err_errno(e, "read %s", d->path.data);
		sys_close(fd);
		return -1;
	}
	sys_close(fd);
	return 0;
}

static int hash_link(struct dg *d, off_t size, struct err *e)
{
	char target[STG_PATH_MAX];
	ssize_t n = readlink(d->path.data, target, sizeof(target));

	if (n < 0)
		return err_errno(e, "readlink %s", d->path.data);
	if ((size_t)n >= sizeof(target) || n != size)
		return err_set(e, "%s: a link target longer than %d bytes", d->path.data, STG_PATH_MAX - 1);
	sha256_update(&d->h, target, (size_t)n);
	return 0;
}

static int walk(struct dg *d, struct err *e);

/* One entry at d->path: its header, then its content. */
static int hash_entry(struct dg *d, struct err *e)
{
	const char *rel = d->path.data + d->root_len;
	char head[128];
	struct stat st;
	int n;

	if (lstat(d->path.data, &st) < 0)
		return err_errno(e, "lstat %s", d->path.data);
	sha256_update(&d->h, *rel ? rel : "/", strlen(*rel ? rel : "/") + 1);
	n = snprintf(head, sizeof(head), "%o %lu:%lu %lld", (unsigned)st.st_mode, (unsigned long)st.st_uid,
		     (unsigned long)st.st_gid, S_ISREG(st.st_mode) || S_ISLNK(st.st_mode) ? (long long)st.st_size : 0LL);
	sha256_update(&d->h, head, (size_t)n + 1);
	d->files++;
	if (S_ISREG(st.st_mode)) {
		d->bytes += (uint64_t)st.st_size;
		return hash_file(d, e);
	}
	if (S_ISLNK(st.st_mode))
		return hash_link(d, st.st_size, e);
	if (S_ISDIR(st.st_mode))
		return walk(d, e);
	return 0;	/* FIFOs, sockets, devices: the header says all there is */
}

static int walk(struct dg *d, struct err *e)
{
	size_t keep = d->path.len, n;
	char **names;
	int rc = 0;

	if (list_dir(d, &names, &n, e) < 0)
		return -1;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (d->path.len + 1 + strlen(names[i]) >= STG_PATH_MAX) {
			rc = err_set(e, "%s/%s: the path is longer than %d bytes", d->path.data, names[i], STG_PATH_MAX);
			break;
		}
		buf_addf(&d->path, "/%s", names[i]);
		rc = hash_entry(d, e);
		buf_truncate(&d->path, keep);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc;
}

/* The digest of the tree at d's root as "sha256:<hex>" into out. */
static int digest_tree(struct dg *d, const char *root, char out[STG_DIGEST_MAX], struct err *e)
{
	uint8_t sum[SHA256_LEN];
	int rc;

	buf_truncate(&d->path, 0);
	if (buf_adds(&d->path, root) < 0)
		return err_set(e, "%s: the path is longer than %d bytes", root, STG_PATH_MAX);
	d->root_len = d->path.len;
	if (sha256_init(&d->h) < 0)
		return err_set(e, "sha256: cannot start a digest");
	rc = hash_entry(d, e);
	if (sha256_final(&d->h, sum) < 0 && rc == 0)
		rc = err_set(e, "sha256: cannot finish a digest");
	sha256_release(&d->h);
	if (rc < 0)
		return -1;
	memcpy(out, "sha256:", 7);
	out[7 + enc_hex_write(out + 7, sum, SHA256_LEN)] = '\0';
	return 0;
}

static void dg_init(struct dg *d)
{
	memset(d, 0, sizeof(*d));
	buf_init(&d->path, STG_PATH_MAX + 1);
	d->chunk = xmalloc(STG_DIGEST_READ_CHUNK);
}

static void dg_release(struct dg *d)
{
	free(d->chunk);
	buf_release(&d->path);
}

int stg_digest_tree(const char *root, char out[STG_DIGEST_MAX], uint64_t *files, uint64_t *bytes, struct err *e)
{
	struct dg d;
	int rc;

	dg_init(&d);
	rc = digest_tree(&d, root, out, e);
	if (files)
		*files = d.files;
	if (bytes)
		*bytes = d.bytes;
	dg_release(&d);
	return rc;
}

static int digest_all(const struct json *rec, struct json *res, struct err *e)
{
	const struct json *vols = json_get(rec, "volumes"), *sets = json_get(rec, "datasets");
	struct json *out = json_get(res, "datasets");
	struct dg d;
	int rc = 0;

	if (json_len(vols) != json_len(sets))
		return err_set(e, "the snapshot's record lists %zu volumes and %zu datasets", json_len(vols),
			       json_len(sets));
	dg_init(&d);
	for (size_t i = 0; i < json_len(vols) && rc == 0; i++) {
		const char *vol = json_at(vols, i)->u.str.s, *tree = json_at(sets, i)->u.str.s;
		char hex[STG_DIGEST_MAX];

		wk_progress("digesting volume %s", vol);
		if ((rc = digest_tree(&d, tree, hex, e)) < 0)
			err_prefix(e, "volume \"%s\"", vol);
		else
			json_object_set_str(out, vol, hex);
	}
	json_object_set_int(res, "files", (int64_t)d.files);
	json_object_set_int(res, "bytes", (int64_t)d.bytes);
	dg_release(&d);
	return rc;
}

int cmd_env_digest(struct wk *w, const struct json *payload, struct json **result, struct err *e)
{
	const char *name = json_get_str(payload, "snapshot"), *storage;
	int64_t t0 = ev_mono_ms();
	struct json *rec = NULL, *res;
	char env[SC_ID_MAX];

	if (snap_find(w, w->env, name, env, sizeof(env), &rec, e) < 0)
		return err_prefix(e, "env.digest");
	storage = json_get_str(rec, "storage");
	res = json_new_object();
	json_object_set_str(res, "storage", storage ? storage : "");
	json_object_set(res, "datasets", json_new_object());
	if (!str_eq(storage, "dir") && !str_eq(storage, "btrfs")) {
		json_object_set_str(res, "unsupported", "this storage's captures are not digested");
	} else if (digest_all(rec, res, e) < 0) {
		json_free(res);
		json_free(rec);
		return err_prefix(e, "env.digest");
	}
	json_object_set_int(res, "took_ms", ev_mono_ms() - t0);
	json_free(rec);
	*result = res;
	return 0;
}
