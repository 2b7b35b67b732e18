/*
 * orch_place.c: placement for a deploy (targets.md, "Placement";
 * deployments.md, phases place, provision and join).
 *
 * place takes the environment's own host, the pinned target, or the team's
 * first connected host (sidecars before driver hosts, which EnsureDriverHosts
 * creates first). With none, provision creates a machine through the team's
 * first cloud that can (Hetzner today) with a fresh join token bound to that
 * cloud in its cloud-init, and join waits for a host of the team to connect,
 * preferring one that joined through that cloud. The machine's answer and the
 * join are both callbacks on the loop: nothing here blocks.
 *
 * ctx: placed (a host was found by place), cloud_id and token_id (what
 * provision made), machine (its name, for messages).
 */
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/crypto.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/orch.h"

#define NO_CLOUD_MSG                                                                                           \
	"no connected host and no cloud that can provision: connect a cloud or run `denvd join` on a machine"

/* ---- place ---- */

struct host_pick {
	struct cp *cp;
	const char *cloud_id;	/* only hosts of this cloud; NULL: any */
	bool drivers;		/* this pass takes driver hosts, else sidecars */
	char host_id[ID_MAX];
};

static bool host_is_driver(struct cp *cp, const struct json *h)
{
	const char *cid = json_get_str(h, "CloudID");
	const struct json *cloud = cid && *cid ? st_get(cp->db, "clouds", cid) : NULL;

	return cp_provider_is_driver(json_get_str(cloud, "Provider"));
}

static int pick_host(const char *id, const struct json *row, void *arg)
{
	struct host_pick *p = arg;

	if (p->cloud_id && !str_eq(json_get_str(row, "CloudID"), p->cloud_id))
		return 0;
	if (host_is_driver(p->cp, row) != p->drivers || !cp_host_connected(p->cp, id))
		return 0;
	str_copy(p->host_id, sizeof(p->host_id), id);
	return 1;
}

/* The team's first connected host, sidecars before driver hosts. */
static bool first_connected(struct cp_run *r, const char *cloud_id, char out[ID_MAX])
{
	struct host_pick p = { r->cp, cloud_id, false, "" };
	struct err e;

	for (int pass = 0; pass < 2 && !*p.host_id; pass++) {
		p.drivers = pass == 1;
		if (st_scan(r->cp->db, "hosts", "TeamID", r->team_id, NULL, pick_host, &p, &e) < 0)
			log_error("orch", "hosts: %s", e.msg);
	}
	str_copy(out, ID_MAX, p.host_id);
	return *p.host_id != '\0';
}

static void use_host(struct cp_run *r, const char *host_id)
{
	str_copy(r->host_id, sizeof(r->host_id), host_id);
	run_env(r, cp_obj("HostID", json_new_str(host_id), NULL));
}

static void placed(struct cp_run *r, const char *host_id, const char *reason)
{
	use_host(r, host_id);
	json_object_set_bool(r->ctx, "placed", true);
	run_ok(r, cp_obj("host", json_new_str(host_id), "reason", json_new_str(reason), NULL));
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
	if (!str_eq(provider, "hetzner")) {
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
	labels = cp_obj("managed-by", json_new_str("denv"), "denv-cloud", json_new_str(cloud_id), "denv-deployment",
			json_new_str(r->dep_id), NULL);
	r->machine = cp_hetzner_create(r->cp, json_get(cloud, "Config"), name, ud.data, labels, machine_made, r, &e);
	json_free(labels);
	memset(ud.data, 0, ud.len);
	buf_release(&ud);
	if (!r->machine) {
		drop_token(r);
		run_fail(r, cp_obj("cloud", json_new_str(cloud_id), "provider", json_new_str(provider), NULL), "%s",
			 e.msg);
	}
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

static void join_timeout(struct ev *ev, void *arg)
{
	struct cp_run *r = arg;
	const char *machine = json_get_str(r->ctx, "machine");
	int64_t waited = ev_mono_ms() - r->join_started_ms;

	r->join_waiting = false;
	if (machine)
		log_warn("orch", "deploy %s: server %s did not join; it may still be running in the cloud account",
			 r->dep_id, machine);
	run_fail(r, cp_obj("waited_ms", json_new_int(waited), NULL), "no host of the team connected within %lld s%s%s",
		 (long long)(r->cp->cfg.join_wait_ms / 1000), machine ? "; waited for server " : "",
		 machine ? machine : "");
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
