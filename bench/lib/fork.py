"""Fork latency against volume size, on btrfs and on dir: env.fork end to
end (clone, network, two containers, health, egress probe): the env.fork
command's time as a control plane sees it over denvd's websocket protocol
(driven by t/sidecar/fakecp.py, so without denv-cp's deployment
bookkeeping), beside a baseline measured in the same run:
the raw equivalent of what the fork does with the data and the containers,

  btrfs: `btrfs subvolume snapshot` of the snapshot's volume, then
         `docker run -d` of the two services (same image and command, the
         data service bind-mounting the new subvolume at /data);
  dir:   `cp -a` of the snapshot's volume, then the same two `docker run -d`.

The environment has two busybox services, one holding the volume, which holds
0, 100 MiB or 1 GiB of incompressible data (QUICK=1 skips 1 GiB). Per size a
parent is created, filled and snapshotted once (untimed); then rounds, each
with a block of forks (every size) and a block of baselines (which block
goes first alternates), each op torn down untimed, the data read into the page cache before each (untimed);
5 recorded rounds (QUICK=1: 2) after one warm-up round. btrfs runs on an
image file in a temp dir of its own, loop-mounted there and detached on
exit (benchlib.Btrfs).

Figures: per backend and size, the fork's seconds; btrfs against an absolute
"< 1 s", dir against "<= 1.2x the baseline"; and one flatness row for btrfs
(the largest size's fork over the 0 MiB fork). The snapshot's frozen_for is
bench/snapshot.sh's figure; here it and denvd's own forked_in are notes."""
import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile

import benchlib as B

try:
    from fakecp import FakeCP, Denvd, remove_project
except ImportError as ex:  # websockets missing (python/.venv) or t/sidecar not on the path
    FakeCP = None
    IMPORT_ERROR = "python with websockets and t/sidecar/fakecp.py needed (python/.venv): %s" % ex

IMAGE = "denv-test/busybox"
SERVICES = [
    {"name": "app", "image": IMAGE, "command": ["sleep", "3600"], "env": {}, "user": "",
     "volumes": ["data:/data"], "ports": [], "depends_on": [], "resources": {}},
    {"name": "side", "image": IMAGE, "command": ["sleep", "3600"], "env": {}, "user": "",
     "volumes": [], "ports": [], "depends_on": [], "resources": {}},
]
SPEC = {"version": "ver_b", "egress": "deny", "volumes": ["data"], "warm": [], "services": SERVICES}
SIZES = [0, 100] + ([] if B.QUICK else [1024])
BACKENDS = ("btrfs", "dir")


def size_label(mib):
    return "1 GiB" if mib == 1024 else "%d MiB" % mib


def key(backend, mib):
    return "fork_%s_%d" % (backend, mib)


def declare():
    for backend in BACKENDS:
        for mib in SIZES:
            if backend == "btrfs":
                B.fig(key(backend, mib), "fork, 2 services, %s data, btrfs" % size_label(mib),
                      "subvol snapshot + 2 docker run", "s", "<1")
            else:
                B.fig(key(backend, mib), "fork, 2 services, %s data, dir" % size_label(mib),
                      "cp -a + 2 docker run", "s", "ratio<=1.2")
        if backend == "btrfs":
            B.fig("fork_btrfs_flat", "fork btrfs, %s vs 0 MiB data (flat in size)" % size_label(SIZES[-1]),
                  "the 0 MiB fork", "s", "ratio<=1.2")


def keys(backend):
    return [key(backend, m) for m in SIZES] + (["fork_btrfs_flat"] if backend == "btrfs" else [])


def command(cp, kind, env, payload, timeout=600):
    res, _, _, _ = cp.command(kind, env, payload, timeout=timeout)
    B.need(res is not None, "%s %s: no result within %d s" % (kind, env, timeout))
    B.need(res.get("ok"), "%s %s: %s" % (kind, env, (res.get("error") or res)))
    return res.get("payload") or {}


def fill(vol, mib):
    """mib MiB of incompressible data in vol, in 64 MiB files, on disk."""
    left = mib << 20
    i = 0
    while left > 0:
        n = min(left, 64 << 20)
        with open(os.path.join(vol, "blob%02d" % i), "wb") as f:
            for _ in range(n >> 20):
                f.write(os.urandom(1 << 20))
        left -= n
        i += 1
    os.sync()


def warm(src):
    """Read every file under src (untimed), so that fork and baseline both
    copy from the page cache whatever ran before them (cheap when the data
    is there already)."""
    for d, _, files in os.walk(src):
        for name in files:
            try:
                with open(os.path.join(d, name), "rb", buffering=0) as f:
                    while f.read(1 << 20):
                        pass
            except OSError:
                pass


def volume_of(container):
    r = B.sh("docker", "inspect", container)
    B.need(r.returncode == 0, "docker inspect %s: %s" % (container, r.stderr.strip()))
    mounts = json.loads(r.stdout)[0]["Mounts"]
    src = [m["Source"] for m in mounts if m["Destination"] == "/data"]
    B.need(src, "%s has no /data mount" % container)
    return src[0]


class Run:
    """One backend: denvd joined to a fake control plane, with its own data
    dir (and btrfs root); the environments it made are destroyed in close()."""

    def __init__(self, backend):
        self.backend = backend
        self.fs = None
        self.d = None
        self.envs = []
        self.tmp = tempfile.mkdtemp(prefix="denv-bench-fork-%s." % backend, dir=os.environ.get("TMPDIR", "/tmp"))
        self.data = os.path.join(self.tmp, "denvd", "data")
        # Where the baseline's copies and snapshots go: the same filesystem
        # as the fork's volumes.
        self.raw = os.path.join(self.tmp, "raw")
        self.cp = None

    def start(self):
        backend = self.backend
        self.cp = FakeCP()
        extra = ["--probe-image", IMAGE, "--probe-url", "http://127.0.0.1:9/"]
        if backend == "btrfs":
            self.fs = B.Btrfs("5G")
            self.root = self.fs.root
            self.raw = os.path.join(self.fs.mnt, "raw")
            extra += ["--btrfs-root", self.root]
        else:
            self.root = self.data
        os.makedirs(self.raw)
        os.makedirs(os.path.join(self.tmp, "denvd"))
        self.d = Denvd(os.path.join(B.TOP, "bin", "denvd"), os.path.join(self.tmp, "denvd"), self.cp.url,
                       token=self.cp.token, extra=extra)
        self.d.start()
        if not self.cp.wait_conn(30):
            raise B.Pending("denvd did not connect: " + " | ".join(self.d.logtext().strip().splitlines()[-3:]))

    def env(self, kind):
        e = "env_BF%s%s" % (kind, secrets.token_hex(4).upper())
        self.envs.append(e)
        return e

    def destroy(self, env):
        try:
            self.cp.command("env.destroy", env, {}, timeout=300)
        except Exception:
            pass
        self.rm_env_docker(env)

    @staticmethod
    def rm_env_docker(env):
        """Containers and networks of env (ours), by its label and project."""
        c = B.sh("docker", "ps", "-aq", "--filter", "label=ai.denv.env=" + env).stdout.split()
        if c:
            B.sh("docker", "rm", "-f", "-v", *c)
        n = B.sh("docker", "network", "ls", "-q", "--filter", "label=ai.denv.env=" + env).stdout.split()
        if n:
            B.sh("docker", "network", "rm", *n)
        remove_project(env.lower())

    def close(self):
        try:
            if self.d and self.d.proc and self.d.proc.poll() is None and self.cp and self.cp.conn is not None:
                for env in reversed(self.envs):
                    try:
                        self.cp.command("env.destroy", env, {}, timeout=120)
                    except Exception:
                        pass
            if self.d:
                self.d.kill(signal.SIGTERM)
            for env in self.envs:
                self.rm_env_docker(env)
            B.docker_rm_prefixed()  # baseline containers bind-mount the btrfs image
        finally:
            if self.cp:
                try:
                    self.cp.server.shutdown()
                except Exception:
                    pass
            if self.fs:
                self.fs.close()
            if os.environ.get("BENCH_KEEP"):
                B.log("kept " + self.tmp)
            else:
                shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- one parent, then alternating fork / baseline ----

    def parent(self, mib):
        """A parent environment holding mib MiB, snapshotted: (env, snapshot,
        the snapshot's volume directory, frozen_for)."""
        p = self.env("P")
        command(self.cp, "env.create", p, SPEC, timeout=300)
        vol = volume_of(p.lower() + "-app-1")
        fill(vol, mib)
        snap = "ver_S" + secrets.token_hex(4).upper()
        res = command(self.cp, "env.snapshot", p, {"name": snap}, timeout=900)
        src = os.path.join(self.root, "snaps", p, snap, "data")
        if not os.path.isdir(src):
            B.log("no %s: the baseline copies the parent's live volume instead" % src)
            src = vol
        return p, snap, src, res.get("frozen_for")

    def fork(self, p, snap):
        """env.fork end to end: (seconds, denvd's forked_in, the fork's id)."""
        f = self.env("F")
        t0 = B.now()
        res = command(self.cp, "env.fork", f, {"from_env": p, "from_snapshot": snap, "services": SERVICES,
                                               "volumes": ["data"], "egress": "deny"}, timeout=900)
        return B.now() - t0, res.get("forked_in"), f

    def baseline(self, src, i):
        """The raw equivalent: (seconds, what to tear down)."""
        dst = os.path.join(self.raw, "b%d-%s" % (i, secrets.token_hex(3)))
        names = [B.PREFIX + "app-" + os.path.basename(dst), B.PREFIX + "side-" + os.path.basename(dst)]
        t0 = B.now()
        if self.backend == "btrfs":
            argv = ["btrfs", "subvolume", "snapshot", src, dst]
        else:
            argv = ["cp", "-a", src, dst]
        r = B.sh(*argv, timeout=900)
        B.need(r.returncode == 0, "%s: %s" % (" ".join(argv[:3]), r.stderr.strip()))
        for name, svc in zip(names, SERVICES):
            mount = ["-v", dst + ":/data"] if svc["volumes"] else []
            r = B.sh("docker", "run", "-d", "--name", name, *mount, svc["image"], *svc["command"], timeout=300)
            B.need(r.returncode == 0, "docker run %s: %s" % (svc["name"], r.stderr.strip()))
        return B.now() - t0, (dst, names)

    def unbaseline(self, what):
        dst, names = what
        B.sh("docker", "rm", "-f", "-v", *names)
        if self.backend == "btrfs":
            B.sh("btrfs", "subvolume", "delete", dst)
        else:
            shutil.rmtree(dst, ignore_errors=True)


def one_backend(backend, n):
    run = None
    done = set()
    try:
        if backend == "btrfs":
            B.need(B.which("btrfs"), "btrfs not installed (btrfs-progs)")
        run = Run(backend)
        run.start()
        # One parent per size, then rounds: each round forks every size once
        # and runs every size's baseline, in two blocks (all forks, then all
        # baselines, or the other way round: alternating per round), so that
        # load drifting over the run touches every row alike and every op
        # follows the same kind of op on a smaller size. (Back to back, the
        # second of two 1 GiB copies was much faster than the first here;
        # in blocks, no op of either side gets that advantage.) Round 0 is
        # not recorded: the first container starts after denvd's start pay
        # for caches.
        parents = {mib: run.parent(mib) for mib in SIZES}
        fork_s = {mib: [] for mib in SIZES}
        base_s = {mib: [] for mib in SIZES}
        forked_in = {mib: [] for mib in SIZES}
        for rnd in range(1 + n):
            for what in (("fork", "base") if rnd % 2 == 0 else ("base", "fork")):
                for mib in SIZES:
                    p, snap, src, _ = parents[mib]
                    k = key(backend, mib)
                    warm(src)
                    if what == "fork":
                        t, fi, f = run.fork(p, snap)
                        run.destroy(f)
                        if rnd:
                            B.sample(k, t)
                            fork_s[mib].append(t)
                            forked_in[mib].append(B.parse_ms(fi))
                    else:
                        t, td = run.baseline(src, rnd)
                        run.unbaseline(td)
                        if rnd:
                            B.base(k, t)
                            base_s[mib].append(t)
                    os.sync()
        for mib in SIZES:
            fi_ms = [x for x in forked_in[mib] if x is not None]
            B.note("fork %s %s: fork %s s (denvd's own forked_in median %s), baseline %s s; "
                   "the parent's snapshot froze it for %s" % (
                       backend, size_label(mib), " ".join("%.2f" % x for x in fork_s[mib]),
                       "%.0f ms" % B.median(fi_ms) if fi_ms else "?",
                       " ".join("%.2f" % x for x in base_s[mib]), parents[mib][3] or "?"))
            done.add(key(backend, mib))
        if backend == "btrfs":
            for t in fork_s[SIZES[-1]]:
                B.sample("fork_btrfs_flat", t)
            for t in fork_s[0]:
                B.base("fork_btrfs_flat", t)
            done.add("fork_btrfs_flat")
    except B.Pending as p:
        for k in keys(backend):
            if k not in done:
                B.pending(k, p)
    except (OSError, subprocess.SubprocessError, RuntimeError) as ex:
        for k in keys(backend):
            if k not in done:
                B.pending(k, "%s: %s" % (type(ex).__name__, ex))
    finally:
        if run:
            run.close()


def interrupted(signum, frame):
    raise KeyboardInterrupt("signal %d" % signum)


def body():
    # SIGTERM/SIGHUP unwind like ^C, through the clean-ups (loop mount,
    # containers, temp dirs).
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, interrupted)
    declare()
    why = ""
    if FakeCP is None:
        why = IMPORT_ERROR
    elif os.geteuid() != 0:
        why = "needs root (loop mount, volumes owned by other uids)"
    elif not os.access(os.path.join(B.TOP, "bin", "denvd"), os.X_OK):
        why = "bin/denvd not built (make bin/denvd)"
    else:
        r = subprocess.run(["sh", B.TOP + "/t/docker-up.sh", "busybox"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True)
        if r.returncode != 0:
            why = "no Docker engine or fixture image (t/docker-up.sh busybox): " + (r.stderr.strip() or "failed")
    if why:
        for b in BACKENDS:
            for k in keys(b):
                B.pending(k, why)
        return
    n = B.runs(5, 2)
    for b in BACKENDS:
        one_backend(b, n)
    tmp = os.environ.get("TMPDIR") or "/tmp"
    fs = B.sh("df", "-PT", tmp).stdout.splitlines()[-1:]
    B.note("fork: the baseline starts the two containers with plain `docker run -d` on Docker's default "
           "network; the fork also makes the environment's network, waits for health and probes that egress "
           "is denied. dir data in %s (%s; on a filesystem with reflinks both sides share extents)" % (
               tmp, fs[0].split()[1] if fs and len(fs[0].split()) > 1 else "?"))


if __name__ == "__main__":  # bench/fork-pg.sh imports Run from here
    B.main(body)
