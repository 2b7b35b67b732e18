/* deploy.c: deployment, phase and version rows (deployments.md). They are
 * created pending here; the orchestrator (orch.c) runs them. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

struct kind_phases {
	const char *kind;
	const char *const *names;
};

static const char *const deploy_phases[] = { "resolve", "place", "provision", "join", "prepare", "start",
					     "health", "warm", "snapshot", "ingress", "verdict", NULL };
static const char *const fork_phases[] = { "place", "clone", "health", "verdict", NULL };
static const char *const snapshot_phases[] = { "snapshot", "health", "verdict", NULL };
static const char *const rollback_phases[] = { "restore", "health", "verdict", NULL };
static const char *const verify_phases[] = { "stop", "collect", "snapshot", "clone", "grade", "verdict", NULL };
static const char *const destroy_phases[] = { "teardown", "verdict", NULL };
static const char *const promote_phases[] = { "gate.fork", "gate.consistency", "gate.replay", "gate.invariants",
					      "gate.soak", "apply", "verdict", NULL };

static const struct kind_phases kinds[] = {
	{ "deploy", deploy_phases },	 { "fork", fork_phases },	{ "snapshot", snapshot_phases },
	{ "rollback", rollback_phases }, { "verify", verify_phases },	{ "destroy", destroy_phases },
	{ "promote", promote_phases },
};

const char *const *cp_phase_names(const char *kind)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (str_eq(kinds[i].kind, kind))
			return kinds[i].names;
	return NULL;
}

struct json *cp_env_new(const char *team_id, const char *project_id, const char *name, const char *stage)
{
	char id[ID_MAX];
	struct json *env = cp_row_new("env", team_id, id);

	json_object_set_str(env, "ProjectID", project_id);
	json_object_set_str(env, "Name", name);
	json_object_set_str(env, "Stage", stage);
	json_object_set_str(env, "HostID", "");
	json_object_set_str(env, "ParentVersionID", "");
	json_object_set_str(env, "CurrentVersionID", "");
	json_object_set_str(env, "Status", "pending");
	json_object_set(env, "CreatedAt", cp_now_json());
	json_object_set(env, "Endpoints", json_new_object());
	return env;
}

/* Phase row ids sort by sequence within a deployment: "<dep>.<seq, 2 digits>". */
void cp_phase_id(const char *dep_id, int seq, char out[CP_ROW_ID_MAX])
{
	snprintf(out, CP_ROW_ID_MAX, "%s.%02d", dep_id, seq);
}

struct json *cp_version_new(struct cp *cp, const struct json *env, const struct json *spec)
{
	const char *env_id = json_get_str(env, "ID");
	struct json *v = json_new_object();
	char id[ID_MAX];

	id_new("ver", id);
	json_object_set_str(v, "ID", id);
	json_object_set_str(v, "TeamID", json_get_str(env, "TeamID"));
	json_object_set_str(v, "ProjectID", json_get_str(env, "ProjectID"));
	json_object_set_str(v, "EnvID", env_id);
	json_object_set_int(v, "Number", (int64_t)st_count(cp->db, "versions", "EnvID", env_id) + 1);
	json_object_set(v, "Spec", spec ? json_dup(spec) : json_new_null());
	json_object_set_str(v, "Snapshot", "");
	json_object_set_bool(v, "Healthy", false);
	json_object_set(v, "CreatedAt", cp_now_json());
	return v;
}

void cp_short_name(const char *prefix, char *out, size_t n)
{
	char id[ID_MAX], tail[CP_SHORT_ID + 1];
	size_t len;

	/* The random end of a ULID: two names made in the same millisecond differ. */
	id_new("x", id);
	len = strlen(id);
	for (size_t i = 0; i < CP_SHORT_ID; i++)
		tail[i] = (char)tolower((unsigned char)id[len - CP_SHORT_ID + i]);
	tail[CP_SHORT_ID] = '\0';
	snprintf(out, n, "%s%s", prefix, tail);
}

struct json *cp_deployment_create(struct st_txn *txn, const char *team_id, const char *project_id,
				  const char *env_id, const char *kind, struct json *params)
{
	return cp_deployment_create_v(txn, team_id, project_id, env_id, kind, params, "");
}

struct json *cp_deployment_create_v(struct st_txn *txn, const char *team_id, const char *project_id,
				    const char *env_id, const char *kind, struct json *params, const char *version_id)
{
	const char *const *names = cp_phase_names(kind);
	char id[ID_MAX], pid[CP_ROW_ID_MAX];
	struct json *dep = cp_row_new("dep", team_id, id), *phases = json_new_array(), *out = json_new_object();

	json_object_set_str(dep, "ProjectID", project_id);
	json_object_set_str(dep, "EnvID", env_id);
	json_object_set_str(dep, "Kind", kind);
	json_object_set_str(dep, "Status", "pending");
	json_object_set_str(dep, "VersionID", version_id ? version_id : "");
	json_object_set_str(dep, "TargetEnvID", "");
	json_object_set(dep, "Params", params ? params : json_new_object());
	json_object_set_str(dep, "Error", "");
	json_object_set(dep, "CreatedAt", cp_now_json());
	json_object_set(dep, "FinishedAt", json_new_null());

	for (int seq = 1; names && names[seq - 1]; seq++) {
		struct json *ph = json_new_object();

		json_object_set_str(ph, "DeploymentID", id);
		json_object_set_int(ph, "Seq", seq);
		json_object_set_str(ph, "Name", names[seq - 1]);
		json_object_set_str(ph, "Status", "pending");
		json_object_set(ph, "Evidence", json_new_null());
		json_object_set_str(ph, "Error", "");
		json_object_set(ph, "StartedAt", json_new_null());
		json_object_set(ph, "FinishedAt", json_new_null());
		json_array_push(phases, json_dup(ph));
		cp_phase_id(id, seq, pid);
		st_put(txn, "phases", pid, ph);
	}
	json_object_set(out, "deployment", cp_public(dep, "deployments"));
	json_object_set(out, "phases", phases);
	st_put(txn, "deployments", id, dep);
	return out;
}

struct json *cp_deployment_view(struct cp *cp, const struct json *dep)
{
	struct json *out = json_new_object();

	json_object_set(out, "deployment", cp_public(dep, "deployments"));
	json_object_set(out, "phases", cp_list(cp, "phases", "DeploymentID", json_get_str(dep, "ID"), false, 0,
					       NULL, NULL));
	return out;
}
