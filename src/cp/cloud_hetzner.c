/*
 * cloud_hetzner.c: machines through the Hetzner Cloud API (targets.md,
 * "Clouds and hosts"): create (POST {api}/servers with the cloud's
 * server_type, location and image and the cloud-init user data), delete
 * (DELETE {api}/servers/{id}; a 404 means it is already gone) and find by
 * name (GET {api}/servers?name=), on the loop through the asynchronous HTTP
 * client (https with the system CA store). The API base is
 * CP_HETZNER_API_URL unless DENV_HETZNER_API_URL says otherwise (tests, proxies).
 *
 * The cloud's token travels only in the Authorization header; it and the
 * user data (which holds a join token) are never logged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "cp/cloud.h"

#define HZ_AUTH_MAX 600		/* "Authorization: Bearer " and the token */
#define HZ_MESSAGE_MAX 300	/* of the provider's error message, in ours */

/* The server's public address: IPv4, else the IPv6 network (a machine may be
 * created without IPv4). */
static void server_ip(const struct json *server, char *out, size_t n)
{
	const struct json *net = json_get(server, "public_net");
	const char *v4 = json_get_str(json_get(net, "ipv4"), "ip");
	const char *v6 = json_get_str(json_get(net, "ipv6"), "ip");

	str_copy(out, n, v4 && *v4 ? v4 : v6 ? v6 : "");
}

/* "hetzner: <message> (HTTP <status> <code>)" from {error: {code, message}}. */
static void provider_error(const struct http_client_resp *resp, const struct json *doc, char *out, size_t n)
{
	const struct json *err = json_get(doc, "error");
	const char *msg = json_get_str(err, "message"), *code = json_get_str(err, "code");

	if (msg && *msg)
		snprintf(out, n, "hetzner: %.*s (HTTP %d%s%.40s)", HZ_MESSAGE_MAX, msg, resp->status,
			 code && *code ? " " : "", code ? code : "");
	else
		snprintf(out, n, "hetzner: HTTP %d from the API", resp->status);
}

/* The server object of a create answer, or the first of a find answer's
 * list; NULL when there is none. */
static const struct json *answer_server(enum cp_machine_op op, const struct json *doc)
{
	const struct json *list;

	if (op == CP_MACHINE_CREATE)
		return json_get(doc, "server");
	list = json_get(doc, "servers");
	return json_len(list) ? json_at(list, 0) : NULL;
}

static void answered(const struct http_client_resp *resp, const struct err *e, void *arg)
{
	struct cp_machine_call *c = arg;
	struct cp_machine m;
	const struct json *server;
	struct json *doc = NULL;
	struct err pe;
	char why[ERR_MSG_MAX];
	int64_t id;

	c->call = NULL;
	memset(&m, 0, sizeof(m));
	if (!resp) {
		snprintf(why, sizeof(why), "hetzner: %.400s", e ? e->msg : "request failed");
		cp_machine_call_end(c, NULL, why);
		return;
	}
	if (resp->body.len && json_parse(resp->body.data, resp->body.len, NULL, &doc, &pe) < 0)
		doc = NULL;
	/* A 404 to a delete: already gone (deleted by hand, or never there), what we wanted. */
	if (c->op == CP_MACHINE_DELETE && resp->status == 404) {
		json_free(doc);
		cp_machine_call_end(c, NULL, NULL);
		return;
	}
	if (resp->status < 200 || resp->status > 299) {
		provider_error(resp, doc, why, sizeof(why));
		goto fail;
	}
	server = c->op == CP_MACHINE_DELETE ? NULL : answer_server(c->op, doc);
	if (!server && c->op != CP_MACHINE_CREATE) {
		json_free(doc);
		cp_machine_call_end(c, NULL, NULL);
		return;
	}
	id = json_get_int(server, "id", 0);
	if (id <= 0) {
		snprintf(why, sizeof(why), "hetzner: HTTP %d without a server id in the answer", resp->status);
		goto fail;
	}
	snprintf(m.ref, sizeof(m.ref), "%lld", (long long)id);
	str_copy(m.name, sizeof(m.name), json_get_str(server, "name") ? json_get_str(server, "name") : "");
	server_ip(server, m.ip, sizeof(m.ip));
	json_free(doc);
	cp_machine_call_end(c, &m, NULL);
	return;
fail:
	json_free(doc);
	cp_machine_call_end(c, NULL, why);
}

/* One call to the API with the cloud's token; body may be NULL. The token
 * and the body are wiped from our copies once the request is queued. */
static struct cp_machine_call *hz_call(struct cp *cp, const struct json *config, enum cp_machine_op op, const char *method,
				       const char *path, char *body, cp_machine_fn fn, void *arg, struct err *e)
{
	const char *token = json_get_str(config, "token");
	char url[1024], auth[HZ_AUTH_MAX];
	const char *headers[] = { auth, "Content-Type: application/json", "Accept: application/json",
				  "User-Agent: denv-cp", NULL };
	const char *bodyless[] = { auth, "Accept: application/json", "User-Agent: denv-cp", NULL };
	struct http_client_req req = { 0 };
	struct cp_machine_call *c;

	if (!token || !*token)
		return err_set(e, "hetzner: the cloud has no token"), NULL;
	if (strcspn(token, "\r\n") != strlen(token) || strlen(token) + 32 > sizeof(auth))
		return err_set(e, "hetzner: the cloud's token is not a usable API token"), NULL;
	snprintf(url, sizeof(url), "%s%s", cp->cfg.hetzner_api_url, path);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	req.method = method;
	req.url = url;
	req.headers = body ? headers : bodyless;
	req.body = body;
	req.body_len = body ? strlen(body) : 0;
	req.timeout_ms = CP_PROVIDER_TIMEOUT_MS;
	c = cp_machine_call_new(cp, op, fn, arg);
	/* The request is copied: wipe our copies of the secrets at once. */
	c->call = http_aclient_do(cp_aclient(cp), &req, CP_PROVIDER_BODY_MAX, answered, c, e);
	memset(auth, 0, sizeof(auth));
	if (!c->call) {
		free(c);
		return err_prefix(e, "hetzner"), NULL;
	}
	return c;
}

struct cp_machine_call *cp_hetzner_create(struct cp *cp, const struct json *config, const char *name,
					  const char *user_data, const struct json *labels, cp_machine_fn fn,
					  void *arg, struct err *e)
{
	struct cp_machine_call *c;
	struct json *body;
	char *text;
	size_t len;

	body = cp_obj("name", json_new_str(name), "server_type",
		      json_new_str(cp_cloud_cfg(config, "server_type", CP_HETZNER_SERVER_TYPE)), "location",
		      json_new_str(cp_cloud_cfg(config, "location", CP_HETZNER_LOCATION)), "image",
		      json_new_str(cp_cloud_cfg(config, "image", CP_HETZNER_IMAGE)), "user_data", json_new_str(user_data),
		      "start_after_create", json_new_bool(true), "labels",
		      labels ? json_dup(labels) : json_new_object(), NULL);
	text = json_to_string(body, JSON_COMPACT);
	json_free(body);
	len = strlen(text);
	c = hz_call(cp, config, CP_MACHINE_CREATE, "POST", "/servers", text, fn, arg, e);
	memset(text, 0, len);
	free(text);
	if (c)
		log_info("cloud", "hetzner: creating server %s (%s in %s)", name,
			 cp_cloud_cfg(config, "server_type", CP_HETZNER_SERVER_TYPE),
			 cp_cloud_cfg(config, "location", CP_HETZNER_LOCATION));
	return c;
}

/* Server ids are decimal numbers; anything else never reaches a URL. */
static bool ref_ok(const char *ref)
{
	size_t n = ref ? strlen(ref) : 0;

	return n > 0 && n < 20 && strspn(ref, "0123456789") == n;
}

struct cp_machine_call *cp_hetzner_delete(struct cp *cp, const struct json *config, const char *ref,
					  cp_machine_fn fn, void *arg, struct err *e)
{
	char path[64];
	struct cp_machine_call *c;

	if (!ref_ok(ref))
		return err_set(e, "hetzner: \"%.40s\" is not a server id", ref ? ref : ""), NULL;
	snprintf(path, sizeof(path), "/servers/%s", ref);
	c = hz_call(cp, config, CP_MACHINE_DELETE, "DELETE", path, NULL, fn, arg, e);
	if (c)
		log_info("cloud", "hetzner: deleting server %s", ref);
	return c;
}

struct cp_machine_call *cp_hetzner_find(struct cp *cp, const struct json *config, const char *name,
					cp_machine_fn fn, void *arg, struct err *e)
{
	char path[CP_NAME_MAX + 32];

	/* Generated names are [a-z0-9-]: nothing to escape, but refuse the rest. */
	if (!cp_valid_name(name) || strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(name))
		return err_set(e, "hetzner: \"%.63s\" is not a server name denv makes", name), NULL;
	snprintf(path, sizeof(path), "/servers?name=%s", name);
	return hz_call(cp, config, CP_MACHINE_FIND, "GET", path, NULL, fn, arg, e);
}
