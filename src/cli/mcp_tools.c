/*
 * mcp_tools.c: the tools of denv mcp. Each takes the call's arguments,
 * makes the REST calls a CLI verb would (quietly: on stdio, stdout is the
 * protocol), and answers one JSON text. Deployments (snapshot, verify,
 * destroy) are followed to their end, so a tool's answer is final.
 */
#include "cli/mcp_tools.h"

#include <string.h>

#include "base/buf.h"
#include "base/enc.h"
#include "base/err.h"
#include "base/ev.h"
#include "base/str.h"
#include "base/utf8.h"
#include "cli/cli.h"
#include "cli/mcp.h"
#include "http/http.h"
#include "json/json.h"
#include "tar/tar.h"

typedef int (*tool_fn)(struct cli *c, const struct json *args, struct json **out, struct err *e);

struct tool {
	const char *name;
	const char *description;
	const char *schema;	/* the inputSchema, JSON text */
	tool_fn run;
};

#define ENV_PROP "\"env\":{\"type\":\"string\",\"description\":\"environment id (env_...) or project/env\"}"
#define SERVICE_PROP "\"service\":{\"type\":\"string\",\"description\":\"service (default main, a sandbox's one service)\"}"
#define ENC_PROP "\"encoding\":{\"type\":\"string\",\"enum\":[\"text\",\"base64\"],\"description\":\"default text\"}"

/* ---- helpers ---- */

static const char *arg_str(const struct json *args, const char *key, const char *def)
{
	const char *s = json_get_str(args, key);

	return s && *s ? s : def;
}

static int need_str(const struct json *args, const char *key, const char **out, struct err *e)
{
	*out = arg_str(args, key, NULL);
	return *out ? 0 : err_set(e, "argument %s (a string) is required", key);
}

/* "/v1/envs/<id><suffix>" for the env argument. */
static int env_path(struct cli *c, const struct json *args, const char *suffix, struct buf *path, struct err *e)
{
	char id[CLI_ID_MAX];
	const char *ref;

	if (need_str(args, "env", &ref, e) < 0 || cli_resolve_env(c, ref, id, sizeof(id), e) < 0)
		return -1;
	buf_adds(path, "/v1/envs/");
	http_pct_encode(path, id, "");
	buf_adds(path, suffix);
	return 0;
}

/* Follow a 202 answer's deployment to its end; *final its last {deployment, phases}. */
static int follow(struct cli *c, const struct json *resp, struct json **final, struct err *e)
{
	const char *dep = json_get_str(json_get(resp, "deployment"), "ID");
	int64_t deadline = ev_mono_ms() + (int64_t)MCP_DEPLOY_WAIT_S * 1000;
	struct buf path = BUF_INIT;
	int rc = -1;

	if (!dep)
		return err_set(e, "the server started no deployment");
	buf_adds(&path, "/v1/deployments/");
	http_pct_encode(&path, dep, "");
	for (;;) {
		json_free(*final);
		*final = NULL;
		if (cli_call(c, "GET", path.data, NULL, final, e) < 0)
			break;
		if (cli_status_final(json_get_str(json_get(*final, "deployment"), "Status"))) {
			rc = 0;
			break;
		}
		if (ev_mono_ms() > deadline) {
			err_set(e, "deployment %s did not end within %d s", dep, MCP_DEPLOY_WAIT_S);
			break;
		}
		cli_sleep_ms(CLI_POLL_MS);
	}
	buf_release(&path);
	return rc;
}

/* POST/DELETE path, follow the deployment, insist it succeeded. */
static int run_deployment(struct cli *c, const char *method, const char *path, const struct json *body,
			  struct json **final, struct err *e)
{
	struct json *resp = NULL;
	const struct json *d;
	int rc = cli_call(c, method, path, body, &resp, e);

	if (rc == 0)
		rc = follow(c, resp, final, e);
	json_free(resp);
	if (rc < 0)
		return -1;
	d = json_get(*final, "deployment");
	if (!str_eq(json_get_str(d, "Status"), "succeeded"))
		return err_set(e, "deployment %s %s: %s", json_get_str(d, "ID"), json_get_str(d, "Status"),
			       json_get_str(d, "Error") ? json_get_str(d, "Error") : "no error recorded");
	return 0;
}

/* {id, name, status} of a {environment} answer. */
static struct json *sandbox_of(const struct json *resp)
{
	const struct json *env = json_get(resp, "environment");
	struct json *o = json_new_object();

	json_object_set_str(o, "id", json_get_str(env, "ID"));
	json_object_set_str(o, "name", json_get_str(env, "Name"));
	json_object_set_str(o, "status", json_get_str(env, "Status"));
	return o;
}

static int post_sandbox(struct cli *c, struct json *body, struct json **out, struct err *e)
{
	struct json *resp = NULL;
	int rc = cli_call(c, "POST", "/v1/sandboxes", body, &resp, e);

	if (rc == 0)
		*out = sandbox_of(resp);
	json_free(resp);
	return rc;
}

/* ---- the tools ---- */

static int tool_create(struct cli *c, const struct json *args, struct json **out, struct err *e)
{
	static const char *const copied[] = { "image", "cmd", "env", "egress", "name", "project", "timeout_sec",
					       "idle_ttl_sec", "max_ttl_sec", NULL };
	struct json *body = json_new_object();
	const char *image;
	int rc = need_str(args, "image", &image, e);

	for (int i = 0; rc == 0 && copied[i]; i++)
		if (json_get(args, copied[i]))
			json_object_set(body, copied[i], json_dup(json_get(args, copied[i])));
	if (rc == 0)
		rc = post_sandbox(c, body, out, e);
	json_free(body);
	return rc;
}

static int tool_exec(struct cli *c, const struct json *args, struct json **out, struct err *e)
{
	const struct json *cmd = json_get(args, "cmd");
	struct buf path = BUF_INIT;
	struct json *body;
	int rc;

	if (!cmd || cmd->type != JSON_ARRAY || json_len(cmd) == 0)
		return err_set(e, "argument cmd (a non-empty array of strings) is required");
	if (env_path(c, args, "/exec", &path, e) < 0)
		return buf_release(&path), -1;
	body = json_new_object();
	json_object_set_str(body, "service", arg_str(args, "service", MCP_SERVICE_DEFAULT));
	json_object_set(body, "cmd", json_dup(cmd));
	json_object_set_int(body, "timeout_sec", json_get_int(args, "timeout_sec", CLI_EXEC_DEFAULT_TIMEOUT_S));
	c->timeout_ms = (json_get_int(body, "timeout_sec", 0) * 1000) + CLI_EXEC_SLACK_MS;
	rc = cli_call(c, "POST", path.data, body, out, e);
	c->timeout_ms = 0;
	json_free(body);
	buf_release(&path);
	return rc;
}

/* The parent directory and the base name of an absolute file path. */
static int split_path(const char *p, struct buf *dir, const char **base, struct err *e)
{
	const char *slash = strrchr(p, '/');

	if (p[0] != '/' || !slash || !slash[1])
		return err_set(e, "path must be an absolute file path, not %s", p);
	buf_add(dir, p, slash == p ? 1 : (size_t)(slash - p));
	*base = slash + 1;
	return 0;
}

/* "/v1/envs/<id>/files?service=S&path=DIR" */
static int files_path(struct cli *c, const struct json *args, const char *dir, struct buf *path, struct err *e)
{
	if (env_path(c, args, "/files?service=", path, e) < 0)
		return -1;
	http_pct_encode(path, arg_str(args, "service", MCP_SERVICE_DEFAULT), "");
	buf_adds(path, "&path=");
	http_pct_encode(path, dir, "");
	return 0;
}

static int decode_content(const struct json *args, struct buf *data, struct err *e)
{
	const struct json *content = json_get(args, "content");
	const char *enc = arg_str(args, "encoding", "text");

	if (!content || content->type != JSON_STRING)
		return err_set(e, "argument content (a string) is required");
	if (str_eq(enc, "base64"))
		return enc_base64_decode(data, content->u.str.s, content->u.str.len, ENC_BASE64, e);
	if (!str_eq(enc, "text"))
		return err_set(e, "encoding is text or base64, not %s", enc);
	buf_add(data, content->u.str.s, content->u.str.len);
	return 0;
}

static int tool_files_put(struct cli *c, const struct json *args, struct json **out, struct err *e)
{
	struct buf dir = BUF_INIT, data = BUF_INIT, tar, path = BUF_INIT, resp = BUF_INIT;
	struct tar_writer *w = NULL;
	const char *file, *base = NULL;
	int rc = -1;

	buf_init(&tar, CLI_FILES_MAX);
	if (need_str(args, "path", &file, e) < 0 || split_path(file, &dir, &base, e) < 0 ||
	    decode_content(args, &data, e) < 0 || files_path(c, args, dir.data, &path, e) < 0)
		goto out;
	w = tar_writer_new_buf(&tar);
	if (tar_write_file(w, base, NULL, data.data ? data.data : "", data.len, e) < 0 ||
	    tar_writer_finish(w, e) < 0 ||
	    cli_call_raw(c, "PUT", path.data, "application/x-tar", tar.data, tar.len, &resp, e) < 0)
		goto out;
	*out = json_new_object();
	json_object_set_str(*out, "path", file);
	json_object_set_int(*out, "bytes", (int64_t)data.len);
	rc = 0;
out:
	tar_writer_free(w);
	buf_release(&dir);
	buf_release(&data);
	buf_release(&tar);
	buf_release(&path);
	buf_release(&resp);
	return rc;
}

/* The first regular file of an archive into data (GET /files puts the file first). */
static int first_file(const struct buf *tar, struct buf *data, struct err *e)
{
	struct tar_reader *r = tar_reader_new();
	size_t off = 0, used;
	struct tar_event ev;
	bool found = false, in_file = false;
	int k = TAR_EV_MORE;

	while (off < tar->len && (k = tar_reader_feed(r, tar->data + off, tar->len - off, &used, &ev, e)) >= 0) {
		off += used;
		if (k == TAR_EV_ENTRY && found)
			break;
		if (k == TAR_EV_ENTRY)
			found = in_file = ev.entry->type == TAR_REG;
		else if (k == TAR_EV_DATA && in_file)
			buf_add(data, ev.data, ev.len);
		else if (k == TAR_EV_END || k == TAR_EV_MORE)
			break;
	}
	tar_reader_free(r);
	if (k < 0)
		return -1;
	return found ? 0 : err_set(e, "the archive holds no regular file (a directory?)");
}

static int tool_files_get(struct cli *c, const struct json *args, struct json **out, struct err *e)
{
	struct buf path = BUF_INIT, tar, data = BUF_INIT, b64 = BUF_INIT;
	const char *file, *enc = arg_str(args, "encoding", "text");
	int rc = -1;

	buf_init(&tar, CLI_MAX_RESPONSE);
	if (!str_eq(enc, "text") && !str_eq(enc, "base64")) {
		err_set(e, "encoding is text or base64, not %s", enc);
		goto out;
	}
	if (need_str(args, "path", &file, e) < 0 || files_path(c, args, file, &path, e) < 0 ||
	    cli_call_raw(c, "GET", path.data, NULL, NULL, 0, &tar, e) < 0 || first_file(&tar, &data, e) < 0)
		goto out;
	if (str_eq(enc, "text") && !utf8_valid(data.data ? data.data : "", data.len)) {
		err_set(e, "%s is not UTF-8 text: ask for encoding base64", file);
		goto out;
	}
	*out = json_new_object();
	json_object_set_str(*out, "path", file);
	json_object_set_str(*out, "encoding", enc);
	if (str_eq(enc, "base64")) {
		enc_base64_encode(&b64, data.data ? data.data : "", data.len, ENC_BASE64);
		json_object_set(*out, "content", json_new_strn(b64.data ? b64.data : "", b64.len));
	} else {
		json_object_set(*out, "content", json_new_strn(data.data ? data.data : "", data.len));
	}
	rc = 0;
out:
	buf_release(&path);
	buf_release(&tar);
	buf_release(&data);
	buf_release(&b64);
	return rc;
}

/* Snapshot env: the new version's id into version. */
static int snapshot(struct cli *c, const struct json *args, char *version, size_t size, struct err *e)
{
	struct buf path = BUF_INIT;
	struct json *final = NULL;
	int rc = env_path(c, args, "/snapshot", &path, e);

	if (rc == 0)
		rc = run_deployment(c, "POST", path.data, NULL, &final, e);
	if (rc == 0 && !json_get_str(json_get(final, "deployment"), "VersionID"))
		rc = err_set(e, "the snapshot names no version");
	if (rc == 0)
		str_copy(version, size, json_get_str(json_get(final, "deployment"), "VersionID"));
	json_free(final);
	buf_release(&path);
	return rc;
}

static int tool_snapshot(struct cli *c, const struct json *args, struct json **out, struct err *e)
{
	char version[CLI_ID_MAX];

	if (snapshot(c, args, version, sizeof(version), e) < 0)
		return -1;
	*out = json_new_object();
	json_object_set_str(*out, "version", version);
	return 0;
}

static int tool_fork(struct cli *c, const struct json *args, struct json **out, struct err *e)
{
	char version[CLI_ID_MAX];
	struct json *body;
	int rc;

	if (snapshot(c, args, version, sizeof(version), e) < 0)
		return -1;
	body = json_new_object();
	json_object_set_str(body, "from_version", version);
	if (json_get_str(args, "name"))
		json_object_set_str(body, "name", json_get_str(args, "name"));
	rc = post_sandbox(c, body, out, e);
	if (rc == 0)
		json_object_set_str(*out, "version", version);
	json_free(body);
	return rc;
}

static int tool_verify(struct cli *c, const struct json *args, struct json **out, struct err *e)
{
	struct buf path = BUF_INIT;
	struct json *final = NULL, *body = json_new_object(), *resp = NULL;
	const struct json *phases;
	int rc;

	json_object_set_bool(body, "resume", false);
	rc = env_path(c, args, "/verify", &path, e);
	if (rc == 0 && (rc = cli_call(c, "POST", path.data, body, &resp, e)) == 0)
		rc = follow(c, resp, &final, e);
	if (rc == 0) {
		*out = json_new_object();
		json_object_set_str(*out, "status", json_get_str(json_get(final, "deployment"), "Status"));
		phases = json_get(final, "phases");
		for (size_t i = 0; i < json_len(phases); i++)
			if (str_eq(json_get_str(json_at(phases, i), "Name"), "verdict"))
				json_object_set(*out, "verdict", json_dup(json_get(json_at(phases, i), "Evidence")));
	}
	json_free(final);
	json_free(resp);
	json_free(body);
	buf_release(&path);
	return rc;
}

static int tool_destroy(struct cli *c, const struct json *args, struct json **out, struct err *e)
{
	struct buf path = BUF_INIT;
	struct json *final = NULL;
	int rc = env_path(c, args, "", &path, e);

	if (rc == 0)
		rc = run_deployment(c, "DELETE", path.data, NULL, &final, e);
	if (rc == 0) {
		*out = json_new_object();
		json_object_set_str(*out, "status", "destroyed");
	}
	json_free(final);
	buf_release(&path);
	return rc;
}

static int tool_get(struct cli *c, const struct json *args, struct json **out, struct err *e)
{
	struct buf path = BUF_INIT;
	int rc = env_path(c, args, "", &path, e);

	if (rc == 0)
		rc = cli_call(c, "GET", path.data, NULL, out, e);
	buf_release(&path);
	return rc;
}

static int tool_logs(struct cli *c, const struct json *args, struct json **out, struct err *e)
{
	struct buf path = BUF_INIT;
	int rc = env_path(c, args, "/logs?tail=", &path, e);

	if (rc == 0) {
		buf_addf(&path, "%lld", (long long)json_get_int(args, "tail", 100));
		if (json_get_str(args, "service")) {
			buf_adds(&path, "&service=");
			http_pct_encode(&path, json_get_str(args, "service"), "");
		}
		rc = cli_call(c, "GET", path.data, NULL, out, e);
	}
	buf_release(&path);
	return rc;
}

static const struct tool tools[] = {
	{ "create", "Create a sandbox from an image and wait until it is healthy; answers its id.",
	  "{\"type\":\"object\",\"properties\":{\"image\":{\"type\":\"string\"},"
	  "\"cmd\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
	  "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}},"
	  "\"egress\":{\"type\":\"string\",\"enum\":[\"deny\",\"allow\"]},\"name\":{\"type\":\"string\"},"
	  "\"project\":{\"type\":\"string\"},\"timeout_sec\":{\"type\":\"integer\"},"
	  "\"idle_ttl_sec\":{\"type\":\"integer\"},\"max_ttl_sec\":{\"type\":\"integer\"}},"
	  "\"required\":[\"image\"]}",
	  tool_create },
	{ "exec", "Run a command (an argv list, no shell) in a service; answers stdout, stderr and exit_code.",
	  "{\"type\":\"object\",\"properties\":{" ENV_PROP ",\"cmd\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},"
	  "\"minItems\":1}," SERVICE_PROP ",\"timeout_sec\":{\"type\":\"integer\"}},\"required\":[\"env\",\"cmd\"]}",
	  tool_exec },
	{ "files_put", "Write one file (text, or base64 for bytes) into a service; parents are created.",
	  "{\"type\":\"object\",\"properties\":{" ENV_PROP ",\"path\":{\"type\":\"string\"},"
	  "\"content\":{\"type\":\"string\"}," ENC_PROP "," SERVICE_PROP "},\"required\":[\"env\",\"path\",\"content\"]}",
	  tool_files_put },
	{ "files_get", "Read one file of a service (text, or base64 for bytes).",
	  "{\"type\":\"object\",\"properties\":{" ENV_PROP ",\"path\":{\"type\":\"string\"}," ENC_PROP "," SERVICE_PROP
	  "},\"required\":[\"env\",\"path\"]}",
	  tool_files_get },
	{ "snapshot", "Capture the environment's live state as a new version; answers its id.",
	  "{\"type\":\"object\",\"properties\":{" ENV_PROP "},\"required\":[\"env\"]}", tool_snapshot },
	{ "fork", "Snapshot the environment and start a new sandbox from that version; answers the fork's id.",
	  "{\"type\":\"object\",\"properties\":{" ENV_PROP ",\"name\":{\"type\":\"string\"}},\"required\":[\"env\"]}",
	  tool_fork },
	{ "verify", "Run the environment's verifier; answers the status and the verdict (reward).",
	  "{\"type\":\"object\",\"properties\":{" ENV_PROP "},\"required\":[\"env\"]}", tool_verify },
	{ "destroy", "Destroy the environment (its containers and volumes) and wait until it is gone.",
	  "{\"type\":\"object\",\"properties\":{" ENV_PROP "},\"required\":[\"env\"]}", tool_destroy },
	{ "get", "The environment's record: status, versions, endpoints.",
	  "{\"type\":\"object\",\"properties\":{" ENV_PROP "},\"required\":[\"env\"]}", tool_get },
	{ "logs", "The last lines of a service's stdout and stderr.",
	  "{\"type\":\"object\",\"properties\":{" ENV_PROP "," SERVICE_PROP ",\"tail\":{\"type\":\"integer\"}},"
	  "\"required\":[\"env\"]}",
	  tool_logs },
};

#define NTOOLS (sizeof(tools) / sizeof(tools[0]))

static const struct tool *find(const char *name)
{
	for (size_t i = 0; i < NTOOLS; i++)
		if (str_eq(tools[i].name, name))
			return &tools[i];
	return NULL;
}

bool mcp_tool_known(const char *name)
{
	return find(name) != NULL;
}

struct json *mcp_tools_list(void)
{
	struct json *list = json_new_array(), *res = json_new_object();

	for (size_t i = 0; i < NTOOLS; i++) {
		struct json *t = json_new_object(), *schema = NULL;
		struct err e;

		if (json_parse(tools[i].schema, strlen(tools[i].schema), NULL, &schema, &e) < 0)
			schema = json_new_object();	/* a typo here fails the unit test */
		json_object_set_str(t, "name", tools[i].name);
		json_object_set_str(t, "description", tools[i].description);
		json_object_set(t, "inputSchema", schema);
		json_array_push(list, t);
	}
	json_object_set(res, "tools", list);
	return res;
}

static struct json *result(const char *text, size_t len, bool is_error)
{
	struct json *r = json_new_object(), *content = json_new_array(), *item = json_new_object();

	json_object_set_str(item, "type", "text");
	json_object_set(item, "text", json_new_strn(text, len));
	json_array_push(content, item);
	json_object_set(r, "content", content);
	json_object_set_bool(r, "isError", is_error);
	return r;
}

struct json *mcp_tool_call(struct cli *c, const char *name, const struct json *args)
{
	const struct tool *t = find(name);
	struct json *out = NULL, *r;
	struct buf text = BUF_INIT;
	struct err e = { 0 };

	if (!c)
		return result(CLI_NOT_SIGNED_IN, strlen(CLI_NOT_SIGNED_IN), true);
	if (!t || t->run(c, args, &out, &e) < 0) {
		json_free(out);
		return result(e.msg[0] ? e.msg : "failed", strlen(e.msg[0] ? e.msg : "failed"), true);
	}
	json_write(&text, out ? out : json_get(NULL, ""), JSON_COMPACT);
	r = result(text.data ? text.data : "null", text.data ? text.len : 4, false);
	json_free(out);
	buf_release(&text);
	return r;
}
