/*
 * orch_promote.c: the promote kind (deployments.md, promote). A version of
 * one environment is promoted to a target environment of the same project
 * (the blog's `denv promote ops-world alpha staging`) only after five gates
 * pass on a fresh fork of it, the candidate, which the route created and
 * which is this deployment's EnvID:
 *   gate.fork         env.fork of the version, then `true` answered in the
 *                     first service
 *   gate.consistency  env.digest of the version's snapshot: each dataset
 *                     matches the digests the version recorded (recorded
 *                     now when it has none: the first promotion)
 *   gate.replay       N times verify.collect (thaw) and verify.run on the
 *                     candidate: every reward the same
 *   gate.invariants   promote.c's comparison with the target's version, then
 *                     each x-denv.promote.invariants command exits 0
 *   gate.soak         the candidate keeps running for the declared soak;
 *                     then every service still answers
 *   apply             the target's old environment is destroyed and the
 *                     candidate takes its name: the target now runs the
 *                     version
 * A failed gate skips the rest (orch.c); the verdict destroys the candidate
 * and the target is untouched. Params {from_env, version, target,
 * target_env}: target_env is what the target was when the promotion was
 * asked for; the gates look the target up by name when they run. The
 * deployment's phases are the environment's data sheet
 * (api_promote.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "cp/orch.h"
#include "spec/spec.h"

static const struct json *p_version(struct cp_run *r)
{
	return st_get(r->cp->db, "versions", r->version_id);
}

static const struct json *p_spec(struct cp_run *r)
{
	return json_get(p_version(r), "Spec");
}

static const struct json *p_services(struct cp_run *r)
{
	return json_get(p_spec(r), "services");
}

/* The environment now named the target in the project, other than the
 * candidate (a promotion that applied meanwhile made a new one), or NULL. */
static const struct json *p_target(struct cp_run *r)
{
	const struct json *t = cp_find(r->cp, "environments", "ProjectID", r->project_id, "Name",
				       json_get_str(r->params, "target"));

	return t && !str_eq(json_get_str(t, "ID"), r->env_id) ? t : NULL;
}

/* `true` in service svc of the candidate, then fn. */
static void p_answer(struct cp_run *r, const char *svc, run_cmd_fn fn)
{
	struct json *cmd = json_new_array();

	json_array_push(cmd, json_new_str("true"));
	run_cmd(r, r->env_id, "env.exec",
		cp_obj("service", json_new_str(svc), "cmd", cmd, "timeout_sec", json_new_int(CP_HEALTH_TIMEOUT_S), NULL),
		(int64_t)CP_HEALTH_TIMEOUT_S * 1000 + CP_EXEC_SLACK_MS, fn);
}

/* "" when the exec answered 0, else why not (into why). */
static const char *p_exec_failed(const struct cp_result *res, char *why, size_t n)
{
	int64_t code = json_get_int(res->payload, "exit_code", -1);

	if (!res->ok)
		snprintf(why, n, "%s", res->error);
	else if (code != 0)
		snprintf(why, n, "exited %lld", (long long)code);
	else
		why[0] = '\0';
	return why;
}

/* ---- gate.fork ---- */

static void pf_answered(struct cp_run *r, const struct cp_result *res)
{
	struct json *ev = json_dup(json_get(r->ctx, "fork"));
	char why[ERR_MSG_MAX];

	if (*p_exec_failed(res, why, sizeof(why))) {
		json_object_set_bool(ev, "answered", false);
		run_fail(r, ev, "the fresh fork did not answer: %s", why);
		return;
	}
	json_object_set_bool(ev, "answered", true);
	run_ok(r, ev);
}

static void pf_cloned(struct cp_run *r, const struct cp_result *res)
{
	static const char *const kept[] = { "egress", "digests", "clock" };
	const struct json *p = res->payload, *ep = json_get(p, "endpoints");
	struct json *ev;

	if (!res->ok) {
		run_fail(r, cp_obj("env", json_new_str(r->env_id), NULL), "%s", res->error);
		return;
	}
	json_object_set(r->ctx, "endpoints", ep ? json_dup(ep) : json_new_object());
	run_env(r, cp_obj("Endpoints", ep ? json_dup(ep) : json_new_object(), NULL));
	ev = cp_obj("env", json_new_str(r->env_id), "from", json_new_str(r->version_id), "forked_in_ms",
		    json_new_int(run_duration_ms(json_get(p, "forked_in"), true)), "endpoints",
		    ep ? json_dup(ep) : json_new_object(), NULL);
	/* What the fresh fork's own create found: the sheet shows these. */
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		if (json_get(p, kept[i]))
			json_object_set(ev, kept[i], json_dup(json_get(p, kept[i])));
	json_object_set(r->ctx, "fork", ev);
	p_answer(r, json_get_str(json_at(p_services(r), 0), "name"), pf_answered);
}

static void p_fork(struct cp_run *r)
{
	run_cmd(r, r->env_id, "env.fork", run_fork_payload(json_get_str(r->params, "from_env"), p_version(r)), 0,
		pf_cloned);
}

/* ---- gate.consistency ---- */

/* The first dataset whose digest differs from the recorded one, into why. */
static bool digests_differ(const struct json *recorded, const struct json *now, char *why, size_t n)
{
	for (size_t i = 0; recorded && recorded->type == JSON_OBJECT && i < recorded->u.obj.n; i++) {
		const char *vol = recorded->u.obj.m[i].key, *want = json_get_str(recorded, vol);
		const char *got = json_get_str(now, vol);

		if (!got) {
			snprintf(why, n, "dataset %s is gone (recorded %s)", vol, want ? want : "?");
			return true;
		}
		if (!str_eq(got, want)) {
			snprintf(why, n, "dataset %s is %s, recorded %s", vol, got, want ? want : "?");
			return true;
		}
	}
	for (size_t i = 0; now && now->type == JSON_OBJECT && i < now->u.obj.n; i++)
		if (!json_get(recorded, now->u.obj.m[i].key)) {
			snprintf(why, n, "dataset %s was not recorded", now->u.obj.m[i].key);
			return true;
		}
	return false;
}

static void pc_digested(struct cp_run *r, const struct cp_result *res)
{
	const struct json *recorded = json_get(p_version(r), "Digests"), *now = json_get(res->payload, "datasets");
	char why[ERR_MSG_MAX];
	struct json *ev;

	if (!res->ok) {
		run_fail(r, NULL, "%s", res->error);
		return;
	}
	ev = cp_obj("snapshot", json_new_str(json_get_str(p_version(r), "Snapshot")), "storage",
		    json_new_str(json_get_str(res->payload, "storage")), "datasets",
		    now ? json_dup(now) : json_new_object(), "files", json_new_int(json_get_int(res->payload, "files", 0)),
		    "bytes", json_new_int(json_get_int(res->payload, "bytes", 0)), NULL);
	if (json_get_str(res->payload, "unsupported")) {
		json_object_set_str(ev, "reason", json_get_str(res->payload, "unsupported"));
		run_skip(r, ev);
		return;
	}
	if (!recorded) {
		/* Nothing to compare with yet: these become the version's record. */
		cp_update(r->cp, "versions", r->version_id, cp_obj("Digests", json_dup(now), NULL));
		json_object_set_bool(ev, "recorded", true);
		run_ok(r, ev);
		return;
	}
	json_object_set(ev, "recorded", json_dup(recorded));
	if (digests_differ(recorded, now, why, sizeof(why))) {
		run_fail(r, ev, "%s", why);
		return;
	}
	json_object_set_bool(ev, "matches", true);
	run_ok(r, ev);
}

static void p_consistency(struct cp_run *r)
{
	run_cmd(r, json_get_str(p_version(r), "EnvID"), "env.digest",
		cp_obj("snapshot", json_new_str(json_get_str(p_version(r), "Snapshot")), NULL), 0, pc_digested);
}

/* ---- gate.replay ---- */

static int64_t p_replays(struct cp_run *r)
{
	const struct json *pr = json_get(p_spec(r), "promote");

	return pr ? json_get_int(pr, "replays", SPEC_PROMOTE_REPLAYS_DEFAULT) : SPEC_PROMOTE_REPLAYS_DEFAULT;
}

static void pr_next(struct cp_run *r);

static void pr_graded(struct cp_run *r, const struct cp_result *res)
{
	struct json *rewards = json_get(r->ctx, "rewards");
	const struct json *reward = json_get(res->payload, "reward");

	if (!res->ok) {
		run_fail(r, cp_obj("rewards", json_dup(rewards), NULL), "replay %d: %s", r->step_i, res->error);
		return;
	}
	json_array_push(rewards, reward ? json_dup(reward) : json_new_null());
	if (!json_equal(json_at(rewards, 0), json_at(rewards, json_len(rewards) - 1))) {
		char *a = json_to_string(json_at(rewards, 0), 0), *b = json_to_string(reward, 0);

		run_fail(r, cp_obj("replays", json_new_int(p_replays(r)), "rewards", json_dup(rewards), NULL),
			 "replay %d gave reward %s, replay 1 gave %s", r->step_i, b, a);
		free(a);
		free(b);
		return;
	}
	pr_next(r);
}

static void pr_collected(struct cp_run *r, const struct cp_result *res)
{
	char id[ID_MAX + 16];

	if (!res->ok) {
		run_fail(r, cp_obj("rewards", json_dup(json_get(r->ctx, "rewards")), NULL), "replay %d: %s", r->step_i,
			 res->error);
		return;
	}
	snprintf(id, sizeof(id), "%s-r%d", r->dep_id, r->step_i);
	run_cmd(r, r->env_id, "verify.run",
		cp_obj("id", json_new_str(id), "verifier", json_dup(json_get(p_spec(r), "verifier")), "refused",
		       json_new_bool(json_len(json_get(res->payload, "refused")) > 0), NULL),
		0, pr_graded);
}

static void pr_next(struct cp_run *r)
{
	const struct json *v = json_get(p_spec(r), "verifier");
	char id[ID_MAX + 16];

	if (r->step_i >= p_replays(r)) {
		const struct json *rewards = json_get(r->ctx, "rewards");

		run_ok(r, cp_obj("replays", json_new_int(p_replays(r)), "rewards", json_dup(rewards), "reward",
				 json_dup(json_at(rewards, 0)), NULL));
		return;
	}
	r->step_i++;
	snprintf(id, sizeof(id), "%s-r%d", r->dep_id, r->step_i);
	/* thaw: no snapshot follows to unpause the candidate's agent. */
	run_cmd(r, r->env_id, "verify.collect",
		cp_obj("id", json_new_str(id), "agent_service",
		       json_new_str(json_get_str(json_get(p_spec(r), "agent"), "service")), "collect",
		       json_dup(json_get(v, "collect")), "resume", json_new_bool(true), "thaw", json_new_bool(true), NULL),
		0, pr_collected);
}

static void p_replay(struct cp_run *r)
{
	if (!json_get(p_spec(r), "verifier")) {
		run_skip(r, cp_obj("reason", json_new_str("no x-denv.verifier"), NULL));
		return;
	}
	if (p_replays(r) == 0) {
		run_skip(r, cp_obj("reason", json_new_str("x-denv.promote.replays is 0"), NULL));
		return;
	}
	r->step_i = 0;
	json_object_set(r->ctx, "rewards", json_new_array());
	pr_next(r);
}

/* ---- gate.invariants ---- */

static const struct json *p_declared(struct cp_run *r)
{
	return json_get(json_get(p_spec(r), "promote"), "invariants");
}

static void pi_next(struct cp_run *r);

static void pi_ran(struct cp_run *r, const struct cp_result *res)
{
	const struct json *inv = json_at(p_declared(r), (size_t)r->step_i);
	const char *err = json_get_str(res->payload, "stderr");
	char why[ERR_MSG_MAX], detail[CP_PROMOTE_DETAIL_MAX];

	if (*p_exec_failed(res, why, sizeof(why)))
		snprintf(detail, sizeof(detail), "%.80s%s%.160s", why, err && *err ? ": " : "", err ? err : "");
	json_array_push(json_get(r->ctx, "checks"),
			cp_obj("name", json_new_str(json_get_str(inv, "name")), "declared", json_new_bool(true), "ok",
			       json_new_bool(!*why), "detail", json_new_str(*why ? detail : "exited 0"), NULL));
	r->step_i++;
	pi_next(r);
}

static void pi_next(struct cp_run *r)
{
	const struct json *checks = json_get(r->ctx, "checks"), *inv;
	struct json *ev;

	if ((size_t)r->step_i < json_len(p_declared(r))) {
		inv = json_at(p_declared(r), (size_t)r->step_i);
		run_cmd(r, r->env_id, "env.exec",
			cp_obj("service", json_new_str(json_get_str(inv, "service")), "cmd",
			       json_dup(json_get(inv, "command")), "timeout_sec", json_new_int(CP_PROMOTE_CHECK_TIMEOUT_S),
			       NULL),
			(int64_t)CP_PROMOTE_CHECK_TIMEOUT_S * 1000 + CP_EXEC_SLACK_MS, pi_ran);
		return;
	}
	ev = cp_obj("against", json_new_str(json_get_str(r->ctx, "against")), "checks", json_dup(checks), NULL);
	for (size_t i = 0; i < json_len(checks); i++)
		if (!json_get_bool(json_at(checks, i), "ok", true)) {
			run_fail(r, ev, "%s: %s", json_get_str(json_at(checks, i), "name"),
				 json_get_str(json_at(checks, i), "detail"));
			return;
		}
	run_ok(r, ev);
}

static void p_invariants(struct cp_run *r)
{
	const struct json *target = p_target(r);
	const char *tv = target && !str_eq(json_get_str(target, "Status"), "destroyed") ?
				 json_get_str(target, "CurrentVersionID") : NULL;
	struct json *checks = json_new_array();

	/* Against what the target runs now; a first promotion has nothing to keep. */
	cp_promote_invariants(json_get(st_get(r->cp->db, "versions", tv), "Spec"), p_spec(r), checks);
	json_object_set(r->ctx, "checks", checks);
	json_object_set_str(r->ctx, "against", tv ? tv : "");
	r->step_i = 0;
	pi_next(r);
}

/* ---- gate.soak ---- */

static void ps_answered(struct cp_run *r, const struct cp_result *res)
{
	const char *svc = json_get_str(json_at(p_services(r), (size_t)r->step_i), "name");
	char why[ERR_MSG_MAX];
	int64_t soak = json_get_int(json_get(p_spec(r), "promote"), "soak_sec", 0);

	if (*p_exec_failed(res, why, sizeof(why))) {
		run_fail(r, cp_obj("soaked_for_s", json_new_int(soak), "service", json_new_str(svc), NULL),
			 "service %s did not answer after the soak: %s", svc, why);
		return;
	}
	if ((size_t)++r->step_i < json_len(p_services(r))) {
		p_answer(r, json_get_str(json_at(p_services(r), (size_t)r->step_i), "name"), ps_answered);
		return;
	}
	run_ok(r, cp_obj("soaked_for_s", json_new_int(soak), "answered", json_new_int(r->step_i), NULL));
}

static void ps_done(struct ev *ev, void *arg)
{
	struct cp_run *r = arg;

	r->step_i = 0;
	p_answer(r, json_get_str(json_at(p_services(r), 0), "name"), ps_answered);
}

static void p_soak(struct cp_run *r)
{
	int64_t soak = json_get_int(json_get(p_spec(r), "promote"), "soak_sec", 0);

	if (soak <= 0) {
		run_skip(r, cp_obj("reason", json_new_str("no x-denv.promote.soak declared"), NULL));
		return;
	}
	ev_timer_start(r->cp->ev, &r->soak_timer, soak * 1000, ps_done, r);
}

/* ---- apply ---- */

/* The candidate becomes the target: its name, the target's stage. */
static void pa_take_over(struct cp_run *r, const struct json *old)
{
	const char *target = json_get_str(r->params, "target");
	const char *stage = old ? json_get_str(old, "Stage") : NULL;

	run_env(r, cp_obj("Name", json_new_str(target), "Stage", json_new_str(stage && *stage ? stage : target),
			  "Status", json_new_str("running"), "CurrentVersionID", json_new_str(r->version_id), NULL));
	run_ok(r, cp_obj("target", json_new_str(target), "env", json_new_str(r->env_id), "version",
			 json_new_str(r->version_id), "replaced", old ? json_new_str(json_get_str(old, "ID")) : json_new_null(),
			 NULL));
}

/* The old target row gives up its name (and is marked destroyed): the
 * row stays, a record of what the target ran. */
static void pa_retire(struct cp_run *r, const struct json *old)
{
	char name[CP_NAME_MAX + 1], prefix[CP_NAME_MAX + 1], id[ID_MAX];

	if (!old)
		return;
	str_copy(id, sizeof(id), json_get_str(old, "ID"));
	snprintf(prefix, sizeof(prefix), "%.*s-was-", CP_NAME_MAX - 5 - CP_SHORT_ID, json_get_str(old, "Name"));
	cp_short_name(prefix, name, sizeof(name));
	cp_update(r->cp, "environments", id,
		  cp_obj("Name", json_new_str(name), "Status", json_new_str("destroyed"), "Endpoints", json_new_object(),
			 NULL));
}

static void pa_destroyed(struct cp *cp, const struct cp_result *res, void *arg)
{
	struct cp_run *r = arg;
	const struct json *old = st_get(cp->db, "environments", json_get_str(r->ctx, "replacing"));

	r->cmd = NULL;
	if (!res->ok) {
		run_fail(r, NULL, "destroying the target's environment %s: %s", json_get_str(old, "ID"), res->error);
		return;
	}
	pa_retire(r, old);
	pa_take_over(r, st_get(cp->db, "environments", json_get_str(r->ctx, "replacing")));
}

static void p_apply(struct cp_run *r)
{
	const struct json *old = p_target(r);
	const char *host = json_get_str(old, "HostID");

	if (!old) {
		pa_take_over(r, NULL);
		return;
	}
	if (str_eq(json_get_str(old, "Status"), "destroyed")) {	/* destroyed by hand: only its name is left */
		pa_retire(r, old);
		pa_take_over(r, NULL);
		return;
	}
	json_object_set_str(r->ctx, "replacing", json_get_str(old, "ID"));
	if (host && *host && !cp_host_connected(r->cp, host)) {
		run_fail(r, NULL, "the target's host %s is not connected; the target is left as it is", host);
		return;
	}
	if (!host || !*host) {	/* never placed: nothing runs to be removed */
		pa_destroyed(r->cp, &(struct cp_result){ .ok = true }, r);
		return;
	}
	r->cmd = cp_cmd_send(r->cp, host, json_get_str(old, "ID"), "env.destroy", json_new_object(), NULL, 0,
			     pa_destroyed, r);
}

/* ---- verdict ---- */

/* {gate: status} from the phase rows. */
static struct json *gate_statuses(struct cp_run *r)
{
	struct json *g = json_new_object();
	char pid[CP_ROW_ID_MAX];

	for (int seq = 1; r->names[seq - 1] && !str_eq(r->names[seq - 1], "verdict"); seq++) {
		cp_phase_id(r->dep_id, seq, pid);
		json_object_set_str(g, r->names[seq - 1], json_get_str(st_get(r->cp->db, "phases", pid), "Status"));
	}
	return g;
}

static void p_verdict(struct cp_run *r)
{
	struct json *ev = cp_obj("target", json_new_str(json_get_str(r->params, "target")), "version",
				 json_new_str(r->version_id), "gates", gate_statuses(r), "took_ms",
				 json_new_int(run_took_ms(r)), NULL);

	if (!r->failed) {
		json_object_set_str(ev, "env", r->env_id);
		run_done(r, "succeeded", ev);
		return;
	}
	/* The candidate is not kept; the target still runs what it ran. */
	run_env(r, cp_obj("Status", json_new_str("failed"), NULL));
	run_destroy_helper(r, r->env_id);
	run_done(r, "failed", ev);
}

const struct run_kind cp_kind_promote = {
	"promote", "deploying",
	{ p_fork, p_consistency, p_replay, p_invariants, p_soak, p_apply, p_verdict },
};
