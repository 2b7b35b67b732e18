"""verify end to end: POST /v1/envs/{id}/verify {resume: true} until its
deployment has finished (stop, collect, snapshot, clone, grade on a fork,
verdict), for an agent box (busybox, uid 1000) whose answer a busybox
verifier image grades; the reward must be 1. On dir and on btrfs (an image
file, loop-mounted). No baseline (the issue sets none)."""
import benchlib as B

COMPOSE = """
x-denv:
  egress: deny
  agent: { service: box }
  verifier:
    image: denv-test/busybox
    command: ["sh", "-c", "[ \\"$(cat /submission/home/agent/answer.txt)\\" = 42 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt"]
    collect: ["/home/agent/answer.txt"]
services:
  box:
    image: denv-test/busybox
    user: "1000:1000"
    command: ["sleep", "3600"]
    environment: { HOME: /home/agent }
    volumes: ["home:/home/agent"]
volumes: { home: {} }
"""


def one_backend(backend, key, n):
    fs = None
    s = None
    phases = {}
    try:
        args = ()
        if backend == "btrfs":
            fs = B.Btrfs("2G")
            args = ("--btrfs-root", fs.root)
        s = B.Stack("verify-" + backend, sidecar_args=args)
        st, h = s.req("GET", "/v1/hosts")
        got = h["hosts"][0].get("Capabilities", {}).get("storage")
        B.need(got == backend, "the host reports storage %r, not %r" % (got, backend))
        env, dd = s.deploy("vfy", COMPOSE)
        B.need(dd["deployment"]["Status"] == "succeeded", "deploy: " + s.failed_phase(dd))
        st, r = s.req("POST", "/v1/envs/%s/exec" % env,
                      {"service": "box", "cmd": ["sh", "-c", "echo 42 > /home/agent/answer.txt"]})
        B.need(st == 200 and r.get("exit_code") == 0, "writing the answer: %s %s" % (st, r))
        for i in range(n + 1):  # the first one warms up and is not recorded
            t0 = B.now()
            st, r = s.req("POST", "/v1/envs/%s/verify" % env, {"resume": True})
            B.need(st == 202, "POST verify: %s %s" % (st, r))
            dd = s.wait_dep(r["deployment"]["ID"])
            t1 = B.now()
            B.need(dd["deployment"]["Status"] == "succeeded", "verify: " + s.failed_phase(dd))
            ev = {p["Name"]: p.get("Evidence") or {} for p in dd["phases"]}.get("verdict", {})
            B.need(ev.get("reward") == 1, "verify gave reward %r (%s)" % (ev.get("reward"), ev))
            if i > 0:
                B.sample(key, t1 - t0)
                for k, v in B.phase_ms(dd).items():
                    phases.setdefault(k, []).append(v)
        B.note("verify %s: median phases: " % backend +
               ", ".join("%s %.0f ms" % (k, B.median(v)) for k, v in phases.items()))
    except B.Pending as p:
        B.pending(key, p)
    finally:
        if s:
            s.close()
        if fs:
            fs.close()


def body():
    B.fig("verify_dir", "verify end to end (busybox verifier), dir", None, "s", "report")
    B.fig("verify_btrfs", "verify end to end (busybox verifier), btrfs", None, "s", "<3")
    why = B.docker_ready()
    if why:
        B.pending("verify_dir", why)
        B.pending("verify_btrfs", why)
        return
    n = B.runs(5, 2)
    one_backend("dir", "verify_dir", n)
    one_backend("btrfs", "verify_btrfs", n)


B.main(body)
