"""exec round trip: POST /v1/envs/{id}/exec (API -> hub -> sidecar -> the
Engine API's exec) against `docker exec` alone, both running `true` in the same running
container, interleaved one by one. The client of each is a new process per
call where that is what a user runs (docker CLI) and a new HTTP connection
per call for the API (urllib, one request per connection)."""
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


def body():
    B.fig(KEY, "exec round trip API->hub->sidecar", "docker exec", "ms", "ratio<=1.15")
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
        for _ in range(n):
            t0 = B.now()
            st, r = s.req("POST", "/v1/envs/%s/exec" % env, {"service": "box", "cmd": ["true"]})
            t1 = B.now()
            if st != 200 or r.get("exit_code") != 0:
                B.pending(KEY, "exec failed: %s %s" % (st, r))
                return
            B.sample(KEY, (t1 - t0) * 1000)
            t0 = B.now()
            r = B.sh("docker", "exec", cname, "true")
            t1 = B.now()
            if r.returncode != 0:
                B.pending(KEY, "docker exec failed: " + r.stderr.strip())
                return
            B.base(KEY, (t1 - t0) * 1000)
        B.note("exec: the sidecar checks the container and runs the command through dockerd's Engine API "
               "socket (src/sidecar/engine_exec.c), not the docker CLI; the baseline is the CLI")
    finally:
        s.close()


B.main(body)
