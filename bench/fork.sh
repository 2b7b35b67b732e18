#!/bin/sh
# fork.sh: fork latency against volume size, on the dir and btrfs backends,
# beside the raw operations on the same data: `cp -a` of the volume and
# `btrfs subvolume snapshot` of it. For 0, 100 MiB and 1 GiB of volume data
# in a two-service environment (busybox; one service holds the volume), it
# prints: the snapshot's frozen_for, the end-to-end env.fork time (clone,
# network, two containers, health, egress probe), the sidecar's forked_in,
# and the raw figures. Prints figures, asserts nothing.
#
# Needs root, Docker (t/docker-up.sh), btrfs-progs, python/.venv with
# websockets. btrfs runs on an image FILE in this run's own temp dir, loop-
# mounted there and detached on every exit. QUICK=1 skips 1 GiB.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
py=$top/python/.venv/bin/python
bin=$top/bin/denvd
die() { echo "fork.sh: $*" >&2; exit 1; }
[ -x "$bin" ] || die "$bin not built (make bin/denvd)"
[ "$(id -u)" = 0 ] || die "needs root (loop mount, volumes owned by other uids)"
"$py" -c 'import websockets' 2>/dev/null || die "python/.venv with websockets needed"
for c in mkfs.btrfs btrfs losetup mount umount; do command -v $c >/dev/null 2>&1 || die "$c not installed"; done
sh "$top/t/docker-up.sh" busybox >/dev/null 2>&1 || die "no Docker engine (t/docker-up.sh)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-fork.XXXXXX")
dev=
cleanup() {
	if mountpoint -q "$tmp/mnt" 2>/dev/null; then
		umount "$tmp/mnt" 2>/dev/null || { sleep 1; umount "$tmp/mnt" 2>/dev/null; } || umount -l "$tmp/mnt"
	fi
	[ -n "$dev" ] && losetup -d "$dev" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
truncate -s 5G "$tmp/btrfs.img"
mkfs.btrfs -q "$tmp/btrfs.img" >/dev/null 2>&1 || die "mkfs.btrfs on the image file failed"
dev=$(losetup --find --show "$tmp/btrfs.img") || { dev=; die "no loop device"; }
mkdir "$tmp/mnt"
mount -t btrfs "$dev" "$tmp/mnt" || die "cannot mount the loop device"
mkdir "$tmp/mnt/root" "$tmp/mnt/raw"
"$py" - "$top" "$tmp" <<'PY'
import json, os, secrets, subprocess, sys, time
top, tmp = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(top, "t", "sidecar"))
from fakecp import FakeCP, Denvd, docker, remove_project  # noqa: E402

sizes = [0, 100] + ([] if os.environ.get("QUICK") not in (None, "", "0") else [1024])
services = [
    {"name": "app", "image": "denv-test/busybox", "command": ["sleep", "3600"], "env": {}, "user": "",
     "volumes": ["data:/data"], "ports": [], "depends_on": [], "resources": {}},
    {"name": "side", "image": "denv-test/busybox", "command": ["sleep", "3600"], "env": {}, "user": "",
     "volumes": [], "ports": [], "depends_on": [], "resources": {}},
]
spec = {"version": "ver_b", "egress": "deny", "volumes": ["data"], "warm": [], "services": services}


def timed(argv):
    t0 = time.time()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.time() - t0


def ms(s):
    return "%.0f ms" % (s * 1000) if s < 10 else "%.1f s" % s


rows = []
for backend in ("dir", "btrfs"):
    cp = FakeCP()
    wd = os.path.join(tmp, backend)
    os.makedirs(wd)
    extra = ["--probe-image", "denv-test/busybox", "--probe-url", "http://127.0.0.1:9/"]
    if backend == "btrfs":
        extra += ["--btrfs-root", os.path.join(tmp, "mnt", "root")]
    d = Denvd(os.path.join(top, "bin", "denvd"), wd, cp.url, token=cp.token, extra=extra)
    d.start()
    cp.wait_conn(15)
    try:
        for size in sizes:
            tag = secrets.token_hex(4).upper()
            P, F = "env_BFP" + tag, "env_BFF" + tag
            res, _, _, _ = cp.command("env.create", P, spec, timeout=240)
            assert res and res["ok"], res
            ins = json.loads(docker("inspect", P.lower() + "-app-1").stdout)[0]
            vol = [m["Source"] for m in ins["Mounts"] if m["Destination"] == "/data"][0]
            left = size << 20
            i = 0
            while left > 0:      # incompressible data, in 64 MiB files
                n = min(left, 64 << 20)
                with open(os.path.join(vol, "blob%02d" % i), "wb") as f:
                    f.write(os.urandom(n))
                left -= n
                i += 1
            os.sync()
            res, _, _, _ = cp.command("env.snapshot", P, {"name": "ver_S" + tag}, timeout=600)
            assert res and res["ok"], res
            frozen = res["payload"]["frozen_for"]
            t0 = time.time()
            res, _, _, _ = cp.command("env.fork", F, {"from_env": P, "from_snapshot": "ver_S" + tag,
                                                      "services": services, "volumes": ["data"], "egress": "deny"},
                                      timeout=600)
            fork_s = time.time() - t0
            assert res and res["ok"], res
            forked_in = res["payload"]["forked_in"]
            if backend == "dir":
                raw_dst = os.path.join(wd, "raw-" + tag)
                raw_cp = timed(["cp", "-a", vol, raw_dst])
                raw_snap = None
            else:
                raw_dst = os.path.join(tmp, "mnt", "raw", "cp-" + tag)
                raw_cp = timed(["cp", "-a", vol, raw_dst])
                raw_snap = timed(["btrfs", "subvolume", "snapshot", vol, os.path.join(tmp, "mnt", "raw", "s-" + tag)])
                subprocess.run(["btrfs", "subvolume", "delete", os.path.join(tmp, "mnt", "raw", "s-" + tag)],
                               stdout=subprocess.DEVNULL)
            subprocess.run(["rm", "-rf", raw_dst])
            rows.append((backend, size, frozen, fork_s, forked_in, raw_cp, raw_snap))
            print("# %s %4d MiB: frozen_for %s, fork %s (forked_in %s), cp -a %s%s" % (
                backend, size, frozen, ms(fork_s), forked_in, ms(raw_cp),
                ", btrfs subvolume snapshot %s" % ms(raw_snap) if raw_snap is not None else ""), file=sys.stderr)
            for e in (F, P):
                cp.command("env.destroy", e, {}, timeout=300)
    finally:
        d.kill()
        for e in list(docker("ps", "-a", "--format", "{{.Label \"com.docker.compose.project\"}}").stdout.split()):
            if e.startswith("env_bf"):
                remove_project(e)

print("fork latency: a two-service environment (busybox), volume data incompressible; dir on the data dir's")
print("filesystem, btrfs on a loop-mounted image file. fork = env.fork end to end as the control plane sees it.")
print("%-6s %9s %12s %12s %12s %12s %16s" % ("store", "data", "frozen_for", "fork", "forked_in", "cp -a", "btrfs snapshot"))
for b, size, frozen, fork_s, forked_in, raw_cp, raw_snap in rows:
    print("%-6s %5d MiB %12s %12s %12s %12s %16s" % (b, size, frozen, ms(fork_s), forked_in, ms(raw_cp),
                                                    ms(raw_snap) if raw_snap is not None else "-"))
print("(cp -a is coreutils' default --reflink=auto: on btrfs it shares extents instead of copying)")
PY
