/* api_github.c: the GitHub App side: the webhook and the /v1/github routes. Without
 * DENV_GITHUB_APP_ID and DENV_GITHUB_APP_PRIVATE_KEY the app is off: the
 * webhook answers 503 and the installation list says configured: false. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/crypto.h"
#include "base/enc.h"
#include "base/log.h"
#include "base/str.h"
#include "cp/cp.h"

static bool app_configured(const struct cp *cp)
{
	return cp->cfg.gh_app_id && cp->cfg.gh_app_key;
}

static const char app_off[] = "the GitHub App is not configured on this server";

/* X-Hub-Signature-256: "sha256=" and the hex HMAC of the body. */
static bool signature_ok(const struct cp *cp, struct http_req *req, const char *body, size_t len)
{
	const char *sig = http_req_header(req, "X-Hub-Signature-256");
	const char *secret = cp->cfg.gh_webhook_secret;
	uint8_t mac[SHA256_LEN];
	char hex[SHA256_HEX_LEN + 1];

	if (!sig || !str_has_prefix(sig, "sha256=") || strlen(sig) != 7 + SHA256_HEX_LEN)
		return false;
	if (hmac_sha256(secret, strlen(secret), body, len, mac) < 0)
		return false;
	enc_hex_write(hex, mac, sizeof(mac));
	/* GitHub sends lowercase hex, as enc_hex_write writes it. */
	return crypto_equal(hex, sig + 7, SHA256_HEX_LEN);
}

static void installation_event(struct cp *cp, struct http_req *req, const struct json *ev)
{
	const char *action = json_get_str(ev, "action");
	const struct json *inst = json_get(ev, "installation");
	int64_t n = json_get_int(inst, "id", 0);
	const struct json *old;
	struct json *row, *resp = json_new_object();
	struct st_txn *txn;
	char id[32];

	json_object_set_bool(resp, "ok", true);
	if (n <= 0) {
		json_free(resp);
		http_respond_error(req, 400, "installation event without installation.id");
		return;
	}
	snprintf(id, sizeof(id), "%" PRId64, n);
	old = st_get(cp->db, "installations", id);
	txn = st_begin(cp->db);
	if (str_eq(action, "deleted")) {
		st_delete(txn, "installations", id);
	} else if (str_eq(action, "created") || str_eq(action, "unsuspend") ||
		   str_eq(action, "new_permissions_accepted")) {
		/* Keep an existing link to a team. */
		row = json_new_object();
		json_object_set_int(row, "InstallationID", n);
		json_object_set_str(row, "TeamID", old ? json_get_str(old, "TeamID") : "");
		json_object_set_str(row, "AccountLogin", json_get_str(json_get(inst, "account"), "login"));
		json_object_set(row, "CreatedAt",
				old ? json_dup(json_get(old, "CreatedAt")) : cp_now_json());
		st_put(txn, "installations", id, row);
	}
	cp_commit_reply(cp, txn, req, 200, resp, NULL, NULL);
}

/* A push deploys every project whose source is the repository; fetching the
 * compose file needs a GitHub API client that is not written yet, so each
 * project is reported with that error. */
static void push_event(struct cp *cp, struct http_req *req, const struct json *ev)
{
	const char *ref = json_get_str(ev, "ref");
	const char *repo = json_get_str(json_get(ev, "repository"), "full_name");
	struct json *resp = json_new_object(), *list = json_new_array(), *srcs;

	srcs = repo ? cp_list(cp, "sources", "Repo", repo, false, 0, NULL, NULL) : json_new_array();
	for (size_t i = 0; i < json_len(srcs); i++) {
		struct json *o = json_new_object();

		json_object_set_str(o, "project", json_get_str(json_at(srcs, i), "ProjectID"));
		json_object_set_str(o, "error", "fetching from GitHub is not implemented yet");
		json_array_push(list, o);
	}
	json_free(srcs);
	json_object_set_bool(resp, "ok", true);
	json_object_set_str(resp, "sha", json_get_str(ev, "after"));
	json_object_set_str(resp, "branch", ref && str_has_prefix(ref, "refs/heads/") ? ref + 11 : ref);
	json_object_set(resp, "projects", list);
	cp_reply(req, 200, resp);
}

static void h_webhook(struct cp *cp, struct http_req *req)
{
	const char *kind = http_req_header(req, "X-GitHub-Event");
	struct json *ev = NULL, *resp;
	size_t len;
	const char *body = http_req_body(req, &len);
	struct err e;

	if (!app_configured(cp)) {
		http_respond_error(req, 503, app_off);
		return;
	}
	if (!cp->cfg.gh_webhook_secret) {
		http_respond_error(req, 401, "webhooks are refused: DENV_GITHUB_WEBHOOK_SECRET is not set");
		return;
	}
	if (!signature_ok(cp, req, body, len)) {
		http_respond_error(req, 401, "X-Hub-Signature-256 does not match");
		return;
	}
	if (json_parse(body, len, NULL, &ev, &e) < 0 || ev->type != JSON_OBJECT) {
		json_free(ev);
		http_respond_error(req, 400, "webhook body must be a JSON object");
		return;
	}
	if (str_eq(kind, "installation")) {
		installation_event(cp, req, ev);
	} else if (str_eq(kind, "push")) {
		push_event(cp, req, ev);
	} else {
		resp = json_new_object();
		json_object_set_bool(resp, "ok", true);
		cp_reply(req, 200, resp);
	}
	json_free(ev);
}

static void h_installations(struct cp *cp, struct http_req *req)
{
	struct cp_caller who;
	struct json *resp;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	resp = json_new_object();
	json_object_set(resp, "installations",
			cp_list(cp, "installations", "TeamID", who.team_id, false, 0, NULL, NULL));
	json_object_set_bool(resp, "configured", app_configured(cp));
	cp_reply(req, 200, resp);
}

static void h_installation_link(struct cp *cp, struct http_req *req)
{
	const char *id = http_req_param(req, "id");
	struct cp_caller who;
	const struct json *row;
	const char *owner;
	struct json *upd, *resp;
	struct st_txn *txn;
	char key[32];

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	if (!app_configured(cp)) {
		http_respond_error(req, 503, app_off);
		return;
	}
	row = st_get(cp->db, "installations", id);
	if (!row) {
		http_respond_error(req, 404, "installation not found (the app has not reported it)");
		return;
	}
	owner = json_get_str(row, "TeamID");
	if (owner && *owner && !str_eq(owner, who.team_id)) {
		http_respond_error(req, 409, "installation is already linked to another team");
		return;
	}
	str_copy(key, sizeof(key), id);
	upd = json_dup(row);
	json_object_set_str(upd, "TeamID", who.team_id);
	resp = json_new_object();
	json_object_set(resp, "installation", json_dup(upd));
	txn = st_begin(cp->db);
	st_put(txn, "installations", key, upd);
	cp_commit_reply(cp, txn, req, 200, resp, NULL, NULL);
}

static void h_repos(struct cp *cp, struct http_req *req)
{
	const char *id = http_req_query(req, "installation");
	struct cp_caller who;
	const struct json *row;

	if (cp_auth(cp, req, CP_AUTH_TEAM, &who) < 0)
		return;
	if (!app_configured(cp)) {
		http_respond_error(req, 503, app_off);
		return;
	}
	if (!id || !*id) {
		http_respond_error(req, 400, "installation is required");
		return;
	}
	row = st_get(cp->db, "installations", id);
	if (!row || !str_eq(json_get_str(row, "TeamID"), who.team_id)) {
		http_respond_error(req, 404, "installation not found");
		return;
	}
	http_respond_error(req, 503, "listing repositories needs the GitHub API client, which is not implemented yet");
}

int cp_api_github(struct cp *cp)
{
	if (cp_route(cp, "POST", "/webhooks/github", CP_BODY_WEBHOOK, h_webhook) < 0 ||
	    cp_route(cp, "GET", "/v1/github/installations", 0, h_installations) < 0 ||
	    cp_route(cp, "POST", "/v1/github/installations/{id}/link", CP_BODY_JSON, h_installation_link) < 0 ||
	    cp_route(cp, "GET", "/v1/github/repos", 0, h_repos) < 0)
		return -1;
	return 0;
}
