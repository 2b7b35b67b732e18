/*
 * mcp.h: denv mcp, a Model Context Protocol server (JSON-RPC 2.0) that
 * offers the sandbox API as tools. mcp.c holds the transport-free part:
 * one message in, at most one answer out. cmd_mcp.c carries messages over
 * stdio (one per line) or streamable HTTP (one per POST /mcp).
 */
#ifndef DENV_CLI_MCP_H
#define DENV_CLI_MCP_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"

struct cli;

#define MCP_MESSAGE_MAX ((size_t)48 << 20)	/* one message: a line on stdio, a POST body */
#define MCP_JSON_DEPTH 64			/* nesting a message may have */
#define MCP_PROTOCOL_LATEST "2025-11-25"	/* answered when the client asks for one we lack */
#define MCP_DEPLOY_WAIT_S 900			/* a tool follows a deployment this long */
#define MCP_SERVICE_DEFAULT "main"		/* the one service of a POST /v1/sandboxes sandbox */

/* JSON-RPC 2.0 error codes. */
#define MCP_PARSE_ERROR (-32700)
#define MCP_INVALID_REQUEST (-32600)
#define MCP_METHOD_NOT_FOUND (-32601)
#define MCP_INVALID_PARAMS (-32602)

struct mcp {
	struct cli *c;		/* the API client, the caller's key (NULL: every tool call fails) */
	const char *version;	/* serverInfo.version */
	bool initialized;	/* an initialize was answered */
};

/*
 * Handle one message (len bytes of JSON). 1 with the answer's JSON text in
 * out, or 0 when there is none (a notification, a response from the client).
 * Protocol failures are answers (JSON-RPC errors); a tool that fails is a
 * result with isError. -1 only when out's cap is reached.
 */
int mcp_handle(struct mcp *m, const char *msg, size_t len, struct buf *out);
/* Whether msg is an initialize request (the HTTP transport issues a session then). */
bool mcp_is_initialize(const char *msg, size_t len);

#endif
