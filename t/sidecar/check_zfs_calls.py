"""Check the zfs/zpool command sequence the fake (t/fakes/zfs) recorded while
test_snap.py ran on the zfs backend. argv: calls.log. Prints TAP."""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import tap  # noqa: E402


def ok(cond, name, diag=None):
    return tap.ok(cond, "zfs sequence: " + name, diag)


calls = []
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    calls.append((int(f[0]), f[1:]))
cmds = [" ".join(a) for _, a in calls]
fails = [" ".join(a) for rc, a in calls if rc != 0]
ok(cmds and cmds[0].startswith("zpool list -H tank"), "zpool list <pool> decides storage zfs", cmds[:3])
unexpected = [c for c in fails if not re.match(r"zfs destroy -r \S+@\S+$", c) and
              not re.match(r"zfs list -H -o name \S+$", c)]
ok(not unexpected, "no refused call (other than existence probes and clearing a leftover snapshot name)",
   "\n".join(unexpected))

snaps = [c for c in cmds if c.startswith("zfs snapshot")]
ok(snaps and all(re.match(r"zfs snapshot -r tank/envs/[^/]+/vol@\S+$", c) for c in snaps),
   "every capture is one recursive snapshot of the env's vol dataset (atomic across volumes)", snaps)
m = re.match(r"zfs snapshot -r tank/envs/([^/]+)/vol@(\S+)$", snaps[0]) if snaps else None
P, V1 = (m.group(1), m.group(2)) if m else ("?", "?")
clones = [c for c in cmds if c.startswith("zfs clone tank/envs/%s/vol/" % P)]
forks = sorted(set(re.match(r"zfs clone \S+ tank/envs/([^/]+)/vol/", c).group(1) for c in clones))
ok(len(forks) >= 2 and all(len([c for c in clones if re.match(r"tank/envs/%s/vol/\w+$" % f, c.split()[3])]) == 3
                           for f in forks[:2]),
   "each fork is a zfs clone of every volume's snapshot", clones)
ok(["zfs rollback tank/envs/%s/vol/%s@%s" % (P, v, V1) in cmds for v in ("home", "pg", "rd")] == [True] * 3,
   "rolling the parent back to its newest snapshot is zfs rollback", [c for c in cmds if "rollback" in c])
swaps = [c for c in cmds if re.match(r"zfs (clone|rename) .*(\.new-|/old/)", c)]
ok(any(re.match(r"zfs clone tank/envs/%s/vol/\w+@%s tank/envs/[^/]+/vol/\.new-\w+$" % (P, V1), c) for c in swaps)
   and any(re.match(r"zfs rename tank/envs/[^/]+/vol/\w+ tank/envs/[^/]+/old/\w+\.\d+$", c) for c in swaps),
   "a fork returning to its origin: clone beside, old volume renamed away with its snapshots", swaps)
dP = [i for i, c in enumerate(cmds) if c == "zfs destroy -R tank/envs/%s" % P]
dF = [i for i, c in enumerate(cmds) if re.match(r"zfs destroy -R tank/envs/(%s)$" % "|".join(forks), c)]
ok(len(dP) == 1 and dF and dP[0] > max(dF), "the parent's datasets go only after its last fork",
   [c for c in cmds if "destroy" in c])
sys.exit(tap.finish())
