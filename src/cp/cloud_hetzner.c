/*
 * cloud_hetzner.c: create a machine through the Hetzner Cloud API (targets.md,
 * "Clouds and hosts"): POST {api}/servers with the cloud's server_type,
 * location and image and the cloud-init user data, on the loop through the
 * asynchronous HTTP client (https with the system CA store). The API base is
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
#include "cp/cp.h"

#define HZ_AUTH_MAX 600		/* "Authorization: Bearer " and the token */
#define HZ_MESSAGE_MAX 300	/* of the provider's error message, in ours */

struct cp_machine_call {
	struct cp *cp;
	struct http_acall *call;
	cp_machine_fn fn;
	void *arg;
};

/* A config value, or its default for a cloud row that lacks it. */
static const char *cfg(const struct json *config, const char *key, const char *fallback)
{
	const char *v = json_get_str(config, key);

	return v && *v ? v : fallback;
}

static struct http_aclient *aclient(struct cp *cp)
{
	if (!cp->aclient)
		cp->aclient = http_aclient_new(cp->ev);
	return cp->aclient;
}

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
		goto fail;
	}
	if (resp->body.len && json_parse(resp->body.data, resp->body.len, NULL, &doc, &pe) < 0)
		doc = NULL;
	if (resp->status < 200 || resp->status > 299) {
		provider_error(resp, doc, why, sizeof(why));
		goto fail;
	}
	server = json_get(doc, "server");
	id = json_get_int(server, "id", 0);
	if (id <= 0) {
		snprintf(why, sizeof(why), "hetzner: HTTP %d without a server id in the answer", resp->status);
		goto fail;
	}
	snprintf(m.ref, sizeof(m.ref), "%lld", (long long)id);
	str_copy(m.name, sizeof(m.name), json_get_str(server, "name") ? json_get_str(server, "name") : "");
	server_ip(server, m.ip, sizeof(m.ip));
	json_free(doc);
	c->fn(c->cp, &m, NULL, c->arg);
	free(c);
	return;
fail:
	json_free(doc);
	c->fn(c->cp, NULL, why, c->arg);
	free(c);
}

struct cp_machine_call *cp_hetzner_create(struct cp *cp, const struct json *config, const char *name,
					  const char *user_data, const struct json *labels, cp_machine_fn fn,
					  void *arg, struct err *e)
{
	const char *token = json_get_str(config, "token");
	char url[1024], auth[HZ_AUTH_MAX];
	const char *headers[] = { auth, "Content-Type: application/json", "Accept: application/json",
				  "User-Agent: denv-cp", NULL };
	struct http_client_req req = { 0 };
	struct cp_machine_call *c;
	struct json *body;
	char *text;

	if (!token || !*token)
		return err_set(e, "hetzner: the cloud has no token"), NULL;
	if (strcspn(token, "\r\n") != strlen(token) || strlen(token) + 32 > sizeof(auth))
		return err_set(e, "hetzner: the cloud's token is not a usable API token"), NULL;
	snprintf(url, sizeof(url), "%s/servers", cp->cfg.hetzner_api_url);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	body = cp_obj("name", json_new_str(name), "server_type",
		      json_new_str(cfg(config, "server_type", CP_HETZNER_SERVER_TYPE)), "location",
		      json_new_str(cfg(config, "location", CP_HETZNER_LOCATION)), "image",
		      json_new_str(cfg(config, "image", CP_HETZNER_IMAGE)), "user_data", json_new_str(user_data),
		      "start_after_create", json_new_bool(true), "labels",
		      labels ? json_dup(labels) : json_new_object(), NULL);
	text = json_to_string(body, JSON_COMPACT);
	json_free(body);
	req.method = "POST";
	req.url = url;
	req.headers = headers;
	req.body = text;
	req.body_len = strlen(text);
	req.timeout_ms = CP_PROVIDER_TIMEOUT_MS;
	c = xcalloc(1, sizeof(*c));
	c->cp = cp;
	c->fn = fn;
	c->arg = arg;
	/* The request is copied: wipe our copies of the secrets at once. */
	c->call = http_aclient_do(aclient(cp), &req, CP_PROVIDER_BODY_MAX, answered, c, e);
	memset(auth, 0, sizeof(auth));
	memset(text, 0, req.body_len);
	free(text);
	if (!c->call) {
		free(c);
		return err_prefix(e, "hetzner"), NULL;
	}
	log_info("cloud", "hetzner: creating server %s (%s in %s)", name,
		 cfg(config, "server_type", CP_HETZNER_SERVER_TYPE), cfg(config, "location", CP_HETZNER_LOCATION));
	return c;
}

void cp_machine_cancel(struct cp_machine_call *c)
{
	if (!c)
		return;
	if (c->call)
		http_acall_cancel(c->call);
	free(c);
}
