/* api_hosts.c: clouds, join tokens, hosts and targets (targets.md). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crypto.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cloud.h"

/* ---- providers ---- */

static bool provider_known(const char *p)
{
	return str_eq(p, "manual") || cp_cloud_ops(p) || cp_provider_is_driver(p);
}

/* A config key whose value is a credential: "token", or any key containing
 * "secret" or "key" (case-insensitive). */
static bool secret_key(const char *k)
{
	char low[ST_NAME_MAX * 4];
	size_t i;

	for (i = 0; k[i] && i + 1 < sizeof(low); i++)
		low[i] = (char)tolower((unsigned char)k[i]);
	low[i] = '\0';
	return str_eq(low, "token") || strstr(low, "secret") || strstr(low, "key");
}

/* A cloud as shown: credentials replaced by "•••". */
static struct json *cloud_public(const struct json *row)
{
	struct json *c = json_dup(row);
	struct json *cfg = json_get(c, "Config");

	for (size_t i = 0; cfg && cfg->type == JSON_OBJECT && i < cfg->u.obj.n; i++)
		if (secret_key(cfg->u.obj.m[i].key)) {
			json_free(cfg->u.obj.m[i].val);
			cfg->u.obj.m[i].val = json_new_str("\xe2\x80\xa2\xe2\x80\xa2\xe2\x80\xa2");
		}
	return c;
}

/* The config keys a provider cannot do without: AWS signs with a key pair,
 * the others send a token. */
static const char *const token_required[] = { "token", NULL };
static const char *const aws_required[] = { "access_key_id", "secret_access_key", NULL };

/* Check and complete a provider's config. -1 after answering 400. */
static int provider_config(struct http_req *req, const char *provider, struct json *cfg)
{
	static const struct {
		const char *provider, *key, *value;
	} defaults[] = {
		{ "hetzner", "server_type", CP_HETZNER_SERVER_TYPE },
		{ "hetzner", "location", CP_HETZNER_LOCATION },
		{ "hetzner", "image", CP_HETZNER_IMAGE },
		{ "aws", "region", CP_AWS_REGION },
		{ "aws", "instance_type", CP_AWS_INSTANCE_TYPE },
		{ "aws", "image_id", CP_AWS_IMAGE },
	};
	const char *const *required = str_eq(provider, "aws") ? aws_required : token_required;

	for (size_t i = 0; i < cfg->u.obj.n; i++)
		if (cfg->u.obj.m[i].val->type != JSON_STRING) {
			cp_fail(req, 400, "%s: config.%s must be a string", provider, cfg->u.obj.m[i].key);
			return -1;
		}
	if (str_eq(provider, "manual"))
		return 0;
	for (size_t i = 0; required[i]; i++)
		if (!json_get_str(cfg, required[i]) || !*json_get_str(cfg, required[i])) {
			cp_fail(req, 400, "%s: config.%s is required", provider, required[i]);
			return -1;
		}
	for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
		const char *v = json_get_str(cfg, defaults[i].key);

		if (str_eq(provider, defaults[i].provider) && (!v || !*v))
			json_object_set_str(cfg, defaults[i].key, defaults[i].value);
	}
	return 0;
}

/* Read {provider, name?, config?} (and token? for targets/connect) into a new
 * cloud row. NULL after answering 400/409. */
static struct json *cloud_from_body(struct cp *cp, struct http_req *req, const char *team_id,
				    const struct json *body, bool drivers_only)
{
	const char *provider = NULL, *name = NULL, *token = NULL;
	const struct json *c = json_get(body, "config");
	struct json *cfg, *row;
	char id[ID_MAX];

	if (cp_req_str(req, body, "provider", &provider) < 0 || cp_opt_str(req, body, "name", &name) < 0 ||
	    cp_opt_str(req, body, "token", &token) < 0)
		return NULL;
	if (str_eq(provider, "modal")) {
		http_respond_error(req, 400, CP_MODAL_REFUSED);
		return NULL;
	}
	if (drivers_only ? !cp_provider_is_driver(provider) : !provider_known(provider)) {
		cp_fail(req, 400, drivers_only ? "provider must be e2b, daytona or prime, got \"%s\""
					       : "provider must be manual, hetzner, aws, e2b, daytona or prime, got \"%s\"",
			provider);
		return NULL;
	}
	if (c && c->type != JSON_NULL && c->type != JSON_OBJECT) {
		http_respond_error(req, 400, "config must be an object");
		return NULL;
	}
	if (!name || !*name)
		name = provider;
	if (!cp_valid_name(name)) {
		cp_fail(req, 400, "name must be 1 to %d letters, digits, '.', '_' or '-'", CP_NAME_MAX);
		return NULL;
	}
	if (cp_find(cp, "clouds", "TeamID", team_id, "Name", name)) {
		cp_fail(req, 409, "cloud \"%s\" already exists", name);
		return NULL;
	}
	cfg = c && c->type == JSON_OBJECT ? json_dup(c) : json_new_object();
	if (token && *token)
		json_object_set_str(cfg, "token", token);
	if (provider_config(req, provider, cfg) < 0) {
		json_free(cfg);
		return NULL;
	}
	id_new("cloud", id);
	row = json_new_object();
	json_object_set_str(row, "ID", id);
	json_object_set_str(row, "TeamID", team_id);
	json_object_set_str(row, "Provider", provider);
	json_object_set_str(row, "Name", name);
	json_object_set(row, "Config", cfg);
	json_object_set(row, "CreatedAt", cp_now_json());
	return row;
}

/* 200 {table: the caller's team's rows of table, each as view shows it}. */
static void reply_team_rows(struct cp *cp, struct http_req *req, const char *table,
			    struct json *(*view)(struct cp *cp, const struct json *row))
{
	struct cp_caller who;
	struct json *rows, *list;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	rows = cp_list(cp, table, "TeamID", who.team_id, false, 0, NULL, NULL);
	list = json_new_array();
	for (size_t i = 0; i < json_len(rows); i++)
		json_array_push(list, view(cp, json_at(rows, i)));
	json_free(rows);
	cp_reply_with(req, 200, table, list);
}

static struct json *cloud_view(struct cp *cp, const struct json *row)
{
	(void)cp;
	return cloud_public(row);
}

static void h_clouds_list(struct cp *cp, struct http_req *req)
{
	reply_team_rows(cp, req, "clouds", cloud_view);
}

/* Store cloud (taken) and answer 201: {cloud, token_checked} for POST
 * /v1/clouds; {cloud, host, info, capabilities} with its new driver host for
 * POST /v1/targets/connect. */
static void cloud_store(struct cp *cp, struct http_req *req, struct json *cloud, bool connect, bool checked)
{
	const char *provider = json_get_str(cloud, "Provider");
	struct json *resp = json_new_object(), *host = NULL, *info;
	struct st_txn *txn = st_begin(cp->db);
	char cid[ID_MAX], hid[ID_MAX];

	str_copy(cid, sizeof(cid), json_get_str(cloud, "ID"));
	json_object_set(cloud, "CreatedAt", cp_now_json()); /* now, not before the check */
	json_object_set(resp, "cloud", cloud_public(cloud));
	if (!connect) {
		json_object_set_bool(resp, "token_checked", checked);
	} else {
		host = cp_driver_host_new(json_get_str(cloud, "TeamID"), cloud);
		str_copy(hid, sizeof(hid), json_get_str(host, "ID"));
		info = json_new_object();
		json_object_set_str(info, "provider", provider);
		json_object_set_bool(info, "token_checked", checked);
		json_object_set(resp, "host", cp_public(host, "hosts"));
		json_object_set(resp, "info", info);
		json_object_set(resp, "capabilities", cp_provider_table(provider));
	}
	st_put(txn, "clouds", cid, cloud);
	if (host)
		st_put(txn, "hosts", hid, host);
	cp_commit_reply(cp, txn, req, 201, resp, NULL, NULL);
}

/* A connect waiting for the provider's answer about its token. */
struct pending_cloud {
	struct http_req *req;
	struct json *cloud;
	bool connect;
};

static void pending_free(void *arg)
{
	struct pending_cloud *p = arg;

	json_free(p->cloud);
	free(p);
}

static void token_checked(struct cp *cp, int status, const char *error, void *arg)
{
	struct pending_cloud *p = arg;
	const struct json *c = p->cloud;

	if (status)
		cp_fail(p->req, status, "%s", error);
	else if (http_req_gone(p->req))
		http_respond_error(p->req, 502, "client went away"); /* only frees it: nothing is stored */
	else if (cp_find(cp, "clouds", "TeamID", json_get_str(c, "TeamID"), "Name", json_get_str(c, "Name")))
		/* Another connect of the same name finished first. */
		cp_fail(p->req, 409, "cloud \"%s\" already exists", json_get_str(c, "Name"));
	else {
		cloud_store(cp, p->req, p->cloud, p->connect, true);
		p->cloud = NULL;
	}
	pending_free(p);
}

/* Check the token of a new cloud with its provider, then store it; a
 * provider without a token (manual) is stored at once. Takes cloud. */
static void cloud_connect(struct cp *cp, struct http_req *req, struct json *cloud, bool connect)
{
	const char *provider = json_get_str(cloud, "Provider");
	struct pending_cloud *p;
	struct err e;

	if (!cp_token_checkable(provider)) {
		cloud_store(cp, req, cloud, connect, false);
		return;
	}
	p = xcalloc(1, sizeof(*p));
	p->req = req;
	p->cloud = cloud;
	p->connect = connect;
	/* The request is parked until the provider answers (token_checked). */
	if (!cp_token_check(cp, provider, json_get(cloud, "Config"), token_checked, p, pending_free, &e)) {
		cp_fail(req, e.code ? e.code : 502, "%s", e.msg);
		pending_free(p);
	}
}

/* POST /v1/clouds, and POST /v1/targets/connect (connect: with its driver host). */
static void cloud_create(struct cp *cp, struct http_req *req, bool connect)
{
	struct cp_caller who;
	struct json *body = NULL, *row;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0 || cp_body(req, &body) < 0)
		return;
	row = cloud_from_body(cp, req, who.team_id, body, connect);
	if (row)
		cloud_connect(cp, req, row, connect);
	json_free(body);
}

static void h_clouds_create(struct cp *cp, struct http_req *req)
{
	cloud_create(cp, req, false);
}

/* ---- join tokens ---- */

/* The paste-able install line: download denvd from this server, then join. */
static void join_command(const struct cp *cp, const char *token, char *out, size_t n)
{
	char url[1024];

	cp_denvd_url(cp, url, sizeof(url));
	snprintf(out, n, "curl -fsSL %s -o denvd && chmod +x denvd && sudo ./denvd install --server %s --token %s",
		 url, cp->cfg.public_url, token);
}

static void h_join_token(struct cp *cp, struct http_req *req)
{
	const char *cloud_id = NULL;
	char token[CRYPTO_TOKEN_MAX], id[ID_MAX], cmd[2048];
	struct cp_caller who;
	struct json *body = NULL, *resp;
	struct st_txn *txn;
	struct err e;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0 || cp_body(req, &body) < 0)
		return;
	if (cp_opt_str(req, body, "cloud_id", &cloud_id) < 0)
		goto out;
	if (cloud_id && *cloud_id && !cp_team_row(cp, req, "clouds", who.team_id, cloud_id, "cloud"))
		goto out;
	txn = st_begin(cp->db);
	if (cp_join_token_new(txn, who.team_id, cloud_id, token, sizeof(token), id, &e) < 0) {
		st_abort(txn);
		cp_fail(req, 500, "join token: %s", e.msg);
		goto out;
	}
	join_command(cp, token, cmd, sizeof(cmd));
	resp = json_new_object();
	json_object_set_str(resp, "token", token);
	json_object_set_int(resp, "expires_in_sec", CP_JOIN_TOKEN_TTL_S);
	json_object_set_str(resp, "command", cmd);
	memset(token, 0, sizeof(token));
	memset(cmd, 0, sizeof(cmd));
	cp_commit_reply(cp, txn, req, 201, resp, NULL, NULL);
out:
	json_free(body);
}

/* ---- hosts and targets ---- */

static struct json *host_view(struct cp *cp, const struct json *host)
{
	struct json *h = cp_public(host, "hosts");

	/* A driver host needs no stream (and may not be committed yet). */
	json_object_set_bool(h, "connected",
			     cp_host_driver(cp, host) != NULL || cp_host_connected(cp, json_get_str(host, "ID")));
	return h;
}

static void h_hosts(struct cp *cp, struct http_req *req)
{
	reply_team_rows(cp, req, "hosts", host_view);
}

static struct json *target_view(struct cp *cp, const struct json *host, const char *provider)
{
	struct json *t = host_view(cp, host);
	char kind[64];

	snprintf(kind, sizeof(kind), "%s%s", provider ? "driver:" : "sidecar", provider ? provider : "");
	json_object_set_str(t, "kind", kind);
	if (provider)
		json_object_set_str(t, "provider", provider);
	json_object_set(t, "capabilities", json_dup(json_get(host, "Capabilities")));
	if (provider)
		json_object_set(t, "table", cp_provider_table(provider));
	return t;
}

/* The team's hosts as targets, sidecars first; extra holds host rows not
 * yet committed. A provisioned server that never joined (deleted, or whose
 * delete failed: orch_place.c) is in /v1/hosts as a record, and no target. */
static struct json *targets_list(struct cp *cp, const char *team_id, const struct json *extra)
{
	struct json *rows = cp_list(cp, "hosts", "TeamID", team_id, false, 0, NULL, NULL);
	struct json *out = json_new_array();

	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < json_len(rows) + json_len(extra); i++) {
			const struct json *h = i < json_len(rows) ? json_at(rows, i) : json_at(extra, i - json_len(rows));
			const char *provider = cp_host_driver(cp, h), *status = json_get_str(h, "Status");

			if (str_eq(status, "deleted") || str_eq(status, "delete_failed"))
				continue;
			if ((pass == 0) == (provider == NULL))
				json_array_push(out, target_view(cp, h, provider));
		}
	json_free(rows);
	return out;
}

static void h_targets(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	struct st_txn *txn;
	struct json *resp, *added;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	added = json_new_array();
	txn = cp_ensure_driver_hosts(cp, who.team_id, added);
	resp = json_new_object();
	json_object_set(resp, "targets", targets_list(cp, who.team_id, added));
	json_free(added);
	if (txn)
		cp_commit_reply(cp, txn, req, 200, resp, NULL, NULL);
	else
		cp_reply(req, 200, resp);
}

static void h_targets_connect(struct cp *cp, struct http_req *req)
{
	cloud_create(cp, req, true);
}

int cp_api_hosts(struct cp *cp)
{
	if (cp_route(cp, "GET", "/v1/clouds", 0, h_clouds_list) < 0 ||
	    cp_route(cp, "POST", "/v1/clouds", CP_BODY_JSON, h_clouds_create) < 0 ||
	    cp_route(cp, "POST", "/v1/join-tokens", CP_BODY_JSON, h_join_token) < 0 ||
	    cp_route(cp, "GET", "/v1/hosts", 0, h_hosts) < 0 ||
	    cp_route(cp, "GET", "/v1/targets", 0, h_targets) < 0 ||
	    cp_route(cp, "POST", "/v1/targets/connect", CP_BODY_JSON, h_targets_connect) < 0)
		return -1;
	return 0;
}
