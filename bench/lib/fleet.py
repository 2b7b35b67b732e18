"""fleet: many simulated sidecars in one process, for bench/lib/scale.py.

  python fleet.py PORT CREDS [HEARTBEAT_SEC]

Each sidecar is t/cp/sidecar.py's Sidecar (the real host stream: hello with a
join token or a host secret, heartbeats, ack, progress, one result per
command, answered again from its log when a command id comes back), all on
one asyncio loop. CREDS is a JSON list with one object per sidecar:
{"token": "djt_..."} to join, or {"host_id": ..., "secret": ...} to come
back as a known host. Once every sidecar is admitted the list is written
back to CREDS with each one's host id and secret, and one line
"fleet: admitted N in S s" goes to stdout. It runs until SIGTERM or SIGINT,
then prints "fleet: answered K commands (kind=count ...)" and exits 0.
A sidecar refused by the control plane (1008) is fatal: "fleet: refused ...",
exit 1. HEARTBEAT_SEC defaults to denvd's 10 s.
"""
import os
import sys

# bench/lib holds drivers named like standard modules (concurrent.py, which
# asyncio imports): off the path before anything else is imported.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "t", "cp"))

import asyncio  # noqa: E402
import json  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402

from sidecar import Sidecar  # noqa: E402

HEARTBEAT_S = 10.0        # denvd's interval (protocol.md)
JOINING_AT_ONCE = 64      # streams opening at a time: a burst of 1,000 hellos would time out their own handshakes
POLL_S = 0.01
PARENT_CHECK_S = 1.0      # how often orphaned() looks at its parent
RETRY_S = 1.0             # after a failed attempt (denvd's first back-off step)


def load(path):
    with open(path) as f:
        return json.load(f)


def save(path, fleet):
    creds = [{"host_id": sc.host_id, "secret": sc.secret} for sc in fleet]
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(creds, f)
    os.replace(tmp, path)


def refused(fleet):
    return next((sc for sc in fleet if sc.closed), None)


async def keep(sc):
    """sc.run(), again after what it does not handle itself (an HTTP refusal
    of the upgrade, say 503 while denv-cp is busy): denvd retries those too."""
    while not sc.stop_flag:
        try:
            await sc.run()
            return
        except Exception as ex:  # logged, then the next attempt
            print("fleet: %s: %s: %s" % (sc.hostname, type(ex).__name__, ex), file=sys.stderr, flush=True)
            await asyncio.sleep(RETRY_S)


async def start_all(fleet, tasks, stop):
    """Start every sidecar, at most JOINING_AT_ONCE not yet admitted; ends
    early when one is refused or we are told to stop."""
    def over():
        return stop.is_set() or refused(fleet)
    for i, sc in enumerate(fleet):
        while i - sum(1 for s in fleet[:i] if s.admitted.is_set()) >= JOINING_AT_ONCE:
            if over():
                return
            await asyncio.sleep(POLL_S)
        tasks.append(asyncio.create_task(keep(sc)))
    while not all(sc.admitted.is_set() for sc in fleet) and not over():
        await asyncio.sleep(POLL_S)


def answered(fleet):
    kinds = {}
    for sc in fleet:
        for _, kind, _, _ in sc.received:
            kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


async def orphaned(stop):
    """Stop when the bench that started us is gone (killed without a SIGTERM
    to us): a thousand sidecars must not go on dialling a closed port."""
    parent = os.getppid()
    while not stop.is_set():
        if os.getppid() != parent:
            stop.set()
        await asyncio.sleep(PARENT_CHECK_S)


async def main(port, creds_path, heartbeat):
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    watch = asyncio.create_task(orphaned(stop))
    fleet = [Sidecar(port, token=c.get("token", ""), host_id=c.get("host_id", ""), secret=c.get("secret", ""),
                     hostname="sim-%d" % i, heartbeat=heartbeat, thread=False)
             for i, c in enumerate(load(creds_path))]
    tasks = []
    t0 = time.perf_counter()
    await start_all(fleet, tasks, stop)
    bad = refused(fleet)
    rc = 0
    if bad:
        print("fleet: refused: %s %s" % bad.closed, flush=True)
        rc = 1
    elif not stop.is_set():
        save(creds_path, fleet)
        print("fleet: admitted %d in %.3f s" % (len(fleet), time.perf_counter() - t0), flush=True)
        await stop.wait()
    for sc in fleet:
        sc.stop_flag = True
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    watch.cancel()
    kinds = answered(fleet)
    print("fleet: answered %d commands (%s)" % (sum(kinds.values()),
                                                 " ".join("%s=%d" % kv for kv in sorted(kinds.items()))), flush=True)
    return rc


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        print("usage: fleet.py PORT CREDS [HEARTBEAT_SEC]", file=sys.stderr)
        sys.exit(2)
    sys.exit(asyncio.run(main(int(sys.argv[1]), sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else HEARTBEAT_S)))
