/* Unit tests: denv mcp's message handling (mcp.c) and the tools' argument
 * checks that come before any API call (mcp_tools.c): the JSON-RPC error
 * codes, the version answer, notifications without an answer, the tool
 * list's schemas, and refusals as tool results with isError. */
#include <string.h>

#include "cli/cli.h"
#include "cli/mcp.h"
#include "json/json.h"
#include "tap.h"

/* The answer to msg parsed (NULL when there is none). */
static struct json *ask(struct mcp *m, const char *msg)
{
	struct buf out = BUF_INIT;
	struct json *doc = NULL;
	struct err e;

	if (mcp_handle(m, msg, strlen(msg), &out) == 1 && json_parse(out.data, out.len, NULL, &doc, &e) < 0)
		tap_diag("answer is not JSON: %s", out.data);
	buf_release(&out);
	return doc;
}

static int64_t code_of(struct mcp *m, const char *msg)
{
	struct json *r = ask(m, msg);
	int64_t code = json_get_int(json_get(r, "error"), "code", 0);

	json_free(r);
	return code;
}

static void protocol(void)
{
	static const char init[] = "{\"id\":1,\"method\":\"initialize\"}", note[] = "{\"method\":\"initialize\"}";
	struct mcp m = { .version = "9.9" };
	struct json *r;

	r = ask(&m, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-03-26\"}}");
	is_str(json_get_str(json_get(r, "result"), "protocolVersion"), "2025-03-26", "a version we speak is echoed");
	is_str(json_get_str(json_get(json_get(r, "result"), "serverInfo"), "version"), "9.9", "serverInfo has ours");
	is_int(json_get_int(r, "id", 0), 7, "the id is the request's");
	ok(json_get(json_get(json_get(r, "result"), "capabilities"), "tools"), "it offers tools");
	ok(m.initialized, "initialized is set");
	json_free(r);
	r = ask(&m, "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"1999-01-01\"}}");
	is_str(json_get_str(json_get(r, "result"), "protocolVersion"), MCP_PROTOCOL_LATEST, "an unknown one gets our latest");
	is_str(json_get_str(r, "id"), "x", "string ids are kept");
	json_free(r);
	ok(!ask(&m, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"), "a notification has no answer");
	ok(!ask(&m, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"), "nor has a response");
	r = ask(&m, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");
	ok(json_get(r, "result") && json_get(r, "result")->type == JSON_OBJECT, "ping answers {}");
	json_free(r);
	is_int(code_of(&m, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/list\"}"), MCP_METHOD_NOT_FOUND,
	       "an unknown method is -32601");
	is_int(code_of(&m, "{\"jsonrpc\":\"2.0\",\"id\":3,"), MCP_PARSE_ERROR, "malformed JSON is -32700");
	is_int(code_of(&m, "[{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}]"), MCP_INVALID_REQUEST,
	       "a batch is -32600");
	is_int(code_of(&m, "{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}"), MCP_INVALID_REQUEST,
	       "a boolean id is -32600");
	is_int(code_of(&m, "{\"id\":4,\"method\":\"ping\"}"), MCP_INVALID_REQUEST, "no jsonrpc member is -32600");
	is_int(code_of(&m, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\",\"params\":[1]}"), MCP_INVALID_PARAMS,
	       "array params are -32602");
	ok(mcp_is_initialize(init, strlen(init)), "mcp_is_initialize: yes");
	ok(!mcp_is_initialize(note, strlen(note)), "  not without an id");
}

static void tools_list(void)
{
	struct mcp m = { 0 };
	struct json *r = ask(&m, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	const struct json *tools = json_get(json_get(r, "result"), "tools");
	static const char *const want[] = { "create", "exec", "files_put", "files_get", "snapshot", "fork",
					    "verify", "destroy", NULL };
	int good = 0;

	for (int i = 0; want[i]; i++)
		for (size_t k = 0; k < json_len(tools); k++)
			if (!strcmp(json_get_str(json_at(tools, k), "name"), want[i]))
				good++;
	is_int(good, 8, "tools/list has the sandbox API's tools");
	good = 0;
	for (size_t k = 0; k < json_len(tools); k++) {
		const struct json *s = json_get(json_at(tools, k), "inputSchema");
		const struct json *req = json_get(s, "required");
		bool all = json_get_str(s, "type") && !strcmp(json_get_str(s, "type"), "object") && json_len(req) > 0;

		for (size_t j = 0; all && j < json_len(req); j++)
			all = json_get(json_get(s, "properties"), json_at(req, j)->u.str.s) != NULL;
		good += all;
	}
	is_int(good, (long long)json_len(tools), "every schema parses, is an object and defines what it requires");
	json_free(r);
}

/* tools/call name with arguments args: the result's text, and whether isError. */
static bool call(struct mcp *m, const char *name, const char *args, char *text, size_t size)
{
	struct buf msg = BUF_INIT;
	struct json *r, *res;
	bool is_error;

	buf_addf(&msg, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\",\"arguments\":%s}}",
		 name, args);
	r = ask(m, msg.data);
	res = json_get(r, "result");
	is_error = json_get_bool(res, "isError", false);
	snprintf(text, size, "%s", json_get_str(json_at(json_get(res, "content"), 0), "text") ?
		 json_get_str(json_at(json_get(res, "content"), 0), "text") : "");
	json_free(r);
	buf_release(&msg);
	return is_error;
}

static void tool_refusals(void)
{
	struct cli c;
	struct mcp m = { 0 };
	char text[512];

	is_int(code_of(&m, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"nope\"}}"),
	       MCP_INVALID_PARAMS, "an unknown tool is -32602");
	is_int(code_of(&m, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{}}"), MCP_INVALID_PARAMS,
	       "no tool name is -32602");
	is_int(code_of(&m, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"get\","
			   "\"arguments\":[]}}"),
	       MCP_INVALID_PARAMS, "array arguments are -32602");
	ok(call(&m, "get", "{\"env\":\"env_x\"}", text, sizeof(text)), "without a client a call is a tool error");
	is_str(text, CLI_NOT_SIGNED_IN, "  saying how to sign in");
	cli_init(&c);
	m.c = &c;
	ok(call(&m, "exec", "{\"env\":\"env_x\"}", text, sizeof(text)), "exec without cmd is a tool error");
	is_str(text, "argument cmd (a non-empty array of strings) is required", "  naming the argument");
	ok(call(&m, "create", "{}", text, sizeof(text)), "create without image");
	is_str(text, "argument image (a string) is required", "  naming it");
	ok(call(&m, "files_put", "{\"env\":\"env_x\",\"path\":\"rel.txt\",\"content\":\"a\"}", text, sizeof(text)),
	   "files_put of a relative path");
	is_str(text, "path must be an absolute file path, not rel.txt", "  says so");
	ok(call(&m, "files_put", "{\"env\":\"env_x\",\"path\":\"/a\",\"content\":\"!!\",\"encoding\":\"base64\"}", text,
		sizeof(text)),
	   "files_put of bad base64");
	ok(strstr(text, "base64") != NULL, "  says base64");
	ok(call(&m, "files_get", "{\"env\":\"env_x\",\"path\":\"/a\",\"encoding\":\"hex\"}", text, sizeof(text)),
	   "files_get with an unknown encoding");
	is_str(text, "encoding is text or base64, not hex", "  names the choices");
	ok(call(&m, "destroy", "{}", text, sizeof(text)), "destroy without env");
	is_str(text, "argument env (a string) is required", "  naming it");
	cli_release(&c);
}

int main(void)
{
	protocol();
	tools_list();
	tool_refusals();
	return tap_done();
}
