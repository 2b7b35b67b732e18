#!/usr/bin/env python3
"""A FAKE zfs(8) and zpool(8) for denvd's tests: no ZFS kernel module exists
on these machines. Installed as t/fakes/zfs/zfs and t/fakes/zfs/zpool
(symlinks to this file) and put first in PATH.

It keeps its pool in $DENV_FAKE_ZFS (state.json, calls.log, mnt/): datasets
are real directories at their mountpoints ($DENV_FAKE_ZFS/mnt/<dataset>, so
Docker can bind-mount them), snapshots are copies, clones copies of a
snapshot that remember their origin. It refuses what real zfs refuses and
denvd must never ask for: destroying a snapshot or a filesystem that has
dependent clones (without -R), rolling back past newer snapshots (without
-r), creating over an existing dataset or under a missing parent (without
-p), cloning a missing snapshot, receiving over an existing dataset. send
writes a stream of its own (magic, name, a tar) that receive reads back.
Every call is appended to calls.log as
"<exit>\t<argv...>" so a test can check the sequence. The pool is
$DENV_FAKE_ZPOOL (default "tank")."""
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tarfile

root = os.environ.get("DENV_FAKE_ZFS")
pool = os.environ.get("DENV_FAKE_ZPOOL", "tank")
if not root:
    sys.stderr.write("fake zfs: DENV_FAKE_ZFS is not set\n")
    sys.exit(2)


class Fail(Exception):
    pass


def load():
    p = os.path.join(root, "state.json")
    if os.path.exists(p):
        return json.load(open(p))
    mp = os.path.join(root, "mnt", pool)
    os.makedirs(mp, exist_ok=True)
    return {"seq": 0, "ds": {pool: {"mp": mp, "explicit_mp": None, "origin": None}}, "snaps": {}}


def save(st):
    p = os.path.join(root, "state.json")
    with open(p + ".tmp", "w") as f:
        json.dump(st, f, indent=1)
    os.rename(p + ".tmp", p)


def copytree(src, dst):
    """cp -a src/. dst/ (dst exists)."""
    subprocess.run(["cp", "-a", src + "/.", dst + "/"], check=True)


def empty(d):
    for n in os.listdir(d):
        p = os.path.join(d, n)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        else:
            os.unlink(p)


def parent(name):
    return name.rsplit("/", 1)[0] if "/" in name else None


def inherited_mp(st, name):
    par = st["ds"].get(parent(name))
    if par is None or par["mp"] is None:
        return None
    return par["mp"] + "/" + name.rsplit("/", 1)[1]


def children(st, name, recursive=True):
    return sorted(n for n in st["ds"] if n.startswith(name + "/") and (recursive or "/" not in n[len(name) + 1:]))


def snaps_of(st, name):
    return sorted((s for s in st["snaps"] if s.split("@")[0] == name), key=lambda s: st["snaps"][s]["seq"])


def clones_of(st, snap):
    return sorted(n for n, d in st["ds"].items() if d["origin"] == snap)


def datadir(st, name):
    d = st["ds"][name]
    return d["mp"] if d["mp"] else os.path.join(root, "hidden", name.replace("/", "%"))


def make_ds(st, name, mp_opt=None, origin=None):
    mp = mp_opt if mp_opt is not None else inherited_mp(st, name)
    if mp == "none":
        mp = None
    st["ds"][name] = {"mp": mp, "explicit_mp": mp_opt, "origin": origin}
    os.makedirs(datadir(st, name), exist_ok=True)


def parse_opts(args, flags, with_value=()):
    opts, rest = {}, []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and len(a) > 1 and not rest:
            for j, ch in enumerate(a[1:]):
                if ch in with_value:
                    v = a[j + 2:] or args[i + 1]
                    if not a[j + 2:]:
                        i += 1
                    opts.setdefault(ch, []).append(v)
                    break
                if ch not in flags:
                    raise Fail("invalid option '%s'" % ch)
                opts[ch] = True
        else:
            rest.append(a)
        i += 1
    return opts, rest


def cmd_create(st, args):
    o, r = parse_opts(args, "p", "o")
    if len(r) != 1:
        raise Fail("usage: create [-p] [-o property=value] filesystem")
    name = r[0]
    if name in st["ds"]:
        raise Fail("cannot create '%s': dataset already exists" % name)
    mp = None
    for kv in o.get("o", []):
        k, _, v = kv.partition("=")
        if k == "mountpoint":
            mp = v
    missing = []
    p = parent(name)
    while p and p not in st["ds"]:
        missing.append(p)
        p = parent(p)
    if missing and not o.get("p"):
        raise Fail("cannot create '%s': parent does not exist" % name)
    for m in reversed(missing):
        make_ds(st, m)
    make_ds(st, name, mp)


def cmd_snapshot(st, args):
    o, r = parse_opts(args, "r")
    if not r:
        raise Fail("usage: snapshot [-r] <filesystem@snapname>...")
    todo = []
    for s in r:
        ds, _, sn = s.partition("@")
        if ds not in st["ds"] or not sn:
            raise Fail("cannot create snapshot '%s': dataset does not exist" % s)
        for n in [ds] + (children(st, ds) if o.get("r") else []):
            if n + "@" + sn in st["snaps"]:
                raise Fail("cannot create snapshot '%s@%s': dataset already exists" % (n, sn))
            todo.append(n + "@" + sn)
    for s in todo:      # all or nothing, as one transaction group
        st["seq"] += 1
        d = os.path.join(root, "snaps", s.replace("/", "%"))
        os.makedirs(d)
        copytree(datadir(st, s.split("@")[0]), d)
        st["snaps"][s] = {"seq": st["seq"], "dir": d}


def cmd_clone(st, args):
    o, r = parse_opts(args, "p", "o")
    if len(r) != 2:
        raise Fail("usage: clone <snapshot> <filesystem>")
    snap, dst = r
    if snap not in st["snaps"]:
        raise Fail("cannot open '%s': dataset does not exist" % snap)
    if dst in st["ds"]:
        raise Fail("cannot create '%s': dataset already exists" % dst)
    if parent(dst) not in st["ds"]:
        raise Fail("cannot create '%s': parent does not exist" % dst)
    make_ds(st, dst, origin=snap)
    copytree(st["snaps"][snap]["dir"], datadir(st, dst))


def cmd_rollback(st, args):
    o, r = parse_opts(args, "rRf")
    if len(r) != 1 or "@" not in r[0]:
        raise Fail("usage: rollback [-rRf] <snapshot>")
    snap = r[0]
    if snap not in st["snaps"]:
        raise Fail("cannot open '%s': dataset does not exist" % snap)
    ds = snap.split("@")[0]
    later = [s for s in snaps_of(st, ds) if st["snaps"][s]["seq"] > st["snaps"][snap]["seq"]]
    if later and not o.get("r"):
        raise Fail("cannot rollback to '%s': more recent snapshots or bookmarks exist\n"
                   "use '-r' to force deletion of the following snapshots and bookmarks:\n%s"
                   % (snap, "\n".join(later)))
    for s in later:
        if clones_of(st, s):
            raise Fail("cannot destroy '%s': snapshot has dependent clones" % s)
    for s in later:
        shutil.rmtree(st["snaps"].pop(s)["dir"])
    d = datadir(st, ds)
    empty(d)
    copytree(st["snaps"][snap]["dir"], d)


def destroy_snap(st, s):
    if clones_of(st, s):
        raise Fail("cannot destroy snapshot %s: snapshot has dependent clones\n"
                   "use '-R' to destroy the following datasets:\n%s" % (s, "\n".join(clones_of(st, s))))
    shutil.rmtree(st["snaps"].pop(s)["dir"])


def cmd_destroy(st, args):
    o, r = parse_opts(args, "rRf")
    if len(r) != 1:
        raise Fail("usage: destroy [-rRf] <filesystem|snapshot>")
    t = r[0]
    if "@" in t:
        ds, _, sn = t.partition("@")
        targets = [n + "@" + sn for n in [ds] + (children(st, ds) if o.get("r") or o.get("R") else [])
                   if n + "@" + sn in st["snaps"]]
        if not targets:
            raise Fail("could not find any snapshots to destroy; check snapshot names.")
        for s in targets:
            if clones_of(st, s) and not o.get("R"):
                destroy_snap(st, s)     # raises
        for s in targets:
            for c in clones_of(st, s):
                destroy_tree(st, c)
            destroy_snap(st, s)
        return
    if t not in st["ds"]:
        raise Fail("cannot open '%s': dataset does not exist" % t)
    if t == pool:
        raise Fail("cannot destroy '%s': operation does not apply to pools" % t)
    tree = [t] + children(st, t)
    if not (o.get("r") or o.get("R")) and (children(st, t) or snaps_of(st, t)):
        raise Fail("cannot destroy '%s': filesystem has children\nuse '-r' to destroy the following datasets" % t)
    dependents = [c for n in tree for s in snaps_of(st, n) for c in clones_of(st, s)]
    outside = [c for c in dependents if c != t and not c.startswith(t + "/")]
    if dependents and not o.get("R"):
        raise Fail("cannot destroy '%s': filesystem has dependent clones\n"
                   "use '-R' to destroy the following datasets:\n%s" % (t, "\n".join(dependents)))
    if outside:     # -R would take them: the harness refuses, denvd must never do it
        raise Fail("FAKE: refusing -R that would destroy clones outside %s: %s" % (t, " ".join(outside)))
    destroy_tree(st, t)


def destroy_tree(st, t):
    for n in reversed([t] + children(st, t)):
        for s in reversed(snaps_of(st, n)):
            for c in clones_of(st, s):
                destroy_tree(st, c)
            shutil.rmtree(st["snaps"].pop(s)["dir"])
        shutil.rmtree(datadir(st, n), ignore_errors=True)
        del st["ds"][n]


def cmd_rename(st, args):
    o, r = parse_opts(args, "pf")
    if len(r) != 2:
        raise Fail("usage: rename <filesystem> <filesystem>")
    a, b = r
    if a not in st["ds"]:
        raise Fail("cannot open '%s': dataset does not exist" % a)
    if b in st["ds"]:
        raise Fail("cannot rename to '%s': dataset already exists" % b)
    if parent(b) not in st["ds"]:
        raise Fail("cannot rename to '%s': parent does not exist" % b)
    if children(st, a):
        raise Fail("FAKE: renaming a dataset with children is not modelled")
    old_dir = datadir(st, a)
    d = st["ds"].pop(a)
    st["ds"][b] = d
    if d["explicit_mp"] is None:
        d["mp"] = inherited_mp(st, b)
    new_dir = datadir(st, b)
    os.makedirs(os.path.dirname(new_dir), exist_ok=True)
    os.rename(old_dir, new_dir)
    for s in snaps_of(st, a):
        st["snaps"][b + "@" + s.split("@")[1]] = st["snaps"].pop(s)
    for n, x in st["ds"].items():
        if x["origin"] and x["origin"].split("@")[0] == a:
            x["origin"] = b + "@" + x["origin"].split("@")[1]


STREAM_MAGIC = b"FAKEZFS-SEND 1\n"


def cmd_send(st, args):
    """zfs send SNAPSHOT > stream: this fake's own stream (a magic line, the
    snapshot's name, then a tar of its copy); real zfs's is opaque too."""
    o, r = parse_opts(args, "")
    if len(r) != 1 or "@" not in r[0]:
        raise Fail("usage: send <snapshot>")
    snap = r[0]
    if snap not in st["snaps"]:
        raise Fail("cannot open '%s': dataset does not exist" % snap)
    if os.isatty(1):
        raise Fail("Error: Stream can not be written to a terminal.\nYou must redirect standard output.")
    out = sys.stdout.buffer
    out.write(STREAM_MAGIC + snap.encode() + b"\n")
    out.flush()
    with tarfile.open(fileobj=out, mode="w|") as tf:
        tf.add(st["snaps"][snap]["dir"], arcname=".")


def cmd_receive(st, args):
    """zfs receive [-u] FS@SNAP < stream: a new dataset FS (its parent must
    exist) holding the stream's data, and its snapshot SNAP."""
    o, r = parse_opts(args, "uF")
    if len(r) != 1 or "@" not in r[0]:
        raise Fail("usage: receive [-u] <filesystem@snapname>")
    ds, _, sn = r[0].partition("@")
    inp = sys.stdin.buffer
    if inp.read(len(STREAM_MAGIC)) != STREAM_MAGIC:
        raise Fail("cannot receive: invalid stream (bad magic number)")
    inp.readline()      # the sent snapshot's name: the target names its own
    if ds in st["ds"]:
        raise Fail("destination '%s' exists\nmust specify -F to overwrite it" % ds)
    if parent(ds) not in st["ds"]:
        raise Fail("cannot receive new filesystem stream: destination '%s' does not exist" % parent(ds))
    make_ds(st, ds)
    try:
        with tarfile.open(fileobj=inp, mode="r|") as tf:
            tf.extractall(datadir(st, ds), numeric_owner=True)
    except (tarfile.TarError, OSError) as e:
        shutil.rmtree(datadir(st, ds), ignore_errors=True)
        del st["ds"][ds]
        raise Fail("cannot receive: invalid stream (%s)" % e)
    cmd_snapshot(st, [ds + "@" + sn])


def prop(st, name, col):
    if "@" in name:
        s = st["snaps"][name]
        return {"name": name, "clones": ",".join(clones_of(st, name)) or "-", "creation": str(s["seq"]),
                "mountpoint": "-", "origin": "-", "type": "snapshot"}.get(col, "-")
    d = st["ds"][name]
    return {"name": name, "mountpoint": d["mp"] or "none", "origin": d["origin"] or "-", "clones": "-",
            "creation": "0", "type": "filesystem"}.get(col, "-")


def cmd_list(st, args):
    o, r = parse_opts(args, "Hrp", "otsd")
    cols = ",".join(o.get("o", ["name,used,avail,refer,mountpoint"])).split(",")
    types = ",".join(o.get("t", ["filesystem"])).split(",")
    depth = int(o["d"][0]) if "d" in o else (1 << 30 if o.get("r") else 0)
    names = []
    tops = r or [pool]
    if not r:
        depth = 1 << 30
    for top in tops:
        if top not in st["ds"] and top not in st["snaps"]:
            raise Fail("cannot open '%s': dataset does not exist" % top)
        if "@" in top:
            names.append(top)
            continue
        fs = [top] + [c for c in children(st, top) if c[len(top):].count("/") <= depth]
        for n in fs:
            if "filesystem" in types or "all" in types:
                names.append(n)
            if ("snapshot" in types or "all" in types) and (n != top or depth >= 1 or not r) and \
                    (n == top or n[len(top):].count("/") < depth):
                names.extend(snaps_of(st, n))
    if "s" in o and o["s"][0] == "creation":
        names.sort(key=lambda n: st["snaps"][n]["seq"] if "@" in n else 0)
    for n in names:
        print("\t".join(prop(st, n, c) for c in cols))


def cmd_get(st, args):
    o, r = parse_opts(args, "Hp", "o")
    if len(r) != 2:
        raise Fail("usage: get [-H] [-o field] property dataset")
    p, n = r
    if n not in st["ds"] and n not in st["snaps"]:
        raise Fail("cannot open '%s': dataset does not exist" % n)
    v = prop(st, n, p)
    if o.get("o", ["name,property,value,source"])[0] == "value":
        print(v)
    else:
        print("\t".join([n, p, v, "local"]))


def zpool(args):
    o, r = parse_opts(args, "Hp", "o")
    if not args or args[0] != "list":
        raise Fail("FAKE zpool: only 'zpool list' is modelled")
    o, r = parse_opts(args[1:], "Hp", "o")
    for p in r or [pool]:
        if p != pool:
            raise Fail("cannot open '%s': no such pool" % p)
    print("%s\t2G\t1M\t2G\t-\t-\t0%%\t0%%\t1.00x\tONLINE\t-" % pool)


def main():
    prog = os.path.basename(sys.argv[0])
    args = sys.argv[1:]
    os.makedirs(root, exist_ok=True)
    lock = open(os.path.join(root, "lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    rc = 0
    try:
        if prog == "zpool":
            zpool(args)
        else:
            st = load()
            cmds = {"create": cmd_create, "snapshot": cmd_snapshot, "clone": cmd_clone, "rollback": cmd_rollback,
                    "destroy": cmd_destroy, "rename": cmd_rename, "list": cmd_list, "get": cmd_get,
                    "send": cmd_send, "receive": cmd_receive, "recv": cmd_receive}
            if not args or args[0] not in cmds:
                raise Fail("FAKE zfs: '%s' is not modelled" % (args[0] if args else ""))
            cmds[args[0]](st, args[1:])
            save(st)
    except Fail as e:
        sys.stderr.write(str(e) + "\n")
        rc = 1
    with open(os.path.join(root, "calls.log"), "a") as f:
        f.write("%d\t%s\n" % (rc, "\t".join([prog] + args)))
    sys.stdout.flush()
    return rc


if __name__ == "__main__":
    sys.exit(main())
