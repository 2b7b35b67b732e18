/*
 * orch_move.c: a fork or rollback whose version's snapshot is not on the
 * host the environment runs on moves the snapshot there first (denv-cp(8),
 * "Moving snapshots"). Hosts never listen and may sit on networks that
 * cannot reach each other; each reaches the control plane, so the control
 * plane relays, one part of at most CP_MOVE_PART_BYTES at a time over the
 * existing chunked transfer (doc/host-stream-chunks.md): memory here is one
 * part per move whatever the snapshot's size. The steps, each one command:
 *   snap.export  source: each volume as one stream (btrfs send when both
 *                hosts are btrfs, zfs send when both are zfs, else a tar
 *                stream), with its sha256
 *   snap.read    source: a part of one stream (chunks before the result)
 *   snap.write   target: that part, appended (chunks before the command)
 *   snap.import  target: each stream's sha256 against the source's, then
 *                receive; a mismatch fails the phase and the target removes
 *                what it received
 * A progress event after each part says the bytes so far. The version's
 * SnapshotHosts then lists the target, so the next fork there does not move.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "cp/orch.h"

struct json *cp_version_holders(struct cp *cp, const struct json *v)
{
	const struct json *held = json_get(v, "SnapshotHosts");
	const struct json *env = st_get(cp->db, "environments", json_get_str(v, "EnvID"));
	const char *home = json_get_str(env, "HostID");
	struct json *out;

	if (held && held->type == JSON_ARRAY && json_len(held))
		return json_dup(held);
	/* Versions from before moves: the snapshot is where its env ran. */
	out = json_new_array();
	if (home && *home)
		json_array_push(out, json_new_str(home));
	return out;
}

struct json *run_snapshot_hosts(const struct cp_run *r)
{
	struct json *h = json_new_array();

	json_array_push(h, json_new_str(r->host_id));
	return h;
}

bool cp_version_held_on(struct cp *cp, const struct json *v, const char *host_id)
{
	struct json *h = cp_version_holders(cp, v);
	bool found = false;

	for (size_t i = 0; i < json_len(h) && !found; i++)
		found = str_eq(json_at(h, i)->u.str.s, host_id);
	json_free(h);
	return found;
}

static struct json *mv(struct cp_run *r)
{
	return json_get(r->ctx, "move");
}

static const char *mv_str(struct cp_run *r, const char *key)
{
	return json_get_str(mv(r), key);
}

static const char *host_storage(struct cp *cp, const char *host_id)
{
	const char *s = json_get_str(json_get(st_get(cp->db, "hosts", host_id), "Capabilities"), "storage");

	return s && *s ? s : "dir";
}

/* btrfs send between btrfs hosts, zfs send between zfs hosts, else a tar. */
static const char *move_format(const char *from_st, const char *to_st)
{
	if (str_eq(from_st, to_st) && (str_eq(from_st, "btrfs") || str_eq(from_st, "zfs")))
		return from_st;
	return "tar";
}

/* The host's error names its command ("snap.import: ..."). */
static void mv_fail(struct cp_run *r, const struct cp_result *res)
{
	run_fail(r, NULL, "moving snapshot %s from host %s to host %s: %s", mv_str(r, "snapshot"),
		 mv_str(r, "from_host"), mv_str(r, "to_host"), res->error);
}

static void mv_done(struct cp_run *r)
{
	run_phase_fn then = r->after_move;

	r->after_move = NULL;
	then(r);
}

static int64_t total_bytes(const struct json *manifest)
{
	const struct json *vols = json_get(manifest, "volumes");
	int64_t n = 0;

	for (size_t i = 0; i < json_len(vols); i++)
		n += json_get_int(json_at(vols, i), "bytes", 0);
	return n;
}

static void progress(struct cp_run *r, const char *vol)
{
	const struct json *m = mv(r);
	char msg[300];

	snprintf(msg, sizeof(msg), "moving snapshot %s to host %s: %lld of %lld bytes (volume %s)",
		 json_get_str(m, "snapshot"), json_get_str(m, "to_host"), (long long)json_get_int(m, "done", 0),
		 (long long)json_get_int(m, "total", 0), vol);
	run_event(r, "progress",
		  cp_obj("message", json_new_str(msg), "move", json_new_str(json_get_str(m, "snapshot")), "bytes",
			 json_new_int(json_get_int(m, "done", 0)), "total", json_new_int(json_get_int(m, "total", 0)),
			 "from_host", json_new_str(json_get_str(m, "from_host")), "to_host",
			 json_new_str(json_get_str(m, "to_host")), NULL));
}

static void imported(struct cp_run *r, const struct cp_result *res)
{
	struct json *m = mv(r), *holders;
	const char *vid = json_get_str(m, "version");

	if (!res->ok) {
		mv_fail(r, res);
		return;
	}
	holders = cp_version_holders(r->cp, st_get(r->cp->db, "versions", vid));
	json_array_push(holders, json_new_str(json_get_str(m, "to_host")));
	cp_update(r->cp, "versions", vid, cp_obj("SnapshotHosts", holders, NULL));
	json_object_set_int(m, "took_ms", run_took_ms(r) - json_get_int(m, "started_ms", 0));
	json_object_set(r->ctx, "moved",
			cp_obj("from_host", json_new_str(json_get_str(m, "from_host")), "to_host",
			       json_new_str(json_get_str(m, "to_host")), "format", json_new_str(json_get_str(m, "format")),
			       "bytes", json_new_int(json_get_int(m, "total", 0)), "took_ms",
			       json_new_int(json_get_int(m, "took_ms", 0)), NULL));
	log_info("orch", "snapshot %s moved from host %s to host %s: %lld bytes", json_get_str(m, "snapshot"),
		 json_get_str(m, "from_host"), json_get_str(m, "to_host"), (long long)json_get_int(m, "total", 0));
	mv_done(r);
}

static void import(struct cp_run *r)
{
	const struct json *m = mv(r), *man = json_get(m, "manifest");

	run_cmd_on(r, json_get_str(m, "to_host"), r->env_id, "snap.import",
		   cp_obj("snapshot", json_new_str(json_get_str(m, "snapshot")), "from_env",
			  json_new_str(json_get_str(m, "from_env")), "format", json_new_str(json_get_str(m, "format")),
			  "volumes", json_dup(json_get(man, "volumes")), "record", json_dup(json_get(man, "record")),
			  NULL),
		   NULL, 0, imported);
}

static void next_part(struct cp_run *r);

static void written(struct cp_run *r, const struct cp_result *res)
{
	struct json *m = mv(r);
	const struct json *vol = json_at(json_get(json_get(m, "manifest"), "volumes"), (size_t)json_get_int(m, "vol", 0));
	int64_t have = json_get_int(res->payload, "have", -1), want = json_get_int(m, "offset", 0) + json_get_int(m, "len", 0);
	int64_t before = json_get_int(m, "vol_done_before", 0);

	if (!res->ok) {
		mv_fail(r, res);
		return;
	}
	if (have < 0 || have > json_get_int(vol, "bytes", 0)) {
		run_fail(r, NULL, "moving snapshot %s: host %s holds %lld bytes of volume %s", mv_str(r, "snapshot"),
			 mv_str(r, "to_host"), (long long)have, json_get_str(vol, "name"));
		return;
	}
	/* A part the target did not take (it held another offset) is sent
	 * again from what it holds, a bounded number of times. */
	if (have != want && json_get_int(m, "resends", 0) >= CP_MOVE_RESENDS_MAX) {
		run_fail(r, NULL, "moving snapshot %s: host %s keeps holding %lld bytes of volume %s, not %lld",
			 mv_str(r, "snapshot"), mv_str(r, "to_host"), (long long)have, json_get_str(vol, "name"),
			 (long long)want);
		return;
	}
	if (have != want)
		json_object_set_int(m, "resends", json_get_int(m, "resends", 0) + 1);
	json_object_set_int(m, "offset", have);
	json_object_set_int(m, "done", before + have);
	progress(r, json_get_str(vol, "name"));
	if (have == json_get_int(vol, "bytes", 0)) {
		json_object_set_int(m, "vol", json_get_int(m, "vol", 0) + 1);
		json_object_set_int(m, "offset", 0);
		json_object_set_int(m, "vol_done_before", before + have);
	}
	next_part(r);
}

static void read_back(struct cp_run *r, const struct cp_result *res)
{
	struct json *m = mv(r);
	const struct json *vol = json_at(json_get(json_get(m, "manifest"), "volumes"), (size_t)json_get_int(m, "vol", 0));
	struct buf part = BUF_INIT;
	struct err e;

	if (!res->ok) {
		mv_fail(r, res);
		return;
	}
	buf_init(&part, CP_ARCHIVE_MAX);
	if (cp_result_archive(res, &part, &e) < 0 || (int64_t)part.len != json_get_int(m, "len", -1)) {
		buf_release(&part);
		run_fail(r, NULL, "moving snapshot %s: host %s answered %zu bytes of volume %s, not %lld",
			 mv_str(r, "snapshot"), mv_str(r, "from_host"), part.len, json_get_str(vol, "name"),
			 (long long)json_get_int(m, "len", -1));
		return;
	}
	run_cmd_on(r, json_get_str(m, "to_host"), r->env_id, "snap.write",
		   cp_obj("snapshot", json_new_str(json_get_str(m, "snapshot")), "from_env",
			  json_new_str(json_get_str(m, "from_env")), "volume", json_new_str(json_get_str(vol, "name")),
			  "offset", json_new_int(json_get_int(m, "offset", 0)), "size",
			  json_new_int(json_get_int(vol, "bytes", 0)), NULL),
		   &part, 0, written);
	buf_release(&part);
}

static void next_part(struct cp_run *r)
{
	struct json *m = mv(r);
	const struct json *vols = json_get(json_get(m, "manifest"), "volumes");
	const struct json *vol = json_at(vols, (size_t)json_get_int(m, "vol", 0));
	int64_t off = json_get_int(m, "offset", 0), bytes = json_get_int(vol, "bytes", 0), len;

	if (!vol) {
		import(r);
		return;
	}
	len = bytes - off < (int64_t)CP_MOVE_PART_BYTES ? bytes - off : (int64_t)CP_MOVE_PART_BYTES;
	json_object_set_int(m, "len", len);
	run_cmd_on(r, json_get_str(m, "from_host"), json_get_str(m, "from_env"), "snap.read",
		   cp_obj("snapshot", json_new_str(json_get_str(m, "snapshot")), "format",
			  json_new_str(json_get_str(m, "format")), "volume", json_new_str(json_get_str(vol, "name")),
			  "offset", json_new_int(off), "length", json_new_int(len), NULL),
		   NULL, 0, read_back);
}

static void exported(struct cp_run *r, const struct cp_result *res)
{
	struct json *m = mv(r);
	const struct json *vols = json_get(res->payload, "volumes");

	if (!res->ok) {
		mv_fail(r, res);
		return;
	}
	/* No volumes is a stateless stack's snapshot: only its record moves. */
	if (!vols || vols->type != JSON_ARRAY || !json_get(res->payload, "record")) {
		run_fail(r, NULL, "moving snapshot %s: host %s exported no manifest of volumes and record",
			 mv_str(r, "snapshot"), mv_str(r, "from_host"));
		return;
	}
	json_object_set(m, "manifest", json_dup(res->payload));
	json_object_set_int(m, "total", total_bytes(res->payload));
	json_object_set_int(m, "done", 0);
	progress(r, json_len(vols) ? json_get_str(json_at(vols, 0), "name") : "");
	next_part(r);
}

/* The first connected host holding the snapshot, into out; false if none. */
static bool pick_source(struct cp *cp, const struct json *holders, char out[ID_MAX])
{
	for (size_t i = 0; i < json_len(holders); i++)
		if (cp_host_connected(cp, json_at(holders, i)->u.str.s)) {
			str_copy(out, ID_MAX, json_at(holders, i)->u.str.s);
			return true;
		}
	return false;
}

void run_move(struct cp_run *r, const char *version_id, const char *to_host, run_phase_fn then)
{
	const struct json *v = st_get(r->cp->db, "versions", version_id);
	struct json *holders = cp_version_holders(r->cp, v);
	const char *to_st = host_storage(r->cp, to_host), *from_st;
	char from[ID_MAX];

	r->after_move = then;
	if (cp_version_held_on(r->cp, v, to_host)) {
		json_free(holders);
		mv_done(r);
		return;
	}
	if (!pick_source(r->cp, holders, from)) {
		json_free(holders);
		run_fail(r, NULL, "the snapshot of version %s is on no connected host", version_id);
		return;
	}
	json_free(holders);
	from_st = host_storage(r->cp, from);
	/* A zfs snapshot has no tree to tar, and a zfs host takes no tar. */
	if (str_eq(from_st, "zfs") != str_eq(to_st, "zfs")) {
		run_fail(r, NULL, "moving snapshot %s from host %s (%s) to host %s (%s): a zfs snapshot moves only "
				  "between zfs hosts (zfs send/receive)",
			 json_get_str(v, "Snapshot"), from, from_st, to_host, to_st);
		return;
	}
	json_object_set(r->ctx, "move",
			cp_obj("version", json_new_str(version_id), "snapshot", json_new_str(json_get_str(v, "Snapshot")),
			       "from_env", json_new_str(json_get_str(v, "EnvID")), "from_host", json_new_str(from),
			       "to_host", json_new_str(to_host), "format",
			       json_new_str(move_format(from_st, to_st)),
			       "vol", json_new_int(0), "offset", json_new_int(0), "started_ms",
			       json_new_int(run_took_ms(r)), NULL));
	run_cmd_on(r, from, json_get_str(v, "EnvID"), "snap.export",
		   cp_obj("snapshot", json_new_str(json_get_str(v, "Snapshot")), "from_env",
			  json_new_str(json_get_str(v, "EnvID")), "format", json_new_str(mv_str(r, "format")), NULL),
		   NULL, 0, exported);
}
