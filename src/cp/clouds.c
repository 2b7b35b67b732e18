/*
 * clouds.c: what a cloud produces (targets.md, "Clouds and hosts"): the
 * providers, the one driver host of an e2b, daytona or prime cloud (EnsureDriverHosts,
 * shared by GET /v1/targets and placement), and single-use join tokens
 * (shared by POST /v1/join-tokens and the provision phase).
 */
#include <stdio.h>
#include <string.h>

#include "base/clock.h"
#include "base/crypto.h"
#include "base/str.h"
#include "cp/cp.h"

bool cp_provider_is_driver(const char *provider)
{
	return str_eq(provider, "e2b") || str_eq(provider, "daytona") || str_eq(provider, "prime");
}

const char *cp_host_driver(struct cp *cp, const struct json *host)
{
	const char *cloud_id = json_get_str(host, "CloudID");
	const struct json *cloud = cloud_id && *cloud_id ? st_get(cp->db, "clouds", cloud_id) : NULL;
	const char *provider = json_get_str(cloud, "Provider");

	return cp_provider_is_driver(provider) ? provider : NULL;
}

/* The static capability row of a hosted provider (targets.md). */
struct json *cp_provider_table(const char *provider)
{
	static const struct {
		const char *provider, *snapshot, *fork, *fork_time, *egress, *caps, *gpu, *notes;
	} rows[] = {
		{ "e2b", "pause (sandbox persisted)", "", "n/a", "provider network config", "provider tier", "no",
		  "one sandbox per environment; pause/resume keeps state, no branch" },
		{ "daytona", "snapshot to image", "new sandbox from snapshot", "tens of seconds", "limited",
		  "provider tier", "partial", "" },
		{ "prime", "snapshot", "new sandbox from snapshot", "seconds", "yes", "per sandbox", "yes",
		  "filesystem checkpoints; a fork is a new sandbox restored from one" },
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct json *t;

		if (!str_eq(rows[i].provider, provider))
			continue;
		t = json_new_object();
		json_object_set_str(t, "provider", rows[i].provider);
		json_object_set_bool(t, "multi_service", false);
		json_object_set_str(t, "snapshot", rows[i].snapshot);
		json_object_set_str(t, "fork", rows[i].fork);
		json_object_set_str(t, "fork_time", rows[i].fork_time);
		json_object_set_str(t, "egress_deny", rows[i].egress);
		json_object_set_str(t, "caps", rows[i].caps);
		json_object_set_str(t, "gpu", rows[i].gpu);
		json_object_set_bool(t, "verify", false);
		json_object_set_str(t, "notes", rows[i].notes);
		return t;
	}
	return NULL;
}

struct json *cp_driver_host_new(const char *team_id, const struct json *cloud)
{
	const char *provider = json_get_str(cloud, "Provider");
	struct json *h = json_new_object();
	char id[ID_MAX];

	id_new("host", id);
	json_object_set_str(h, "ID", id);
	json_object_set_str(h, "TeamID", team_id);
	json_object_set_str(h, "CloudID", json_get_str(cloud, "ID"));
	json_object_set_str(h, "Name", provider);
	json_object_set_str(h, "Status", "connected");
	json_object_set_str(h, "ProviderRef", provider);
	json_object_set(h, "LastSeenAt", json_new_null());
	json_object_set(h, "CreatedAt", cp_now_json());
	json_object_set(h, "Capabilities", cp_provider_table(provider));
	return h;
}

struct st_txn *cp_ensure_driver_hosts(struct cp *cp, const char *team_id, struct json *added)
{
	struct json *clouds = cp_list(cp, "clouds", "TeamID", team_id, false, 0, NULL, NULL);
	struct st_txn *txn = NULL;

	for (size_t i = 0; i < json_len(clouds); i++) {
		const struct json *c = json_at(clouds, i);
		struct json *h;
		char id[ID_MAX];

		if (!cp_provider_is_driver(json_get_str(c, "Provider")) ||
		    st_count(cp->db, "hosts", "CloudID", json_get_str(c, "ID")) > 0)
			continue;
		h = cp_driver_host_new(team_id, c);
		str_copy(id, sizeof(id), json_get_str(h, "ID"));
		if (added)
			json_array_push(added, json_dup(h));
		if (!txn)
			txn = st_begin(cp->db);
		st_put(txn, "hosts", id, h);
	}
	json_free(clouds);
	return txn;
}

void cp_denvd_url(const struct cp *cp, char *out, size_t n)
{
	const char *d = cp->cfg.denvd_url;
	bool absolute = str_has_prefix(d, "http://") || str_has_prefix(d, "https://");

	snprintf(out, n, "%s%s", absolute ? "" : cp->cfg.public_url, d);
}

int cp_join_token_new(struct st_txn *txn, const char *team_id, const char *cloud_id, char *token,
		      size_t token_size, char id[ID_MAX], struct err *e)
{
	struct json *row = cp_secret_row_new("join token", "djt", "jtok", CP_JOIN_TOKEN_TTL_S, token, token_size, id, e);

	if (!row)
		return -1;
	json_object_set_str(row, "TeamID", team_id);
	json_object_set_str(row, "CloudID", cloud_id ? cloud_id : "");
	json_object_set(row, "UsedAt", json_new_null());
	st_put(txn, "join_tokens", id, row);
	return 0;
}
