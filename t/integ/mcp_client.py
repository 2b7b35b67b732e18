"""t/integ/mcp_client.py: drive `denv mcp` with the real mcp SDK as the
client, over stdio (the server spawned by the SDK) or streamable HTTP
(a URL of a running `denv mcp --http`). Prints TAP lines (t/lib/tap.py).

    mcp_client.py stdio DENV_BIN | http URL
"""
import asyncio
import base64
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import tap  # noqa: E402
from mcp import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

WANT_TOOLS = {"create", "exec", "files_put", "files_get", "snapshot", "fork", "verify", "destroy"}


async def call(s, name, args):
    r = await s.call_tool(name, args, read_timeout_seconds=600)
    text = r.content[0].text if r.content else ""
    return r.is_error, text


async def scenario(s, where):
    init = await s.initialize()
    tap.ok(init.server_info.name == "denv", f"{where}: initialize names the server")
    tools = (await s.list_tools()).tools
    names = {t.name for t in tools}
    tap.ok(WANT_TOOLS <= names, f"{where}: tools/list offers the sandbox API", names)
    tap.ok(all(t.input_schema.get("type") == "object" for t in tools), f"{where}: each tool has an object schema")
    await s.send_ping()
    err, text = await call(s, "create", {"image": "denv-test/busybox:latest", "cmd": ["sleep", "3600"]})
    tap.ok(not err, f"{where}: create", text)
    if err:
        return
    env = json.loads(text)["id"]
    err, text = await call(s, "exec", {"env": env, "cmd": ["sh", "-c", "echo hi; echo oops >&2; exit 3"]})
    d = json.loads(text) if not err else {}
    tap.ok(not err and d.get("stdout") == "hi\n" and d.get("exit_code") == 3, f"{where}: exec answers output and code", text)
    err, text = await call(s, "files_put", {"env": env, "path": "/work/notes/a.txt", "content": "héllo\n"})
    tap.ok(not err, f"{where}: files_put text", text)
    blob = bytes(range(256))
    err, text = await call(s, "files_put", {"env": env, "path": "/work/b.bin", "encoding": "base64",
                                            "content": base64.b64encode(blob).decode()})
    tap.ok(not err, f"{where}: files_put base64", text)
    err, text = await call(s, "files_get", {"env": env, "path": "/work/notes/a.txt"})
    tap.ok(not err and json.loads(text)["content"] == "héllo\n", f"{where}: files_get text round-trips", text)
    err, text = await call(s, "files_get", {"env": env, "path": "/work/b.bin", "encoding": "base64"})
    tap.ok(not err and base64.b64decode(json.loads(text)["content"]) == blob,
           f"{where}: files_get base64 round-trips all 256 bytes", text[:200])
    err, text = await call(s, "files_get", {"env": env, "path": "/work/b.bin"})
    tap.ok(err and "base64" in text, f"{where}: bytes asked for as text are a tool error", text)
    err, text = await call(s, "exec", {"env": "env_nosuchthing", "cmd": ["true"]})
    tap.ok(err and text, f"{where}: a refused call is a tool error with the API's message", text)
    err, text = await call(s, "snapshot", {"env": env})
    tap.ok(not err and json.loads(text)["version"], f"{where}: snapshot names a version", text)
    err, text = await call(s, "fork", {"env": env})
    tap.ok(not err and json.loads(text)["id"] != env, f"{where}: fork makes a new sandbox", text)
    fork = json.loads(text)["id"] if not err else None
    if fork:
        err, text = await call(s, "files_get", {"env": fork, "path": "/work/notes/a.txt"})
        tap.ok(not err and json.loads(text)["content"] == "héllo\n", f"{where}: the fork has the file", text)
        err, text = await call(s, "destroy", {"env": fork})
        tap.ok(not err, f"{where}: destroy the fork", text)
    # A bare sandbox has no verifier: the call must still come back as an answer, not hang or raise.
    err, text = await call(s, "verify", {"env": env})
    tap.ok(text and (err or "status" in json.loads(text)), f"{where}: verify answers (a verdict or why not)", text)
    print(f"# {where}: verify said {text[:160]!r}")
    err, text = await call(s, "destroy", {"env": env})
    tap.ok(not err, f"{where}: destroy", text)
    err, text = await call(s, "get", {"env": env})
    tap.ok(not err and json.loads(text)["environment"]["Status"] == "destroyed", f"{where}: get shows it destroyed", text)


async def verify_project(s, ref):
    """verify on a deployed environment with a verifier (MCP_VERIFY_ENV, <project>/<env>)."""
    err, text = await call(s, "files_put", {"env": ref, "service": "box", "path": "/home/agent/answer.txt",
                                            "content": "42\n"})
    tap.ok(not err, "files_put into a named service of <project>/<env>", text)
    err, text = await call(s, "verify", {"env": ref})
    d = json.loads(text) if not err else {}
    tap.ok(d.get("status") == "succeeded" and (d.get("verdict") or {}).get("reward") == 1,
           "verify answers the verdict with its reward", text)


async def main():
    kind, target = sys.argv[1], sys.argv[2]
    if kind == "stdio":
        params = StdioServerParameters(command=target, args=["mcp"], env=dict(os.environ))
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await scenario(s, "stdio")
            if os.environ.get("MCP_VERIFY_ENV"):
                await verify_project(s, os.environ["MCP_VERIFY_ENV"])
    else:
        async with streamable_http_client(target) as (r, w), ClientSession(r, w) as s:
            await scenario(s, "http")


asyncio.run(main())
sys.exit(tap.finish())
