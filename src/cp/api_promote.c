/*
 * api_promote.c: POST /v1/envs/{env}/promote starts a promotion of {env}'s
 * version to a target environment of its project (orch_promote.c runs the
 * gates); GET /v1/envs/{env}/sheet serves the environment's data sheet,
 * assembled from the records that prove each line: the version (its spec,
 * snapshot and recorded dataset digests), the create that started what
 * runs (image digests, the egress probe's finding) and the last promotion
 * that made this environment (every gate with its evidence).
 */
#include <stdio.h>
#include <string.h>

#include "base/str.h"
#include "cp/cp.h"
#include "spec/spec.h"

/* ---- POST /v1/envs/{env}/promote {target, version} ---- */

/* The version to promote: given (a healthy snapshot of env), else env's current. */
static const struct json *promote_version(struct cp *cp, struct http_req *req, const struct json *env,
					  const char *vid)
{
	const struct json *v;

	if (!vid || !*vid)
		vid = json_get_str(env, "CurrentVersionID");
	v = vid && *vid ? st_get(cp->db, "versions", vid) : NULL;
	if (!v || !str_eq(json_get_str(v, "EnvID"), json_get_str(env, "ID")) || !json_get_bool(v, "Healthy", false) ||
	    !*json_get_str(v, "Snapshot")) {
		http_respond_error(req, 400, "version must be a healthy snapshot of this environment");
		return NULL;
	}
	return v;
}

static void h_promote(struct cp *cp, struct http_req *req)
{
	const char *target = NULL, *vid = NULL, *project;
	char prefix[CP_NAME_MAX + 1], name[CP_NAME_MAX + 1], env_id[ID_MAX];
	const struct json *env, *v, *old;
	struct json *body = NULL, *cand, *params, *resp;
	struct cp_caller who;
	struct st_txn *txn;

	if (!(env = cp_live_env(cp, req, &who)) || cp_body(req, &body) < 0)
		return;
	if (cp_req_str(req, body, "target", &target) < 0 || cp_opt_str(req, body, "version", &vid) < 0)
		goto out;
	project = json_get_str(env, "ProjectID");
	if (cp_name_ok(req, "target", target) < 0)
		goto out;
	if (str_eq(target, json_get_str(env, "Name"))) {
		http_respond_error(req, 400, "target must be another environment of the project");
		goto out;
	}
	if (!(v = promote_version(cp, req, env, vid)) || cp_quota_check(cp, req, who.team_id, CP_QUOTA_ENVS) < 0)
		goto out;
	old = cp_find(cp, "environments", "ProjectID", project, "Name", target);
	/* The candidate: a fresh fork of the version, on the source's host. */
	snprintf(prefix, sizeof(prefix), "%.*s-promote-", CP_NAME_MAX - 9 - CP_SHORT_ID, target);
	cp_short_name(prefix, name, sizeof(name));
	cand = cp_env_new(who.team_id, project, name, "promote");
	json_object_set_str(cand, "ParentVersionID", json_get_str(v, "ID"));
	json_object_set_str(cand, "HostID", json_get_str(env, "HostID"));
	str_copy(env_id, sizeof(env_id), json_get_str(cand, "ID"));
	params = cp_obj("from_env", json_new_str(json_get_str(env, "ID")), "version", json_new_str(json_get_str(v, "ID")),
			"target", json_new_str(target), "target_env",
			json_new_str(old && !str_eq(json_get_str(old, "Status"), "destroyed") ? json_get_str(old, "ID") : ""),
			NULL);
	txn = st_begin(cp->db);
	resp = cp_deployment_create_v(txn, who.team_id, project, env_id, "promote", params, json_get_str(v, "ID"));
	st_put(txn, "environments", env_id, cand);
	cp_commit_deploy(cp, txn, req, 202, resp, env_id);
out:
	json_free(body);
}

/* ---- GET /v1/envs/{env}/sheet ---- */

struct newest {
	const char *kind, *version;	/* version NULL: any */
	const struct json *dep;
};

static int newest_dep(const char *id, const struct json *row, void *arg)
{
	struct newest *n = arg;

	if (str_eq(json_get_str(row, "Kind"), n->kind) && str_eq(json_get_str(row, "Status"), "succeeded") &&
	    (!n->version || str_eq(json_get_str(row, "VersionID"), n->version)))
		n->dep = row;	/* ids are ULIDs: the last seen is the newest */
	return 0;
}

/* The newest succeeded deployment of kind on env (of version, when given). */
static const struct json *find_dep(struct cp *cp, const char *env_id, const char *kind, const char *version)
{
	struct newest n = { kind, version, NULL };
	struct err e;

	if (st_scan(cp->db, "deployments", "EnvID", env_id, NULL, newest_dep, &n, &e) < 0)
		return NULL;
	return n.dep;
}

/* The evidence of dep's phase called name, or NULL. */
static const struct json *phase_evidence(struct cp *cp, const struct json *dep, const char *name)
{
	const char *const *names = cp_phase_names(json_get_str(dep, "Kind"));
	char pid[CP_ROW_ID_MAX];

	for (int seq = 1; dep && names && names[seq - 1]; seq++)
		if (str_eq(names[seq - 1], name)) {
			cp_phase_id(json_get_str(dep, "ID"), seq, pid);
			return json_get(st_get(cp->db, "phases", pid), "Evidence");
		}
	return NULL;
}

static struct json *dup_or_null(const struct json *v)
{
	return v ? json_dup(v) : json_new_null();
}

static struct json *protection(int n, const char *name, bool held, struct json *evidence)
{
	return cp_obj("n", json_new_int(n), "name", json_new_str(name), "held", json_new_bool(held), "evidence",
		      evidence, NULL);
}

/* {service: resources} (memory_mb, pids, cpus; 0 is the host's default). */
static struct json *caps_of(const struct json *spec)
{
	struct json *caps = json_new_object();

	for (size_t i = 0; i < json_len(json_get(spec, "services")); i++) {
		const struct json *s = json_at(json_get(spec, "services"), i);

		json_object_set(caps, json_get_str(s, "name"), dup_or_null(json_get(s, "resources")));
	}
	return caps;
}

/* The five protections (concepts.md), each with what shows it holds. */
static struct json *protections(const struct json *spec, const char *probe)
{
	const char *agent = json_get_str(json_get(spec, "agent"), "service");
	const struct json *svc = agent ? spec_service(spec, agent) : NULL, *vf = json_get(spec, "verifier");
	struct json *list = json_new_array();

	json_array_push(list, protection(1, "the agent is never root", agent && svc,
					 cp_obj("service", json_new_str(agent ? agent : ""), "user",
						json_new_str(json_get_str(svc, "user") ? json_get_str(svc, "user") : ""),
						"checked", json_new_str("at resolve: a root agent is refused"), NULL)));
	json_array_push(list, protection(2, "the grader is a separate principal", vf != NULL,
					 cp_obj("verifier", dup_or_null(vf), "runs",
						json_new_str("as root on a fork, after the agent is frozen"), NULL)));
	json_array_push(list, protection(3, "special files in submissions are refused", vf != NULL,
					 cp_obj("collect", dup_or_null(json_get(vf, "collect")), "refused",
						json_new_str("symlink, fifo, device, socket: reward 0"), NULL)));
	json_array_push(list, protection(4, "memory, process and CPU caps on every service", true,
					 cp_obj("caps", caps_of(spec), "zero", json_new_str("the host's default"), NULL)));
	json_array_push(list, protection(5, "egress is denied and probed",
					 str_eq(json_get_str(spec, "egress"), "deny") && probe &&
						 str_has_prefix(probe, "denied"),
					 cp_obj("policy", json_new_str(json_get_str(spec, "egress")), "probe",
						probe ? json_new_str(probe) : json_new_null(), NULL)));
	return list;
}

/* The phases of a promotion as the sheet lists its gates. */
static struct json *gates_of(struct cp *cp, const struct json *dep)
{
	struct json *phases = cp_list(cp, "phases", "DeploymentID", json_get_str(dep, "ID"), false, 0, NULL, NULL);
	struct json *out = json_new_array();

	for (size_t i = 0; i < json_len(phases); i++) {
		const struct json *p = json_at(phases, i);

		json_array_push(out, cp_obj("name", json_new_str(json_get_str(p, "Name")), "status",
					    json_new_str(json_get_str(p, "Status")), "evidence",
					    dup_or_null(json_get(p, "Evidence")), "error",
					    json_new_str(json_get_str(p, "Error")), NULL));
	}
	json_free(phases);
	return out;
}

static struct json *datasets_of(const struct json *v, const struct json *snap_ev)
{
	const struct json *spec = json_get(v, "Spec"), *digests = json_get(v, "Digests");
	const struct json *paths = json_get(snap_ev, "datasets");
	struct json *out = json_new_array();

	for (size_t i = 0; i < json_len(json_get(spec, "volumes")); i++) {
		const char *vol = json_at(json_get(spec, "volumes"), i)->u.str.s;
		const struct json *path = json_at(paths, i);

		json_array_push(out, cp_obj("volume", json_new_str(vol), "dataset", dup_or_null(path), "digest",
					    dup_or_null(json_get(digests, vol)), NULL));
	}
	return out;
}

static void h_sheet(struct cp *cp, struct http_req *req)
{
	const struct json *env, *v, *spec, *promo, *made, *fork_ev, *made_ev;
	struct cp_caller who;
	struct json *s;
	const char *probe;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0 ||
	    !(env = cp_team_row(cp, req, "environments", who.team_id, http_req_param(req, "env"), "environment")))
		return;
	v = st_get(cp->db, "versions", json_get_str(env, "CurrentVersionID"));
	if (!v) {
		http_respond_error(req, 409, "the environment has no version yet; deploy it first");
		return;
	}
	spec = json_get(v, "Spec");
	promo = find_dep(cp, json_get_str(env, "ID"), "promote", NULL);
	/* The create whose probe and digests describe the version: its deploy. */
	made = find_dep(cp, json_get_str(v, "EnvID"), "deploy", json_get_str(v, "ID"));
	fork_ev = phase_evidence(cp, promo, "gate.fork");
	made_ev = phase_evidence(cp, made, "prepare");
	probe = json_get_str(fork_ev ? fork_ev : made_ev, "egress");
	s = json_new_object();
	json_object_set(s, "environment", cp_obj("id", json_new_str(json_get_str(env, "ID")), "name",
						 json_new_str(json_get_str(env, "Name")), "project",
						 json_new_str(json_get_str(env, "ProjectID")), "status",
						 json_new_str(json_get_str(env, "Status")), NULL));
	json_object_set(s, "version", cp_obj("id", json_new_str(json_get_str(v, "ID")), "number",
					     json_new_int(json_get_int(v, "Number", 0)), "env",
					     json_new_str(json_get_str(v, "EnvID")), "snapshot",
					     json_new_str(json_get_str(v, "Snapshot")), "created_at",
					     dup_or_null(json_get(v, "CreatedAt")), NULL));
	json_object_set(s, "images", dup_or_null(json_get(fork_ev ? fork_ev : made_ev, "digests")));
	json_object_set(s, "datasets", datasets_of(v, phase_evidence(cp, made, "snapshot")));
	json_object_set(s, "protections", protections(spec, probe));
	json_object_set(s, "caps", caps_of(spec));
	json_object_set(s, "egress", cp_obj("policy", json_new_str(json_get_str(spec, "egress")), "probe",
					    probe ? json_new_str(probe) : json_new_null(), NULL));
	json_object_set(s, "clock", dup_or_null(json_get(spec, "clock")));
	json_object_set(s, "verifier", dup_or_null(json_get(spec, "verifier")));
	json_object_set(s, "promotion", promo ? cp_obj("deployment", json_new_str(json_get_str(promo, "ID")),
						       "finished_at", dup_or_null(json_get(promo, "FinishedAt")),
						       "gates", gates_of(cp, promo), NULL)
					      : json_new_null());
	cp_reply(req, 200, cp_obj("sheet", s, NULL));
}

int cp_api_promote(struct cp *cp)
{
	if (cp_route(cp, "POST", "/v1/envs/{env}/promote", CP_BODY_JSON, h_promote) < 0 ||
	    cp_route(cp, "GET", "/v1/envs/{env}/sheet", 0, h_sheet) < 0)
		return -1;
	return 0;
}
