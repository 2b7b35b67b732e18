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
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import yaml

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

    # A denv version of the same image with an agent and a verifier: rollouts
    # fork it (from_denv_version); fork() and grade() act on the one running.
    compose = {"x-denv": {"egress": "deny", "agent": {"service": "main"},
                          "verifier": {"service": "main", "collect": ["/app/env.py"],
                                       "command": ["sh", "-c", "test -s /submission/app/env.py && "
                                                   "echo 1 > /logs/verifier/reward.txt"]}},
               "services": {"main": {"image": image, "user": "1000:1000", "ports": ["8765"]}}}
    c.ensure_project("hud")
    dep = c.deploy("hud", yaml.safe_dump(compose), env=f"hud-version-{os.urandom(3).hex()}", timeout_sec=600)
    assert dep.get("Status") == "succeeded", dep
    version = dep["VersionID"]
    rt2 = DenvRuntime.from_denv_version(version)
    job2 = await task.run(agent, runtime=rt2)
    report["version_rewards"] = rewards_of(job2)
    report["version_parents"] = [c.environment(e).get("ParentVersionID") for e in rt2.environments]
    async with rt2(task):
        child = await asyncio.to_thread(rt2.fork)
        report["fork_parent_env"] = c.environment(child.id).get("ParentVersionID") is not None
        c.destroy(child.id)
        v = await asyncio.to_thread(rt2.grade)
        report["grade"] = {"reward": v.reward, "source": v.source}
    report["version"] = version
    c.destroy(str(dep.get("EnvID")))
    srv.shutdown()
    return report


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2])), default=str))
