"""Memory: denv-cp's RSS with 10,000 environments in its store (each with one
healthy version and one succeeded eleven-phase deploy, as a deploy leaves
them, and again with the environment rows alone; written by
bench/cp-envs.c), read from /proc after start-up and one pass over every
project's environment list; and denvd's RSS once joined and idle. Each run
starts a fresh process. MEMORY_ENVS overrides 10,000."""
import os
import shutil
import tempfile
import time

import benchlib as B

NENV = int(os.environ.get("MEMORY_ENVS", "10000"))


def tree_rss_kib(pid):
    """RSS of pid plus its descendants (KiB), and how many processes."""
    total, count, todo = 0, 0, [pid]
    while todo:
        p = todo.pop()
        r = B.rss_kib(p)
        if r is None:
            continue
        total += r
        count += 1
        try:
            for t in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, t)) as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return total, count


def cp_memory(bare):
    key = "cpmem_bare" if bare else "cpmem"
    what = "env rows only" if bare else "+1 version, 1 deploy each"
    B.fig(key, "denv-cp RSS, %d envs (%s)" % (NENV, what), None, "MiB", "<64")
    tool = os.path.join(B.BUILD, "bench", "cp-envs")
    if not os.access(tool, os.X_OK):
        B.pending(key, "%s not built (make BUILD=... %s)" % (tool, os.path.relpath(tool, B.TOP)))
        return
    work = tempfile.mkdtemp(prefix="denv-bench-cpmem.", dir=os.environ.get("TMPDIR", "/tmp"))
    try:
        db = os.path.join(work, "db")
        s = B.Stack("cpmem", sidecar=False, db=db)  # bootstraps the team and key
        key_ = s.key
        time.sleep(0.3)
        empty = B.rss_kib(s.cp.pid)
        s.close()
        r = B.sh(tool, db, str(NENV), "100", *(["bare"] if bare else []), timeout=600)
        B.need(r.returncode == 0, "cp-envs: " + (r.stderr.strip() or r.stdout.strip()))
        logb = os.path.getsize(os.path.join(db, "log"))
        start_rss = []
        for _ in range(B.runs(3, 1)):
            s = B.Stack("cpmem", sidecar=False, db=db, key=key_)
            try:
                t0 = B.now()
                st, r = s.req("GET", "/v1/projects")
                B.need(st == 200, "GET /v1/projects: %s" % st)
                start_rss.append(B.rss_kib(s.cp.pid))
                seen = 0
                for p in r["projects"]:
                    st, e = s.req("GET", "/v1/projects/%s/envs" % p["ID"])
                    B.need(st == 200, "GET envs: %s %s" % (st, e))
                    seen += len(e["environments"])
                B.need(seen >= NENV, "the API lists %d environments, not %d" % (seen, NENV))
                B.sample(key, B.rss_kib(s.cp.pid) / 1024.0)
                walk = B.now() - t0
            finally:
                s.close()
        B.note("denv-cp (%s): RSS %.1f MiB with an empty store, %.1f MiB right after start with %d environments "
               "(%.0f MB log); the figure is after listing them all (%.1f s)" % (
                   what, empty / 1024.0, sorted(start_rss)[len(start_rss) // 2] / 1024.0, NENV, logb / 1e6, walk))
    except B.Pending as p:
        B.pending(key, p)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def denvd_memory():
    key = "denvdmem"
    B.fig(key, "denvd RSS, joined and idle", None, "MiB", "<8")
    why = B.docker_ready()
    if why:
        B.pending(key, why)
        return
    procs = []
    try:
        for _ in range(B.runs(3, 1)):
            s = B.Stack("denvdmem")
            try:
                time.sleep(3)
                B.need(s.sidecar.poll() is None, "denvd exited: " + s.log_tail("denvd.log"))
                own = B.rss_kib(s.sidecar.pid)
                total, n = tree_rss_kib(s.sidecar.pid)
                procs.append(n)
                B.sample(key, own / 1024.0)
            finally:
                s.close()
        if max(procs) > 1:
            B.note("denvd: %d processes when idle; the figure is the main one's RSS, %.1f MiB with the children" %
                   (max(procs), total / 1024.0))
    except B.Pending as p:
        B.pending(key, p)


def body():
    cp_memory(False)
    cp_memory(True)
    denvd_memory()


B.main(body)
