"""Snapshots that move between hosts, through the REAL control plane
(bin/denv-cp) and three real denvd processes on this machine (separate state
files and data dirs): a version deployed on one host is forked onto another
(pinned by the fork's host field); the snapshot moves (progress events with
the bytes so far, the clone's evidence says how), the fork holds the
snapshot's PostgreSQL row and file, and the version then lists both hosts.
A second fork on that host moves nothing. A stream corrupted on the source
after its export is refused by the third host (sha256 mismatch): the fork
fails saying so, and nothing of the move stays there.
Usage: test_move_cp.py TOP TMP [--btrfs-base DIR | --zfs]  (each host's
btrfs root under DIR: the move is then btrfs send/receive; --zfs: each host
on a pool of its own of the FAKE zfs in t/fakes/zfs, zfs send/receive; else
a tar stream)."""
import json
import glob
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import TAP, remove_project  # noqa: E402
import subprocess  # noqa: E402
from realcp import QUICKSTART as COMPOSE, RealCP  # noqa: E402

top, tmp = sys.argv[1], sys.argv[2]
btrfs_base = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--btrfs-base" else None
zfs = len(sys.argv) > 3 and sys.argv[3] == "--zfs"
fmt = "btrfs" if btrfs_base else "zfs" if zfs else "tar"
t = TAP()
rcp = RealCP(top, tmp, 20500)
req = rcp.req
PG = ["psql", "-U", "postgres", "-h", "/run/postgresql", "-v", "ON_ERROR_STOP=1", "-qAt"]
NAMES = ("ha", "hb", "hc")


def start_host(name, token):
    """denvd join with its own state file, data dir and log under tmp/<name>."""
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    extra, env = [], dict(os.environ)
    if btrfs_base:
        os.makedirs(os.path.join(btrfs_base, name), exist_ok=True)
        extra = ["--btrfs-root", os.path.join(btrfs_base, name)]
    if zfs:
        extra = ["--zfs-pool", "tank"]
        env.update(PATH=top + "/t/fakes/zfs:" + env.get("PATH", ""), DENV_FAKE_ZFS=d + "/zfs", DENV_FAKE_ZPOOL="tank")
    log = open(os.path.join(d, "denvd.log"), "w")
    return subprocess.Popen([top + "/bin/denvd", "join", "--server", rcp.srv, "--token", token,
                             "--state", d + "/host.json", "--data", d + "/data",
                             "--probe-image", "denv-test/busybox", "--probe-url", "http://127.0.0.1:9/"] + extra,
                            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)


def zfs_snaps(name, snap):
    """The fake pool of host name: its snapshots called snap."""
    p = os.path.join(tmp, name, "zfs", "state.json")
    return [k for k in json.load(open(p))["snaps"] if k.endswith("@" + snap)] if os.path.exists(p) else []


def connected_ids():
    st, h = req("GET", "/v1/hosts")
    return [x["ID"] for x in (h.get("hosts", []) if st == 200 else []) if x.get("connected")]


def wait_new_host(known, limit=30):
    end = time.time() + limit
    while time.time() < end:
        new = [i for i in connected_ids() if i not in known]
        if new:
            return new[0]
        time.sleep(0.2)
    return None


def wait_dep(st, r, limit=300):
    if st != 202:
        return {"error": (st, r)}
    return rcp.wait_dep(r["deployment"]["ID"], limit)


def phases(dd):
    return {p["Name"]: p for p in dd.get("phases", [])}


def evidence(ph, name):
    return (ph.get(name) or {}).get("Evidence") or {}


def status(dd):
    return dd.get("deployment", {}).get("Status")


def run(env, svc, cmd):
    st, r = req("POST", "/v1/envs/%s/exec" % env, {"service": svc, "cmd": cmd})
    return r.get("stdout", "").strip() if st == 200 and isinstance(r, dict) else "<%s %s>" % (st, r)


def sql(env, q):
    return run(env, "db", PG + ["-c", q])


def holders(env, vid):
    st, r = req("GET", "/v1/envs/%s/versions" % env)
    for v in (r.get("versions", []) if st == 200 else []):
        if v["ID"] == vid:
            return v.get("SnapshotHosts") or []
    return None


def fork(env, vid, host, name):
    dd = wait_dep(*req("POST", "/v1/envs/%s/fork" % env, {"version": vid, "name": name, "host": host}))
    envs.append(dd.get("deployment", {}).get("EnvID"))
    return dd


procs, envs, ids = {}, [], {}
try:
    rcp.wait_up()
    for n in NAMES:
        st, tok = req("POST", "/v1/join-tokens", {})
        procs[n] = start_host(n, tok["token"])
        ids[n] = wait_new_host(list(ids.values()))
    t.ok(all(ids.values()), "three denvd hosts join (%s)" % fmt, ids)
    # The deploy lands where placement puts it; the other two are the targets.
    req("POST", "/v1/projects", {"name": "mv"})
    dd = wait_dep(*req("POST", "/v1/projects/mv/deploy", {"compose": COMPOSE}))
    env = dd.get("deployment", {}).get("EnvID")
    envs.append(env)
    t.ok(status(dd) == "succeeded", "the deploy succeeds", dd)
    src = req("GET", "/v1/envs/%s" % env)[1]["environment"]["HostID"]
    src_name = [n for n in NAMES if ids[n] == src][0]
    dst_b, dst_c = [n for n in NAMES if n != src_name]
    run(env, "box", ["sh", "-c", "echo moved-file-content > /home/agent/known.txt"])
    sql(env, "CREATE TABLE t (x text); INSERT INTO t VALUES ('row-that-moves')")
    dd = wait_dep(*req("POST", "/v1/envs/%s/snapshot" % env, {}))
    v2 = dd.get("deployment", {}).get("VersionID")
    t.ok(status(dd) == "succeeded", "a snapshot of the row and the file succeeds", dd)

    dd = fork(env, v2, ids[dst_b], "f-b")
    ph = phases(dd)
    fb = dd.get("deployment", {}).get("EnvID")
    moved = evidence(ph, "clone").get("moved") or {}
    t.diag("clone evidence on %s: %s" % (dst_b, evidence(ph, "clone")))
    t.ok(status(dd) == "succeeded" and evidence(ph, "place").get("host") == ids[dst_b],
         "a fork pinned to another host succeeds there", (dd, open(os.path.join(tmp, "cp.log")).read()[-3000:]))
    t.ok(moved.get("from_host") == src and moved.get("to_host") == ids[dst_b] and moved.get("format") == fmt
         and moved.get("bytes", 0) > 0, "the clone's evidence says the snapshot moved (%s, %s bytes)"
         % (moved.get("format"), moved.get("bytes")), moved)
    st, evs = req("GET", "/v1/events?subject=dep:%s" % dd.get("deployment", {}).get("ID"))
    prog = [e["Body"] for e in (evs.get("events", []) if st == 200 else []) if (e.get("Body") or {}).get("move")]
    t.ok(prog and max(p["bytes"] for p in prog) == moved.get("bytes") and min(p["bytes"] for p in prog) == 0,
         "progress events count the bytes moved (%d events)" % len(prog), prog)
    t.ok(sql(fb, "SELECT x FROM t") == "row-that-moves", "the fork on the other host has the PostgreSQL row")
    t.ok(run(fb, "box", ["cat", "/home/agent/known.txt"]) == "moved-file-content",
         "the fork on the other host has the file",
         run(fb, "box", ["ls", "-ln", "/home/agent"]))
    t.ok(sorted(holders(env, v2) or []) == sorted([src, ids[dst_b]]),
         "the version lists both hosts as holding its snapshot", holders(env, v2))

    dd = fork(env, v2, ids[dst_b], "f-b2")
    ph = phases(dd)
    t.ok(status(dd) == "succeeded" and "moved" not in evidence(ph, "clone"),
         "a second fork on that host moves nothing", ph.get("clone"))

    # Corrupt the source's exported stream of the db volume (same size):
    # the next host's digest check must refuse it.
    streams = glob.glob(os.path.join(tmp, src_name, "data", "moves", "out.%s.pg.%s" % (v2, fmt)))
    if streams:
        with open(streams[0], "r+b") as f:
            f.seek(os.path.getsize(streams[0]) // 2)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0xFF]))
    dd = fork(env, v2, ids[dst_c], "f-c")
    err = dd.get("deployment", {}).get("Error", "")
    t.ok(streams and status(dd) == "failed" and "sha256 mismatch" in err and "clone" in err,
         "a corrupted stream is refused with a clear error: %s" % err[:200], (streams, dd))
    cdata = os.path.join(tmp, dst_c, "data")
    left = glob.glob(os.path.join(cdata, "moves", "in.*")) + glob.glob(os.path.join(cdata, "snaps", "*", v2))
    if btrfs_base:
        left += glob.glob(os.path.join(btrfs_base, dst_c, "snaps", "*", v2))
    if zfs:
        left += zfs_snaps(dst_c, v2)
    t.ok(not left, "nothing of the refused move stays on that host", left)
    t.ok(ids[dst_c] not in (holders(env, v2) or []), "the version does not list the refusing host",
         holders(env, v2))

    for e in reversed(envs):
        if e:
            wait_dep(*req("DELETE", "/v1/envs/%s" % e))
finally:
    for p in procs.values():
        p.kill()
        p.wait()
    rcp.proc.kill()
    rcp.proc.wait()
    for e in envs:
        if e:
            remove_project(e.lower())
sys.exit(t.done())
