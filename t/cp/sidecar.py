"""A scripted sidecar for testing denv-cp's host hub (protocol.md).

It joins with a djt_ token or reconnects with its dhs_ secret, sends
heartbeats, acks every command, answers from its own log when a command id
comes again, and produces canned results. `plan` scripts what happens per
command kind: a list of actions consumed in order ("ok", "fail:<msg>",
"drop" = record the result then drop the stream and come back, "stall" =
never answer, "delay:<sec>", "hold" = answer when the test calls release()).

Chunks (doc/host-stream-chunks.md): an archive travels as chunk frames
{"type":"chunk","command_id":..,"seq":N,"last":bool,"data":b64 of <= 1 MiB}
before the command (env.put) or the result (env.get), whose payload has
{tar_bytes, tar_sha256, tar_chunks}. Action "badsha" corrupts an env.get's
announced sha256.
"""
import asyncio
import base64
import hashlib
import json
import threading
import time

import websockets
from websockets.asyncio.client import connect

CHUNK = 1 << 20


class Sidecar:
    def __init__(self, port, token="", host_id="", secret="", hostname="box-1", heartbeat=0.5, thread=True):
        """thread=False: no thread of its own; the caller awaits run() on its
        loop (bench/lib/fleet.py runs a thousand on one)."""
        self.url = "ws://127.0.0.1:%d/v1/hosts/stream" % port
        self.token, self.host_id, self.secret = token, host_id, secret
        self.hostname = hostname
        self.heartbeat = heartbeat
        self.plan = {}          # kind -> [action, ...]
        self.log = {}           # command id -> result frame (the sidecar's command log)
        self.executed = {}      # command id -> times executed
        self.received = []      # (command id, kind, env_id, payload) per command frame
        self.files = {}         # (service, path) -> bytes
        self.closed = None      # (code, reason) when the control plane closed us
        self.connects = 0
        self.held = []          # (ws, frame, chunks) of commands on "hold"
        self.admitted = threading.Event()
        self.stop_flag = False
        self.loop = None
        self.ws = None
        self.thread = None
        if thread:
            self.thread = threading.Thread(target=lambda: asyncio.run(self.run()), daemon=True)
            self.thread.start()

    # ---- control from the test thread ----

    def wait_admitted(self, timeout=5):
        return self.admitted.wait(timeout)

    def wait_closed(self, timeout=5):
        deadline = time.time() + timeout
        while self.closed is None and time.time() < deadline:
            time.sleep(0.02)
        return self.closed

    def stop(self):
        self.stop_flag = True
        if self.loop and self.ws:
            asyncio.run_coroutine_threadsafe(self.ws.close(), self.loop)
        if self.thread:
            self.thread.join(5)

    def release(self):
        """Answer the commands on "hold" now (as "ok")."""
        held, self.held = self.held, []
        for ws, f, chunks in held:
            asyncio.run_coroutine_threadsafe(self._answer(ws, f, chunks, "ok"), self.loop).result(5)

    def commands(self, kind=None):
        return [c for c in self.received if kind is None or c[1] == kind]

    # ---- the sidecar ----

    async def run(self):
        """Stream, and come back after a drop, until refused or stopped."""
        self.loop = asyncio.get_running_loop()
        while not self.stop_flag:
            again = await self._session()
            if not again:
                return
            await asyncio.sleep(0.3)

    async def _session(self):
        """One stream. Returns whether to reconnect."""
        try:
            async with connect(self.url, max_size=32 << 20) as ws:
                self.ws = ws
                self.connects += 1
                await ws.send(json.dumps({"type": "hello", "payload": {
                    "host_id": self.host_id, "token": self.secret or self.token,
                    "capabilities": {"hostname": self.hostname, "storage": "dir", "docker": "20.10.24"}}}))
                hello = json.loads(await ws.recv())
                if hello.get("type") != "hello":
                    return False
                p = hello.get("payload") or {}
                if p.get("secret"):
                    self.host_id, self.secret = p["host_id"], p["secret"]
                self.admitted.set()
                beat = asyncio.create_task(self._beat(ws))
                chunks = {}
                try:
                    async for text in ws:
                        f = json.loads(text)
                        if f.get("type") == "chunk":
                            chunks.setdefault(f["command_id"], []).append(f)
                        elif f.get("type") == "command":
                            if await self._command(ws, f, chunks.pop(f["command_id"], [])) == "dropped":
                                return True
                finally:
                    beat.cancel()
        except websockets.exceptions.ConnectionClosed as ex:
            if ex.rcvd is not None and ex.rcvd.code == 1008:
                self.closed = (ex.rcvd.code, ex.rcvd.reason)
                return False
        except OSError:
            pass
        return not self.stop_flag

    async def _beat(self, ws):
        if not self.heartbeat:
            return
        while True:
            await asyncio.sleep(self.heartbeat)
            await ws.send(json.dumps({"type": "heartbeat", "host_id": self.host_id}))

    def _next_action(self, kind):
        steps = self.plan.get(kind)
        return steps.pop(0) if steps else "ok"

    async def _command(self, ws, f, chunks):
        cid, kind, payload = f["command_id"], f["kind"], f.get("payload") or {}
        self.received.append((cid, kind, f.get("env_id"), payload))
        await ws.send(json.dumps({"type": "ack", "host_id": self.host_id, "command_id": cid}))
        if cid in self.log:     # answered before: from the log, without running again
            for frame in self.log[cid]:
                await ws.send(json.dumps(frame))
            return None
        action = self._next_action(kind)
        if action == "stall":
            return None
        if action == "hold":
            self.held.append((ws, f, chunks))
            return None
        return await self._answer(ws, f, chunks, action)

    async def _answer(self, ws, f, chunks, action):
        cid, kind, payload = f["command_id"], f["kind"], f.get("payload") or {}
        if action.startswith("delay:"):
            await asyncio.sleep(float(action[6:]))
        await ws.send(json.dumps({"type": "progress", "host_id": self.host_id, "command_id": cid,
                                  "message": "working on " + kind}))
        self.executed[cid] = self.executed.get(cid, 0) + 1
        if action.startswith("fail:"):
            frames = [{"type": "result", "command_id": cid, "ok": False, "error": action[5:]}]
        else:
            try:
                frames = self._run(cid, kind, f.get("env_id"), payload, chunks, action)
            except Exception as ex:  # a scripted failure such as a missing path
                frames = [{"type": "result", "command_id": cid, "ok": False, "error": str(ex)}]
        for fr in frames:
            fr["host_id"] = self.host_id
        self.log[cid] = frames
        if action == "drop":
            ws.transport.abort()
            return "dropped"
        for fr in frames:
            await ws.send(json.dumps(fr))
        return None

    def _run(self, cid, kind, env_id, p, chunks, action):
        def result(payload):
            return [{"type": "result", "command_id": cid, "ok": True, "payload": payload}]

        if kind == "env.create":
            image = p["services"][0]["image"] if p.get("services") else ""
            if image.startswith("bad"):
                raise RuntimeError("image %s: pull access denied" % image)
            eps = {s["name"]: "127.0.0.1:%d" % (20000 + i) for i, s in enumerate(p.get("services", []))}
            return result({"endpoints": eps, "started_in": "1.5s", "storage": "dir", "egress": "denied (verified)",
                           "digests": {s["name"]: s["image"] + "@sha256:00" for s in p.get("services", [])}})
        if kind == "env.snapshot":
            return result({"snapshot": p["name"], "datasets": ["pg", "home"], "frozen_for": "12ms", "consistent": True})
        if kind == "env.fork":
            return result({"forked_in": "900ms", "endpoints": {"box": "127.0.0.1:21000"}})
        if kind == "env.rollback":
            return result({"snapshot": p["snapshot"], "endpoints": {"box": "127.0.0.1:22000"}})
        if kind == "env.exec":
            cmd = p["cmd"]
            if cmd[0] == "false":
                return result({"exit_code": 1, "stdout": "", "stderr": "it failed"})
            if cmd[0] == "echo":
                return result({"exit_code": 0, "stdout": " ".join(cmd[1:]) + "\n", "stderr": ""})
            return result({"exit_code": 0, "stdout": "", "stderr": ""})
        if kind == "env.put":
            self.put_chunks = chunks
            assert [c["seq"] for c in chunks] == list(range(p["tar_chunks"])), "chunk order"
            assert chunks[-1]["last"] and not any(c["last"] for c in chunks[:-1]), "last flag"
            assert all(len(base64.b64decode(c["data"])) <= CHUNK for c in chunks), "chunk size"
            data = b"".join(base64.b64decode(c["data"]) for c in chunks)
            if len(data) != p["tar_bytes"]:
                raise RuntimeError("env.put: archive incomplete: got %d of %d bytes" % (len(data), p["tar_bytes"]))
            if hashlib.sha256(data).hexdigest() != p["tar_sha256"]:
                raise RuntimeError("env.put: archive sha256 mismatch")
            where = p.get("path") or p.get("target")
            self.files[(p["service"], where)] = data
            if "target" in p or "owner" in p:  # denvd says where it landed and whose it is
                return result({"path": where + "/landed", "owner": "1000:1000"})
            return result({"path": where})
        if kind == "env.get":
            key = (p["service"], p["path"])
            if key not in self.files:
                raise RuntimeError("docker cp: %s: no such file or directory" % p["path"])
            data = self.files[key]
            n = max(1, (len(data) + CHUNK - 1) // CHUNK)
            frames = [{"type": "chunk", "command_id": cid, "seq": i, "last": i == n - 1,
                       "data": base64.b64encode(data[i * CHUNK:(i + 1) * CHUNK]).decode()} for i in range(n)]
            sha = hashlib.sha256(data).hexdigest()
            if action == "badsha":
                sha = "0" * 64
            frames += result({"tar_bytes": len(data), "tar_sha256": sha, "tar_chunks": n})
            return frames
        if kind == "verify.collect":
            return result({"files": 1, "bytes": 3, "missing": [], "refused": []})
        if kind == "verify.run":
            if p.get("refused"):
                return result({"reward": 0, "source": "refused"})
            return result({"reward": 1, "exit_code": 0, "stdout": "ok", "stderr": "", "source": "reward.txt",
                           "ran_for": "1s"})
        if kind == "env.destroy":
            return result({"destroyed": env_id})
        raise RuntimeError("unknown command kind")
