"""What the hosted-driver tests (test_e2b.py, test_daytona.py) share: tars
of one file, the deployment a 202 started waited for, and a main that skips
without the binary or the image, starts the fake and denv-cp, runs the
test, stops both and checks the log holds no secret and no sanitizer
report. Loopback only.
"""
import io
import os
import subprocess
import tarfile
import tempfile
import traceback

import cp_harness as T
import tap
from cp_harness import BOOT_KEY
from tap import ok, is_


CLI = os.path.join(T.TOP, "bin", "denv")


def cli(s, *args):
    """bin/denv against s with the bootstrap key: (exit code, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DENV_")}
    env.update({"DENV_SERVER": "http://127.0.0.1:%d" % s.port, "DENV_API_KEY": BOOT_KEY})
    p = subprocess.run([CLI] + list(args), env=env, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def tar_of(name, data):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w") as t:
        i = tarfile.TarInfo(name)
        i.size = len(data)
        t.addfile(i, io.BytesIO(data))
    return b.getvalue()


def untar(raw):
    with tarfile.open(fileobj=io.BytesIO(raw)) as t:
        return {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}


def settled(s, st, doc, timeout=60):
    """The deployment a 202 started, waited for; else the answer itself."""
    d = doc.get("deployment") if isinstance(doc, dict) else None
    if st in (200, 201, 202) and d:
        return T.wait_deployment(s, d["ID"] if isinstance(d, dict) else d, timeout=timeout)
    return doc


def main(name, image, fake, env, run, secrets):
    """fake: the started fake; env: denv-cp's environment beside the
    bootstrap key and team; run(s, fake); secrets(fake): what the log must
    not hold."""
    if not os.access(T.BIN, os.X_OK):
        fake.stop()
        print("1..0 # SKIP %s is not built" % T.BIN)
        return 0
    if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode != 0:
        fake.stop()
        print("1..0 # SKIP the fake's sandboxes need Docker and %s" % image)
        return 0
    tmp = tempfile.mkdtemp(prefix="denv-cp-%s-" % name)
    s = None
    try:
        s = T.Server(os.path.join(tmp, "store"), dict(env, DENV_BOOTSTRAP_KEY=BOOT_KEY, DENV_TEAM="acme"))
        run(s, fake)
        is_(s.stop(), 0, "SIGTERM: exit 0")
        log = s.stderr()
        ok(not any(k in log for k in secrets(fake)), "no token in the log")
        ok("ERROR: AddressSanitizer" not in log and "runtime error:" not in log, "no sanitizer report")
        s = None
    except Exception:
        ok(False, "test run raised", traceback.format_exc())
        if s is not None:
            print("# denv-cp stderr tail:")
            for line in s.stderr().splitlines()[-30:]:
                print("#   " + line)
            s.proc.kill()
    finally:
        fake.stop()
    return tap.finish(tmp)
