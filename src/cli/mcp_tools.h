/* mcp_tools.h: the tools denv mcp offers (mcp_tools.c), each one or a few
 * calls of the REST API with the caller's key. */
#ifndef DENV_CLI_MCP_TOOLS_H
#define DENV_CLI_MCP_TOOLS_H

#include <stdbool.h>

struct cli;
struct json;

/* {tools: [{name, description, inputSchema}]} */
struct json *mcp_tools_list(void);
bool mcp_tool_known(const char *name);
/* A CallToolResult: {content: [{type: text, text}], isError}. A refusal
 * (a missing argument, the API's error) is isError with the message. */
struct json *mcp_tool_call(struct cli *c, const char *name, const struct json *args);

#endif
