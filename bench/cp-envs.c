/*
 * cp-envs: fill a control-plane store with N environments the way denv-cp
 * would have left them after one successful deploy each, for bench/memory.sh
 * (denv-cp RSS with 10,000 environments). Asserts nothing.
 *
 *   cp-envs DB N [PER_PROJECT [bare]]
 *
 * DB must already hold the first team (start denv-cp on it once). Per
 * environment: the environment row (running, on a host), one healthy version
 * with a two-service spec, one succeeded deploy with its eleven phases (ok,
 * small evidence); with "bare", the environment row alone. PER_PROJECT
 * environments share a project (default 100). The environments are spread
 * round-robin over the hosts the store holds (joined hosts: bench/scale.sh
 * joins its simulated sidecars first), or all sit on one made-up host id
 * when it holds none.
 * Rows are written 100 environments per transaction, through the store's own
 * API, with the cp's own constructors where they exist (cp_env_new).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/id.h"
#include "base/str.h"
#include "cp/cp.h"
#include "json/json.h"
#include "spec/spec.h"
#include "store/store.h"

#define ENVS_PER_TXN 100

/* The quickstart shape: an agent box and a database (compose as JSON). */
static const char compose_text[] =
	"{\"x-denv\":{\"egress\":\"deny\",\"agent\":{\"service\":\"box\"}},"
	"\"services\":{"
	"\"box\":{\"image\":\"denv-test/busybox\",\"user\":\"1000:1000\",\"command\":[\"sleep\",\"3600\"],"
	"\"environment\":{\"HOME\":\"/home/agent\"},\"volumes\":[\"home:/home/agent\"],\"depends_on\":[\"db\"]},"
	"\"db\":{\"image\":\"denv-test/debian\",\"command\":[\"postgres\"],\"environment\":{\"POSTGRES_PASSWORD\":\"pw\"},"
	"\"volumes\":[\"pg:/var/lib/postgresql/data\"],"
	"\"healthcheck\":{\"test\":[\"CMD\",\"pg_isready\",\"-U\",\"postgres\"],\"interval\":\"1s\",\"retries\":30}}},"
	"\"volumes\":{\"home\":{},\"pg\":{}}}";

static const char *const deploy_phases[] = { "resolve", "place", "provision", "join", "prepare", "start",
					     "health", "warm", "snapshot", "ingress", "verdict", NULL };

struct first_team {
	char id[ID_MAX];
};

struct host_ids {
	char (*id)[ID_MAX];
	size_t n, cap;
};

static int take_first(const char *id, const struct json *row, void *arg)
{
	struct first_team *t = arg;

	str_copy(t->id, sizeof(t->id), id);
	return 1;
}

static int take_host(const char *id, const struct json *row, void *arg)
{
	struct host_ids *h = arg;

	if (h->n == h->cap) {
		h->cap = h->cap ? h->cap * 2 : 64;
		h->id = xrealloc(h->id, h->cap * sizeof(*h->id));
	}
	str_copy(h->id[h->n++], ID_MAX, id);
	return 0;
}

static struct json *evidence(const char *phase, const char *host, const char *ver)
{
	if (str_eq(phase, "place"))
		return cp_obj("host", json_new_str(host), "reason", json_new_str("least loaded"), NULL);
	if (str_eq(phase, "prepare"))
		return cp_obj("egress", json_new_str("denied (verified)"), "digests",
			      cp_obj("box", json_new_str("sha256:8cb9e208ae0a"), "db", json_new_str("sha256:890e00e34e2c"),
				     NULL),
			      NULL);
	if (str_eq(phase, "snapshot"))
		return cp_obj("snapshot", json_new_str(ver), "frozen_for", json_new_str("41ms"), "consistent",
			      json_new_bool(true), NULL);
	if (str_eq(phase, "verdict"))
		return cp_obj("version", json_new_str(ver), "snapshot", json_new_str(ver), "took_ms", json_new_int(7310),
			      NULL);
	return json_new_object();
}

static void add_env(struct st_txn *txn, const char *team, const char *project, uint64_t i, const struct json *spec,
		    const char *host, bool bare)
{
	char name[64], ver[ID_MAX], dep[ID_MAX], pid[CP_ROW_ID_MAX];
	struct json *env, *v, *d;
	const char *env_id;

	snprintf(name, sizeof(name), "env-%" PRIu64, i);
	env = cp_env_new(team, project, name, "alpha");
	env_id = json_get_str(env, "ID");
	id_new("ver", ver);
	id_new("dep", dep);
	if (bare)
		goto env;

	v = cp_obj("ID", json_new_str(ver), "TeamID", json_new_str(team), "ProjectID", json_new_str(project), "EnvID",
		   json_new_str(env_id), "Number", json_new_int(1), "Spec", json_dup(spec), "Snapshot",
		   json_new_str(ver), "Healthy", json_new_bool(true), "CreatedAt", cp_now_json(), NULL);
	st_put(txn, "versions", ver, v);

	d = cp_obj("ID", json_new_str(dep), "TeamID", json_new_str(team), "ProjectID", json_new_str(project), "EnvID",
		   json_new_str(env_id), "Kind", json_new_str("deploy"), "Status", json_new_str("succeeded"),
		   "VersionID", json_new_str(ver), "TargetEnvID", json_new_str(""), "Params",
		   cp_obj("spec", json_dup(spec), "warm", json_new_null(), NULL), "Error", json_new_str(""),
		   "CreatedAt", cp_now_json(), "FinishedAt", cp_now_json(), NULL);
	st_put(txn, "deployments", dep, d);
	for (int seq = 1; deploy_phases[seq - 1]; seq++) {
		struct json *ph = cp_obj("DeploymentID", json_new_str(dep), "Seq", json_new_int(seq), "Name",
					 json_new_str(deploy_phases[seq - 1]), "Status", json_new_str("ok"), "Evidence",
					 evidence(deploy_phases[seq - 1], host, ver), "Error", json_new_str(""),
					 "StartedAt", cp_now_json(), "FinishedAt", cp_now_json(), NULL);

		cp_phase_id(dep, seq, pid);
		st_put(txn, "phases", pid, ph);
	}

env:
	json_object_set_str(env, "HostID", host);
	json_object_set_str(env, "CurrentVersionID", ver);
	json_object_set_str(env, "Status", "running");
	st_put(txn, "environments", env_id, env);
}

int main(int argc, char **argv)
{
	struct st_opts o = { .no_auto_compact = true };
	struct first_team team = { "" };
	struct json *compose = NULL, *spec = NULL;
	struct st_db *db = NULL;
	struct host_ids hosts = { 0 };
	char project[ID_MAX] = "", made_up[ID_MAX];
	uint64_t n, per = 100;
	bool bare = argc > 4 && str_eq(argv[4], "bare");
	struct err e;
	int rc = 1;

	if (argc < 3 || str_to_u64(argv[2], &n) < 0 || (argc > 3 && (str_to_u64(argv[3], &per) < 0 || per == 0)) ||
	    (argc > 4 && !bare) || argc > 5) {
		fprintf(stderr, "usage: cp-envs DB N [PER_PROJECT [bare]]\n");
		return 2;
	}
	if (json_parse(compose_text, strlen(compose_text), NULL, &compose, &e) < 0 ||
	    spec_from_compose(compose, &spec, &e) < 0) {
		fprintf(stderr, "cp-envs: spec: %s\n", e.msg);
		goto out;
	}
	if (st_open(argv[1], &o, &db, &e) < 0) {
		fprintf(stderr, "cp-envs: %s\n", e.msg);
		goto out;
	}
	if (st_scan(db, "teams", NULL, NULL, NULL, take_first, &team, &e) < 0 || !*team.id) {
		fprintf(stderr, "cp-envs: %s has no team (start denv-cp on it once first)\n", argv[1]);
		goto out;
	}
	if (st_scan(db, "hosts", NULL, NULL, NULL, take_host, &hosts, &e) < 0) {
		fprintf(stderr, "cp-envs: hosts: %s\n", e.msg);
		goto out;
	}
	id_new("host", made_up);
	for (uint64_t i = 0; i < n;) {
		struct st_txn *txn = st_begin(db);

		for (int k = 0; k < ENVS_PER_TXN && i < n; k++, i++) {
			if (i % per == 0) {
				char pname[64];

				id_new("prj", project);
				snprintf(pname, sizeof(pname), "bench-%" PRIu64, i / per);
				st_put(txn, "projects", project,
				       cp_obj("ID", json_new_str(project), "TeamID", json_new_str(team.id), "Name",
					      json_new_str(pname), "Kind", json_new_str("rl-environment"), "Source",
					      json_new_str(""), "CreatedAt", cp_now_json(), NULL));
			}
			add_env(txn, team.id, project, i, spec, hosts.n ? hosts.id[i % hosts.n] : made_up, bare);
		}
		if (st_commit(txn, NULL, NULL, &e) < 0) {
			fprintf(stderr, "cp-envs: commit: %s\n", e.msg);
			goto out;
		}
	}
	printf("cp-envs: %" PRIu64 " environments%s in %" PRIu64 " projects on %zu hosts (team %s)\n", n,
	       bare ? " (bare)" : ", each with a version and a deploy", (n + per - 1) / per, hosts.n ? hosts.n : 1,
	       team.id);
	rc = 0;
out:
	st_close(db);
	free(hosts.id);
	json_free(compose);
	json_free(spec);
	return rc;
}
