"""exec round trip: POST /v1/envs/{id}/exec (API -> hub -> sidecar -> the
Engine API's exec) against `docker exec` alone, both running `true` in the same running
container, interleaved one by one. The client of each is a new process per
call where that is what a user runs (docker CLI) and a new HTTP connection
per call for the API (urllib, one request per connection).

Also measured in the same loop, as the floor under both: the same exec
through dockerd's Engine API socket straight from this process (create,
start, inspect: what the sidecar does), so the note can say how much of the
round trip is denv's (API, hub, the sidecar's worker) and how much dockerd's
own exec."""
import http.client
import json
import os
import socket

import benchlib as B

KEY = "exec"
COMPOSE = """
x-denv:
  egress: deny
services:
  box:
    image: denv-test/busybox
    command: ["sleep", "3600"]
"""


class _Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("docker", timeout=60)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def _engine(method, path, body=None):
    c = _Unix(os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock").replace("unix://", ""))
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def engine_exec(cname):
    """`true` in cname through the Engine API: ms, or None if it failed."""
    t0 = B.now()
    st, d = _engine("POST", "/containers/%s/exec" % cname, {"Cmd": ["true"], "AttachStdout": True, "AttachStderr": True})
    if st != 201:
        return None
    xid = json.loads(d)["Id"]
    st, _ = _engine("POST", "/exec/%s/start" % xid, {"Detach": False, "Tty": False})
    if st != 200:
        return None
    st, d = _engine("GET", "/exec/%s/json" % xid)
    if st != 200 or json.loads(d).get("ExitCode") != 0:
        return None
    return (B.now() - t0) * 1000


def pctl(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else 0


def body():
    B.fig(KEY, "exec round trip API->hub->sidecar", "docker exec", "ms", "ratio<=0.5")
    B.fig("exec_p99", "exec round trip p99", "docker exec p99", "ms", "report")
    why = B.docker_ready()
    if why:
        B.pending(KEY, why)
        return
    n = B.runs(30, 10)
    try:
        s = B.Stack("exec")
    except B.Pending as p:
        B.pending(KEY, p)
        return
    try:
        env, dd = s.deploy("bx", COMPOSE)
        if not s.phases_ok(dd, ("prepare", "start", "health")):
            B.pending(KEY, "deploy did not reach health: " + s.failed_phase(dd))
            return
        cname = env.lower() + "-box-1"
        for _ in range(3):  # warm both paths
            s.req("POST", "/v1/envs/%s/exec" % env, {"service": "box", "cmd": ["true"]})
            B.sh("docker", "exec", cname, "true")
        ours, theirs, floor = [], [], []
        for _ in range(n):
            t0 = B.now()
            st, r = s.req("POST", "/v1/envs/%s/exec" % env, {"service": "box", "cmd": ["true"]})
            t1 = B.now()
            if st != 200 or r.get("exit_code") != 0:
                B.pending(KEY, "exec failed: %s %s" % (st, r))
                return
            B.sample(KEY, (t1 - t0) * 1000)
            ours.append((t1 - t0) * 1000)
            t0 = B.now()
            r = B.sh("docker", "exec", cname, "true")
            t1 = B.now()
            if r.returncode != 0:
                B.pending(KEY, "docker exec failed: " + r.stderr.strip())
                return
            B.base(KEY, (t1 - t0) * 1000)
            theirs.append((t1 - t0) * 1000)
            f = engine_exec(cname)
            if f is not None:
                floor.append(f)
        B.sample("exec_p99", pctl(ours, 0.99))
        B.base("exec_p99", pctl(theirs, 0.99))
        if floor:
            fm, om, tm = B.median(floor), B.median(ours), B.median(theirs)
            B.note("exec: where the time goes (medians): dockerd's own exec through its API socket from the bench "
                   "(create, start, inspect) %.1f ms, the floor under both; denv adds %.1f ms (API, hub, the "
                   "sidecar's worker process and its command log), the docker CLI adds %.1f ms. A target of "
                   "0.5x docker exec is %.1f ms, below that floor: it needs an exec that does not go through "
                   "dockerd (entering the container's namespaces from denvd), which is not built" % (
                       fm, om - fm, tm - fm, tm * 0.5))
        B.note("exec: the sidecar checks the container and runs the command through dockerd's Engine API "
               "socket (src/sidecar/engine_exec.c), not the docker CLI; the baseline is the CLI")
    finally:
        s.close()


B.main(body)
