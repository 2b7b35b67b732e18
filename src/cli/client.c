/* client.c: the REST API as the commands use it. See cli.h. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/str.h"
#include "http/http.h"
#include "json/json.h"

void cli_init(struct cli *c)
{
	memset(c, 0, sizeof(*c));
	c->http = http_client_new();
}

void cli_release(struct cli *c)
{
	if (c->http)
		http_client_free(c->http);
	cli_config_release(&c->cfg);
	memset(c, 0, sizeof(*c));
}

int cli_need_key(struct cli *c, struct err *e)
{
	return c->cfg.api_key ? 0 : err_set(e, "%s", CLI_NOT_SIGNED_IN);
}

void cli_ws_url(struct buf *out, const char *server, const char *path)
{
	if (str_has_prefix(server, "https://"))
		buf_addf(out, "wss://%s", server + 8);
	else if (str_has_prefix(server, "http://"))
		buf_addf(out, "ws://%s", server + 7);
	else
		buf_adds(out, server);
	buf_adds(out, path);
}


/* The server's {"error": "..."} message, or the status and the body's start. */
static int http_error(const struct http_client_resp *r, struct err *e)
{
	char msg[ERR_MSG_MAX];

	if (http_client_resp_error(r, msg, sizeof(msg)))
		err_set(e, "%s", msg);
	else if (r->body.len)
		err_set(e, "%d %s: %.200s", r->status, http_status_text(r->status), r->body.data);
	else
		err_set(e, "%d %s", r->status, http_status_text(r->status));
	e->code = r->status;
	return -1;
}

int cli_call_raw(struct cli *c, const char *method, const char *path, const char *content_type,
		 const void *body, size_t len, struct buf *resp, struct err *e)
{
	struct http_client_req req = { 0 };
	struct http_client_resp r = HTTP_CLIENT_RESP_INIT;
	struct buf url = BUF_INIT, auth = BUF_INIT, ctype = BUF_INIT;
	const char *headers[5];
	int nh = 0, rc = -1;

	buf_addf(&url, "%s%s", c->cfg.server, path);
	/* The key goes only into this header: never into a message or a log. */
	if (c->cfg.api_key) {
		buf_addf(&auth, "Authorization: Bearer %s", c->cfg.api_key);
		headers[nh++] = auth.data;
	}
	if (content_type) {
		buf_addf(&ctype, "Content-Type: %s", content_type);
		headers[nh++] = ctype.data;
	}
	headers[nh++] = "User-Agent: denv-cli";
	headers[nh] = NULL;
	req.method = method;
	req.url = url.data;
	req.headers = headers;
	req.body = body;
	req.body_len = len;
	req.timeout_ms = c->timeout_ms > 0 ? (int)c->timeout_ms : CLI_HTTP_TIMEOUT_MS;
	buf_init(&r.body, resp->max ? resp->max : CLI_MAX_RESPONSE);
	if (http_client_do(c->http, &req, &r, e) < 0)
		goto out;
	if (r.status < 200 || r.status > 299) {
		http_error(&r, e);
		goto out;
	}
	if (buf_add(resp, r.body.data, r.body.len) < 0) {
		err_set(e, "response too large");
		goto out;
	}
	rc = 0;
out:
	memset(auth.data, 0, auth.len);
	buf_release(&auth);
	buf_release(&ctype);
	buf_release(&url);
	http_client_resp_release(&r);
	return rc;
}

int cli_call(struct cli *c, const char *method, const char *path, const struct json *body,
	     struct json **out, struct err *e)
{
	struct buf in = BUF_INIT, resp = BUF_INIT;
	struct json *doc = NULL;
	int rc = -1;

	if (out)
		*out = NULL;
	if (body && json_write(&in, body, JSON_COMPACT) < 0) {
		err_set(e, "request body too large");
		goto done;
	}
	if (cli_call_raw(c, method, path, body ? "application/json" : NULL, in.data, in.len, &resp, e) < 0)
		goto done;
	if (resp.len && json_parse(resp.data, resp.len, NULL, &doc, e) < 0) {
		err_prefix(e, "%s %s: bad JSON from the server", method, path);
		goto done;
	}
	if (out)
		*out = doc;
	else
		json_free(doc);
	rc = 0;
done:
	buf_release(&in);
	buf_release(&resp);
	return rc;
}

int cli_print_json(const struct json *v, struct err *e)
{
	struct buf out = BUF_INIT;
	int rc = 0;

	if (!v)
		v = &(struct json){ .type = JSON_NULL };
	if (json_write(&out, v, JSON_PRETTY) < 0 || fwrite(out.data, 1, out.len, stdout) != out.len ||
	    fflush(stdout) != 0)
		rc = err_set(e, "cannot write the output");
	buf_release(&out);
	return rc;
}

int cli_get_print(struct cli *c, const char *path, struct err *e)
{
	return cli_send_print(c, "GET", path, NULL, NULL, NULL, e);
}

void cli_path(struct buf *out, const char *prefix, const char *id, const char *suffix)
{
	buf_adds(out, prefix);
	http_pct_encode(out, id, "");
	if (suffix)
		buf_adds(out, suffix);
}

int cli_send_print(struct cli *c, const char *method, const char *prefix, const char *id, const char *suffix,
		   struct json *body, struct err *e)
{
	struct buf path = BUF_INIT;
	struct json *resp = NULL;
	int rc;

	if (id)
		cli_path(&path, prefix, id, suffix);
	rc = cli_call(c, method, id ? path.data : prefix, body, &resp, e) < 0 ? -1 : cli_print_json(resp, e);
	json_free(body);
	json_free(resp);
	buf_release(&path);
	return rc;
}

/* Look name up among the project's environments. */
static int find_env(struct cli *c, const char *project, const char *name, char *id, size_t size,
		    struct err *e)
{
	struct buf path = BUF_INIT;
	struct json *doc = NULL;
	const struct json *envs;
	int rc = -1;

	cli_path(&path, "/v1/projects/", project, "/envs");
	if (cli_call(c, "GET", path.data, NULL, &doc, e) < 0) {
		if (e->code == 404)
			err_prefix(e, "project %s", project);
		goto out;
	}
	envs = json_get(doc, "environments");
	for (size_t i = 0; i < json_len(envs); i++) {
		const struct json *env = json_at(envs, i);

		if (str_eq(json_get_str(env, "Name"), name) && json_get_str(env, "ID")) {
			rc = str_copy(id, size, json_get_str(env, "ID")) < 0 ? err_set(e, "id too long") : 0;
			goto out;
		}
	}
	err_set(e, "project %s has no environment named %s", project, name);
out:
	json_free(doc);
	buf_release(&path);
	return rc;
}

/* A bare name: every project's environments, each tagged with its project's
 * name, then cli_ref_pick. One request per project (the API has no search). */
static int find_bare(struct cli *c, const char *name, char *id, size_t size, struct err *e)
{
	struct json *projects = NULL, *all = json_new_array();
	const struct json *list;
	int rc = -1;

	if (strlen(name) >= CLI_NAME_MAX) {
		err_set(e, "environment \"%.40s...\": name too long", name);
		goto out;
	}
	if (cli_call(c, "GET", "/v1/projects", NULL, &projects, e) < 0)
		goto out;
	list = json_get(projects, "projects");
	for (size_t i = 0; i < json_len(list) && i < CLI_RESOLVE_PROJECTS_MAX; i++) {
		const char *pid = json_get_str(json_at(list, i), "ID"), *pname = json_get_str(json_at(list, i), "Name");
		struct buf path = BUF_INIT;
		struct json *doc = NULL;
		const struct json *envs;

		if (!pid)
			continue;
		cli_path(&path, "/v1/projects/", pid, "/envs");
		rc = cli_call(c, "GET", path.data, NULL, &doc, e);
		buf_release(&path);
		if (rc < 0) {
			json_free(doc);
			goto out;
		}
		envs = json_get(doc, "environments");
		for (size_t k = 0; k < json_len(envs); k++) {
			struct json *env = json_dup(json_at(envs, k));

			json_object_set_str(env, "project", pname ? pname : pid);
			json_array_push(all, env);
		}
		json_free(doc);
	}
	rc = cli_ref_pick(name, all, id, size, e);
out:
	json_free(projects);
	json_free(all);
	return rc;
}

int cli_resolve_env(struct cli *c, const char *ref, char *id, size_t size, struct err *e)
{
	char project[CLI_NAME_MAX], name[CLI_NAME_MAX];
	int r = cli_ref_split(ref, project, sizeof(project), name, sizeof(name), e);

	if (r < 0)
		return -1;
	if (r == 0 && cli_ref_is_id(ref))
		return str_copy(id, size, ref) < 0 ? err_set(e, "environment id too long") : 0;
	if (r == 0)
		return find_bare(c, ref, id, size, e);
	return find_env(c, project, name, id, size, e);
}

int cli_env_path(struct cli *c, const char *ref, const char *suffix, struct buf *path, struct err *e)
{
	char id[CLI_ID_MAX];

	if (cli_resolve_env(c, ref, id, sizeof(id), e) < 0)
		return -1;
	cli_path(path, "/v1/envs/", id, suffix);
	return 0;
}
