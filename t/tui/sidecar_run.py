"""Run the scripted sidecar (t/cp/sidecar.py) for the `denv top` tests.

usage: sidecar_run.py PORT API_KEY READY_FILE [DELAY_SEC]

Mints a join token with the key, joins as host "box-1", writes the host id
to READY_FILE once admitted, then answers commands until killed. DELAY_SEC
makes every env.create take that long, so a test can watch a phase run.
"""
import json
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cp"))
from sidecar import Sidecar  # noqa: E402


def main():
    port, key, ready = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    delay = float(sys.argv[4]) if len(sys.argv) > 4 else 0
    req = urllib.request.Request("http://127.0.0.1:%d/v1/join-tokens" % port, data=b"{}", method="POST",
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    token = json.load(urllib.request.urlopen(req, timeout=10))["token"]
    sc = Sidecar(port, token=token)
    if delay:
        sc.plan["env.create"] = ["delay:%g" % delay] * 100
    if not sc.wait_admitted(10):
        print("sidecar was not admitted", file=sys.stderr)
        return 1
    with open(ready + ".tmp", "w") as f:
        f.write(sc.host_id + "\n")
    os.rename(ready + ".tmp", ready)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
