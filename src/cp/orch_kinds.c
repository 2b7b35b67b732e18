/*
 * orch_kinds.c: the kinds that act on an environment already placed: fork,
 * snapshot, rollback, verify, destroy (deployments.md). They always run on
 * the environment's own host (targets.md, "Placement").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "cp/orch.h"

static const struct json *version_spec(struct cp_run *r, const char *version_id)
{
	return json_get(st_get(r->cp->db, "versions", version_id), "Spec");
}

static struct json *endpoints_of(const struct cp_run *r)
{
	const struct json *e = json_get(r->ctx, "endpoints");

	return e ? json_dup(e) : json_new_object();
}

static void keep_endpoints(struct cp_run *r, const char *env_id, const struct json *payload)
{
	const struct json *ep = json_get(payload, "endpoints");

	struct json *names;

	json_object_set(r->ctx, "endpoints", ep ? json_dup(ep) : json_new_object());
	cp_update(r->cp, "environments", env_id, cp_obj("Endpoints", endpoints_of(r), NULL));
	/* A fork answers to names of its own (ingress_names.c). */
	if ((names = cp_ingress_names(r->cp, r->host_id, env_id, ep, NULL)))
		cp_update(r->cp, "environments", env_id, cp_obj("Names", names, NULL));
}

struct json *run_fork_payload(const char *from_env, const struct json *version)
{
	const struct json *spec = json_get(version, "Spec");
	const char *egress = json_get_str(spec, "egress");
	struct json *p;

	p = cp_obj("from_env", json_new_str(from_env), "from_snapshot", json_new_str(json_get_str(version, "Snapshot")),
		   "services", json_dup(json_get(spec, "services")), "volumes", json_dup(json_get(spec, "volumes")),
		   "egress", json_new_str(egress && *egress ? egress : "deny"), NULL);
	/* The version's clock: a fork starts from the same instant as its source. */
	if (json_get(spec, "clock"))
		json_object_set(p, "clock", json_dup(json_get(spec, "clock")));
	return p;
}

/* ---- fork: Params {from_env, version, name}; EnvID is the new environment ---- */

/* The pinned host (params.host, checked by the route), else the first
 * connected host holding the snapshot; a host without it gets it moved
 * there in clone (orch_move.c). */
static void fork_place(struct cp_run *r)
{
	const struct json *v = st_get(r->cp->db, "versions", r->version_id);
	const struct json *src = v ? st_get(r->cp->db, "environments", json_get_str(v, "EnvID")) : NULL;
	const char *pin = json_get_str(r->params, "host");
	struct json *holders = cp_version_holders(r->cp, v);
	char host[ID_MAX] = "";

	for (size_t i = 0; !(pin && *pin) && i < json_len(holders) && !*host; i++)
		if (cp_host_connected(r->cp, json_at(holders, i)->u.str.s))
			str_copy(host, sizeof(host), json_at(holders, i)->u.str.s);
	if (pin && *pin)
		str_copy(host, sizeof(host), pin);
	else if (!*host && json_len(holders))
		str_copy(host, sizeof(host), json_at(holders, 0)->u.str.s);
	json_free(holders);
	if (!*host) {
		run_fail(r, NULL, "the source environment has no host");
		return;
	}
	if (!cp_host_connected(r->cp, host)) {
		run_fail(r, NULL, "host %s is not connected", host);
		return;
	}
	str_copy(r->host_id, sizeof(r->host_id), host);
	json_object_set_str(r->ctx, "from_env", json_get_str(src, "ID"));
	run_env(r, cp_obj("HostID", json_new_str(host), NULL));
	run_ok(r, cp_obj("host", json_new_str(host), "reason",
			 json_new_str(!cp_version_held_on(r->cp, v, host) ? "pinned by the request; the snapshot moves here"
				      : pin && *pin				 ? "pinned by the request"
										 : "same host as source snapshot"),
			 NULL));
}

static void fork_cloned(struct cp_run *r, const struct cp_result *res)
{
	struct json *ev;

	if (!res->ok) {
		run_fail(r, NULL, "%s", res->error);
		return;
	}
	keep_endpoints(r, r->env_id, res->payload);
	ev = cp_obj("forked_in_ms", json_new_int(run_duration_ms(json_get(res->payload, "forked_in"), true)), "from",
		    json_new_str(r->version_id), NULL);
	/* The snapshot came from another host first: how. */
	if (json_get(r->ctx, "moved"))
		json_object_set(ev, "moved", json_dup(json_get(r->ctx, "moved")));
	if (json_get(res->payload, "clock"))
		json_object_set(ev, "clock", json_dup(json_get(res->payload, "clock")));
	/* Where the fork's time went, and which test found each service ready. */
	if (json_get(res->payload, "timings"))
		json_object_set(ev, "timings", json_dup(json_get(res->payload, "timings")));
	if (json_get(res->payload, "readiness"))
		json_object_set(ev, "readiness", json_dup(json_get(res->payload, "readiness")));
	run_ok(r, ev);
}

static void fork_clone_here(struct cp_run *r)
{
	const struct json *v = st_get(r->cp->db, "versions", r->version_id);

	run_cmd(r, r->env_id, "env.fork", run_fork_payload(json_get_str(r->ctx, "from_env"), v), 0, fork_cloned);
}

static void fork_clone(struct cp_run *r)
{
	run_move(r, r->version_id, r->host_id, fork_clone_here);
}

static void health_endpoints(struct cp_run *r)
{
	run_ok(r, cp_obj("endpoints", endpoints_of(r), NULL));
}

static void fork_verdict(struct cp_run *r)
{
	struct json *ev = cp_obj("env", json_new_str(r->env_id), "took_ms", json_new_int(run_took_ms(r)), NULL);

	if (r->failed) {
		run_env(r, cp_obj("Status", json_new_str("failed"), NULL));
		run_done(r, "failed", ev);
		return;
	}
	run_env(r, cp_obj("Status", json_new_str("running"), "CurrentVersionID", json_new_str(r->version_id), NULL));
	run_done(r, "succeeded", ev);
}

const struct run_kind cp_kind_fork = {
	"fork", "deploying", { fork_place, fork_clone, health_endpoints, fork_verdict },
};

/* ---- snapshot: VersionID is the new version ---- */

static void snap_answered(struct cp_run *r, const struct cp_result *res)
{
	int64_t code = json_get_int(res->payload, "exit_code", -1);

	if (!res->ok)
		run_fail(r, NULL, "%s", res->error);
	else if (code != 0)
		run_fail(r, cp_obj("answered", json_new_bool(false), NULL), "`true` exited %lld", (long long)code);
	else
		run_ok(r, cp_obj("answered", json_new_bool(true), NULL));
}

static void snap_health(struct cp_run *r)
{
	const struct json *first = json_at(json_get(version_spec(r, r->version_id), "services"), 0);
	struct json *cmd = json_new_array();

	json_array_push(cmd, json_new_str("true"));
	run_cmd(r, r->env_id, "env.exec",
		cp_obj("service", json_new_str(json_get_str(first, "name")), "cmd", cmd, "timeout_sec",
		       json_new_int(CP_HEALTH_TIMEOUT_S), NULL),
		(int64_t)CP_HEALTH_TIMEOUT_S * 1000 + CP_EXEC_SLACK_MS, snap_answered);
}

static void snap_verdict(struct cp_run *r)
{
	const struct json *env = st_get(r->cp->db, "environments", r->env_id);
	const char *snap = json_get_str(r->ctx, "snapshot");

	if (r->failed) {
		run_done(r, "failed", cp_obj("kept", json_new_str(json_get_str(env, "CurrentVersionID")), NULL));
		return;
	}
	cp_update(r->cp, "versions", r->version_id,
		  cp_obj("Healthy", json_new_bool(true), "Snapshot", json_new_str(snap), "SnapshotHosts",
			 run_snapshot_hosts(r), NULL));
	run_env(r, cp_obj("CurrentVersionID", json_new_str(r->version_id), NULL));
	run_done(r, "succeeded",
		 cp_obj("version", json_new_str(r->version_id), "snapshot", json_new_str(snap), "took_ms",
			json_new_int(run_took_ms(r)), NULL));
}

const struct run_kind cp_kind_snapshot = {
	"snapshot", NULL, { run_snapshot, snap_health, snap_verdict },
};

/* ---- rollback: Params {version} ---- */

static void rb_restored(struct cp_run *r, const struct cp_result *res)
{
	const char *snap = json_get_str(res->payload, "snapshot");
	const struct json *v = st_get(r->cp->db, "versions", json_get_str(r->params, "version"));
	struct json *ev;

	if (!res->ok) {
		run_fail(r, NULL, "%s", res->error);
		return;
	}
	keep_endpoints(r, r->env_id, res->payload);
	ev = cp_obj("snapshot", json_new_str(snap && *snap ? snap : json_get_str(v, "Snapshot")), NULL);
	if (json_get(r->ctx, "moved"))
		json_object_set(ev, "moved", json_dup(json_get(r->ctx, "moved")));
	run_ok(r, ev);
}

static void rb_restore_here(struct cp_run *r)
{
	const struct json *v = st_get(r->cp->db, "versions", json_get_str(r->params, "version"));

	run_cmd(r, r->env_id, "env.rollback", cp_obj("snapshot", json_new_str(json_get_str(v, "Snapshot")), NULL), 0,
		rb_restored);
}

/* The version's snapshot may be on another host than the environment now. */
static void rb_restore(struct cp_run *r)
{
	if (!*r->host_id) {
		run_fail(r, NULL, "the environment has no host");
		return;
	}
	run_move(r, json_get_str(r->params, "version"), r->host_id, rb_restore_here);
}

static void rb_health(struct cp_run *r)
{
	run_ok(r, cp_obj("restored", json_new_str(json_get_str(r->params, "version")), NULL));
}

static void rb_verdict(struct cp_run *r)
{
	const char *v = json_get_str(r->params, "version");

	if (!r->failed)
		run_env(r, cp_obj("Status", json_new_str("running"), "CurrentVersionID", json_new_str(v), NULL));
	run_done(r, r->failed ? "failed" : "succeeded", cp_obj("version", json_new_str(v), NULL));
}

const struct run_kind cp_kind_rollback = {
	"rollback", NULL, { rb_restore, rb_health, rb_verdict },
};

/* ---- verify: VersionID is the capture; Params {resume} ---- */

static const struct json *capture_spec(struct cp_run *r)
{
	return version_spec(r, r->version_id);
}

static const char *agent_service(struct cp_run *r)
{
	return json_get_str(json_get(capture_spec(r), "agent"), "service");
}

/* The "error" a refusing host gave beside its refusal (the full message). */
static struct json *payload_error(const struct cp_result *res)
{
	const char *msg = json_get_str(res->payload, "error");

	return json_new_str(msg ? msg : "");
}

/* A refusal (collect's, or the snapshot's or the grader fork's over what
 * the agent's volumes hold) ends the verify at reward 0: the phases after
 * it are skipped, so no grader's fork is made for a submission that cannot
 * be graded (a fork refused midway is destroyed at the verdict). */
static bool v_refused(struct cp_run *r)
{
	return json_len(json_get(r->ctx, "refused")) > 0;
}

static void v_skip_refused(struct cp_run *r)
{
	run_skip(r, cp_obj("refused", json_new_bool(true), "reason",
			   json_new_str("the submission was refused; reward 0 without a grader"), NULL));
}

/* A failure after the agent was frozen is an error, never a refusal; fault
 * says whose: "host" (unreachable, or its sidecar, Docker or storage
 * failed), "verifier" (it ran, but gave no reward in time) or "denv" (the
 * control plane's own records). */
static void v_fail(struct cp_run *r, const char *fault, const char *msg)
{
	json_object_set_str(r->ctx, "fault", fault);
	run_fail(r, NULL, "%s", msg);
}

static void v_stop(struct cp_run *r)
{
	run_ok(r, cp_obj("agent_service", json_new_str(agent_service(r)), "mode", json_new_str("pause"), NULL));
}

static void v_collected(struct cp_run *r, const struct cp_result *res)
{
	const struct json *p = res->payload, *missing = json_get(p, "missing"), *refused = json_get(p, "refused");
	struct json *ev;

	if (!res->ok) {
		v_fail(r, "host", res->error);
		return;
	}
	ev = cp_obj("files", json_new_int(json_get_int(p, "files", 0)), "bytes", json_new_int(json_get_int(p, "bytes", 0)),
		    "missing", missing ? json_dup(missing) : json_new_array(), "refused",
		    refused ? json_dup(refused) : json_new_array(), NULL);
	json_object_set(r->ctx, "missing", json_dup(json_get(ev, "missing")));
	json_object_set(r->ctx, "refused", json_dup(json_get(ev, "refused")));
	run_ok(r, ev);
}

static void v_collect(struct cp_run *r)
{
	const struct json *verifier = json_get(capture_spec(r), "verifier");
	const struct json *collect = json_get(verifier, "collect");

	if (!agent_service(r) || !verifier) {	/* the route checked; the version row says otherwise */
		v_fail(r, "denv", "the capture version has no x-denv.agent.service or x-denv.verifier");
		return;
	}
	run_cmd(r, r->env_id, "verify.collect",
		cp_obj("id", json_new_str(r->dep_id), "agent_service", json_new_str(agent_service(r)), "collect",
		       collect ? json_dup(collect) : json_new_array(), "resume",
		       json_new_bool(json_get_bool(r->params, "resume", false)), NULL),
		0, v_collected);
}

static void v_snapped(struct cp_run *r, const struct cp_result *res)
{
	const struct json *refused = json_get(res->payload, "refused");
	struct json *ev;

	if (!res->ok) {
		v_fail(r, "host", res->error);
		return;
	}
	if (json_len(refused)) {
		/* Nothing was captured: the capture version stays unhealthy. */
		json_object_set(r->ctx, "refused", json_dup(refused));
		run_ok(r, cp_obj("snapshot", json_new_null(), "refused", json_dup(refused), "error",
				 payload_error(res), NULL));
		return;
	}
	ev = run_snapshot_evidence(res->payload, r->version_id);
	json_object_set_str(r->ctx, "snapshot", json_get_str(ev, "snapshot"));
	/* The capture is a healthy version from now on, so it can be forked. */
	cp_update(r->cp, "versions", r->version_id,
		  cp_obj("Healthy", json_new_bool(true), "Snapshot", json_new_str(json_get_str(ev, "snapshot")),
			 "SnapshotHosts", run_snapshot_hosts(r), NULL));
	run_ok(r, ev);
}

static void v_snapshot(struct cp_run *r)
{
	struct json *keep;

	if (v_refused(r)) {
		v_skip_refused(r);
		return;
	}
	keep = json_new_array();
	if (!json_get_bool(r->params, "resume", false))
		json_array_push(keep, json_new_str(agent_service(r)));
	/* refuse: a capture failing over what the volumes hold is answered as
	 * a refusal (the agent can fill a disk or nest a tree at will). */
	run_cmd(r, r->env_id, "env.snapshot",
		cp_obj("name", json_new_str(r->version_id), "keep_paused", keep, "refuse", json_new_bool(true), NULL),
		0, v_snapped);
}

static void v_cloned(struct cp_run *r, const struct cp_result *res)
{
	const char *grader = json_get_str(r->ctx, "grader_env");
	const struct json *refused = json_get(res->payload, "refused");

	if (!res->ok) {
		json_object_set_str(r->ctx, "fault", "host");
		run_fail(r, cp_obj("grader_env", json_new_str(grader), NULL), "%s", res->error);
		return;
	}
	if (json_len(refused)) {	/* the agent's volumes did not fit: its doing */
		json_object_set(r->ctx, "refused", json_dup(refused));
		run_ok(r, cp_obj("grader_env", json_new_str(grader), "refused", json_dup(refused), "error",
				 payload_error(res), NULL));
		return;
	}
	keep_endpoints(r, grader, res->payload);
	cp_update(r->cp, "environments", grader, cp_obj("Status", json_new_str("running"), NULL));
	run_ok(r, cp_obj("grader_env", json_new_str(grader), "forked_in_ms",
			 json_new_int(run_duration_ms(json_get(res->payload, "forked_in"), true)), NULL));
}

/* The grader's environment: "<env>-verify-<short>", stage verify, forked from the capture. */
static void v_clone(struct cp_run *r)
{
	const struct json *env = st_get(r->cp->db, "environments", r->env_id);
	const struct json *v = st_get(r->cp->db, "versions", r->version_id);
	char prefix[CP_NAME_MAX + 1], name[CP_NAME_MAX + 1];
	struct json *g, *payload;
	struct st_txn *txn;
	const char *gid;

	if (v_refused(r)) {
		v_skip_refused(r);
		return;
	}
	snprintf(prefix, sizeof(prefix), "%.*s-verify-", CP_NAME_MAX - 8 - CP_SHORT_ID, json_get_str(env, "Name"));
	cp_short_name(prefix, name, sizeof(name));
	g = cp_env_new(r->team_id, r->project_id, name, "verify");
	json_object_set_str(g, "ParentVersionID", r->version_id);
	json_object_set_str(g, "CurrentVersionID", r->version_id);
	json_object_set_str(g, "HostID", r->host_id);
	json_object_set_str(g, "Status", "deploying");
	gid = json_get_str(g, "ID");
	json_object_set_str(r->ctx, "grader_env", gid);
	cp_update(r->cp, "deployments", r->dep_id, cp_obj("TargetEnvID", json_new_str(gid), NULL));
	txn = st_begin(r->cp->db);
	st_put(txn, "environments", json_get_str(r->ctx, "grader_env"), g);
	cp_commit_quiet(txn, "grader environment");
	payload = run_fork_payload(r->env_id, v);
	json_object_set_bool(payload, "refuse", true);
	run_cmd(r, json_get_str(r->ctx, "grader_env"), "env.fork", payload, 0, v_cloned);
}

static void v_graded(struct cp_run *r, const struct cp_result *res)
{
	static const char *const keys[] = { "reward", "exit_code", "stdout", "stderr", "source", "ran_for" };
	struct json *ev = json_new_object();

	if (!res->ok) {
		json_free(ev);
		/* verify.run's own words for a verifier that gave no reward in time. */
		v_fail(r, strstr(res->error, "verifier wrote no reward") || strstr(res->error, "past timeout_sec")
				  ? "verifier" : "host", res->error);
		return;
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const struct json *v = json_get(res->payload, keys[i]);

		json_object_set(ev, keys[i], v ? json_dup(v) : json_new_null());
	}
	json_object_set(r->ctx, "grade", json_dup(ev));
	run_ok(r, ev);
}

static void v_grade(struct cp_run *r)
{
	const struct json *verifier = json_get(capture_spec(r), "verifier");

	if (v_refused(r)) {
		v_skip_refused(r);
		return;
	}
	run_cmd(r, json_get_str(r->ctx, "grader_env"), "verify.run",
		cp_obj("id", json_new_str(r->dep_id), "verifier", verifier ? json_dup(verifier) : json_new_object(),
		       "refused", json_new_bool(json_len(json_get(r->ctx, "refused")) > 0), NULL),
		0, v_graded);
}

static void helper_destroyed(struct cp *cp, const struct cp_result *res, void *arg)
{
	char *env_id = arg;

	if (res->ok)
		cp_update(cp, "environments", env_id, cp_obj("Status", json_new_str("destroyed"), NULL));
	else
		log_warn("orch", "environment %s: destroy: %s", env_id, res->error);
	free(env_id);
}

void run_destroy_helper(struct cp_run *r, const char *env_id)
{
	if (env_id && *env_id && *r->host_id && cp_host_connected(r->cp, r->host_id))
		cp_cmd_send(r->cp, r->host_id, env_id, "env.destroy", json_new_object(), NULL, 0, helper_destroyed,
			    xstrdup(env_id));
}

static void v_verdict(struct cp_run *r)
{
	const struct json *grade = json_get(r->ctx, "grade"), *missing = json_get(r->ctx, "missing");
	const struct json *refused = json_get(r->ctx, "refused");
	const char *grader = json_get_str(r->ctx, "grader_env");
	bool refusal = !r->failed && v_refused(r);
	struct json *ev, *reward;

	if (r->failed)
		reward = json_new_null();
	else if (refusal)
		reward = json_new_int(0);
	else
		reward = json_get(grade, "reward") ? json_dup(json_get(grade, "reward")) : json_new_null();
	ev = cp_obj("reward", reward, "source",
		    json_new_str(r->failed ? "error" : refusal ? "refused" : json_get_str(grade, "source")), "exit_code",
		    json_get(grade, "exit_code") ? json_dup(json_get(grade, "exit_code")) : json_new_null(), "refused",
		    refused ? json_dup(refused) : json_new_array(), "missing",
		    missing ? json_dup(missing) : json_new_array(), "agent_frozen",
		    json_new_bool(!json_get_bool(r->params, "resume", false)), "took_ms", json_new_int(run_took_ms(r)),
		    NULL);
	if (r->failed) {
		/* Whose fault: a failed command that set none is the host's (not
		 * connected, no answer in time). */
		const char *fault = json_get_str(r->ctx, "fault");

		json_object_set_str(ev, "error", r->error);
		json_object_set_str(ev, "fault", fault && *fault ? fault : "host");
	}
	/* The grader's fork is not kept. */
	run_destroy_helper(r, grader);
	run_done(r, r->failed ? "failed" : "succeeded", ev);
}

const struct run_kind cp_kind_verify = {
	"verify", NULL, { v_stop, v_collect, v_snapshot, v_clone, v_grade, v_verdict },
};

/* ---- destroy ---- */

static void d_torn(struct cp_run *r, const struct cp_result *res)
{
	if (!res->ok)
		run_fail(r, NULL, "%s", res->error);
	else
		run_ok(r, NULL);
}

static void d_teardown(struct cp_run *r)
{
	if (!*r->host_id || !cp_host_connected(r->cp, r->host_id)) {
		run_skip(r, cp_obj("reason", json_new_str("host not connected; datasets left in place"), NULL));
		return;
	}
	run_cmd(r, r->env_id, "env.destroy", json_new_object(), 0, d_torn);
}

static void d_verdict(struct cp_run *r)
{
	if (!r->failed)
		run_env(r, cp_obj("Status", json_new_str("destroyed"), "Endpoints", json_new_object(), NULL));
	run_done(r, r->failed ? "failed" : "succeeded", NULL);
}

const struct run_kind cp_kind_destroy = {
	"destroy", NULL, { d_teardown, d_verdict },
};
