/*
 * sidecar.h: denvd, the sidecar that runs environments on a Docker host.
 *
 * Two kinds of process share this binary:
 *  - the agent (verbs join / run): one poll() loop that keeps the outbound
 *    WebSocket to the control plane, acks commands, keeps one command at a
 *    time per environment, spools put archives and streams get archives;
 *  - a worker (hidden verb "__worker"), started by the agent for each
 *    command. It runs the command start to finish with blocking calls to the
 *    docker CLI, prints progress lines on stdout, writes the result into the
 *    command log, and exits. The command frame arrives on its stdin, which
 *    is the command's <id>.cmd file with an flock held: while the worker
 *    lives the lock is held, so an agent restarted after a crash can tell a
 *    command still running (lock busy) from one that was cut off (lock free).
 * Straight-line workers keep the agent's loop free for heartbeats and other
 * environments, and a command survives the agent being killed.
 *
 * Every limit is here or in a wing's header, named SC_ (IG_, NM_, NT_ for
 * ingress). The wings have folders: agent/ (the loop and the command log),
 * engine/ (Docker), ingress/ (ports and names), storage/ (the backends, with
 * storage/storage.h of their own); the worker commands are beside this.
 */
#ifndef DENV_SIDECAR_H
#define DENV_SIDECAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/err.h"
#include "base/ev.h"
#include "base/proc.h"
#include "json/json.h"

struct http_client;

#ifndef DENVD_VERSION
#define DENVD_VERSION "dev"
#endif

/* ---- session ---- */
#define SC_HEARTBEAT_MS 10000
#define SC_BACKOFF_MIN_MS 1000
#define SC_BACKOFF_MAX_MS 30000
/* A session that lasted this long resets the backoff to its minimum. */
#define SC_BACKOFF_RESET_MS 10000
/* --server may list standbys: a dropped or refused stream tries the next
 * URL after SC_NEXT_SERVER_MS; the back-off grows once every one failed. */
#define SC_SERVERS_MAX 8
#define SC_URL_MAX 4096
#define SC_NEXT_SERVER_MS 250
#define SC_WS_PING_MS 30000
#define SC_FRAME_MAX ((size_t)16 << 20)
/* Keep at most this many bytes queued on the socket while streaming chunks. */
#define SC_TX_HIGH_WATER ((size_t)4 << 20)

/* ---- commands ---- */
#define SC_ID_MAX 128			/* command, env and host ids */
#define SC_MAX_WORKERS 16		/* workers at once (different environments) */
#define SC_MAX_QUEUED 1024		/* commands waiting for their environment */
#define SC_PROGRESS_LINE_MAX 2048
/* Bytes queued towards the control plane above which the agent stops
 * reading workers' pipes (a streamed exec then waits, rather than the agent
 * buffering its output without bound); reading resumes when the queue drains. */
#define SC_STREAM_QUEUED_MAX ((size_t)4 << 20)
#define SC_ORPHAN_POLL_MS 500		/* checking on a worker left by a previous agent */
#define SC_ORPHAN_WAIT_MS (20 * 60 * 1000)
/* A stored result is at most a frame: the largest, an exec's 1 MiB of
 * stdout and of stderr all control bytes, is 12 MiB as JSON (\u0000). */
#define SC_RESULT_FILE_MAX SC_FRAME_MAX
#define SC_CMDLOG_TAR_KEEP_S (24 * 3600)
#define SC_CMDLOG_RESULT_KEEP_S (7 * 24 * 3600)
#define SC_RUNNER_READ_CHUNK 4096		/* one read of a worker's pipe */
#define SC_WORKER_INPUT_MAX ((size_t)16 << 20)	/* the command frame on a worker's stdin */

/* ---- files (doc/host-stream-chunks.md) ---- */
#define SC_CHUNK_BYTES ((size_t)1 << 20)
#define SC_ARCHIVE_MAX ((uint64_t)32 << 20)
#define SC_SPOOLS_MAX 4
#define SC_SPOOL_MARKS_MAX 64		/* refused spools remembered (no file) */
#define SC_SPOOL_TTL_MS (10 * 60 * 1000)
#define SC_SWEEP_MS 60000
#define SC_SWEEP_FIRST_MS 5000	/* the first sweep, soon after start: what a previous run left */
#define FC_PATH_MAX 4000		/* env.put's path or target, env.get's path */
#define FC_NAME_MAX 255			/* one component of a target */
#define SC_FILES_CP_CHUNK 65536			/* a piece of a tar entry's data (env.put) */

/* ---- moving snapshots between hosts (move.c) ---- */
#define SC_MOVE_KEEP_S (3600)				/* an exported stream or a partly received one, unused */
#define SC_MOVE_TREE_BYTES_MAX ((uint64_t)64 << 30)	/* one volume's tar stream, and any stream received */
#define SC_MOVE_TREE_ENTRIES_MAX 10000000		/* entries in one volume's tar stream */
#define SC_MOVE_VOL_MAX 255				/* a volume's name */

/* ---- builds (build.c) ---- */
#define SC_CONTEXT_MAX ((uint64_t)256 << 20)	/* one build context (the control plane's CP_CONTEXT_MAX) */
#define SC_BUILD_TIMEOUT_MS (10 * 60 * 1000)	/* one docker build */
#define SC_BUILD_LOG_KEEP ((size_t)64 << 10)	/* build output kept for the error's tail */
#define SC_BUILD_ERROR_TAIL 320			/* bytes of the log's end quoted in a failed build's error */
#define SC_BUILD_PROGRESS_MAX 2000		/* build output lines sent as progress, per build */
#define SC_CONTEXT_KEEP_S (24 * 3600)		/* an unbuilt context archive or an unfinished part */
#define SC_BUILD_IMAGE_KEEP_S (7 * 24 * 3600)	/* a built image no version here pins, since its build */
#define SC_BUILD_IMAGES_MAX 64			/* built images no version here pins, kept at most */
#define SC_BUILD_PRUNE_MAX 8			/* built images removed per sweep (the sweep blocks the agent) */
#define SC_BUILD_HEAD_MAX 16384			/* the response head */
#define SC_BUILD_URL_MAX 16384			/* the request line's query (args included) */
#define SC_BUILD_MESSAGE_MAX ((size_t)1 << 20)	/* one JSON message of the daemon's */
#define SC_BUILD_IO_CHUNK 65536			/* one read of the context or of the answer */

/* ---- docker ---- */
#define SC_DOCKER_TIMEOUT_MS 120000	/* one ordinary docker CLI call */
#define SC_DOCKER_QUICK_MS 15000	/* inspect, ps, version */
#define SC_DOCKER_OUT_MAX ((size_t)1 << 20)
#define SC_DOCKER_NAME_MAX 300		/* a container, network, label or tag name we make, NUL included */
#define SC_DOCKER_LINE_MAX 300		/* the line of docker's stderr an error quotes */
#define SC_DOCKER_CP_MAX (SC_DOCKER_NAME_MAX + 1 + FC_PATH_MAX + 2)	/* docker cp's "<container>:<path>" */
#define SC_DEFAULT_MEMORY_MB 4096
#define SC_DEFAULT_PIDS 2048
#define SC_DEFAULT_CPUS 2.0
#define SC_HEALTH_ARGV_MAX 256		/* words of a CMD healthcheck run through exec */
#define SC_HEALTH_BASE_MS 60000		/* added to interval * retries */
#define SC_HEALTH_MAX_MS (10 * 60 * 1000)
#define SC_HEALTH_DEFAULT_INTERVAL_MS 30000	/* Docker's own default */
#define SC_EXEC_TIMEOUT_DEFAULT_S 120
#define SC_EXEC_TIMEOUT_MAX_S 86400
#define SC_EXEC_OUTPUT_MAX ((size_t)1 << 20)	/* stdout and stderr each */
/* Background commands (bg.c). */
#define SC_BG_OUTPUT_MAX ((int64_t)64 << 20)	/* stdout and stderr each, kept per command; the rest is dropped */
#define SC_BG_READ_MAX ((size_t)1 << 20)	/* per stream in one env.bg.get */
#define SC_BG_RUNNING_MAX 64			/* running at once in one environment */
#define SC_BG_KEEP 256				/* records kept per environment (ended ones go first) */
#define SC_BG_TIMEOUT_MAX_S (7 * 86400)		/* and the default: a background command is long */
#define SC_BG_WAIT_MAX_S 600			/* one env.bg.get's wait */
#define SC_BG_SIGNAL_WAIT_MS 2000		/* after KILL, TERM or INT: time to see it end */
#define SC_BG_TREE_MAX 1024			/* processes signalled at once */
#define SC_BG_PATH_MAX 4096			/* a path under the background command's directory */
#define SC_BG_STATE_MAX ((size_t)256 << 10)	/* a state.json (the argv is bounded by the frame) */
#define SC_BG_READY_MS 15000			/* the supervisor's word that the exec exists */
/* Interactive exec: control lines from the agent to the worker, on a FIFO
 * <data>/commands/<id>.ctl (runner.c writes, engine_exec.c reads). */
#define SC_CTL_STDIN 'i'			/* 'i' base64 */
#define SC_CTL_EOF 'e'
#define SC_CTL_RESIZE 'r'			/* 'r' ROWS ' ' COLS */
#define SC_CTL_KILL 'k'
#define SC_CTL_KILL_TRIES 40			/* looks for the pid of an exec just started */
#define SC_CTL_KILL_WAIT_MS 50			/* between them */
#define SC_CTL_LINE_MAX ((size_t)64 << 10)	/* one line: the base64 of an exec.in chunk */
#define SC_CTL_QUEUED_MAX ((size_t)4 << 20)	/* control bytes the agent keeps for a slow worker */
#define SC_LOG_TAIL_BYTES 800			/* container log quoted in an error */
#define SC_LOGS_MAX ((size_t)1 << 20)		/* env.logs: bytes kept of stdout and of stderr each */
#define SC_LOGS_TAIL_DEFAULT 100		/* env.logs without tail */
#define SC_LOGS_TAIL_MAX 100000
#define SC_LOGS_STAMP_MAX 64			/* docker's RFC 3339 timestamp with nanoseconds */
#define SC_FILL_MAX_BYTES ((uint64_t)8 << 30)	/* image content copied into a fresh volume */
#define SC_SPEC_FILE_MAX ((size_t)8 << 20)	/* an env's spec.json */
#define SC_SPEC_PATH_MAX 4300			/* <data>/envs/<env>/spec.json */
#define SC_FILL_CACHE_ENTRY_MAX ((uint64_t)64 << 20)	/* larger image trees are not kept */
#define SC_FILL_CACHE_KEEP_S (7 * 24 * 3600)	/* a cache entry unused this long goes */
/* Read caps and buffers of the Engine API, readiness, metrics and pause. */
#define SC_ENGINE_BODY_MAX ((size_t)4 << 20)	/* one Engine API response body */
#define SC_EXEC_HEAD_MAX 16384			/* an exec's response head (API) */
#define SC_EXEC_READ_CHUNK 65536		/* one read of an exec's stream */
/* Quiet this long, an exec asks whether its container still runs: when a
 * gVisor sandbox ends, dockerd leaves the exec's stream open until the
 * command's deadline (a fork bomb's exec hung its whole 90 s). */
#define SC_EXEC_LIVENESS_MS 2000
#define SC_RUN_PATH_MAX 400			/* an Engine API path engine_run.c or engine_exec.c asks */
#define SC_ENGINE_PATH_MAX 600			/* one engine.c or build_gc.c asks (object routes, image filters) */
#define SC_METRICS_FILE_MAX 4096		/* bytes read from one cgroup file */
#define SC_PAUSE_LIST_MAX ((size_t)64 << 10)	/* the file listing the services the user paused */
#define SC_READY_TOKENS_MAX 16			/* words of a recognised healthcheck */
#define SC_READY_WORD_MAX 256			/* one of those words */

/* ---- egress probe ---- */
#define SC_PROBE_IMAGE_DEFAULT "busybox"
#define SC_PROBE_URL_DEFAULT "http://1.1.1.1/"
#define SC_PROBE_TIMEOUT_MS 4000
#define SC_PROBE_CONTAINER_SLACK_MS 4000	/* container start on top of the probe's 4 s */

/* ---- snapshots (snapshot.c, freeze.c, pgfork.c) ---- */
#define SC_FREEZE_STATE_MAX 256			/* bytes read from freezer.state / cgroup.events */
#define SC_FREEZE_MOUNTS_MAX 64			/* freezer and cgroup2 mounts remembered */
#define SC_FREEZE_POLL_FIRST_NS 50000L		/* first wait for FREEZING -> FROZEN */
#define SC_FREEZE_POLL_MAX_NS 5000000L		/* the longest wait between polls (doubling up to it) */
#define SC_PGFORK_VERSION_MAX 64		/* bytes of PG_VERSION read */
#define SC_SNAP_HEALTH_MS 90000			/* after the unpause */
#define SC_SNAP_HEALTH_POLL_MS 200		/* between health looks */
#define SC_SNAP_CHECKPOINT_TIMEOUT_MS 300000	/* one database's checkpoint */
#define SC_SNAP_BGSAVE_POLL_MS 50		/* between looks at a redis BGSAVE */
#define SC_SNAP_MAX_SERVICES 64			/* services quiesced in one snapshot */

/* ---- host (hostinfo.c, install.c, ingress_ctl.c) ---- */
#define SC_HOSTINFO_TIMEOUT_MS 10000		/* each command run for the capabilities */
#define SC_INGRESS_CMDLINE_MAX 8192		/* an ingress process's /proc/<pid>/cmdline */
#define SC_INSTALL_BIN_MAX ((size_t)256 << 20)	/* the binary denvd install copies */

/* ---- verify (compose.md, verifier contract) ---- */
#define SC_VERIFY_MAX_DEPTH 32			/* path components below /submission */
#define SC_VERIFY_MAX_BYTES ((uint64_t)256 << 20)	/* apparent size of regular files, summed */
#define SC_VERIFY_MAX_FILES 20000		/* regular files; directories have the same cap */
#define SC_VERIFY_REFUSED_MAX 32		/* findings listed before the walk stops */
#define SC_VERIFY_TIMEOUT_DEFAULT_S 600
#define SC_VERIFY_TIMEOUT_MAX_S 86400
#define SC_VERIFY_PULL_MS (10 * 60 * 1000)	/* fetching a verifier image, before its clock starts */
#define SC_IMAGE_PULL_MS (10 * 60 * 1000)	/* env.create pulling a service's missing image */
#define SC_VERIFY_TAIL_BYTES 4096		/* stdout and stderr tails in the result */
#define SC_VERIFY_REWARD_MAX 4096		/* bytes of reward.txt read */
#define SC_VERIFY_KEEP_S (24 * 3600)		/* <data>/verify/<id> left by a verify that never finished */
#define SC_VERIFY_PATH_MAX 4000			/* a declared path, as for env.get */
#define SC_VERIFY_COLLECT_JSON_MAX ((size_t)1 << 20)	/* collect.json, the collect step's record */
#define SC_VERIFY_REWARD_TAR_MAX ((size_t)64 << 10)	/* reward.txt as a tar stream from docker cp */
/* Room for a name below the root: 32 components of at most 255 bytes. */
#define SC_VERIFY_NAME_MAX 8448

/* ---- configuration ---- */
#define SC_ENV_FILE_MAX ((size_t)64 << 10)	/* an --env-file, read whole */
#define SC_STATE_FILE_MAX ((size_t)64 << 10)	/* the state file (host id and secret) */
#define SC_STATE_DIR_MAX 4096			/* the state file's directory */
struct sc_config {
	const char *verb;
	const char *server;
	const char *token;
	const char *state_path;
	const char *data_dir;
	const char *zfs_pool;
	const char *btrfs_root;		/* volumes as btrfs subvolumes under this dir */
	const char *env_file;
	const char *probe_image;
	const char *probe_url;
	const char *probe_mode;		/* auto | netns | container */
	const char *runtime;		/* runc | gvisor: a service's runtime when it declares none */
	const char *disk_limit;		/* --disk-limit SIZE: the default disk cap per environment */
	const char *root;		/* install --root DIR (tests) */
	const char *ingress_domain;	/* names under it through the gateway (names.c); NULL: none */
	const char *ingress_listen;	/* the gateway's HOST:PORT */
	const char *ingress_ca_cert, *ingress_ca_key;	/* its issuer; NULL: self-signed */
	const char *ingress_cert_days;	/* its certificate's validity */
	bool server_flag, data_flag, zfs_flag;
	bool leaky_network;		/* test only: never make the network internal */
	bool verbose;
	char host_id[SC_ID_MAX];
	char secret[256];
	char *own[16];			/* strings this config allocated (sc_config_release) */
	size_t nown;
};

/* config.c */
int sc_config_parse(int argc, char **argv, struct sc_config *c, struct err *e);
int sc_env_file_load(const char *path, struct err *e);
void sc_config_defaults(struct sc_config *c);
/* auto | netns | container (--probe-mode, DENV_PROBE_MODE). */
bool sc_probe_mode_ok(const char *mode);
void sc_config_release(struct sc_config *c);
int sc_state_load(struct sc_config *c, struct err *e);
int sc_state_save(const struct sc_config *c, struct err *e);
int sc_stream_url(const char *server, char *out, size_t n, struct err *e);
/* --server's list, "URL[,URL...]" (a control plane and its standbys): at
 * most max stream URLs into out, their count in *n. */
int sc_stream_urls(const char *servers, char out[][SC_URL_MAX], size_t max, size_t *n, struct err *e);
bool sc_safe_id(const char *s);

/* envspec.c: env's spec.json under data into *spec: 1 read, 0 there is
 * none (*spec NULL), -1 unreadable or not JSON (e names the file). */
int sc_spec_load(const char *data, const char *env, struct json **spec, struct err *e);

/* hostinfo.c: the capabilities object of hello and host.report. */
struct json *sc_capabilities(const struct sc_config *c);
void sc_caps_refresh(struct json *caps, const char *data_dir);

#include "sidecar/agent/agent.h"

/* ---- worker side ---- */
struct wk {
	const char *data;
	const char *probe_image, *probe_url, *probe_mode, *zfs_pool, *btrfs_root;
	const char *runtime;		/* the host's default runtime (runtime.c) */
	bool ctr_gvisor;		/* the container wk_container last found runs under runsc */
	int64_t disk_limit_mb;		/* the host's default disk cap per environment; 0: none (disk.c) */
	bool leaky_network;
	const char *id, *kind, *env;
	struct json *cmd;
};
int worker_main(int argc, char **argv);
/* progress.c: one progress line to the agent (newlines folded, cut at
 * SC_PROGRESS_LINE_MAX); every command calls it, so it is not in worker.c. */
void wk_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The service's container, checked to be this environment's and running
 * (or paused, which a read such as env.get can live with). */
int wk_container(struct wk *w, const char *kind, const char *svc, char *out, size_t n, struct err *e);
/* The same, refusing a paused container: the message says it is frozen by
 * verify and how to resume it (env.exec and env.put run inside it). */
int wk_container_running(struct wk *w, const char *kind, const char *svc, char *out, size_t n, struct err *e);
/* As wk_container, and a service whose container ended (exited, dead) too:
 * verify.collect scores that as the agent's doing. */
int wk_container_ended_too(struct wk *w, const char *kind, const char *svc, char *out, size_t n, struct err *e);

typedef int (*wk_fn)(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_host_report(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_env_create(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_env_exec(struct wk *w, const struct json *payload, struct json **result, struct err *e);
/* pause.c: env.pause, env.resume; whether svc is in the user's paused list. */
int cmd_env_pause(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_env_resume(struct wk *w, const struct json *payload, struct json **result, struct err *e);
bool pause_marked(const char *data, const char *env, const char *svc);
/* Send sig to pid and its descendants (killtree.c); how many were signalled. */
size_t sc_kill_tree(pid_t pid, int sig);
/* bg.c: background commands. */
int cmd_env_bg_start(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_env_bg_list(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_env_bg_get(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_env_bg_signal(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_env_put(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_env_get(struct wk *w, const struct json *payload, struct json **result, struct err *e);
/* metrics.c: env.metrics; logs.c: env.logs (both reads, run beside anything). */
int cmd_env_metrics(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_env_logs(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_env_destroy(struct wk *w, const struct json *payload, struct json **result, struct err *e);
/* snapshot.c: consistent captures, forks and rollbacks over the storage backends. */
int cmd_env_snapshot(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_env_fork(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_env_rollback(struct wk *w, const struct json *payload, struct json **result, struct err *e);
/* digest.c: env.digest, the content digest of each volume of a snapshot. */
int cmd_env_digest(struct wk *w, const struct json *payload, struct json **result, struct err *e);
/* move.c: snap.export, snap.read, snap.write, snap.import (a snapshot that
 * moves to another host), and the sweep of their stream files. */
int cmd_snap_export(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_snap_read(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_snap_write(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_snap_import(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int move_prune(const char *data, int64_t now_s);
/* verify.c: collecting the agent's submission and running the grader. */
int cmd_verify_collect(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int cmd_verify_run(struct wk *w, const struct json *payload, struct json **result, struct err *e);
/* verify_tree.c: the lstat walk that refuses what a grader must not be shown. */
struct vtree {
	uint64_t files, dirs, bytes;
	struct json *refused;		/* "rel/path: reason" strings */
	bool stop;			/* a limit was crossed: nothing more is looked at */
};
void vtree_init(struct vtree *t);
void vtree_release(struct vtree *t);
/* Add the finding "name: reason" (one the walk cannot see: a failed copy). */
void vtree_refuse(struct vtree *t, const char *name, const char *reason);
/* Check rel ("home/agent/x", already normalised) below the directory rootfd,
 * each component opened O_NOFOLLOW. *missing when it does not exist. */
int vtree_path(int rootfd, const char *rel, struct vtree *t, bool *missing, struct err *e);
/* Check everything below rootfd (rootfd itself is not counted). */
int vtree_all(int rootfd, struct vtree *t, struct err *e);
/* Does rel exist below rootfd (no link followed)? A parent that is a link
 * is not "missing": vtree_path refuses it. Looks at nothing else, so the
 * missing list is the same whatever refusal a walk runs into. */
bool vtree_missing(int rootfd, const char *rel);

#include "sidecar/engine/engine.h"

/* images.c: each service's image (order: the services) on this host, pulled
 * when missing (SC_IMAGE_PULL_MS); *images maps a reference to {id, digest}.
 * -1 with "service "s" image "i" is not on host "h" and ...: build it ..."
 * when one cannot be had. */
int images_ensure(const struct json *order, struct json **images, struct err *e);
/* build.c: env.context (a build context arriving in parts), and the builds
 * of env.create: each service of services with a build and no image_id is
 * built (or found cached), its image set to the built id; *builds lists
 * {service, context_digest, image, image_id, cached, took_ms}. */
int cmd_env_context(struct wk *w, const struct json *payload, struct json **result, struct err *e);
int builds_ensure(struct wk *w, struct json *services, struct json **builds, struct err *e);
/* Remove <data>/contexts files older than SC_CONTEXT_KEEP_S; how many. */
int build_prune(const char *data, int64_t now_s);
/* build_gc.c: remove images this data directory's builds made (label
 * ai.denv.data=<data>; other denvds' on the same engine are not ours) that no spec.json
 * or snapshot on this host pins: those older than SC_BUILD_IMAGE_KEEP_S
 * (DENVD_BUILD_IMAGE_KEEP_SEC) and, past SC_BUILD_IMAGES_MAX unpinned ones,
 * the oldest; at most SC_BUILD_PRUNE_MAX a call. How many went. */
int build_images_prune(const char *data, int64_t now_s);
/* denv-build/<service>:<12 hex digits of the cache key of build b>. */
int build_tag(const char *svc, const struct json *b, char *tag, size_t n);
/* files.c: a spooled archive against the payload's tar_bytes, tar_chunks
 * and tar_sha256 ("<kind>: archive incomplete: ..."); a file's sha256. */
int sc_spool_check(const char *kind, const struct json *payload, const struct json *spool, struct err *e);
/* The part the command's spool holds, appended to the file part when the
 * payload's offset is *have (what part holds): *have grows by its tar_bytes.
 * A part for another offset is dropped with a progress line (the control
 * plane resends from the answer's have); one past payload.size is an error.
 * No spool: nothing to take (0). Shared by env.context and snap.write. */
int sc_part_take(const char *kind, struct wk *w, const struct json *payload, const char *part, int64_t *have,
		 struct err *e);
/* Keep p as <data>/commands/<id>.tar and answer {tar_bytes, tar_sha256,
 * tar_chunks}: the agent streams it as chunk frames before the result
 * (env.get, snap.read). */
int sc_archive_answer(const struct wk *w, const void *p, size_t n, struct json **result, struct err *e);
int sc_file_sha256(const char *path, char hex[65], struct err *e);

/* render.c */
struct json *render_order(const struct json *services, struct err *e);
int render_compose(const char *project, const char *env, const struct json *spec,
		   const char *voldir, bool internal, struct buf *out, struct err *e);
/* An environment with egress denied (and not the leaky test mode) and one
 * service needs no network: its container gets Docker's "none" network,
 * loopback only. Nothing to create, wall off from the host, or leak. */
bool render_networkless(const struct json *spec, bool leaky);
int render_run_argv(const char *project, const char *env, const struct json *svc,
		    const char *voldir, bool networkless, bool publish, struct argv *a, struct err *e);
/* A service's user without the image's files (pw_resolve with none):
 * numbers only; a bare uid gets gid 0. 0 and the ids, -1 for a name or empty. */
int render_user(const char *user, long *uid, long *gid);

/* fakeclock.c: x-denv.clock (frozen, offset) through Debian's libfaketime,
 * bind-mounted read-only into every container and preloaded (why, and what
 * it cannot reach, at the top of fakeclock.c). fc_prepare stamps each
 * service of order with what fc_run_args adds to its docker run (nothing
 * for real time); -1 with e when the host has no libfaketime. fc_check,
 * after health, refuses a service whose main process did not load it and
 * sets res.clock, the evidence {mode, at | offset, mechanism}. */
#define FC_LIB_IN_CONTAINER "/.denv/libfaketime.so.1"
#define FC_AT_LEN 20			/* "2026-01-01T00:00:00Z" */
#define FC_VALUE_MAX 64			/* a FAKETIME value */
#define FC_MAPS_LINE_MAX 4352		/* one /proc/<pid>/maps line: a PATH_MAX path and the fields */
/* How long the check waits for a service's main process to map the library:
 * "running" can come before the entrypoint's exec of the program (runc's
 * init, a static binary, is the pid until then). */
#define FC_MAPS_WAIT_MS 5000
#define FC_MAPS_POLL_MS 50
bool fc_active(const struct json *clock);
int fc_prepare(const struct json *clock, struct json *order, struct err *e);
void fc_run_args(const struct json *svc, struct argv *a);
int fc_check(const char *project, const struct json *clock, const struct json *order, struct json *res,
	     struct err *e);

/* runtime.c: runc or gVisor's runsc per service (why runsc's arguments are
 * what they are, at the top of runtime.c). rt_register adds runsc to
 * dockerd's daemon.json and reloads dockerd with SIGHUP when runsc is
 * installed and Docker does not list it: 1 registered, 0 nothing to do (no
 * runsc, or already there), -1 with e. Under root (install --root) it only
 * writes the file. rt_prepare stamps each service of order with the runtime
 * it runs under (its own, else w->runtime) and sets res.runtime, the
 * evidence {service: runtime}; -1 when gvisor is asked for and Docker has
 * no runsc. rt_run_args adds --runtime runsc to a gVisor service's run. */
#define RT_RUNSC_DOCKER_NAME "runsc"
#define RT_DAEMON_JSON "/etc/docker/daemon.json"
/* A gVisor service's pid cap is on the host's cgroup, which holds the
 * sandbox's own threads too: about 40 at rest and, on the ptrace platform,
 * about 8 host threads for each process inside (measured with runsc
 * 20221219). The host cap is scaled so that the service's own cap is what
 * its processes meet; runsc ends the whole sandbox when a clone fails. */
#define RT_GVISOR_PIDS_BASE 64
#define RT_GVISOR_PIDS_EACH 10
#define RT_DOCKER_PIDFILE "/var/run/docker.pid"
#define RT_DAEMON_JSON_MAX ((size_t)1 << 20)
#define RT_RELOAD_WAIT_MS 10000		/* dockerd listing runsc after SIGHUP */
#define RT_RELOAD_POLL_MS 200
const char *rt_runsc_binary(void);
int rt_docker_has(const char *name, struct err *e);	/* 1, 0, or -1 with e */
void rt_capabilities(struct json *caps);		/* caps.runtimes: ["runc", "gvisor"?] */
bool rt_name_ok(const char *name);			/* runc | gvisor */
int rt_register(const char *root, struct err *e);
int rt_prepare(const struct wk *w, const struct json *spec, struct json *order, struct json *res, struct err *e);
void rt_run_args(const struct json *svc, struct argv *a);
/* "exec -u 0" for denvd's own file work in a container (stat, cat, mkdir);
 * under gVisor with "--privileged" too: runsc gives an exec as root in a
 * non-root service no capabilities at all, not Docker's default set, so
 * root could not even create a directory in the agent's home. The
 * privilege stays inside gVisor's sandbox, and only denvd's own fixed
 * commands get it. */
void rt_root_exec_args(bool gvisor, struct argv *a);

/* disk.c: the environment's disk cap and denvd's own reserve (why an ext4
 * image per environment, at the top of disk.c). disk_cap_mb: the Spec's
 * disk_mb, else the host's default (0: none). disk_prepare, after the
 * backend's env_prepare, puts voldir on an image of mb MiB (dir backend) and
 * sets res.disk {limit_mb, mechanism, enforced, used_mb}; declared says the
 * env asked for it (refused where the backend cannot cap). disk_release
 * unmounts and removes the image. disk_reserve_check refuses new work below
 * SC_DISK_RESERVE_MB free under the data dir (an eighth of a filesystem
 * smaller than 2 GiB), with e->code ENOSPC. */
#define SC_DISK_RESERVE_MB 256
#define SC_DISK_RESERVE_SHARE 8		/* at most an eighth of a small data filesystem */
struct stg;
int64_t disk_cap_mb(const struct wk *w, const struct json *spec);
int disk_reserve_check(const char *data, struct err *e);
int disk_prepare(const struct wk *w, const struct stg *s, const char *env, const char *voldir, int64_t mb,
		 bool declared, struct json *res, struct err *e);
int disk_release(const char *data, const char *env, struct err *e);
/* "2g", "512m" or bytes into MiB; -1 for anything else (or under 16 MiB). */
int sc_parse_disk_mb(const char *s, int64_t *mb);

/* passwd.c: a service's `user` to uid and gid by Docker's rules, from the
 * image's /etc/passwd and /etc/group (the rules and the parser's strictness
 * are at the top of passwd.c). Parsing allocates nothing. */
#define PW_FILE_MAX ((size_t)1 << 20)	/* bytes of an image's /etc/passwd or /etc/group read */
#define PW_LINE_MAX ((size_t)64 << 10)	/* a longer line is skipped */
#define PW_NAME_MAX 256			/* a longer user or group name is skipped */
#define PW_USER_MAX 512			/* bytes in a `user` value */
#define PW_ID_MAX 2147483647L		/* Docker's highest uid and gid */
#define PW_NEED_PASSWD 0x1
#define PW_NEED_GROUP 0x2
struct pw_files {
	const char *passwd;	/* NULL: the image has no /etc/passwd */
	size_t passwd_len;
	const char *group;	/* NULL: no /etc/group */
	size_t group_len;
};
/* 1 and the first entry's ids, 0 when no line matches (or buf is NULL). */
int pw_user_by_name(const char *buf, size_t len, const char *name, size_t nlen, long *uid, long *gid);
int pw_user_by_uid(const char *buf, size_t len, long uid, long *gid);
int pw_group_by_name(const char *buf, size_t len, const char *name, size_t nlen, long *gid);
/* Which files resolving user needs (PW_NEED_*; 0 for "uid:gid" numbers),
 * or -1 for a value no image can satisfy. */
int pw_needs(const char *user);
/* 0 and the ids; -1 and e ("user \"x\" is not in the image's /etc/passwd")
 * for a name the files lack or a bad value. f NULL: no files. */
int pw_resolve(const char *user, const struct pw_files *f, long *uid, long *gid, struct err *e);

/* files_cp.c: env.put's target (docker cp's rules, at the top of
 * files_cp.c) and owner, without the container. */
struct fc_stat {
	bool exists, is_dir;
	long uid, gid;
};
struct fc_plan {
	char dir[FC_PATH_MAX + 1];	/* the landing directory: extract the archive here */
	char rename[FC_NAME_MAX + 1];	/* the archive's top entry's new name; "" keeps it */
	long uid, gid;			/* the landing directory's owner */
};
/* An absolute target without "." or ".." components, split into its parent
 * and last name (trailing slashes dropped: *slash says whether there were
 * any); "/" gives parent "/" and base "". 0 or -1 e. */
int fc_split(const char *target, char *parent, size_t psize, char *base, size_t bsize, bool *slash,
	     struct err *e);
/* `stat -L -c '%f %u %g'` output (hex mode, uid, gid) into st. 0 or -1. */
int fc_parse_stat(const char *out, struct fc_stat *st);
/* Where an upload whose top entry is a directory (src_dir) or a file lands,
 * from what target (t) and its parent are. 0 and p, or -1 e (the refusal). */
int fc_plan(const char *target, bool src_dir, const struct fc_stat *t, const struct fc_stat *parent,
	    struct fc_plan *p, struct err *e);
/* The archive on fd (read to its end) must hold one file or directory, with
 * whatever is inside it: 0, its name in top and *is_dir; -1 e otherwise. */
int fc_archive_top(int fd, char *top, size_t size, bool *is_dir, struct err *e);
/* Copy the archive on in to out, the top entry from renamed to to (NULL or
 * "": kept) and, with own, every entry owned by uid:gid. With a from, the
 * archive's own "./" entry is dropped. 0 or -1 e. */
int fc_restamp(int in, int out, const char *from, const char *to, bool own, long uid, long gid, struct err *e);

/* ready.c: denvd's own readiness tests (the rules at the top of ready.c). */
#define RD_PG_PORT 5432
#define RD_REDIS_PORT 6379
#define RD_ANSWER_MAX 512		/* bytes of a database's first answer read */
#define RD_NATIVE_TIMEOUT_MS 500	/* one startup packet or PING */
#define RD_EXEC_TIMEOUT_MS 10000	/* one healthcheck command through exec */
#define RD_GAP_FIRST_MS 10		/* first pause between two native tries */
#define RD_GAP_NATIVE_MAX_MS 100
#define RD_GAP_EXEC_FIRST_MS 20		/* first pause between two exec tries */
#define RD_GAP_EXEC_MAX_MS 1000
#define RD_EXEC_BEHIND_MS 10000		/* exec's first try beside a native test (slow, and it holds the loop) */
#define RD_LOOK_MAX_MS 100		/* the longest pause between two looks at Docker's state */
enum rd_native { RD_NONE, RD_POSTGRES, RD_REDIS };
enum { RD_BAD = -1, RD_NOT_YET = 0, RD_READY = 1, RD_MORE = 2 };
enum { RD_EXIT_NOT_YET = 0, RD_EXIT_READY = 10, RD_EXIT_STARTING = 11 };
struct rd_plan {
	bool exec;			/* it has a healthcheck to run through exec */
	enum rd_native native;		/* its healthcheck is this database's stock one */
	int port;			/* the database's port (native) */
	char user[64];			/* PostgreSQL's user in the startup packet */
};
void rd_plan_of(const struct json *svc, struct rd_plan *p);
/* A protocol 3.0 StartupMessage for user into out: its length, 0 when n is short. */
size_t rd_pg_startup(const char *user, uint8_t *out, size_t n);
/* A first answer so far (n bytes): RD_READY, RD_NOT_YET, RD_MORE or RD_BAD. */
int rd_pg_answer(const uint8_t *p, size_t n);
int rd_redis_answer(const char *p, size_t n);
/* The next pause of a back-off from gap, never above cap. */
int64_t rd_gap_next(int64_t gap, int64_t cap);
/* Ask the database in process pid's namespace: 1 ready, 2 it answered that
 * it is starting, 0 no answer yet (detail says what happened), -1 and e when
 * the namespace cannot be entered. */
int rd_native(int pid, const struct rd_plan *p, char *detail, size_t n, struct err *e);

/* pgfork.c: a PostgreSQL started from a snapshot syncs its data directory
 * with one syncfs (why, and when, at the top of pgfork.c). pgf_prepare adds
 * PGF_SYNC_ARG to the command of each such service of order, voldir holding
 * its volumes, and lists them in res's pg_syncfs. */
#define PGF_SYNC_ARG "recovery_init_sync_method=syncfs"
void pgf_prepare(struct json *order, const char *voldir, struct json *res);
/* PG_VERSION's text to its major version ("15\n" 15, "9.6" 9), -1 when it is none. */
int pgf_major(const char *text);
/* Its command runs PostgreSQL's server itself ("postgres", any path). */
bool pgf_is_postgres(const struct json *svc);

/* health.c: wait until the services (or only the one named) are ready;
 * readiness, when not NULL, gets one {service, test, ready_ms, tries, detail}
 * per service the first time a wait finds it ready (test: running, postgres,
 * redis, exec or docker; ready_ms since that wait began; health.c says how
 * each test is chosen). */
int health_wait(const char *project, const struct json *services, const char *only, struct json *readiness,
		struct err *e);

/* storage.h: the storage backends (storage_{dir,btrfs,zfs}.c). */

/* hostwall.c: INPUT rules keeping containers from opening connections to the host. */
#define HW_BRIDGE_MAX 16		/* "dnv" + 12 hex + NUL: Linux allows 15-byte names */
#define HW_TIMEOUT_MS 15000
#define HW_MAX_DUPLICATES 8
void hw_bridge_name(const char *project, char out[HW_BRIDGE_MAX]);
int hw_isolate(const char *project, struct err *e);
int hw_release(const char *project, struct err *e);

/* subnet.c: /25 blocks of denvd's own address pool for environment networks. */
#define SUBNET_POOL_DEFAULT "10.208.0.0/12"
#define SUBNET_BLOCK_PREFIX 25		/* 126 addresses: more than SPEC_MAX_SERVICES */
#define SUBNET_TRIES 64			/* blocks tried before giving up */
#define SUBNET_CIDR_MAX 20
struct subnet_pool {
	uint32_t base;			/* host order */
	int prefix;
	uint32_t blocks;
};
int subnet_pool(struct subnet_pool *p, struct err *e);	/* from DENV_SUBNET_POOL */
uint32_t subnet_first(const struct subnet_pool *p, const char *project);
void subnet_block(const struct subnet_pool *p, uint32_t i, char out[SUBNET_CIDR_MAX]);

/* netns.c: fn runs in a forked child inside the network namespace of
 * process pid, writes a line into msg (n bytes) and returns the child's exit
 * code (0..119). netns_run gives that code and the line, or -1 and e when
 * the namespace cannot be entered (not root, no such process), the child
 * returned NETNS_CANNOT or ran past timeout_ms (it is killed). */
#define NETNS_MSG_MAX 400
#define NETNS_CANNOT 120
typedef int (*netns_fn)(void *arg, char *msg, size_t n);
int netns_run(int pid, netns_fn fn, void *arg, int64_t timeout_ms, char *msg, size_t n, struct err *e);

/* probe.c */
struct probe_result {
	bool reached;
	char method[16];	/* "netns" | "container" */
	char detail[512];
};
int probe_egress(struct wk *w, const char *project, const char *network, const char *first_container,
		 struct probe_result *r, struct err *e);

#include "sidecar/ingress/ingress.h"


/* install.c */
int install_run(struct sc_config *c, const char *self, struct err *e);

/* freeze.c: the snapshot's own freeze through the kernel's cgroup freezer
 * (v1 freezer.state or v2 cgroup.freeze), with a record that lets a later
 * command, or denvd's start, thaw what a killed worker left frozen. */
#define FZ_PATH_MAX 4096
#define FZ_FREEZE_TIMEOUT_MS 10000	/* every task of every cgroup frozen */
#define FZ_REWRITE_MS 50		/* v1: FROZEN written again while still FREEZING */
#define FZ_MOUNTINFO_MAX ((size_t)4 << 20)	/* also /proc/<pid>/cgroup and cgroup.procs */
#define FZ_RECORD_MAX ((size_t)1 << 20)
struct fz_sys {
	const char *proc;		/* "/proc" */
	const char *root;		/* "": put before every mount point (tests: a fake tree) */
};
struct fz_cg {
	int version;			/* 1: <dir>/freezer.state; 2: <dir>/cgroup.freeze */
	char dir[FZ_PATH_MAX];
};
void fz_sys_default(struct fz_sys *s);
/* The freezer cgroup of pid; must_contain (the container id, may be NULL)
 * guards against a pid from another pid namespace. */
int fz_cgroup_of(const struct fz_sys *s, long pid, const char *must_contain, struct fz_cg *out, struct err *e);
/* Which cgroup fz_cgroup_dir looks for: a v1 controller's, or the v2 one,
 * whichever first has its file (file_v1, file_v2) usable for mode (access(2)). */
struct fz_want {
	const char *controller;		/* "freezer", "memory", "cpuacct", "pids" */
	const char *file_v1, *file_v2;
	int mode;
};
/* The cgroup of pid that want names (out->version 1 or 2); fz_cgroup_of is
 * the freezer's. metrics.c reads the memory, cpuacct and pids ones. */
int fz_cgroup_dir(const struct fz_sys *s, long pid, const struct fz_want *want, const char *must_contain,
		  struct fz_cg *out, struct err *e);
/* "comm\n" of every process in the cgroup, appended to out; -1 if none is visible. */
int fz_comms(const struct fz_sys *s, const struct fz_cg *cg, struct buf *out, struct err *e);
/* Freeze all and wait until each is frozen; on failure all are thawed again. */
int fz_freeze(const struct fz_cg *cgs, size_t n, int64_t timeout_ms, struct err *e);
int fz_thaw(const struct fz_cg *cgs, size_t n, struct err *e);
/* <data>/envs/<env>/frozen */
void fz_record_path(const char *data, const char *env, char *out, size_t n);
/* Write the record, locked; the fd holding the lock, or -1. */
int fz_record_begin(const char *path, const struct fz_cg *cgs, size_t n, struct err *e);
int fz_record_end(const char *path, int fd, struct err *e);
/* Thaw what an unlocked record lists and remove it: 1 if a cgroup was
 * thawed, 0 if nothing to do (no record, or its worker still runs), -1. */
int fz_recover(const struct fz_sys *s, const char *path, struct err *e);
int fz_recover_env(const char *data, const char *env, struct err *e);
int fz_recover_all(const char *data, struct err *e);

#endif
