"""verify end to end: POST /v1/envs/{id}/verify {resume: true} until its
deployment has finished (stop, collect, snapshot, clone, grade on a fork,
verdict), for an agent box (busybox, uid 1000) whose answer a busybox
verifier image grades; the reward must be 1. On dir and on btrfs (an image
file, loop-mounted). No baseline (the issue sets none).

Then the quickstart's own stack (examples/quickstart/compose.yaml:
PostgreSQL with a 100 MiB table, the agent's box), as a user deploys it:
its verify end to end, and a refused one (the answer a symlink, which
collect refuses): reward 0 with no grader's fork made, which the run
checks (no new environment, the clone phase skipped)."""
import os

import benchlib as B

ROWS = 100000  # about 100 MiB in the table's heap

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


def verify_once(s, env):
    """One verify with resume: (seconds, deployment view)."""
    t0 = B.now()
    st, r = s.req("POST", "/v1/envs/%s/verify" % env, {"resume": True})
    B.need(st == 202, "POST verify: %s %s" % (st, r))
    dd = s.wait_dep(r["deployment"]["ID"])
    t = B.now() - t0
    B.need(dd["deployment"]["Status"] == "succeeded", "verify: " + s.failed_phase(dd))
    return t, dd


def box(s, env, cmd):
    st, r = s.req("POST", "/v1/envs/%s/exec" % env, {"service": "box", "cmd": ["sh", "-c", cmd]})
    B.need(st == 200 and r.get("exit_code") == 0, "%s: %s %s" % (cmd, st, r))


def one_quickstart(backend, n):
    fs = s = None
    keys = ("verify_qs_" + backend, "verify_refused_" + backend)
    phases = {}
    try:
        args = ()
        if backend == "btrfs":
            fs = B.Btrfs("4G")
            args = ("--btrfs-root", fs.root)
        s = B.Stack("verify-qs-" + backend, sidecar_args=args)
        with open(os.path.join(B.TOP, "examples", "quickstart", "compose.yaml")) as f:
            env, dd = s.deploy("quickstart", f.read())
        B.need(dd["deployment"]["Status"] == "succeeded", "deploy: " + s.failed_phase(dd))
        st, r = s.req("POST", "/v1/envs/%s/exec" % env, {"service": "db", "cmd": [
            "su", "postgres", "-c", "psql -q -h /run/postgresql -c 'CREATE TABLE t AS SELECT g, "
            "repeat(md5(g::text), 30) AS pad FROM generate_series(1, %d) g'" % ROWS], "timeout_sec": 600})
        B.need(st == 200 and r.get("exit_code") == 0, "filling the table: %s %s" % (st, r))
        box(s, env, "echo 42 > /home/agent/answer.txt")
        for i in range(n + 1):  # the first one warms up and is not recorded
            t, dd = verify_once(s, env)
            ev = {p["Name"]: p.get("Evidence") or {} for p in dd["phases"]}
            B.need(ev.get("verdict", {}).get("reward") == 1, "verify gave %s" % ev.get("verdict"))
            if i > 0:
                B.sample(keys[0], t)
                for k, v in B.phase_ms(dd).items():
                    phases.setdefault(k, []).append(v)
        B.note("verify quickstart %s (PostgreSQL 100 MiB): median phases: " % backend +
               ", ".join("%s %.0f ms" % (k, B.median(v)) for k, v in phases.items()))
        box(s, env, "rm -f /home/agent/answer.txt && ln -s /etc/hostname /home/agent/answer.txt")
        before = s.all_envs()
        refused = {}
        for i in range(n + 1):
            t, dd = verify_once(s, env)
            ev = {p["Name"]: p.get("Evidence") or {} for p in dd["phases"]}
            st = {p["Name"]: p.get("Status") for p in dd["phases"]}
            B.need(ev.get("verdict", {}).get("reward") == 0 and ev.get("verdict", {}).get("source") == "refused",
                   "a symlinked answer was not refused: %s" % ev.get("verdict"))
            B.need(st.get("clone") == "skipped", "the refused verify's clone phase is %s" % st.get("clone"))
            if i > 0:
                B.sample(keys[1], t)
                for k, v in B.phase_ms(dd).items():
                    refused.setdefault(k, []).append(v)
        B.need(s.all_envs() == before, "a refused verify made an environment")
        B.note("verify refused %s: no grader fork (clone skipped, no new environment); median phases: " % backend +
               ", ".join("%s %.0f ms" % (k, B.median(v)) for k, v in refused.items()))
    except B.Pending as p:
        for k in keys:
            B.pending(k, p)
    finally:
        if s:
            s.close()
        if fs:
            fs.close()


def body():
    B.fig("verify_qs_btrfs", "verify, quickstart (PostgreSQL 100 MiB + box), btrfs", None, "s", "<1.5")
    B.fig("verify_qs_dir", "verify, quickstart (PostgreSQL 100 MiB + box), dir", None, "s", "report")
    B.fig("verify_refused_btrfs", "verify refused (collect), quickstart, btrfs", None, "s", "<0.3")
    B.fig("verify_refused_dir", "verify refused (collect), quickstart, dir", None, "s", "<0.3")
    B.fig("verify_dir", "verify end to end (busybox verifier), dir", None, "s", "report")
    B.fig("verify_btrfs", "verify end to end (busybox verifier), btrfs", None, "s", "<3")
    why = B.docker_ready()
    if why:
        for k in ("verify_dir", "verify_btrfs", "verify_qs_btrfs", "verify_qs_dir", "verify_refused_btrfs",
                  "verify_refused_dir"):
            B.pending(k, why)
        return
    n = B.runs(5, 2)
    one_backend("dir", "verify_dir", n)
    one_backend("btrfs", "verify_btrfs", n)
    for b in ("btrfs", "dir"):
        one_quickstart(b, n)


B.main(body)
