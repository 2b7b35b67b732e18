/*
 * orch_place.c: placement for a deploy (targets.md, "Placement";
 * deployments.md, phases place, provision and join).
 *
 * place takes the environment's own host, the pinned target, or the team's
 * connected sidecar that is not drained and has room, by the policy (spread
 * or pack; the arithmetic is place_fit.c's); when no sidecar has room, a
 * connected driver host (EnsureDriverHosts creates them first), else a new
 * machine, else a refusal naming what was needed. With no host at all,
 * provision creates a machine through the team's first cloud that can
 * (Hetzner or AWS, cloud_machines.c) with a fresh join token bound to that
 * cloud in its cloud-init, and join waits for a host of the team to connect,
 * preferring one that joined through that cloud. The machine's answer and the
 * join are both callbacks on the loop: nothing here blocks.
 *
 * A server that never joins is deleted (denv-cp(8), "Provisioned servers
 * that never join"): when join gives up, through the cloud at once; when
 * the control plane stopped meanwhile, by the start-up sweep. The machine's join token row is
 * its durable record: DeploymentID and MachineName before the create call,
 * ProviderRef once the cloud answered, then MachineStatus (deleting,
 * deleted, delete_failed, never_created), MachineError, DeleteTries and
 * MachineHostID (the host row that shows the outcome in GET /v1/hosts). A
 * token whose UsedAt is set joined a host: that server is never deleted here.
 *
 * ctx: placed (a host was found by place), cloud_id and token_id (what
 * provision made), machine (its name, for messages), waited_ms (join).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/clock.h"
#include "base/crypto.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/orch.h"

#define NO_CLOUD_MSG                                                                                           \
	"no connected host and no cloud that can provision: connect a cloud or run `denvd join` on a machine"

/* Why a server that never joined could not be deleted: no cloud to ask. */
#define NO_DELETE_MSG "its cloud is gone or cannot delete machines"

/* ---- place ---- */

struct host_pick {
	struct cp *cp;
	const char *cloud_id;	/* only hosts of this cloud; NULL: any */
	bool drivers;		/* this pass takes driver hosts, else sidecars */
	char host_id[ID_MAX];
};

/* A drained host takes nothing new (denv host drain). */
static bool host_takes_new(struct cp *cp, const char *id, const struct json *row)
{
	return cp_host_connected(cp, id) && !json_get_bool(row, "Draining", false);
}

static int pick_host(const char *id, const struct json *row, void *arg)
{
	struct host_pick *p = arg;

	if (p->cloud_id && !str_eq(json_get_str(row, "CloudID"), p->cloud_id))
		return 0;
	if (cp_host_is_driver(p->cp, row) != p->drivers || !host_takes_new(p->cp, id, row))
		return 0;
	str_copy(p->host_id, sizeof(p->host_id), id);
	return 1;
}

/* The team's first connected host that takes new environments, sidecars
 * before driver hosts; only driver hosts when drivers_only. */
static bool first_connected_of(struct cp_run *r, const char *cloud_id, bool drivers_only, char out[ID_MAX])
{
	struct host_pick p = { r->cp, cloud_id, false, "" };
	struct err e;

	for (int pass = drivers_only ? 1 : 0; pass < 2 && !*p.host_id; pass++) {
		p.drivers = pass == 1;
		if (st_scan(r->cp->db, "hosts", "TeamID", r->team_id, NULL, pick_host, &p, &e) < 0)
			log_error("orch", "hosts: %s", e.msg);
	}
	str_copy(out, ID_MAX, p.host_id);
	return *p.host_id != '\0';
}

static bool first_connected(struct cp_run *r, const char *cloud_id, char out[ID_MAX])
{
	return first_connected_of(r, cloud_id, false, out);
}

/* ---- capacity: the team's sidecars that take new environments ---- */

struct fleet {
	struct cp *cp;
	const char *skip_env;		/* the environment being placed: its old reservation goes */
	struct cp_place_host *hosts;
	char (*ids)[ID_MAX];
	size_t n, cap;
};

static int add_host(const char *id, const struct json *row, void *arg)
{
	struct fleet *f = arg;

	if (cp_host_is_driver(f->cp, row) || !host_takes_new(f->cp, id, row))
		return 0;
	if (f->n == f->cap) {
		f->cap = f->cap ? f->cap * 2 : 8;
		f->hosts = xrealloc(f->hosts, f->cap * sizeof(*f->hosts));
		f->ids = xrealloc(f->ids, f->cap * sizeof(*f->ids));
	}
	memset(&f->hosts[f->n], 0, sizeof(f->hosts[f->n]));
	str_copy(f->ids[f->n], ID_MAX, id);
	cp_place_host_capacity(json_get(row, "Capabilities"), &f->hosts[f->n].cap);
	f->n++;
	return 0;
}

/* What a placed environment holds: the reservation place recorded, else
 * (a fork, or a row from before reservations) its current version's Spec. */
static void env_reservation(struct cp *cp, const struct json *env, struct cp_capacity *c)
{
	const struct json *v;

	if (cp_capacity_from_json(json_get(env, "Reserved"), c))
		return;
	v = st_get(cp->db, "versions", json_get_str(env, "CurrentVersionID"));
	cp_place_need(json_get(v, "Spec"), c);
}

static int add_env(const char *id, const struct json *row, void *arg)
{
	struct fleet *f = arg;
	const char *host = json_get_str(row, "HostID"), *st = json_get_str(row, "Status");
	struct cp_capacity c;

	if (!host || !*host || str_eq(id, f->skip_env) || str_eq(st, "destroyed") || str_eq(st, "lost"))
		return 0;
	for (size_t i = 0; i < f->n; i++)
		if (str_eq(f->ids[i], host)) {
			env_reservation(f->cp, row, &c);
			cp_capacity_add(&f->hosts[i].used, &c);
			f->hosts[i].live++;
			break;
		}
	return 0;
}

static void fleet_load(struct cp_run *r, struct fleet *f)
{
	struct err e;

	memset(f, 0, sizeof(*f));
	f->cp = r->cp;
	f->skip_env = r->env_id;
	if (st_scan(r->cp->db, "hosts", "TeamID", r->team_id, NULL, add_host, f, &e) < 0 ||
	    st_scan(r->cp->db, "environments", "TeamID", r->team_id, NULL, add_env, f, &e) < 0)
		log_error("orch", "placement: %s", e.msg);
	for (size_t i = 0; i < f->n; i++)
		f->hosts[i].id = f->ids[i];
}

static void fleet_release(struct fleet *f)
{
	free(f->hosts);
	free(f->ids);
}

/* The evidence's view of each candidate: what it has free and its share. */
static struct json *fleet_json(const struct fleet *f, const struct cp_capacity *need)
{
	struct json *list = json_new_array();
	struct cp_capacity fr;

	for (size_t i = 0; i < f->n && i < CP_PLACE_EVIDENCE_HOSTS; i++) {
		cp_place_free(&f->hosts[i], &fr);
		json_array_push(list, cp_obj("host", json_new_str(f->ids[i]), "free", cp_capacity_json(&fr),
					     "environments", json_new_int(f->hosts[i].live), "share_permille",
					     json_new_int(cp_place_share(&f->hosts[i])), "fits",
					     json_new_bool(cp_place_fits(&f->hosts[i], need)), NULL));
	}
	return list;
}

/* The deploy's policy: its own placement (or a batch's spread), else the team's, else spread. */
static enum cp_place_policy run_policy(struct cp_run *r)
{
	const struct json *team = st_get(r->cp->db, "teams", r->team_id);
	enum cp_place_policy p = CP_PLACE_SPREAD;

	if (json_get_bool(r->params, "spread", false))
		return CP_PLACE_SPREAD;
	if (cp_place_policy_parse(json_get_str(r->params, "placement"), &p) == 0)
		return p;
	if (cp_place_policy_parse(json_get_str(team, "Placement"), &p) == 0)
		return p;
	return CP_PLACE_SPREAD;
}

static void use_host(struct cp_run *r, const char *host_id)
{
	str_copy(r->host_id, sizeof(r->host_id), host_id);
	run_env(r, cp_obj("HostID", json_new_str(host_id), NULL));
}

/* The host is the environment's; what its Spec reserves is recorded with
 * it, so that later placements count it. evidence is taken (NULL: none). */
static void placed_with(struct cp_run *r, const char *host_id, const char *reason, struct json *evidence)
{
	struct cp_capacity need;

	cp_place_need(json_get(r->params, "spec"), &need);
	use_host(r, host_id);
	run_env(r, cp_obj("Reserved", cp_capacity_json(&need), NULL));
	json_object_set_bool(r->ctx, "placed", true);
	if (!evidence)
		evidence = json_new_object();
	json_object_set_str(evidence, "host", host_id);
	json_object_set_str(evidence, "reason", reason);
	run_ok(r, evidence);
}

static void placed(struct cp_run *r, const char *host_id, const char *reason)
{
	placed_with(r, host_id, reason, NULL);
}

/* Whether the team has a cloud that creates machines (pick_cloud, below). */
static bool can_provision(struct cp_run *r);

/* Among the team's sidecars by free capacity. 1 when the phase ended (placed
 * refused, or on to provision), 0 when no sidecar takes new environments. */
static int place_by_capacity(struct cp_run *r)
{
	enum cp_place_policy policy = run_policy(r);
	struct cp_capacity need;
	struct json *ev;
	struct fleet f;
	char host[ID_MAX], reason[160];
	int i;

	cp_place_need(json_get(r->params, "spec"), &need);
	fleet_load(r, &f);
	if (f.n == 0) {
		fleet_release(&f);
		return 0;
	}
	i = cp_place_choose(f.hosts, f.n, &need, policy);
	ev = cp_obj("policy", json_new_str(cp_place_policy_name(policy)), "need", cp_capacity_json(&need), "hosts",
		    fleet_json(&f, &need), NULL);
	if (i >= 0) {
		snprintf(reason, sizeof(reason), "%s: %s free share of %zu candidate host%s",
			 cp_place_policy_name(policy), policy == CP_PLACE_PACK ? "smallest" : "largest", f.n,
			 f.n == 1 ? "" : "s");
		str_copy(host, sizeof(host), f.ids[i]);
		fleet_release(&f);
		placed_with(r, host, reason, ev);
		return 1;
	}
	fleet_release(&f);
	/* No sidecar has room: a provider's host, or a new machine, may. */
	if (first_connected_of(r, NULL, true, host)) {
		placed_with(r, host, "no sidecar has room; connected provider host", ev);
		return 1;
	}
	if (can_provision(r)) {
		json_object_set_str(ev, "host", "");
		json_object_set_str(ev, "reason", "no connected host has room; provisioning");
		run_ok(r, ev);
		return 1;
	}
	run_fail(r, ev,
		 "no connected host has room: the environment needs %lld millicpus, %lld MB of memory and %lld MB "
		 "of disk (see each host's free capacity in this phase's evidence)",
		 (long long)need.millicpus, (long long)need.memory_mb, (long long)need.disk_mb);
	return 1;
}

void run_place(struct cp_run *r)
{
	const char *target = json_get_str(r->params, "target");
	const struct json *cloud;
	struct st_txn *txn;
	char host[ID_MAX], reason[CP_NAME_MAX + 16];

	if (*r->host_id && cp_host_connected(r->cp, r->host_id)) {
		placed(r, r->host_id, "environment already on host");
		return;
	}
	/* A driver cloud created through POST /v1/clouds gets its host now, so
	 * that it can be chosen below (targets.md, "EnsureDriverHosts"). */
	txn = cp_ensure_driver_hosts(r->cp, r->team_id, NULL);
	if (txn)
		cp_commit_quiet(txn, "driver hosts");
	if (target && *target) {
		cloud = cp_find(r->cp, "clouds", "TeamID", r->team_id, "Name", target);
		if (cloud && first_connected(r, json_get_str(cloud, "ID"), host)) {
			snprintf(reason, sizeof(reason), "target %s", target);
			placed(r, host, reason);
		} else {
			run_fail(r, NULL, "target \"%s\" (%s): no connected host", target,
				 cloud ? json_get_str(cloud, "Provider") : "unknown");
		}
		return;
	}
	if (place_by_capacity(r))
		return;
	if (first_connected(r, NULL, host)) {
		placed(r, host, "first connected host in team");
		return;
	}
	run_ok(r, cp_obj("host", json_new_str(""), "reason", json_new_str("no connected host; provisioning"), NULL));
}

/* ---- provision ---- */

/* The first cloud that creates machines: not manual, not a hosted provider.
 * Cloud ids are ULIDs, so scan order is creation order. */
static int pick_cloud(const char *id, const struct json *row, void *arg)
{
	const char *p = json_get_str(row, "Provider");

	if (str_eq(p, "manual") || cp_provider_is_driver(p))
		return 0;
	*(const struct json **)arg = row;
	return 1;
}

static bool can_provision(struct cp_run *r)
{
	const struct json *cloud = NULL;
	struct err e;

	if (st_scan(r->cp->db, "clouds", "TeamID", r->team_id, NULL, pick_cloud, &cloud, &e) < 0)
		log_error("orch", "clouds: %s", e.msg);
	return cloud != NULL;
}

/* A join token the machine will never use goes away with it. */
static void drop_token(struct cp_run *r)
{
	const char *id = json_get_str(r->ctx, "token_id");
	struct st_txn *txn;

	if (!id || !*id)
		return;
	txn = st_begin(r->cp->db);
	st_delete(txn, "join_tokens", id);
	cp_commit_quiet(txn, "join token");
}

static void machine_made(struct cp *cp, const struct cp_machine *m, const char *error, void *arg)
{
	struct cp_run *r = arg;
	const struct json *cloud = st_get(cp->db, "clouds", json_get_str(r->ctx, "cloud_id"));
	const char *provider = json_get_str(cloud, "Provider");
	struct json *ev;

	r->machine = NULL;
	if (!m) {
		drop_token(r);
		run_fail(r, cp_obj("cloud", json_new_str(json_get_str(r->ctx, "cloud_id")), "provider",
				   json_new_str(provider ? provider : ""), NULL),
			 "%s", error);
		return;
	}
	/* The host that joins with this token gets the machine's id as its
	 * ProviderRef (hub.c), so the host row says which server it is. */
	cp_update(cp, "join_tokens", json_get_str(r->ctx, "token_id"),
		  cp_obj("ProviderRef", json_new_str(m->ref), NULL));
	json_object_set_str(r->ctx, "machine", *m->name ? m->name : m->ref);
	ev = cp_obj("cloud", json_new_str(json_get_str(r->ctx, "cloud_id")), "provider",
		    json_new_str(provider ? provider : ""), "ref", json_new_str(m->ref), "ip", json_new_str(m->ip),
		    "name", json_new_str(m->name), NULL);
	log_info("orch", "deploy %s: %s created server %s (%s, %s)", r->dep_id, provider, m->name, m->ref,
		 *m->ip ? m->ip : "no address yet");
	run_event(r, "host.provisioned", json_dup(ev));
	run_ok(r, ev);
}

void run_provision(struct cp_run *r)
{
	const struct json *cloud = NULL;
	const struct cp_cloud_ops *ops;
	const char *cloud_id, *provider;
	char token[CRYPTO_TOKEN_MAX], token_id[ID_MAX], name[CP_NAME_MAX + 1];
	struct buf ud = BUF_INIT;
	struct json *labels;
	struct st_txn *txn;
	struct err e;

	if (json_get_bool(r->ctx, "placed", false)) {
		run_skip(r, cp_obj("reason", json_new_str("host already placed"), NULL));
		return;
	}
	if (st_scan(r->cp->db, "clouds", "TeamID", r->team_id, NULL, pick_cloud, &cloud, &e) < 0)
		log_error("orch", "clouds: %s", e.msg);
	if (!cloud) {
		run_fail(r, NULL, NO_CLOUD_MSG);
		return;
	}
	cloud_id = json_get_str(cloud, "ID");
	provider = json_get_str(cloud, "Provider");
	json_object_set_str(r->ctx, "cloud_id", cloud_id);
	ops = cp_cloud_ops(provider);
	if (!ops) {
		/* POST /v1/clouds takes no other provider that creates machines. */
		run_fail(r, NULL, "%s (%s): this control plane cannot create machines there", json_get_str(cloud, "Name"),
			 provider);
		return;
	}
	/* The token is in the store before the machine can present it. */
	txn = st_begin(r->cp->db);
	if (cp_join_token_new(txn, r->team_id, cloud_id, token, sizeof(token), token_id, &e) < 0) {
		st_abort(txn);
		run_fail(r, NULL, "join token: %s", e.msg);
		return;
	}
	cp_commit_quiet(txn, "join token");
	json_object_set_str(r->ctx, "token_id", token_id);
	if (cp_cloud_init(r->cp, token, &ud, &e) < 0) {
		memset(token, 0, sizeof(token));
		buf_release(&ud);
		drop_token(r);
		run_fail(r, NULL, "%s", e.msg);
		return;
	}
	memset(token, 0, sizeof(token));
	cp_short_name("denv-", name, sizeof(name));
	/* Before the call: should the answer never come back (a restart), the
	 * start-up sweep finds the server by this name. */
	cp_update(r->cp, "join_tokens", token_id,
		  cp_obj("DeploymentID", json_new_str(r->dep_id), "MachineName", json_new_str(name), NULL));
	labels = cp_obj("managed-by", json_new_str("denv"), "denv-cloud", json_new_str(cloud_id), "denv-deployment",
			json_new_str(r->dep_id), NULL);
	r->machine = ops->create(r->cp, json_get(cloud, "Config"), name, ud.data, labels, machine_made, r, &e);
	json_free(labels);
	memset(ud.data, 0, ud.len);
	buf_release(&ud);
	if (!r->machine) {
		drop_token(r);
		run_fail(r, cp_obj("cloud", json_new_str(cloud_id), "provider", json_new_str(provider), NULL), "%s",
			 e.msg);
	}
}

/* ---- servers that never joined ---- */

static void now_rfc3339(char out[CLOCK_RFC3339_MAX])
{
	clock_format_rfc3339(clock_now_ns(), out);
}

/* The server of token tok may be deleted: it has a record and joined no host. */
static bool machine_unjoined(const struct json *tok)
{
	const char *ref = json_get_str(tok, "ProviderRef"), *name = json_get_str(tok, "MachineName");

	return tok && !json_get_str(tok, "UsedAt") && ((ref && *ref) || (name && *name));
}

/* From now on the token admits nobody (hub.c refuses an expired token), so
 * the server cannot join while it is being deleted; one more try counted. */
static void machine_deleting(struct cp *cp, const char *tok_id)
{
	const struct json *tok = st_get(cp->db, "join_tokens", tok_id);
	int64_t tries = json_get_int(tok, "DeleteTries", 0);
	char now[CLOCK_RFC3339_MAX];

	now_rfc3339(now);
	cp_update(cp, "join_tokens", tok_id,
		  cp_obj("ExpiresAt", json_new_str(now), "MachineStatus", json_new_str("deleting"), "DeleteTries",
			 json_new_int(tries + 1), NULL));
}

/* A copy of a string field ("" when absent): row pointers die when the row
 * is written. */
static void field(const struct json *row, const char *key, char *out, size_t n)
{
	const char *v = json_get_str(row, key);

	str_copy(out, n, v ? v : "");
}

/* Record what became of the server of tok_id (error NULL: deleted, or it was
 * already gone): on the token, as a host row with Status deleted or
 * delete_failed (a server that never joined has no other row), and as a
 * host.deleted or host.delete_failed event on host:, dep: and env:. */
static void machine_outcome(struct cp *cp, const char *tok_id, const char *error)
{
	const struct json *tok = st_get(cp->db, "join_tokens", tok_id);
	const char *status = error ? "delete_failed" : "deleted";
	const char *kind = error ? "host.delete_failed" : "host.deleted";
	char team[ID_MAX], cloud[ID_MAX], dep[ID_MAX], env[ID_MAX], rec[ID_MAX], host_id[ID_MAX];
	char name[CP_NAME_MAX + 1], ref[32], subject[ST_ID_MAX];
	const char *subjects[] = { "host", "env", "dep" }, *ids[] = { host_id, env, dep };
	struct json *body;
	struct st_txn *txn;

	if (!tok)
		return;
	field(tok, "TeamID", team, sizeof(team));
	field(tok, "CloudID", cloud, sizeof(cloud));
	field(tok, "DeploymentID", dep, sizeof(dep));
	field(tok, "MachineHostID", rec, sizeof(rec));
	field(tok, "MachineName", name, sizeof(name));
	field(tok, "ProviderRef", ref, sizeof(ref));
	field(*dep ? st_get(cp->db, "deployments", dep) : NULL, "EnvID", env, sizeof(env));
	if (*rec && st_get(cp->db, "hosts", rec)) {
		str_copy(host_id, sizeof(host_id), rec);
		cp_update(cp, "hosts", host_id,
			  cp_obj("Status", json_new_str(status), "ProviderRef", json_new_str(ref), NULL));
	} else {
		id_new("host", host_id);
		txn = st_begin(cp->db);
		st_put(txn, "hosts", host_id,
		       cp_obj("ID", json_new_str(host_id), "TeamID", json_new_str(team), "CloudID", json_new_str(cloud),
			      "Name", json_new_str(*name ? name : ref), "Status", json_new_str(status), "ProviderRef",
			      json_new_str(ref), "LastSeenAt", json_new_null(), "CreatedAt", cp_now_json(),
			      "Capabilities", json_new_object(), NULL));
		cp_commit_quiet(txn, "host record");
	}
	cp_update(cp, "join_tokens", tok_id,
		  cp_obj("MachineStatus", json_new_str(status), "MachineError", json_new_str(error ? error : ""),
			 "MachineHostID", json_new_str(host_id), NULL));
	body = cp_obj("host", json_new_str(host_id), "name", json_new_str(name), "ref", json_new_str(ref), "cloud",
		      json_new_str(cloud), "deployment", json_new_str(dep), NULL);
	if (error)
		json_object_set_str(body, "error", error);
	for (size_t i = 0; i < sizeof(subjects) / sizeof(subjects[0]); i++)
		if (*ids[i]) {
			snprintf(subject, sizeof(subject), "%s:%s", subjects[i], ids[i]);
			cp_event(cp, NULL, team, subject, kind, json_dup(body));
		}
	json_free(body);
	if (error)
		log_warn("orch", "server %s (%s) never joined and could not be deleted: %s; delete it by hand", name,
			 ref, error);
	else
		log_info("orch", "server %s (%s) never joined: deleted", name, ref);
}

/* The config and calls of the cloud that made tok's machine; NULL when that
 * cloud is gone or creates no machines. */
static const struct json *cloud_config(struct cp *cp, const struct json *tok, const struct cp_cloud_ops **ops)
{
	const struct json *cloud = st_get(cp->db, "clouds", json_get_str(tok, "CloudID"));

	*ops = cp_cloud_ops(json_get_str(cloud, "Provider"));
	return *ops ? json_get(cloud, "Config") : NULL;
}

/* ---- join ---- */

/* A connected host of the team, the provisioning cloud's first: ends the phase. */
static bool join_try(struct cp_run *r)
{
	const char *cloud_id = json_get_str(r->ctx, "cloud_id");
	char host[ID_MAX];

	if (!(cloud_id && *cloud_id && first_connected(r, cloud_id, host)) && !first_connected(r, NULL, host))
		return false;
	r->join_waiting = false;
	ev_timer_stop(r->cp->ev, &r->join_timer);
	use_host(r, host);
	run_ok(r, cp_obj("host", json_new_str(host), "joined_in_ms", json_new_int(ev_mono_ms() - r->join_started_ms),
			 NULL));
	return true;
}

/* The provider answered the delete of the server join waited for. */
static void machine_deleted(struct cp *cp, const struct cp_machine *m, const char *error, void *arg)
{
	struct cp_run *r = arg;
	const struct json *tok = st_get(cp->db, "join_tokens", json_get_str(r->ctx, "token_id"));
	char name[CP_NAME_MAX + 1], ref[32];
	struct json *server;

	r->machine = NULL;
	field(tok, "MachineName", name, sizeof(name));
	field(tok, "ProviderRef", ref, sizeof(ref));
	machine_outcome(cp, json_get_str(r->ctx, "token_id"), error);
	server = cp_obj("name", json_new_str(name), "ref", json_new_str(ref), "deleted", json_new_bool(!error), NULL);
	if (error)
		json_object_set_str(server, "error", error);
	if (error)
		run_fail(r, cp_obj("waited_ms", json_new_int(json_get_int(r->ctx, "waited_ms", 0)), "server", server, NULL),
			 "no host of the team connected within %lld s; provisioned server %s (%s) could not be deleted: "
			 "%.200s; delete it by hand",
			 (long long)(cp->cfg.join_wait_ms / 1000), name, ref, error);
	else
		run_fail(r, cp_obj("waited_ms", json_new_int(json_get_int(r->ctx, "waited_ms", 0)), "server", server, NULL),
			 "no host of the team connected within %lld s; provisioned server %s (%s) deleted",
			 (long long)(cp->cfg.join_wait_ms / 1000), name, ref);
}

/* Nobody joined in time. The server this deployment made joined no host
 * either (join_try would have taken it): delete it, then fail the phase. */
static void join_timeout(struct ev *ev, void *arg)
{
	struct cp_run *r = arg;
	const char *machine = json_get_str(r->ctx, "machine"), *tok_id = json_get_str(r->ctx, "token_id");
	const struct json *tok = tok_id ? st_get(r->cp->db, "join_tokens", tok_id) : NULL;
	int64_t waited = ev_mono_ms() - r->join_started_ms;
	const struct cp_cloud_ops *ops;
	const struct json *config;
	struct err e;

	r->join_waiting = false;
	if (!machine || !machine_unjoined(tok) || !json_get_str(tok, "ProviderRef")) {
		if (machine)
			log_warn("orch", "deploy %s: server %s did not join, and a host joined with its token", r->dep_id,
				 machine);
		run_fail(r, cp_obj("waited_ms", json_new_int(waited), NULL),
			 "no host of the team connected within %lld s%s%s", (long long)(r->cp->cfg.join_wait_ms / 1000),
			 machine ? "; waited for server " : "", machine ? machine : "");
		return;
	}
	log_warn("orch", "deploy %s: server %s did not join within %lld s; deleting it", r->dep_id, machine,
		 (long long)(r->cp->cfg.join_wait_ms / 1000));
	json_object_set_int(r->ctx, "waited_ms", waited);
	config = cloud_config(r->cp, tok, &ops);
	r->machine = config ? ops->delete(r->cp, config, json_get_str(tok, "ProviderRef"), machine_deleted, r, &e)
			    : NULL;
	if (!config)
		err_set(&e, NO_DELETE_MSG);
	machine_deleting(r->cp, tok_id);
	if (!r->machine)
		machine_deleted(r->cp, NULL, e.msg, r);
}

void run_join(struct cp_run *r)
{
	if (json_get_bool(r->ctx, "placed", false)) {
		run_skip(r, cp_obj("reason", json_new_str("host already placed"), NULL));
		return;
	}
	r->join_started_ms = ev_mono_ms();
	if (join_try(r))
		return;
	r->join_waiting = true;
	ev_timer_start(r->cp->ev, &r->join_timer, r->cp->cfg.join_wait_ms, join_timeout, r);
}

void cp_orch_host_up(struct cp *cp, const char *team_id)
{
	for (struct cp_run *r = cp->runs; r; r = r->next)
		if (r->join_waiting && str_eq(r->team_id, team_id))
			join_try(r);
}

void run_place_free(struct cp_run *r)
{
	cp_machine_cancel(r->machine);
	r->machine = NULL;
	ev_timer_stop(r->cp->ev, &r->join_timer);
	r->join_waiting = false;
}

/* ---- the start-up sweep ---- */

struct cp_sweep {
	struct cp *cp;
	char tok_id[ID_MAX];
	struct cp_machine_call *call;
	struct cp_sweep *next;
};

static void sweep_end(struct cp_sweep *s)
{
	for (struct cp_sweep **p = &s->cp->sweeps; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			break;
		}
	free(s);
}

static void sweep_deleted(struct cp *cp, const struct cp_machine *m, const char *error, void *arg)
{
	struct cp_sweep *s = arg;

	s->call = NULL;
	machine_outcome(cp, s->tok_id, error);
	sweep_end(s);
}

/* The create call's answer was lost: the server, if the provider made it,
 * is found by the name the token recorded. */
static void sweep_found(struct cp *cp, const struct cp_machine *m, const char *error, void *arg)
{
	struct cp_sweep *s = arg;
	const struct json *tok = st_get(cp->db, "join_tokens", s->tok_id), *config;
	const struct cp_cloud_ops *ops;
	char why[ERR_MSG_MAX];
	struct err e;

	s->call = NULL;
	if (error) {
		snprintf(why, sizeof(why), "finding it by name: %.400s", error);
		machine_outcome(cp, s->tok_id, why);
		sweep_end(s);
		return;
	}
	if (!m) {
		log_info("orch", "server %s: the provider never created it", json_get_str(tok, "MachineName"));
		cp_update(cp, "join_tokens", s->tok_id, cp_obj("MachineStatus", json_new_str("never_created"), NULL));
		sweep_end(s);
		return;
	}
	cp_update(cp, "join_tokens", s->tok_id, cp_obj("ProviderRef", json_new_str(m->ref), NULL));
	tok = st_get(cp->db, "join_tokens", s->tok_id);
	config = cloud_config(cp, tok, &ops);
	s->call = config ? ops->delete(cp, config, m->ref, sweep_deleted, s, &e) : NULL;
	if (!config)
		err_set(&e, NO_DELETE_MSG);
	if (!s->call)
		sweep_deleted(cp, NULL, e.msg, s);
}

/* A token whose server the sweep deletes: a server that never joined, not
 * deleted yet, with tries left, whose deployment is over without success, or
 * whose token expired (it can no longer join). */
static int sweep_pick(const char *id, const struct json *tok, void *arg)
{
	struct cp *cp = ((struct cp_sweep *)arg)->cp;
	const char *ms = json_get_str(tok, "MachineStatus"), *dep_id = json_get_str(tok, "DeploymentID");
	const char *exp = json_get_str(tok, "ExpiresAt"), *dst;
	int64_t ns;
	bool expired = !exp || clock_parse_rfc3339(exp, &ns) < 0 || ns <= clock_now_ns();
	struct cp_sweep *s;

	if (!machine_unjoined(tok) || str_eq(ms, "deleted") || str_eq(ms, "never_created") ||
	    json_get_int(tok, "DeleteTries", 0) >= CP_MACHINE_DELETE_TRIES)
		return 0;
	dst = dep_id && *dep_id ? json_get_str(st_get(cp->db, "deployments", dep_id), "Status") : NULL;
	if (!expired && (!dst || str_eq(dst, "running") || str_eq(dst, "pending") || str_eq(dst, "succeeded")))
		return 0;
	s = xcalloc(1, sizeof(*s));
	s->cp = cp;
	str_copy(s->tok_id, sizeof(s->tok_id), id);
	s->next = cp->sweeps;
	cp->sweeps = s;
	return 0;
}

void cp_orch_sweep_machines(struct cp *cp)
{
	struct cp_sweep head = { cp, "", NULL, NULL };
	struct err e;

	if (st_scan(cp->db, "join_tokens", NULL, NULL, NULL, sweep_pick, &head, &e) < 0)
		log_error("orch", "join tokens: %s", e.msg);
	for (struct cp_sweep *s = cp->sweeps, *next; s; s = next) {
		const struct json *tok = st_get(cp->db, "join_tokens", s->tok_id);
		const struct cp_cloud_ops *ops;
		const struct json *config = cloud_config(cp, tok, &ops);
		char ref[32], name[CP_NAME_MAX + 1];

		next = s->next;
		field(tok, "ProviderRef", ref, sizeof(ref));
		field(tok, "MachineName", name, sizeof(name));
		machine_deleting(cp, s->tok_id);
		if (!config) {
			err_set(&e, NO_DELETE_MSG);
			s->call = NULL;
		} else if (*ref) {
			log_info("orch", "start-up: server %s (%s) never joined; deleting it", name, ref);
			s->call = ops->delete(cp, config, ref, sweep_deleted, s, &e);
		} else {
			log_info("orch", "start-up: looking for server %s, whose creation was interrupted", name);
			s->call = ops->find(cp, config, name, sweep_found, s, &e);
		}
		if (!s->call)
			sweep_deleted(cp, NULL, e.msg, s);
	}
}

void run_sweeps_free(struct cp *cp)
{
	while (cp->sweeps) {
		cp_machine_cancel(cp->sweeps->call);
		cp->sweeps->call = NULL;
		sweep_end(cp->sweeps);
	}
}
