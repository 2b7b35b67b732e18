/*
 * move.c: a snapshot that moves to another host (denvd(8), "Moving a
 * snapshot"). The control plane relays it over the two hosts' streams (hosts
 * never listen, and each reaches only the control plane), one bounded part
 * at a time, with four commands:
 *   snap.export  on the source: each volume of the snapshot becomes one
 *                stream file, <data>/moves/out.<snap>.<vol>.<format>: a
 *                `btrfs send` stream (format btrfs), a `zfs send` stream
 *                (format zfs), or a tar of the volume's tree (format tar:
 *                any backend but zfs). Answer: the
 *                manifest {format, env, volumes: [{name, bytes, sha256}],
 *                record}; the sha256 is of the stream as written here.
 *                Kept for SC_MOVE_KEEP_S, so a second move (to a third host)
 *                sends the same files; asked again, it answers the same.
 *   snap.read    on the source: bytes [offset, offset+length) of one stream,
 *                answered as an archive in chunk frames (as env.get).
 *   snap.write   on the target: a part in chunk frames (as env.context)
 *                appended to <data>/moves/in.<env>.<snap>.<vol> when it
 *                continues what is held; answer {have}.
 *   snap.import  on the target: each received stream's size and sha256
 *                against the source's manifest (a mismatch fails and removes
 *                every partial file and tree of the move), then `btrfs
 *                receive`, `zfs receive` or a safe tar extraction (owners
 *                and modes kept)
 *                into the snapshot's place, and the record written last
 *                (with this host's backend): the snapshot then exists here
 *                as if taken here, so env.fork and env.rollback find it.
 * A zfs snapshot moves only as a zfs stream, so only to a zfs host: it
 * has no tree of its own to tar (the control plane refuses the rest).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/crypto.h"
#include "base/fs.h"
#include "base/str.h"
#include "base/sys.h"
#include "sidecar/sidecar.h"
#include "sidecar/storage/storage.h"
#include "tar/tar.h"

static const struct tar_limits tree_limits = { SC_MOVE_TREE_ENTRIES_MAX, SC_MOVE_TREE_BYTES_MAX, 0, 0 };

/* A volume name as compose allows it, safe as one path component. */
static bool vol_ok(const char *v)
{
	size_t n = v ? strlen(v) : 0;

	if (n == 0 || n > SC_MOVE_VOL_MAX || v[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') || (v[i] >= '0' && v[i] <= '9') ||
		      v[i] == '_' || v[i] == '-' || v[i] == '.'))
			return false;
	return true;
}

static bool format_ok(const char *f)
{
	return str_eq(f, "tar") || str_eq(f, "btrfs") || str_eq(f, "zfs");
}

static void moves_dir(const struct wk *w, char *out, size_t n)
{
	snprintf(out, n, "%s/moves", w->data);
}

static void out_path(const struct wk *w, const char *snap, const char *vol, const char *fmt, char *out, size_t n)
{
	snprintf(out, n, "%s/moves/out.%s.%s.%s", w->data, snap, vol, fmt);
}

static void in_path(const struct wk *w, const char *env, const char *snap, const char *vol, char *out, size_t n)
{
	snprintf(out, n, "%s/moves/in.%s.%s.%s", w->data, env, snap, vol);
}

/* Where the backend keeps the snapshot's volumes: <data or btrfs root>/snaps/<env>/<snap>;
 * none for a zfs stream. A stream's format needs its backend at both ends. */
static int snap_tree(const struct stg *s, const char *env, const char *snap, const char *fmt, char *out, size_t n,
		     struct err *e)
{
	bool zfs = s->ops == &stg_zfs_ops;

	*out = '\0';
	if (str_eq(fmt, "btrfs") && s->ops != &stg_btrfs_ops)
		return err_set(e, "snapshot %s is on %s here: a btrfs stream needs btrfs", snap, s->ops->name);
	if (zfs != str_eq(fmt, "zfs"))
		return err_set(e, "snapshot %s is on %s here: a zfs snapshot moves only as a zfs stream, between zfs "
				  "hosts",
			       snap, s->ops->name);
	if (!zfs)
		snprintf(out, n, "%s/snaps/%s/%s", s->ops == &stg_btrfs_ops ? s->root : s->data, env, snap);
	return 0;
}

static int64_t file_bytes(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? (int64_t)st.st_size : -1;
}

/* ---- snap.export ---- */

static struct json *stream_entry(const char *vol, int64_t bytes, const char *sha)
{
	struct json *o = json_new_object();

	json_object_set_str(o, "name", vol);
	json_object_set_int(o, "bytes", bytes);
	json_object_set_str(o, "sha256", sha);
	return o;
}

static struct json *manifest_new(const char *snap, const char *env, const char *fmt, const struct json *rec)
{
	struct json *m = json_new_object();
	char ts[CLOCK_RFC3339_MAX];

	clock_format_rfc3339(clock_now_ns(), ts);
	json_object_set_str(m, "snapshot", snap);
	json_object_set_str(m, "env", env);
	json_object_set_str(m, "format", fmt);
	json_object_set_str(m, "exported_at", ts);
	json_object_set(m, "volumes", json_new_array());
	json_object_set(m, "record", json_dup(rec));
	return m;
}

/* The volume's tree as a tar stream into the file at path. */
static int write_tar(const char *tree, const char *path, struct err *e)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	struct tar_writer *tw;
	int rc;

	if (fd < 0)
		return err_errno(e, "open %s", path);
	tw = tar_writer_new_fd(fd);
	rc = tar_write_tree(tree, "", tw, &tree_limits, 0, e);
	if (rc == 0)
		rc = tar_writer_finish(tw, e);
	tar_writer_free(tw);
	if (rc == 0 && fsync(fd) < 0)
		rc = err_errno(e, "fsync %s", path);
	sys_close(fd);
	return rc;
}

/* The snapshot's volume as one stream file, made beside its final name
 * and renamed. */
static int export_volume(const struct stg *s, const char *env, const char *snap, const char *tree, const char *vol,
			 const char *fmt, const char *path, struct err *e)
{
	char tmp[STG_PATH_MAX + 8], src[STG_PATH_MAX + 300];
	const char *argv[] = { "btrfs", "send", "-q", "-f", tmp, src, NULL };
	int rc;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	snprintf(src, sizeof(src), "%s/%s", tree, vol);
	unlink(tmp);
	if (str_eq(fmt, "zfs"))
		rc = stg_zfs_send(s, env, vol, snap, tmp, e);
	else
		rc = str_eq(fmt, "btrfs") ? stg_run(argv, NULL, e) : write_tar(src, tmp, e);
	if (rc < 0) {
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, path) < 0)
		return err_errno(e, "rename %s", tmp);
	return 0;
}

/* The manifest kept from an earlier export, when every stream is still whole. */
static struct json *kept_manifest(const struct wk *w, const char *path)
{
	struct json *m = NULL;
	const struct json *vols;
	char sp[STG_PATH_MAX];
	struct err e;

	if (!fs_exists(path) || snap_read_json(path, &m, &e) < 0)
		return NULL;
	vols = json_get(m, "volumes");
	for (size_t i = 0; i < json_len(vols); i++) {
		const struct json *v = json_at(vols, i);

		out_path(w, json_get_str(m, "snapshot"), json_get_str(v, "name"), json_get_str(m, "format"), sp,
			 sizeof(sp));
		if (file_bytes(sp) != json_get_int(v, "bytes", -2)) {
			json_free(m);
			return NULL;
		}
	}
	return m;
}

static int export_all(struct wk *w, const struct stg *s, const char *env, const char *snap, const char *fmt,
		      const struct json *rec, const char *tree, struct json *vols_out, struct err *e)
{
	const struct json *vols = json_get(rec, "volumes");
	char path[STG_PATH_MAX], hex[SHA256_HEX_LEN + 1];

	for (size_t i = 0; i < json_len(vols); i++) {
		const struct json *vj = json_at(vols, i);
		const char *vol = vj && vj->type == JSON_STRING ? vj->u.str.s : NULL;
		int64_t t0 = ev_mono_ms();

		if (!vol_ok(vol))
			return err_set(e, "volume name \"%s\" cannot be moved", vol ? vol : "");
		out_path(w, snap, vol, fmt, path, sizeof(path));
		if (export_volume(s, env, snap, tree, vol, fmt, path, e) < 0 || sc_file_sha256(path, hex, e) < 0)
			return err_prefix(e, "volume \"%s\"", vol);
		wk_progress("volume %s: %lld bytes of %s stream in %lld ms", vol, (long long)file_bytes(path), fmt,
			    (long long)(ev_mono_ms() - t0));
		json_array_push(vols_out, stream_entry(vol, file_bytes(path), hex));
	}
	return 0;
}

int cmd_snap_export(struct wk *w, const struct json *p, struct json **result, struct err *e)
{
	const char *snap = json_get_str(p, "snapshot"), *fmt = json_get_str(p, "format");
	char env[SC_ID_MAX], dir[STG_PATH_MAX], tree[STG_PATH_MAX], mpath[STG_PATH_MAX + 64];
	struct json *rec = NULL, *m;
	struct stg s;
	int rc = -1;

	if (!sc_safe_id(snap) || !format_ok(fmt))
		return err_set(e, "snap.export: payload needs snapshot (a version id) and format (tar, btrfs or zfs)");
	moves_dir(w, dir, sizeof(dir));
	snprintf(mpath, sizeof(mpath), "%s/out.%s.%s.json", dir, snap, fmt);
	if ((m = kept_manifest(w, mpath))) {
		wk_progress("snapshot %s: the %s streams exported earlier are still here", snap, fmt);
		*result = m;
		return 0;
	}
	if (snap_find(w, json_get_str(p, "from_env"), snap, env, sizeof(env), &rec, e) < 0)
		return err_prefix(e, "snap.export");
	if (stg_open(&s, w, json_get_str(rec, "storage") ? json_get_str(rec, "storage") : "dir", e) < 0 ||
	    snap_tree(&s, env, snap, fmt, tree, sizeof(tree), e) < 0)
		goto out;
	if (fs_mkdir_p(dir, 0700, e) < 0)
		goto out;
	m = manifest_new(snap, env, fmt, rec);
	if (export_all(w, &s, env, snap, fmt, rec, tree, json_get(m, "volumes"), e) < 0 || snap_write_json(mpath, m, e) < 0) {
		json_free(m);
		goto out;
	}
	*result = m;
	rc = 0;
out:
	json_free(rec);
	return rc < 0 ? err_prefix(e, "snap.export") : 0;
}

/* ---- snap.read ---- */

int cmd_snap_read(struct wk *w, const struct json *p, struct json **result, struct err *e)
{
	const char *snap = json_get_str(p, "snapshot"), *fmt = json_get_str(p, "format");
	const char *vol = json_get_str(p, "volume");
	int64_t off = json_get_int(p, "offset", -1), len = json_get_int(p, "length", -1), size;
	char path[STG_PATH_MAX];
	char *part;
	ssize_t n;
	int fd, rc;

	if (!sc_safe_id(snap) || !format_ok(fmt) || !vol_ok(vol) || off < 0 || len < 0 ||
	    (uint64_t)len > SC_ARCHIVE_MAX)
		return err_set(e, "snap.read: payload needs snapshot, format, volume, offset and a length of at most "
				  "32 MiB");
	out_path(w, snap, vol, fmt, path, sizeof(path));
	if ((size = file_bytes(path)) < 0)
		return err_set(e, "snap.read: volume %s of snapshot %s was not exported here (or has expired)", vol,
			       snap);
	if (off > size || len > size - off)
		return err_set(e, "snap.read: bytes %lld to %lld are past the stream's %lld", (long long)off,
			       (long long)(off + len), (long long)size);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return err_errno(e, "snap.read: %s", path);
	part = xmalloc((size_t)len + 1);
	n = len ? pread(fd, part, (size_t)len, (off_t)off) : 0;
	sys_close(fd);
	if (n != (ssize_t)len) {
		free(part);
		return n < 0 ? err_errno(e, "snap.read: %s", path) : err_set(e, "snap.read: %s is shorter than it was",
										  path);
	}
	rc = sc_archive_answer(w, part, (size_t)len, result, e);
	free(part);
	return rc;
}

/* ---- snap.write ---- */

int cmd_snap_write(struct wk *w, const struct json *p, struct json **result, struct err *e)
{
	const char *snap = json_get_str(p, "snapshot"), *env = json_get_str(p, "from_env");
	const char *vol = json_get_str(p, "volume");
	int64_t size = json_get_int(p, "size", -1), have;
	char dir[STG_PATH_MAX], part[STG_PATH_MAX];

	if (!sc_safe_id(snap) || !sc_safe_id(env) || !vol_ok(vol) || size < 0 ||
	    (uint64_t)size > SC_MOVE_TREE_BYTES_MAX)
		return err_set(e, "snap.write: payload needs snapshot, from_env, volume and size");
	moves_dir(w, dir, sizeof(dir));
	in_path(w, env, snap, vol, part, sizeof(part));
	if (fs_mkdir_p(dir, 0700, e) < 0)
		return err_prefix(e, "snap.write");
	have = file_bytes(part) < 0 ? 0 : file_bytes(part);
	/* A first part at offset 0 starts the stream again (an earlier move
	 * that stopped midway left its bytes). */
	if (json_get_int(p, "offset", -1) == 0 && have > 0) {
		unlink(part);
		have = 0;
	}
	if (sc_part_take("snap.write", w, p, part, &have, e) < 0)
		return -1;
	*result = json_new_object();
	json_object_set_int(*result, "have", have);
	return 0;
}

/* ---- snap.import ---- */

/* Every received stream of the manifest's volumes is removed. */
static void drop_parts(const struct wk *w, const char *env, const char *snap, const struct json *vols)
{
	char part[STG_PATH_MAX];

	for (size_t i = 0; i < json_len(vols); i++) {
		const char *vol = json_get_str(json_at(vols, i), "name");

		if (vol_ok(vol)) {
			in_path(w, env, snap, vol, part, sizeof(part));
			unlink(part);
		}
	}
}

/* Each stream whole and as the source hashed it. */
static int check_streams(const struct wk *w, const char *env, const char *snap, const struct json *vols,
			 struct err *e)
{
	char part[STG_PATH_MAX], hex[SHA256_HEX_LEN + 1];

	/* No volumes (a stateless stack): only the record moves. */
	if (vols && vols->type != JSON_ARRAY)
		return err_set(e, "the manifest's volumes are not a list");
	for (size_t i = 0; i < json_len(vols); i++) {
		const struct json *v = json_at(vols, i);
		const char *vol = json_get_str(v, "name"), *want = json_get_str(v, "sha256");
		int64_t bytes = json_get_int(v, "bytes", -1), got;

		if (!vol_ok(vol) || !want || strlen(want) != SHA256_HEX_LEN)
			return err_set(e, "the manifest's volume %zu has no usable name and sha256", i);
		in_path(w, env, snap, vol, part, sizeof(part));
		if ((got = file_bytes(part)) != bytes)
			return err_set(e, "volume \"%s\": got %lld of %lld bytes", vol, (long long)(got < 0 ? 0 : got),
				       (long long)bytes);
		if (sc_file_sha256(part, hex, e) < 0)
			return err_prefix(e, "volume \"%s\"", vol);
		if (!str_eq(hex, want))
			return err_set(e, "volume \"%s\": stream sha256 mismatch (the source sent %.12s…, %.12s… arrived)",
				       vol, want, hex);
	}
	return 0;
}

/* One received stream becomes volume vol of the snapshot (at tree, or a
 * zfs snapshot of env's); what the record lists for it into ds. */
static int receive_volume(const struct stg *s, const char *fmt, const char *part, const char *tree, const char *env,
			  const char *snap, const char *vol, char *ds, size_t n, struct err *e)
{
	char dst[STG_PATH_MAX + 300];
	const char *recv[] = { "btrfs", "receive", "-q", "-f", part, tree, NULL };
	const char *mk[] = { "btrfs", "subvolume", "create", dst, NULL };
	unsigned flags = TAR_X_KEEP_OWNER | TAR_X_KEEP_SPECIAL_BITS | TAR_X_ALLOW_ESCAPING_SYMLINKS | TAR_X_SKIP_SPECIAL;
	int fd, rc;

	if (str_eq(fmt, "zfs"))
		return stg_zfs_recv(s, env, vol, snap, part, ds, n, e);
	snprintf(dst, sizeof(dst), "%s/%s", tree, vol);
	str_copy(ds, n, dst);
	if (str_eq(fmt, "btrfs"))
		return stg_run(recv, NULL, e);
	/* A tar into btrfs lands in a subvolume: a fork is a snapshot of it. */
	if (s->ops == &stg_btrfs_ops ? stg_run(mk, NULL, e) : fs_mkdir_p(dst, 0755, e))
		return -1;
	if ((fd = open(part, O_RDONLY | O_CLOEXEC)) < 0)
		return err_errno(e, "open %s", part);
	rc = tar_extract_fd(fd, dst, &tree_limits, flags, NULL, e);
	sys_close(fd);
	return rc;
}

/* The record as the source wrote it, made this host's: its backend, its datasets. */
static struct json *local_record(const struct json *p, const struct stg *s, struct json *datasets)
{
	struct json *rec = json_dup(json_get(p, "record"));
	struct json *moved = json_new_object();
	char ts[CLOCK_RFC3339_MAX];

	clock_format_rfc3339(clock_now_ns(), ts);
	json_object_set_str(rec, "storage", s->ops->name);
	json_object_set(rec, "datasets", datasets);
	json_object_set_str(moved, "format", json_get_str(p, "format"));
	json_object_set_str(moved, "at", ts);
	json_object_set(moved, "volumes", json_dup(json_get(p, "volumes")));
	json_object_set(rec, "moved", moved);
	return rec;
}

static int import_all(struct wk *w, const struct json *p, const struct stg *s, const char *tree, struct err *e)
{
	const char *snap = json_get_str(p, "snapshot"), *env = json_get_str(p, "from_env");
	const char *fmt = json_get_str(p, "format");
	const struct json *vols = json_get(p, "volumes");
	char part[STG_PATH_MAX], rdir[STG_PATH_MAX], rpath[STG_PATH_MAX + 32];
	struct json *datasets = json_new_array(), *rec;
	int rc;

	if (*tree && (stg_remove_tree(tree, e) < 0 || fs_mkdir_p(tree, 0700, e) < 0)) {
		json_free(datasets);
		return -1;
	}
	for (size_t i = 0; i < json_len(vols); i++) {
		const char *vol = json_get_str(json_at(vols, i), "name");
		char ds[STG_PATH_MAX + 300];

		in_path(w, env, snap, vol, part, sizeof(part));
		if (receive_volume(s, fmt, part, tree, env, snap, vol, ds, sizeof(ds), e) < 0) {
			json_free(datasets);
			return err_prefix(e, "volume \"%s\"", vol);
		}
		json_array_push(datasets, json_new_str(ds));
		wk_progress("volume %s received (%s)", vol, fmt);
	}
	snap_dir(w->data, env, snap, rdir, sizeof(rdir));
	snprintf(rpath, sizeof(rpath), "%s/snapshot.json", rdir);
	rec = local_record(p, s, datasets);
	rc = fs_mkdir_p(rdir, 0700, e) < 0 ? -1 : snap_write_json(rpath, rec, e);
	json_free(rec);
	return rc;
}

int cmd_snap_import(struct wk *w, const struct json *p, struct json **result, struct err *e)
{
	const char *snap = json_get_str(p, "snapshot"), *env = json_get_str(p, "from_env");
	const char *fmt = json_get_str(p, "format");
	const struct json *vols = json_get(p, "volumes");
	char tree[STG_PATH_MAX];
	struct json *rec = NULL;
	struct stg s;
	int rc;

	if (!sc_safe_id(snap) || !sc_safe_id(env) || !format_ok(fmt) || !json_get(p, "record"))
		return err_set(e, "snap.import: payload needs snapshot, from_env, format, volumes and record");
	if ((rc = snap_record_load(w->data, env, snap, &rec, e)) != 0) {
		/* Here already (a command re-sent under another id). */
		if (rc > 0) {
			*result = json_new_object();
			json_object_set_str(*result, "snapshot", snap);
			json_object_set_str(*result, "storage", json_get_str(rec, "storage"));
			json_object_set(*result, "datasets", json_dup(json_get(rec, "datasets")));
			json_free(rec);
			drop_parts(w, env, snap, vols);
			return 0;
		}
		return err_prefix(e, "snap.import");
	}
	if (stg_open(&s, w, stg_host_backend(w->zfs_pool, w->btrfs_root), e) < 0 ||
	    snap_tree(&s, env, snap, fmt, tree, sizeof(tree), e) < 0)
		return err_prefix(e, "snap.import");
	if (check_streams(w, env, snap, vols, e) < 0 || import_all(w, p, &s, tree, e) < 0) {
		struct err e2;

		/* Nothing half-received stays: the next move starts clean. */
		drop_parts(w, env, snap, vols);
		if (str_eq(fmt, "zfs") && s.ops->drop_snapshot(&s, env, snap, &e2) < 0)
			wk_progress("removing the received zfs snapshots: %s", e2.msg);
		if (*tree && fs_exists(tree) && stg_remove_tree(tree, &e2) < 0)
			wk_progress("removing %s: %s", tree, e2.msg);
		return err_prefix(e, "snap.import");
	}
	drop_parts(w, env, snap, vols);
	*result = json_new_object();
	json_object_set_str(*result, "snapshot", snap);
	json_object_set_str(*result, "storage", s.ops->name);
	json_object_set_str(*result, "format", fmt);
	return 0;
}

/* ---- the sweep ---- */

static int64_t move_keep(const char *name)
{
	return str_has_prefix(name, "out.") || str_has_prefix(name, "in.") ? SC_MOVE_KEEP_S : -1;
}

int move_prune(const char *data, int64_t now_s)
{
	char dir[4096];

	snprintf(dir, sizeof(dir), "%s/moves", data);
	return fs_prune_files(dir, now_s, move_keep);
}
