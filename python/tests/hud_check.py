"""HUD on denv, run by conformance.py's hud check under a Python that has hud 0.6 (3.11 or 3.12).

    python hud_check.py IMAGE ENV_PY

Runs HUD's reference letter-count task (ENV_PY, its source) through
``Task.run`` with ``denv.hud.DenvRuntime(IMAGE)`` as the runtime and HUD's own
OpenAI-compatible agent against a mock chat-completions server on loopback
that answers the right count. Prints one JSON line: the rewards, the
environments the runtime started, and what grade() and fork() gave.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hud.agents.openai_compatible.agent import OpenAIChatAgent, OpenAIChatConfig

from denv import Client
from denv.hud import DenvRuntime


class MockModel(BaseHTTPRequestHandler):
    """POST /v1/chat/completions: the count of the letter in the word the prompt names."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        text = " ".join(str(m.get("content")) for m in body.get("messages") or [])
        m = re.search(r"How many '(.)'s are in '([^']*)'", text)
        answer = str(m.group(2).count(m.group(1))) if m else "?"
        doc = {"id": "mock-1", "object": "chat.completion", "created": int(time.time()), "model": body.get("model"),
               "choices": [{"index": 0, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": answer}}],
               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
        out = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a: Any) -> None:
        pass


def load_tasks(path: str) -> list[Any]:
    spec = importlib.util.spec_from_file_location("hud_fixture_env", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return list(mod.tasks)


def rewards_of(job: Any) -> list[Any]:
    """Each run's reward (None for a run whose grade is an error, with the error kept)."""
    return [None if run.grade.is_error else run.reward for run in job.runs]


async def main(image: str, env_py: str) -> dict[str, Any]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), MockModel)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    agent = OpenAIChatAgent(OpenAIChatConfig(model="mock", api_key="mock",
                                             base_url=f"http://127.0.0.1:{srv.server_address[1]}/v1"))
    rt = DenvRuntime(image, runtime_config={"resources": {"cpu": 1, "memory_mb": 512}})
    task = load_tasks(env_py)[0]
    job = await task.run(agent, runtime=rt)
    report: dict[str, Any] = {"rewards": rewards_of(job), "environments": list(rt.environments),
                              "errors": [str(run.grade) for run in job.runs if run.grade.is_error]}
    c = Client()
    report["statuses"] = [c.environment(e).get("Status") for e in rt.environments]
    srv.shutdown()
    return report


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2])), default=str))
