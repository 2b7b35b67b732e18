/*
 * orch.h: inside the orchestrator. A running deployment is a struct cp_run
 * stepping through its kind's phases (deployments.md); each phase function
 * ends its phase exactly once with run_ok / run_fail / run_skip, either at
 * once or from a command's callback, and must not touch r afterwards. After a
 * failure the remaining phases are skipped and the kind's verdict still runs;
 * the verdict ends the deployment with run_done.
 */
#ifndef DENV_CP_ORCH_H
#define DENV_CP_ORCH_H

#include "base/ev.h"
#include "cp/cp.h"

struct cp_run;
typedef void (*run_phase_fn)(struct cp_run *r);
typedef void (*run_cmd_fn)(struct cp_run *r, const struct cp_result *res);

#define RUN_PHASES_MAX 12

struct run_kind {
	const char *kind;
	const char *env_status;			/* the environment's status while it runs, or NULL */
	run_phase_fn phases[RUN_PHASES_MAX];	/* in the order of cp_phase_names(kind) */
};

struct cp_run {
	struct cp *cp;
	const struct run_kind *k;
	char dep_id[ID_MAX];
	char env_id[ID_MAX];
	char team_id[ID_MAX];
	char project_id[ID_MAX];
	char version_id[ID_MAX];	/* the deployment's VersionID */
	char host_id[ID_MAX];		/* where its commands go */
	const char *const *names;
	int phase;			/* index into names */
	int64_t started_ms;
	bool failed;
	char error[ERR_MSG_MAX];	/* "<phase>: <reason>" */
	struct json *params;		/* the deployment's Params */
	struct json *ctx;		/* what one phase hands to the next */
	struct cp_cmd *cmd;		/* command in flight */
	run_cmd_fn cmd_fn;
	struct cp_machine_call *machine;	/* provision, join: the cloud's answer pending (create, delete) */
	struct ev_timer join_timer;	/* join: how long it may still wait */
	bool join_waiting;		/* join: taking the next host of the team that connects */
	int64_t join_started_ms;
	int64_t handover_ns;		/* run_handover: when this phase ends and the next starts, 0 = now */
	int64_t phase_started_ns;	/* when the current phase started */
	run_phase_fn after_ship;	/* run_ship_contexts: what runs once every context is on the host */
	run_phase_fn after_move;	/* run_move: what runs once the snapshot is on the host */
	struct ev_timer soak_timer;	/* promote's gate.soak */
	int step_i;			/* promote: the replay, check or service a gate is at */
	struct cp_run *next;
};

extern const struct run_kind cp_kind_deploy, cp_kind_fork, cp_kind_snapshot, cp_kind_rollback,
	cp_kind_verify, cp_kind_destroy, cp_kind_promote;

/* End the current phase. evidence is taken (NULL: null). */
void run_ok(struct cp_run *r, struct json *evidence);
void run_skip(struct cp_run *r, struct json *evidence);
void run_fail(struct cp_run *r, struct json *evidence, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The current phase ends at unix_ns, not when run_ok (or fail, skip) is
 * called, and the next phase starts then: for phases whose work happened
 * inside one host command (env.create does prepare, start and health), laid
 * out on this clock from the durations the host measured. */
void run_handover(struct cp_run *r, int64_t unix_ns);
/* The verdict: end the deployment with status (succeeded, failed,
 * rolled_back) and the verdict's evidence (taken). */
void run_done(struct cp_run *r, const char *status, struct json *evidence);
/* Send a command for this phase to r->host_id; fn gets the result. When the
 * host is not connected the phase fails at once (and -1 is returned). */
int run_cmd(struct cp_run *r, const char *env_id, const char *kind, struct json *payload, int64_t timeout_ms,
	    run_cmd_fn fn);
/* run_cmd with an archive (data taken, may be NULL) sent in chunk frames before the command. */
int run_cmd_data(struct cp_run *r, const char *env_id, const char *kind, struct json *payload, struct buf *data,
		 int64_t timeout_ms, run_cmd_fn fn);
/* run_cmd_data to host_id rather than r->host_id (a move's other host). */
int run_cmd_on(struct cp_run *r, const char *host_id, const char *env_id, const char *kind, struct json *payload,
	       struct buf *data, int64_t timeout_ms, run_cmd_fn fn);
/* orch_move.c: make the snapshot of version_id present on to_host (moving
 * it from a connected host that holds it), then call then; a failure fails
 * the phase. r->ctx "moved" then describes the move (absent: none needed). */
void run_move(struct cp_run *r, const char *version_id, const char *to_host, run_phase_fn then);
/* The hosts holding a version's snapshot (a new array of ids): its
 * SnapshotHosts, else its environment's host. */
struct json *cp_version_holders(struct cp *cp, const struct json *v);
/* SnapshotHosts of a snapshot the run just took on its host: recorded with
 * it, since the env may later run elsewhere (a redeploy of a lost one). */
struct json *run_snapshot_hosts(const struct cp_run *r);
bool cp_version_held_on(struct cp *cp, const struct json *v, const char *host_id);
/* Send every build context of the deploy's Spec to r->host_id that it
 * does not hold (orch_build.c), then call then; a failure fails the phase. */
void run_ship_contexts(struct cp_run *r, run_phase_fn then);
/* Append an event (body taken) to env:<env> and dep:<dep>. */
void run_event(struct cp_run *r, const char *kind, struct json *body);
/* Placement for a deploy (orch_place.c): the place, provision and join phases. */
void run_place(struct cp_run *r);
void run_provision(struct cp_run *r);
void run_join(struct cp_run *r);
/* Stop whatever placement still waits for (the run is going away). A
 * server being deleted stays recorded as deleting: the next start's sweep
 * (cp_orch_sweep_machines) finishes it. */
void run_place_free(struct cp_run *r);
/* Drop the start-up sweep's calls still in flight (exit). */
void run_sweeps_free(struct cp *cp);
/* Milliseconds since the deployment started. */
int64_t run_took_ms(const struct cp_run *r);
/* Update the environment row (fields taken). */
void run_env(struct cp_run *r, struct json *fields);
/* A Go-style duration ("1.5s"), a number of seconds or of milliseconds, in ms. */
int64_t run_duration_ms(const struct json *v, bool number_is_ms);

/* env.fork payload for a new environment from a version's snapshot (orch_kinds.c). */
struct json *run_fork_payload(const char *from_env, const struct json *version);

/* Destroy env_id, an environment the run made for itself on r->host_id (a
 * grader's fork, a promotion's candidate), without waiting: marked
 * destroyed when the host has done it, a warning in the log if it fails.
 * Nothing when env_id is empty or the host is not connected. */
void run_destroy_helper(struct cp_run *r, const char *env_id);

/* The evidence of an env.snapshot result; fallback_name when it names no snapshot. */
struct json *run_snapshot_evidence(const struct json *payload, const char *fallback_name);
/* The snapshot phase of deploy and snapshot: env.snapshot named after the version. */
void run_snapshot(struct cp_run *r);

#endif
