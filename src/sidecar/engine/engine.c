/* engine.c: reading container and image state straight from dockerd's
 * Engine API over its Unix socket, for workers.
 *
 * Why: each `docker inspect` costs a process start of the docker CLI (about
 * 13 ms here), and a sandbox's path to its first exec asks for state several
 * times (health, the probe's pid, the image digest, exec's ownership check).
 * A GET on the socket costs about 1 ms. Reads go this way; of what changes
 * state only exec (engine_exec.c) and a lone container's create and start
 * (engine_run.c) do, each falling back to the CLI, whose messages the tests
 * and users know, whenever it would refuse. When the socket cannot be used (DOCKER_HOST names something other
 * than a Unix socket, the socket is missing, the answer is not what we
 * expect), the same JSON comes from `docker inspect`, which prints the API's
 * own objects, so one parser serves both ways. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/str.h"
#include "http/http.h"
#include "sidecar/sidecar.h"

#define ENGINE_SOCKET_DEFAULT "/var/run/docker.sock"

static struct http_client *client;	/* one per worker: connections are reused */

struct http_client *engine_client(void)
{
	if (!client)
		client = http_client_new();
	return client;
}

const char *engine_socket(void)
{
	const char *h = getenv("DOCKER_HOST");

	if (!h || !*h)
		return ENGINE_SOCKET_DEFAULT;
	return str_has_prefix(h, "unix://") && h[7] ? h + 7 : NULL;
}

/* Letters, digits and the characters of extra only, at most max bytes. */
static bool only_chars(const char *s, size_t max, const char *extra)
{
	return s && *s && strlen(s) <= max && str_only(s, extra);
}

/* Names and references we put in a URL path: nothing that needs escaping. */
static bool path_safe(const char *s)
{
	return only_chars(s, 400, "._-/:@");
}

/* A path with a query of our own making (percent-encoded already). */
static bool path_safe_query(const char *s)
{
	return only_chars(s, 600, "._-/:@?=&%");
}

/* One request on the socket, with a JSON text body or none: the HTTP
 * status and the body in resp, or -1 when the socket cannot be used (e).
 * The caller releases resp either way. */
static int api_do(const char *method, const char *path, const char *text, int timeout_ms,
		  struct http_client_resp *resp, struct err *e)
{
	const char *headers[] = { "Content-Type: application/json", NULL };
	char url[640];
	struct http_client_req req = { 0 };
	const char *sock = engine_socket();

	buf_init(&resp->body, SC_ENGINE_BODY_MAX);
	if (!sock)
		return err_set(e, "DOCKER_HOST is not a Unix socket");
	if (snprintf(url, sizeof(url), "http://docker%s", path) >= (int)sizeof(url))
		return err_set(e, "engine API %s: path too long", method ? method : "GET");
	req.method = method;
	req.url = url;
	req.unix_socket = sock;
	if (text) {
		req.headers = headers;
		req.body = text;
		req.body_len = strlen(text);
	}
	req.timeout_ms = timeout_ms;
	if (http_client_do(engine_client(), &req, resp, e) < 0)
		return -1;
	return resp->status;
}

/* api_do with no body and the quick deadline. */
static int api_call(const char *method, const char *path, struct http_client_resp *resp, struct err *e)
{
	return api_do(method, path, NULL, (int)SC_DOCKER_QUICK_MS, resp, e);
}

/* GET path on the socket. 1 and *out (200), 0 (404), -1 (anything else:
 * the caller falls back to the CLI). */
static int api_get(const char *path, struct json **out, struct err *e)
{
	struct http_client_resp resp = HTTP_CLIENT_RESP_INIT;
	int rc = api_call(NULL, path, &resp, e);

	if (rc == 404)
		rc = 0;
	else if (rc >= 0 && rc != 200)
		rc = err_set(e, "engine API GET %s: HTTP %d", path, resp.status);
	else if (rc == 200)
		rc = json_parse(resp.body.data ? resp.body.data : "", resp.body.len, NULL, out, e) < 0 ? -1 : 1;
	http_client_resp_release(&resp);
	return rc;
}

int engine_api_get(const char *path, struct json **out, struct err *e)
{
	*out = NULL;
	return api_get(path, out, e);
}

int engine_api_delete(const char *path, int *status, struct err *e)
{
	struct http_client_resp resp = HTTP_CLIENT_RESP_INIT;
	int rc;

	if (!path_safe_query(path))
		return err_set(e, "engine API DELETE: a path we do not send: %.100s", path);
	rc = api_call("DELETE", path, &resp, e);
	http_client_resp_release(&resp);
	if (rc < 0)
		return -1;
	*status = rc;
	return 0;
}

int engine_container_do(const char *name, const char *action, struct err *e)
{
	struct http_client_resp resp = HTTP_CLIENT_RESP_INIT;
	char path[SC_ENGINE_PATH_MAX];
	int rc;

	/* 0: the docker CLI does it (a name the API path cannot carry). */
	if (!path_safe(name) || str_fmt(path, sizeof(path), "/containers/%s/%s", name, action) < 0)
		return 0;
	rc = api_call("POST", path, &resp, e);
	if (rc < 0) {
		log_debug("worker", "engine API: %s; using the docker CLI", e->msg);
		err_clear(e);
		rc = 0;
	} else if (rc >= 200 && rc < 300) {
		rc = 1;
	} else {
		char line[SC_DOCKER_LINE_MAX];

		/* Docker's own words, {"message": "..."}, as the CLI would print them. */
		dk_first_line(resp.body.data ? resp.body.data : "", line, sizeof(line));
		rc = err_set(e, "%s %s: HTTP %d %s", action, name, resp.status, line);
	}
	http_client_resp_release(&resp);
	return rc;
}

/* The same object from the CLI: `docker inspect --type T name` prints a
 * JSON array of API objects. 1 and *out, 0 no such object, -1 error. */
static int cli_get(const char *type, const char *name, struct json **out, struct err *e)
{
	struct buf b = BUF_INIT;
	struct json *arr = NULL;

	if (dk(&b, SC_DOCKER_QUICK_MS, e, "inspect", "--type", type, name, NULL) < 0) {
		buf_release(&b);
		return strstr(e->msg, "No such") ? 0 : -1;
	}
	if (json_parse(b.data ? b.data : "", b.len, NULL, &arr, e) < 0 || json_len(arr) != 1) {
		buf_release(&b);
		json_free(arr);
		return err_set(e, "docker inspect %s: unexpected output", name);
	}
	buf_release(&b);
	*out = json_dup(json_at(arr, 0));
	json_free(arr);
	return 1;
}

static int get_object(const char *type, const char *name, struct json **out, struct err *e)
{
	char path[SC_ENGINE_PATH_MAX];
	int rc;

	*out = NULL;
	if (path_safe(name) && str_fmt(path, sizeof(path), "/%ss/%s/json", type, name) == 0) {
		if ((rc = api_get(path, out, e)) >= 0)
			return rc;
		log_debug("worker", "engine API: %s; using the docker CLI", e->msg);
		err_clear(e);
	}
	return cli_get(type, name, out, e);
}

int engine_container(const char *name, struct engine_ctr *c, struct err *e)
{
	const struct json *st, *health;
	struct json *o;
	int rc;

	memset(c, 0, sizeof(*c));
	if ((rc = get_object("container", name, &o, e)) <= 0)
		return rc;
	st = json_get(o, "State");
	health = json_get(st, "Health");
	str_copy(c->status, sizeof(c->status), json_get_str(st, "Status") ? json_get_str(st, "Status") : "");
	str_copy(c->health, sizeof(c->health),
		 health && json_get_str(health, "Status") ? json_get_str(health, "Status") : "none");
	c->exit_code = (int)json_get_int(st, "ExitCode", 0);
	c->pid = (int)json_get_int(st, "Pid", 0);
	{
		const char *env = json_get_str(json_get(json_get(o, "Config"), "Labels"), "ai.denv.env");

		str_copy(c->env, sizeof(c->env), env ? env : "");
	}
	c->gvisor = str_eq(json_get_str(json_get(o, "HostConfig"), "Runtime"), RT_RUNSC_DOCKER_NAME);
	json_free(o);
	if (!*c->status)
		return err_set(e, "container %s: no state in its inspect output", name);
	return 1;
}

int engine_container_files(const char *name, struct json **mounts, char *rootfs, size_t n, struct err *e)
{
	struct json *o;
	const char *merged;
	int rc;

	*mounts = NULL;
	*rootfs = '\0';
	if ((rc = get_object("container", name, &o, e)) <= 0)
		return rc;
	merged = json_get_str(json_get(json_get(o, "GraphDriver"), "Data"), "MergedDir");
	if (!merged || !*merged || str_copy(rootfs, n, merged) < 0) {
		json_free(o);
		return err_set(e, "container %s: its inspect output names no root directory on the host", name);
	}
	*mounts = json_dup(json_get(o, "Mounts"));
	json_free(o);
	return 1;
}

int engine_image(const char *ref, struct engine_img *im, struct err *e)
{
	const struct json *digests;
	struct json *o;
	int rc;

	memset(im, 0, sizeof(*im));
	if ((rc = get_object("image", ref, &o, e)) <= 0)
		return rc;
	str_copy(im->id, sizeof(im->id), json_get_str(o, "Id") ? json_get_str(o, "Id") : "");
	digests = json_get(o, "RepoDigests");
	if (json_len(digests) > 0 && json_at(digests, 0)->type == JSON_STRING)
		str_copy(im->digest, sizeof(im->digest), json_at(digests, 0)->u.str.s);
	json_free(o);
	if (!str_has_prefix(im->id, "sha256:"))
		return err_set(e, "image %s: no id in its inspect output", ref);
	return 1;
}

/* One request with a JSON body (or none) on the socket: 0 and *status
 * (and *out, parsed, on a 2xx when out is not NULL; e holds the answer
 * otherwise), -1 when no answer came. */
int engine_api(const char *method, const char *path, const struct json *body, int timeout_ms,
	       int *status, struct json **out, struct err *e)
{
	char *text = body ? json_to_string(body, 0) : NULL;
	struct http_client_resp resp = HTTP_CLIENT_RESP_INIT;
	int rc = api_do(method, path, text, timeout_ms, &resp, e) < 0 ? -1 : 0;

	free(text);
	if (rc == 0) {
		*status = resp.status;
		if (out && resp.status / 100 == 2 &&
		    json_parse(resp.body.data ? resp.body.data : "", resp.body.len, NULL, out, e) < 0)
			rc = -1;
		else if (resp.status / 100 != 2)
			err_set(e, "%s %s: HTTP %d: %.200s", method, path, resp.status,
				resp.body.data ? resp.body.data : "");
	}
	http_client_resp_release(&resp);
	return rc;
}
