"""streamed exec, first byte: `denv exec` (GET /v1/envs/{id}/exec/stream,
API -> hub -> sidecar -> the Engine API's exec, output relayed as it comes)
against `docker exec` alone, both running `echo a; sleep 1` in the same
container, interleaved one by one; the figure is the time from starting
the client process to reading the first byte of its stdout (the sleep keeps
the command running, so it is not the round trip)."""
import os
import subprocess

import benchlib as B

KEY = "exec-stream"
COMPOSE = """
x-denv:
  egress: deny
services:
  box:
    image: denv-test/busybox
    command: ["sleep", "3600"]
"""
CMD = ["sh", "-c", "echo a; sleep 1"]


def first_byte_ms(argv, env):
    t0 = B.now()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    b = p.stdout.read(1)
    t1 = B.now()
    p.stdout.read()
    return (t1 - t0) * 1000 if b == b"a" and p.wait(timeout=60) == 0 else None


def body():
    B.fig(KEY, "streamed exec first byte (denv exec)", "docker exec", "ms", "ratio<=1.5")
    why = B.docker_ready()
    if why:
        B.pending(KEY, why)
        return
    n = B.runs(15, 5)
    try:
        s = B.Stack("exec-stream")
    except B.Pending as p:
        B.pending(KEY, p)
        return
    try:
        env, dd = s.deploy("xs", COMPOSE)
        if not s.phases_ok(dd, ("prepare", "start", "health")):
            B.pending(KEY, "deploy did not reach health: " + s.failed_phase(dd))
            return
        cname = env.lower() + "-box-1"
        cenv = dict(os.environ, DENV_SERVER=s.url, DENV_API_KEY=s.key)
        denv = [B.TOP + "/bin/denv", "exec", "--service", "box", env, "--"] + CMD
        dock = ["docker", "exec", cname] + CMD
        first_byte_ms(denv, cenv)  # warm both paths
        first_byte_ms(dock, cenv)
        for _ in range(n):
            a = first_byte_ms(denv, cenv)
            b = first_byte_ms(dock, cenv)
            if a is None or b is None:
                B.pending(KEY, "a client did not print 'a' and exit 0")
                return
            B.sample(KEY, a)
            B.base(KEY, b)
        B.note("exec-stream: both clients are new processes; denv dials the WebSocket, sends the command and "
               "writes the first exec.out frame as it arrives")
    finally:
        s.close()


B.main(body)
