/*
 * storage.h: where an environment's volumes live, and how they are captured,
 * cloned and restored. One backend per file behind one small table of
 * operations:
 *   storage_dir.c    dir    plain directories; snapshots and forks are copies
 *   storage_btrfs.c  btrfs  a subvolume per volume; read-only snapshots,
 *                           writable snapshot-of-snapshot forks
 *   storage_zfs.c    zfs    a dataset per volume; zfs snapshot -r, clone, rollback
 * and the leaf every backend calls: storage_vols.c (the volume directories,
 * their sync, their usage).
 * The snapshot layer (snapshot.c) does everything the backends share: the
 * freeze, the snapshot record, forks' origins, what a destroy may remove.
 *
 * Naming: a snapshot is (env, name), name being the version id. Its record
 * is <data>/snaps/<env>/<name>/snapshot.json (written last: a snapshot exists
 * when its record does); dir keeps its copies beside the record.
 */
#ifndef DENV_SIDECAR_STORAGE_H
#define DENV_SIDECAR_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "json/json.h"

/* Longest path below a tree's root the copier makes (PATH_MAX): it holds
 * no fd per level, so this, not the depth, is what bounds a tree (2048
 * levels of one-letter names). Past it a copy fails with ENAMETOOLONG. */
#define STG_PATH_MAX 4096
/* Longest symlink target and xattr list/value the copier carries. */
#define STG_XATTR_LIST_MAX ((size_t)64 << 10)
#define STG_XATTR_VALUE_MAX ((size_t)64 << 10)
/* btrfs and zfs CLI calls: each is a metadata operation. */
#define STG_CMD_TIMEOUT_MS 120000
/* Forks of forks are followed this deep when reclaiming a destroyed origin. */
#define STG_RECLAIM_DEPTH_MAX 64
#define STG_USAGE_DEPTH_MAX 256		/* directory levels stg_tree_bytes descends */
#define STG_USAGE_ENTRIES_MAX 10000000	/* entries it counts before giving up */
#define STG_DIGEST_READ_CHUNK ((size_t)64 << 10)	/* one read of a file being digested */
#define STG_DIGEST_DIR_ENTRIES_MAX ((size_t)1 << 20)	/* names in one directory */
#define STG_ZPOOL_PROBE_TIMEOUT_MS 10000	/* zpool list, looking for the pool */
/* Our layout has subvolumes at most this deep below a directory we remove. */
#define STG_BTRFS_SCAN_DEPTH 4
#define STG_COPY_CHUNK ((size_t)1 << 20)	/* one read of storage_copy.c */
#define STG_FILL_TIMEOUT_MS (10 * 60 * 1000)	/* filling one volume from its image */
#define STG_ZFS_NAME_MAX 1024			/* a dataset name */
#define STG_ZFS_LIST_MAX ((size_t)4 << 20)	/* zfs list output */
#define STG_ZFS_ARGS_MAX 16			/* arguments of one zfs call */

struct stg;

struct stg_ops {
	const char *name;	/* the capability: dir | btrfs | zfs */
	/* Make the env's volume directory exist; its path into voldir. */
	int (*env_prepare)(const struct stg *s, const char *env, char *voldir, size_t n, struct err *e);
	/* tree (a complete directory under voldir) becomes volume vol. */
	int (*adopt)(const struct stg *s, const char *env, const char *vol, const char *tree, struct err *e);
	/* Flush dirty data of env's volumes before the freeze (never during it). */
	int (*sync)(const struct stg *s, const char *env, struct err *e);
	/* Capture every volume in vols of env under name, at one instant (the
	 * containers are paused). One dataset string per volume into datasets. */
	int (*snapshot)(const struct stg *s, const char *env, const char *name, const struct json *vols,
			struct json *datasets, struct err *e);
	/* Volume vol of the snapshot (from_env, name) becomes volume vol of env
	 * (which has no such volume yet). */
	int (*clone)(const struct stg *s, const char *from_env, const char *name, const char *env,
		     const char *vol, struct err *e);
	/* Volume vol of env is replaced by its state in snapshot (from_env, name). */
	int (*restore)(const struct stg *s, const char *from_env, const char *name, const char *env,
		       const char *vol, struct err *e);
	/* Remove the captured data of one snapshot (the record is the caller's). */
	int (*drop_snapshot)(const struct stg *s, const char *env, const char *name, struct err *e);
	/* Remove the env's volumes. 1 when something had to be kept (zfs: a
	 * snapshot with clones lives on the volume), 0 when all is gone. */
	int (*drop_env)(const struct stg *s, const char *env, struct err *e);
	/* Bytes volume vol of env takes on the backend (env.metrics). */
	int (*usage)(const struct stg *s, const char *env, const char *vol, int64_t *bytes, struct err *e);
};

struct stg {
	const struct stg_ops *ops;
	const char *data;	/* denvd's data dir */
	const char *root;	/* btrfs: --btrfs-root; zfs: the pool */
	int64_t disk_mb;	/* the env's disk cap (disk.c); 0: none */
};

extern const struct stg_ops stg_dir_ops, stg_btrfs_ops, stg_zfs_ops;
/* zfs moves (storage_zfs.c): volume vol of env's snapshot name sent as a
 * `zfs send` stream into the file at path; a stream at path received as
 * that volume's snapshot (its full name into snap_out), found by name
 * afterwards as a snapshot taken here. */
int stg_zfs_send(const struct stg *s, const char *env, const char *vol, const char *name, const char *path,
		 struct err *e);
int stg_zfs_recv(const struct stg *s, const char *env, const char *vol, const char *name, const char *path,
		 char *snap_out, size_t n, struct err *e);

/* The backend called name ("dir", "btrfs", "zfs") with the worker's settings;
 * -1 when this host cannot serve it (no --btrfs-root, no pool). */
struct wk;
int stg_open(struct stg *s, const struct wk *w, const char *name, struct err *e);
/* The host's backend for new environments: zfs when the pool is given and
 * `zpool list <pool>` succeeds, btrfs when the root is given and on btrfs,
 * else dir. */
const char *stg_host_backend(const char *zfs_pool, const char *btrfs_root);
/* An env's backend: the one recorded in its spec.json, else the default. */
int stg_for_env(struct stg *s, const struct wk *w, const char *env, struct err *e);

/* storage_copy.c: cp -a in C. dst must not exist. Keeps owners, modes, times,
 * symlinks (not followed), hard links within the tree, holes of sparse files,
 * xattrs (ACLs included), FIFOs, sockets and device nodes. */
int stg_copy_tree(const char *src, const char *dst, struct err *e);
/* The same, saying which way each regular file's data went (files with data only). */
struct stg_copy_stats {
	uint64_t bytes;		/* of regular files, holes included */
	size_t reflinked;	/* FICLONE: extents shared, nothing copied */
	size_t copy_range;	/* copy_file_range: the kernel copied */
	size_t read_write;	/* neither worked (another filesystem): read and write */
};
int stg_copy_tree_stats(const char *src, const char *dst, struct stg_copy_stats *stats, struct err *e);
/* "12 files, 100 MiB: 12 reflinked" and the like, for progress lines. */
void stg_copy_stats_text(const struct stg_copy_stats *st, char *out, size_t n);
/* Why a copy, capture or clone failed because of what the volumes hold
 * rather than a fault of the host or of denv: a short reason ("disk full",
 * "name too long", "unreadable"), from e->code (the errno the copier kept)
 * or the storage CLI's words. NULL for anything else (an I/O
 * error, a missing tool, a bug): those stay errors. A verify scores such a
 * failure 0 (refused), since an agent can cause it at will. */
const char *stg_volume_fault(const struct err *e);
/* storage_vols.c: the blocks allocated under path (du's way: st_blocks, links not followed,
 * one file system, a file with several links counted at each). The dir and
 * btrfs backends' usage; bytes 0 when path does not exist. */
int stg_tree_bytes(const char *path, int64_t *bytes, struct err *e);
/* <voldir of env>/<vol> through the backend's env_prepare, walked. */
int stg_usage_walk(const struct stg *s, const char *env, const char *vol, int64_t *bytes, struct err *e);
/* digest.c: one SHA-256 over the tree at root ("sha256:<hex>" into out):
 * per entry, in bytewise name order below each directory, its path below
 * root, type and mode, owner, size, and a regular file's bytes or a link's
 * target; times are left out. Nothing is followed; only regular files are
 * opened. files and bytes (may be NULL) count what was hashed. */
#define STG_DIGEST_MAX (7 + 64 + 1)	/* "sha256:", 64 hex digits, NUL */
int stg_digest_tree(const char *root, char out[STG_DIGEST_MAX], uint64_t *files, uint64_t *bytes, struct err *e);
/* Remove a tree that may hold btrfs subvolumes or read-only snapshots. */
int stg_remove_tree(const char *path, struct err *e);

/* Run a storage CLI (btrfs, zfs) from argv; its stdout into out (may be NULL).
 * -1 with "<argv0> <argv1>: <first stderr line>" unless it exits 0. */
struct buf;
int stg_run(const char *const *argv, struct buf *out, struct err *e);
/* The same with stdin read from in_path and stdout written to out_path
 * (either NULL: none); what it writes is synced before it returns. */
int stg_run_file(const char *const *argv, const char *in_path, const char *out_path, struct err *e);

/* storage_btrfs.c: true when path is on a btrfs filesystem. */
bool stg_btrfs_path(const char *path);
/* The env's disk cap on btrfs: quotas enabled on the filesystem, a level-1
 * qgroup for the env (its id from the env's name) limited to mb MiB, and
 * every volume subvolume of the env assigned to it as it is made (adopt,
 * clone, restore). Snapshots are not assigned: they do not count. Writes
 * past the cap fail with EDQUOT inside the environment. */
int stg_btrfs_cap(const struct stg *s, const char *env, int64_t mb, struct err *e);

/* storage_vols.c: syncfs the filesystem holding <top>/envs/<env>/vol (the dir
 * and btrfs backends keep every volume of an env on one filesystem). */
int stg_sync_vols(const char *top, const char *env, struct err *e);
/* storage_vols.c: make <top>/envs/<env>/vol, its path in voldir (of size n),
 * where the dir and btrfs backends keep an env's volumes. */
int stg_make_vols(const char *top, const char *env, char *voldir, size_t n, struct err *e);
/* storage_fill.c: fill volumes that do not exist yet (create.c). images maps
 * an image reference to {id} for the images known to be on this host (may be
 * NULL): their content is cached by id. */
int storage_fill_with(const struct stg *s, const char *project, const char *env, const char *voldir,
		      const struct json *spec, const struct json *images, struct err *e);
/* Remove fill-cache entries unused for SC_FILL_CACHE_KEEP_S; how many. */
int storage_fill_prune(const char *data, int64_t now_s);

/* create.c: bring up env's stack from a spec (env.create, env.fork,
 * env.rollback). With from set, the volumes of the snapshot (from->env,
 * from->name) are cloned (a fork: the env is new) or restored (a rollback)
 * before the services start; volumes the snapshot lacks are filled fresh. */
struct create_from {
	const char *env, *name, *storage;
	bool restore;
};
int create_stack(struct wk *w, const char *kind, const struct json *spec, const struct create_from *from,
		 struct json **result, struct err *e);
/* The spec.json env.create wrote for env (the caller frees), or -1 with
 * "environment ... does not exist on this host". */
int create_read_spec(const struct wk *w, const char *env, struct json **spec, struct err *e);

/* snaprec.c: snapshot records. */
#define SC_SNAP_RECORD_MAX ((size_t)8 << 20)	/* one snapshot.json */
/* <data>/snaps/<env>/<name>: the snapshot's directory. */
void snap_dir(const char *data, const char *env, const char *name, char *out, size_t n);
int snap_read_json(const char *path, struct json **out, struct err *e);
int snap_write_json(const char *path, const struct json *j, struct err *e);
/* 1 and *rec when (env, name) has a record, 0 when not, -1 on error. */
int snap_record_load(const char *data, const char *env, const char *name, struct json **rec, struct err *e);
/* The record of snapshot name: looked for under hint_env, then env, then
 * every environment (names are version ids, unique on a host). 0 and *rec
 * (the caller frees) with its env in env_out, or -1. */
int snap_find(const struct wk *w, const char *hint_env, const char *name, char *env_out, size_t n,
	      struct json **rec, struct err *e);
/* snap_find, then *from set to clone from it (env_out, name, its storage;
 * restore false); *rec must outlive *from. */
int snap_from(const struct wk *w, const char *hint_env, const char *name, struct create_from *from, char *env_out,
	      size_t n, struct json **rec, struct err *e);

/* snapshot.c */
/* env.destroy's storage part: the env's volumes, and its snapshots that no
 * live fork depends on; what is kept is reclaimed when its last fork goes. */
int snap_destroy_env(struct wk *w, const char *env, struct err *e);

#endif
