/*
 * mcp.c: the JSON-RPC side of denv mcp: initialize, ping, tools/list,
 * tools/call and the notifications, with the error codes JSON-RPC 2.0
 * names. The tools themselves are in mcp_tools.c.
 */
#include "cli/mcp.h"

#include <string.h>

#include "base/err.h"
#include "base/str.h"
#include "cli/mcp_tools.h"
#include "json/json.h"

/* The handshake revisions we speak; all carry tools the same way. */
static const char *const versions[] = { "2024-11-05", "2025-03-26", "2025-06-18", MCP_PROTOCOL_LATEST, NULL };

static struct json *envelope(const struct json *id)
{
	struct json *r = json_new_object();

	json_object_set_str(r, "jsonrpc", "2.0");
	json_object_set(r, "id", id ? json_dup(id) : json_new_null());
	return r;
}

static struct json *rpc_error(const struct json *id, int code, const char *msg)
{
	struct json *r = envelope(id), *err = json_new_object();

	json_object_set_int(err, "code", code);
	json_object_set_str(err, "message", msg);
	json_object_set(r, "error", err);
	return r;
}

static struct json *rpc_result(const struct json *id, struct json *result)
{
	struct json *r = envelope(id);

	json_object_set(r, "result", result);
	return r;
}

static struct json *initialize(struct mcp *m, const struct json *params)
{
	const char *want = json_get_str(params, "protocolVersion");
	const char *ver = MCP_PROTOCOL_LATEST;
	struct json *res = json_new_object(), *caps = json_new_object(), *tools = json_new_object();
	struct json *info = json_new_object();

	for (int i = 0; want && versions[i]; i++)
		if (str_eq(versions[i], want))
			ver = versions[i];
	json_object_set_str(res, "protocolVersion", ver);
	json_object_set_bool(tools, "listChanged", false);
	json_object_set(caps, "tools", tools);
	json_object_set(res, "capabilities", caps);
	json_object_set_str(info, "name", "denv");
	json_object_set_str(info, "version", m->version ? m->version : "");
	json_object_set(res, "serverInfo", info);
	json_object_set_str(res, "instructions",
			    "Sandboxes of a denv control plane: create one from an image, exec in it, put and get "
			    "files, snapshot, fork, verify, destroy. Environments are named by id (env_...).");
	m->initialized = true;
	return res;
}

static struct json *call_tool(struct mcp *m, const struct json *id, const struct json *params)
{
	const char *name = json_get_str(params, "name");
	const struct json *args = json_get(params, "arguments");

	if (!name)
		return rpc_error(id, MCP_INVALID_PARAMS, "tools/call needs params.name");
	if (args && args->type != JSON_OBJECT)
		return rpc_error(id, MCP_INVALID_PARAMS, "tools/call: arguments must be an object");
	if (!mcp_tool_known(name))
		return rpc_error(id, MCP_INVALID_PARAMS, "unknown tool");
	return rpc_result(id, mcp_tool_call(m->c, name, args));
}

/* The answer to a request (id present), by method. */
static struct json *dispatch(struct mcp *m, const struct json *id, const char *method, const struct json *params)
{
	if (params && params->type != JSON_OBJECT && params->type != JSON_NULL)
		return rpc_error(id, MCP_INVALID_PARAMS, "params must be an object");
	if (str_eq(method, "initialize"))
		return rpc_result(id, initialize(m, params));
	if (str_eq(method, "ping"))
		return rpc_result(id, json_new_object());
	if (str_eq(method, "tools/list"))
		return rpc_result(id, mcp_tools_list());
	if (str_eq(method, "tools/call"))
		return call_tool(m, id, params);
	return rpc_error(id, MCP_METHOD_NOT_FOUND, "method not found");
}

/* A request's id is a string or an integer (JSON-RPC 2.0 allows no other). */
static bool id_ok(const struct json *id)
{
	return id->type == JSON_STRING || id->type == JSON_INT;
}

static struct json *answer(struct mcp *m, const char *msg, size_t len)
{
	struct json_limits lim = { .max_depth = MCP_JSON_DEPTH, .max_size = MCP_MESSAGE_MAX };
	struct json *doc = NULL, *r;
	const struct json *id;
	const char *method;
	struct err e;

	if (json_parse(msg, len, &lim, &doc, &e) < 0)
		return rpc_error(NULL, MCP_PARSE_ERROR, "parse error");
	if (doc->type != JSON_OBJECT) {
		r = rpc_error(NULL, MCP_INVALID_REQUEST, "a message is one JSON object (no batches)");
		json_free(doc);
		return r;
	}
	id = json_get(doc, "id");
	method = json_get_str(doc, "method");
	if (!method) {
		/* A response to us (we send no requests) or junk without an id: no answer. */
		r = id && !json_get(doc, "result") && !json_get(doc, "error")
			    ? rpc_error(id_ok(id) ? id : NULL, MCP_INVALID_REQUEST, "no method")
			    : NULL;
	} else if (!id) {
		r = NULL;	/* notifications/initialized, cancelled...: nothing to answer */
	} else if (!id_ok(id) || !str_eq(json_get_str(doc, "jsonrpc"), "2.0")) {
		r = rpc_error(id_ok(id) ? id : NULL, MCP_INVALID_REQUEST, "not a JSON-RPC 2.0 request");
	} else {
		r = dispatch(m, id, method, json_get(doc, "params"));
	}
	json_free(doc);
	return r;
}

int mcp_handle(struct mcp *m, const char *msg, size_t len, struct buf *out)
{
	struct json *r = answer(m, msg, len);
	int rc;

	if (!r)
		return 0;
	rc = json_write(out, r, JSON_COMPACT) < 0 ? -1 : 1;
	json_free(r);
	return rc;
}

bool mcp_is_initialize(const char *msg, size_t len)
{
	struct json_limits lim = { .max_depth = MCP_JSON_DEPTH, .max_size = MCP_MESSAGE_MAX };
	struct json *doc = NULL;
	struct err e;
	bool yes;

	if (json_parse(msg, len, &lim, &doc, &e) < 0)
		return false;
	yes = json_get(doc, "id") && str_eq(json_get_str(doc, "method"), "initialize");
	json_free(doc);
	return yes;
}
