"""100 forks of one version at once on btrfs, through the API: one
environment (a busybox service holding a volume with FORK100_MIB MiB, 8 by
default) is deployed and snapshotted; then FORK100_N (100) POST
/v1/envs/{id}/fork calls go out at once, each from its own thread, and each
fork's time runs from its request to its deployment's end (polled every
50 ms). The baseline, in the same run, is the raw equivalent at once:
FORK100_N processes that each run `btrfs subvolume snapshot` of the
snapshot's volume and `docker run -d` of the same image and command with the
new subvolume bind-mounted. Figures: the wall time of the whole batch (ratio
target <= 1.3x) and per-fork p50 and p99 against per-op p50 and p99.

Long: it starts 2 x FORK100_N containers (about 2-4 min on the 2-core VM),
so it runs only with BENCH_LONG=1; otherwise its rows are pending."""
import os
import secrets
import subprocess
import threading

import benchlib as B

N = int(os.environ.get("FORK100_N", "100"))
MIB = int(os.environ.get("FORK100_MIB", "8"))
IMAGE = "denv-test/busybox"
COMPOSE = """
x-denv:
  egress: deny
services:
  app:
    image: denv-test/busybox
    command: ["sleep", "3600"]
    volumes: ["data:/data"]
volumes:
  data: {}
"""
KEYS = ("fork100_total", "fork100_p50", "fork100_p99")


def pctl(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else 0


def declare():
    base = "%d x (btrfs snapshot + docker run -d) at once" % N
    B.fig("fork100_total", "%d forks of one version at once, btrfs (batch wall)" % N, base, "s", "ratio<=1.3")
    B.fig("fork100_p50", "%d forks at once: per-fork p50" % N, "per-op p50", "s", "report")
    B.fig("fork100_p99", "%d forks at once: per-fork p99" % N, "per-op p99", "s", "report")


def forks(s, env, vid):
    """Seconds per fork (request to deployment end), wall of the batch, failures."""
    times, bad = [None] * N, []
    gate = threading.Barrier(N + 1)

    def one(i):
        gate.wait()
        t0 = B.now()
        st, r = s.req("POST", "/v1/envs/%s/fork" % env, {"version": vid, "name": "f%03d" % i})
        if st != 202:
            bad.append("%s %s" % (st, r))
            return
        s.envs.add(r["deployment"]["EnvID"])
        dd = s.wait_dep(r["deployment"]["ID"], limit=900)
        if dd.get("deployment", {}).get("Status") != "succeeded":
            bad.append(s.failed_phase(dd))
            return
        times[i] = B.now() - t0

    ts = [threading.Thread(target=one, args=(i,)) for i in range(N)]
    for t in ts:
        t.start()
    gate.wait()
    t0 = B.now()
    for t in ts:
        t.join()
    return [t for t in times if t is not None], B.now() - t0, bad


def baseline(src, raw):
    """The raw batch: seconds per op, wall, failures."""
    script = 'btrfs subvolume snapshot "$1" "$2" >/dev/null && docker run -d --name "$3" -v "$2:/data" %s sleep 3600 >/dev/null' % IMAGE
    procs, t0 = [], B.now()
    for i in range(N):
        dst = os.path.join(raw, "b%03d-%s" % (i, secrets.token_hex(2)))
        name = "%sf100-%d" % (B.PREFIX, i)
        procs.append((subprocess.Popen(["sh", "-c", script, "fork100", src, dst, name], stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE), B.now(), dst))
    times, bad = [], []
    for p, s0, dst in procs:
        _, err = p.communicate()
        if p.returncode == 0:
            times.append(B.now() - s0)
        else:
            bad.append(err.decode(errors="replace").strip()[:200])
    wall = B.now() - t0
    return times, wall, bad, [d for _, _, d in procs]


def body():
    declare()
    if os.environ.get("BENCH_LONG", "") in ("", "0"):
        for k in KEYS:
            B.pending(k, "long (2 x %d containers): run with BENCH_LONG=1" % N)
        return
    why = B.docker_ready() or ("" if B.which("btrfs") else "btrfs not installed (btrfs-progs)")
    if why:
        for k in KEYS:
            B.pending(k, why)
        return
    fs = s = None
    raw_dirs = []
    try:
        fs = B.Btrfs("8G")
        s = B.Stack("fork100", sidecar_args=["--btrfs-root", fs.root])
        env, dd = s.deploy("f100", COMPOSE)
        B.need(s.phases_ok(dd, ("prepare", "start", "health")), "deploy: " + s.failed_phase(dd))
        vol = [l for l in B.sh("docker", "inspect", "-f", "{{range .Mounts}}{{.Source}} {{.Destination}}\n{{end}}",
                               env.lower() + "-app-1").stdout.splitlines() if l.endswith(" /data")]
        B.need(vol, "no /data mount in the deployed service")
        with open(os.path.join(vol[0].split(" ")[0], "fill.bin"), "wb") as f:
            for _ in range(MIB):
                f.write(os.urandom(1 << 20))
        st, r = s.req("POST", "/v1/envs/%s/snapshot" % env, {})
        B.need(st == 202, "snapshot: %s %s" % (st, r))
        sd = s.wait_dep(r["deployment"]["ID"], limit=600)
        B.need(sd["deployment"]["Status"] == "succeeded", "snapshot: " + s.failed_phase(sd))
        vid = sd["deployment"].get("VersionID")
        B.need(vid, "the snapshot's deployment names no version")
        src = os.path.join(fs.root, "snaps", env, vid, "data")
        if not os.path.isdir(src):
            src = vol[0].split(" ")[0]
        raw = os.path.join(fs.mnt, "raw")
        os.makedirs(raw, exist_ok=True)
        os.sync()
        # denv first, then the baseline: each batch leaves 100 containers that are removed untimed.
        ft, fwall, fbad = forks(s, env, vid)
        B.need(not fbad, "%d of %d forks failed, first: %s" % (len(fbad), N, fbad[0] if fbad else ""))
        for e in sorted(s.envs - {env}):
            st, d = s.req("DELETE", "/v1/envs/" + e)
            if st == 202:
                s.wait_dep(d["deployment"]["ID"], limit=300)
        s.envs = {env}
        os.sync()
        bt, bwall, bbad, raw_dirs = baseline(src, raw)
        B.need(not bbad, "%d of %d baseline ops failed, first: %s" % (len(bbad), N, bbad[0] if bbad else ""))
        B.sample("fork100_total", fwall)
        B.base("fork100_total", bwall)
        B.sample("fork100_p50", pctl(ft, 0.5))
        B.base("fork100_p50", pctl(bt, 0.5))
        B.sample("fork100_p99", pctl(ft, 0.99))
        B.base("fork100_p99", pctl(bt, 0.99))
        B.note("fork100: %d forks of a %d MiB volume via POST /v1/envs/{id}/fork, all at once (no batch route on "
               "this branch): batch %.1f s, per fork p50 %.2f s p99 %.2f s; baseline batch %.1f s, p50 %.2f s "
               "p99 %.2f s. A fork also makes its network, waits for health and runs the egress probe; the "
               "baseline does none of that." % (N, MIB, fwall, pctl(ft, .5), pctl(ft, .99), bwall, pctl(bt, .5),
                                                 pctl(bt, .99)))
    except B.Pending as p:
        for k in KEYS:
            B.pending(k, p)
    finally:
        B.docker_rm_prefixed()
        for d in raw_dirs:
            if os.path.isdir(d):
                B.sh("btrfs", "subvolume", "delete", d)
        if s:
            s.close()
        if fs:
            fs.close()


B.main(body)
