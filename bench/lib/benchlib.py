"""benchlib: what the bench drivers share.

1. The line protocol that bench/lib/table.sh turns into the table (one line
   each, tab-separated after the tag; anything else on stdout is free text):

     @fig KEY  LABEL  BASELINE-LABEL  UNIT  TARGET   declare a figure (in table order)
     @s KEY VALUE                                    one run of denv
     @b KEY VALUE                                    one run of the baseline
     @pending KEY  REASON                            the figure cannot be measured now
     @note TEXT                                      printed under the table

   TARGET is "ratio<=X", "ratio>=X" (median / baseline median), "<X" or ">X"
   (the median itself, in UNIT), or "report" (no target).

2. A real stack on temp directories: denv-cp on a fresh store at
   127.0.0.1:<free port>, and (optionally) one denvd joined to it with its
   own --data and --state. Everything it starts is stopped, and every
   environment it created is destroyed, in close() (also on SIGTERM/SIGINT).

Benchmarks assert nothing: a failure becomes a "pending" row with the reason.
BENCH_KEEP=1 keeps the stacks' temp directories (logs); BENCH_CP_VERBOSE=1
starts denv-cp with -v (one log line per request).
"""
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

BUILD = os.environ.get("BUILD") or "build"
TOP = os.environ.get("DENV_TOP") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if not os.path.isabs(BUILD):
    BUILD = os.path.join(TOP, BUILD)
QUICK = os.environ.get("QUICK", "") not in ("", "0")
# Containers and networks the benchmarks create themselves (baselines) carry
# this prefix and only those are removed; the stack's own are removed by
# environment id (label ai.denv.env).
PREFIX = "denvbench-%d-%s-" % (os.getpid(), secrets.token_hex(2))


def runs(full, quick):
    return quick if QUICK else full


def _emit(*fields):
    print("\t".join(str(f) for f in fields), flush=True)


def fig(key, label, base_label, unit, target):
    _emit("@fig", key, label, base_label or "-", unit, target)


def sample(key, value):
    _emit("@s", key, "%.6g" % value)


def base(key, value):
    _emit("@b", key, "%.6g" % value)


def pending(key, reason):
    _emit("@pending", key, " ".join(str(reason).split())[:300])


def note(text):
    _emit("@note", " ".join(str(text).split()))


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def now():
    return time.perf_counter()


def sh(*argv, timeout=300, check=False):
    """Run argv; CompletedProcess with text stdout/stderr."""
    return subprocess.run(list(argv), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout, check=check)


def rss_kib(pid):
    """VmRSS of pid in KiB, or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def descendants(pid):
    """Every process below pid (from /proc), deepest last."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for t in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, t)) as f:
                    kids = [int(c) for c in f.read().split()]
                out += kids
                todo += kids
        except OSError:
            pass
    return out


def alive(pid):
    """pid exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def need(ok, reason):
    if not ok:
        raise Pending(reason)


class Pending(Exception):
    """The figure cannot be measured here/now; the message says why."""


def docker_ready():
    """'' when Docker answers and the fixture images exist, else why not."""
    r = subprocess.run(["sh", TOP + "/t/docker-up.sh", "all"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True)
    if r.returncode != 0:
        return "no Docker engine or fixture images (t/docker-up.sh all): " + (r.stderr.strip() or "failed")
    return ""


def docker_rm_prefixed():
    """Remove the containers and networks named with PREFIX (ours only)."""
    c = sh("docker", "ps", "-aq", "--filter", "name=^" + PREFIX).stdout.split()
    for i in range(0, len(c), 50):
        sh("docker", "rm", "-f", "-v", *c[i:i + 50])
    n = sh("docker", "network", "ls", "-q", "--filter", "name=^" + PREFIX).stdout.split()
    if n:
        sh("docker", "network", "rm", *n)


class Stack:
    """denv-cp on a temp store, and optionally one joined denvd."""

    def __init__(self, name, sidecar=True, db=None, key=None, cp_env=None, sidecar_args=(), start_timeout=60):
        """db: an existing store directory or postgres:// DSN (kept); key:
        its API key; sidecar_args: more denvd flags (--btrfs-root DIR);
        start_timeout: seconds for denv-cp to listen (it replays the store
        first)."""
        self.sidecar_args = list(sidecar_args)
        self.procs = []
        self.envs = set()
        self.tmp = tempfile.mkdtemp(prefix="denv-bench-%s." % name, dir=os.environ.get("TMPDIR", "/tmp"))
        self.key = key or "dak_" + secrets.token_hex(20)
        self.db = db or os.path.join(self.tmp, "db")
        self.cp = None
        self.sidecar = None
        self._old = {}
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self._old[s] = signal.signal(s, self._on_signal)
        try:
            self._start_cp(cp_env, start_timeout)
            if sidecar:
                self._start_sidecar()
        except BaseException:
            self.close()
            raise

    def _on_signal(self, signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)

    def _start_cp(self, cp_env, start_timeout):
        for b in ("denv-cp", "denvd"):
            need(os.access(os.path.join(TOP, "bin", b), os.X_OK), "bin/%s not built" % b)
        logf = open(os.path.join(self.tmp, "cp.log"), "w")
        env = dict(os.environ, DENV_BOOTSTRAP_KEY=self.key)
        env.update(cp_env or {})
        self.cp = subprocess.Popen([TOP + "/bin/denv-cp"] + (["-v"] if os.environ.get("BENCH_CP_VERBOSE") else []) + ["-addr", "127.0.0.1:0", "-db", self.db],
                                   env=env, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
        self.procs.append(self.cp)
        port = None
        end = time.time() + start_timeout
        while time.time() < end and port is None:
            if self.cp.poll() is not None:
                raise Pending("denv-cp exited at start: " + self.log_tail("cp.log"))
            with open(os.path.join(self.tmp, "cp.log")) as f:
                m = re.search(r"listening on http://[0-9.]+:(\d+)", f.read())
            if m:
                port = int(m.group(1))
            else:
                time.sleep(0.02)
        need(port, "denv-cp did not listen within %d s" % start_timeout)
        self.port = port
        self.url = "http://127.0.0.1:%d" % port

    def _start_sidecar(self):
        st, tok = self.req("POST", "/v1/join-tokens", {})
        need(st == 201, "join token: %s %s" % (st, tok))
        logf = open(os.path.join(self.tmp, "denvd.log"), "w")
        self.sidecar = subprocess.Popen(
            [TOP + "/bin/denvd", "join", "--server", self.url, "--token", tok["token"],
             "--state", self.tmp + "/host.json", "--data", self.tmp + "/data",
             "--probe-image", "denv-test/busybox", "--probe-url", "http://127.0.0.1:9/"] + self.sidecar_args,
            stdin=subprocess.DEVNULL, stdout=logf, stderr=logf)
        self.procs.append(self.sidecar)
        end = time.time() + 30
        while time.time() < end:
            st, h = self.req("GET", "/v1/hosts")
            hosts = h.get("hosts", []) if st == 200 else []
            if hosts and hosts[0].get("connected"):
                return
            if self.sidecar.poll() is not None:
                break
            time.sleep(0.05)
        raise Pending("denvd did not join: " + self.log_tail("denvd.log"))

    def log_tail(self, name, n=3):
        try:
            with open(os.path.join(self.tmp, name)) as f:
                return " | ".join(f.read().strip().splitlines()[-n:])
        except OSError:
            return "(no log)"

    def req(self, method, path, body=None, timeout=600):
        data = json.dumps(body).encode() if body is not None else None
        r = urllib.request.Request(self.url + path, data=data, method=method,
                                   headers={"Authorization": "Bearer " + self.key,
                                            "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(r, timeout=timeout) as resp:
                b = resp.read()
                try:
                    return resp.status, json.loads(b)
                except ValueError:
                    return resp.status, b
        except urllib.error.HTTPError as e:
            b = e.read().decode(errors="replace")
            try:
                return e.code, json.loads(b)
            except ValueError:
                return e.code, b

    def wait_dep(self, dep_id, limit=300):
        end = time.time() + limit
        while time.time() < end:
            st, dd = self.req("GET", "/v1/deployments/" + dep_id)
            if st == 200 and dd["deployment"]["Status"] not in ("pending", "running", "queued"):
                return dd
            time.sleep(0.05)
        return self.req("GET", "/v1/deployments/" + dep_id)[1]

    def deploy(self, project, compose):
        """Deploy compose to project's alpha env: (env_id, deployment view)."""
        self.req("POST", "/v1/projects", {"name": project})
        st, dep = self.req("POST", "/v1/projects/%s/deploy" % project, {"compose": compose})
        need(st == 202, "deploy refused: %s %s" % (st, dep))
        env = dep["deployment"]["EnvID"]
        self.envs.add(env)
        return env, self.wait_dep(dep["deployment"]["ID"])

    @staticmethod
    def failed_phase(dd):
        """'phase: error' of the first failed phase of a deployment view, or ''."""
        for p in dd.get("phases", []):
            if p.get("Status") == "failed":
                return "%s phase: %s" % (p["Name"], p.get("Error") or "failed")
        return dd.get("deployment", {}).get("Error") or dd.get("deployment", {}).get("Status", "?")

    @staticmethod
    def phases_ok(dd, names):
        ph = {p["Name"]: p.get("Status") for p in dd.get("phases", [])}
        return all(ph.get(n) == "ok" for n in names)

    def destroy_envs(self):
        """Destroy every environment in self.envs (untimed teardown) and forget them."""
        gone = []
        for env in list(self.envs):
            st, d = self.req("DELETE", "/v1/envs/" + env)
            if st == 202:
                gone.append(d["deployment"]["ID"])
        for d in gone:
            self.wait_dep(d, limit=300)
        self.envs.clear()

    def all_envs(self):
        """Every environment in this (private) control plane."""
        out = set(self.envs)
        st, r = self.req("GET", "/v1/projects")
        for p in (r.get("projects", []) if st == 200 else []):
            st, e = self.req("GET", "/v1/projects/%s/envs" % p["ID"])
            for env in (e.get("environments", []) if st == 200 else []):
                out.add(env["ID"])
        return out

    def close(self):
        try:
            envs = set()
            if self.cp and self.cp.poll() is None and self.sidecar:
                try:
                    envs = self.all_envs()
                except Exception:
                    envs = set(self.envs)
                if self.sidecar and self.sidecar.poll() is None:
                    deps = []
                    for env in envs:
                        try:
                            st, r = self.req("DELETE", "/v1/envs/" + env, timeout=30)
                            if st == 202:
                                deps.append(r["deployment"]["ID"])
                        except Exception:
                            pass
                    for d in deps:
                        try:
                            self.wait_dep(d, limit=60)
                        except Exception:
                            pass
            else:
                envs = set(self.envs)
            # denvd's workers (and their docker CLIs) finish a running command
            # after denvd is told to stop: wait for them, then kill what is
            # left of that tree, so that nothing creates containers after the
            # clean-up below.
            tree = descendants(self.sidecar.pid) if self.sidecar and self.sidecar.poll() is None else []
            for p in reversed(self.procs):
                if p.poll() is None:
                    p.terminate()
                    try:
                        p.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()
            end = time.time() + 20
            while tree and time.time() < end:
                tree = [q for q in tree if alive(q)]
                time.sleep(0.1)
            for q in tree:
                try:
                    os.kill(q, signal.SIGKILL)
                except OSError:
                    pass
            # Whatever a destroy left behind, by environment id (ours only;
            # only a stack with a sidecar ever made containers).
            # The sidecar's data dir names every environment it ever made,
            # also those whose ids we never heard of (cp killed first).
            try:
                envs |= {e for e in os.listdir(os.path.join(self.tmp, "data", "envs")) if e.startswith("env_")}
            except OSError:
                pass
            for attempt in range(2 if self.sidecar and envs else 0):
                if attempt:
                    time.sleep(1)  # a create the daemon had already accepted
                for what in (("ps", "-a"), ("network", "ls")):
                    fmt = '{{.ID}} {{.Label "ai.denv.env"}}'
                    out = sh("docker", *what, "--filter", "label=ai.denv.env", "--format", fmt).stdout
                    ids = [ln.split()[0] for ln in out.splitlines() if len(ln.split()) == 2 and ln.split()[1] in envs]
                    if ids and what[0] == "ps":
                        sh("docker", "rm", "-f", "-v", *ids)
                    elif ids:
                        sh("docker", "network", "rm", *ids)
        finally:
            for s, h in self._old.items():
                signal.signal(s, h)
            if os.environ.get("BENCH_KEEP"):
                log("kept " + self.tmp)
            else:
                shutil.rmtree(self.tmp, ignore_errors=True)


def main(body):
    """Run body(); an uncaught Pending/exception is reported, never raised."""
    try:
        body()
    except KeyboardInterrupt:
        log("interrupted")
        sys.exit(130)
    finally:
        try:
            docker_rm_prefixed()
        except Exception:
            pass


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def which(prog):
    for d in os.environ.get("PATH", "").split(":") + ["/usr/sbin", "/sbin"]:
        p = os.path.join(d, prog)
        if d and os.access(p, os.X_OK):
            return p
    return None


class Nginx:
    """nginx, one worker, serving body at path with content type ctype on a
    free loopback port, from a temp directory; stop() ends it."""

    def __init__(self, tmp, path, body, ctype):
        exe = which("nginx")
        need(exe, "nginx not installed (apt-get install nginx-light)")
        d = os.path.join(tmp, "nginx")
        os.makedirs(os.path.join(d, "root"), exist_ok=True)
        with open(os.path.join(d, "root", "body"), "wb") as f:
            f.write(body)
        # nginx's worker runs as nobody when we are root: let it read the body.
        for p, mode in ((tmp, 0o711), (d, 0o711), (os.path.join(d, "root"), 0o755),
                        (os.path.join(d, "root", "body"), 0o644)):
            os.chmod(p, mode)
        self.port = free_port()
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
	access_log off;
	client_body_temp_path {d};
	proxy_temp_path {d};
	fastcgi_temp_path {d};
	uwsgi_temp_path {d};
	scgi_temp_path {d};
	keepalive_requests 100000000;
	server_tokens off;
	server {{
		listen 127.0.0.1:{port};
		location = {path} {{
			default_type {ctype};
			alias {d}/root/body;
		}}
	}}
}}
""".format(d=d, port=self.port, path=path, ctype=ctype))
        self.proc = subprocess.Popen([exe, "-c", conf, "-p", d], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "out"), "w"))
        self.url = "http://127.0.0.1:%d%s" % (self.port, path)
        end = time.time() + 10
        while time.time() < end:
            try:
                with urllib.request.urlopen(self.url, timeout=1) as r:
                    if r.read() == body:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise Pending("nginx did not serve the body")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _ms(v):
    m = re.match(r"([0-9.]+)(us|ms|s)$", v or "")
    if not m:
        return None
    return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]


def wrk(url, duration, headers=(), conns=50):
    """wrk -t1 -cCONNS -dDURATION --latency: (requests/s, p99 ms, non-2xx)."""
    exe = which("wrk")
    need(exe, "wrk not installed (apt-get install wrk)")
    argv = [exe, "-t1", "-c%d" % conns, "-d" + duration, "--latency"]
    for h in headers:
        argv += ["-H", h]
    r = sh(*(argv + [url]), timeout=120)
    out = r.stdout
    rps = re.search(r"^Requests/sec:\s*([0-9.]+)", out, re.M)
    p99 = re.search(r"^\s*99%\s+(\S+)", out, re.M)
    bad = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", out)
    need(rps and p99, "wrk gave no figures: " + (r.stderr.strip() or out.strip())[:200])
    return float(rps.group(1)), _ms(p99.group(1)), int(bad.group(1)) if bad else 0


class Btrfs:
    """A btrfs filesystem on an image file in a temp directory of our own,
    loop-mounted there; close() unmounts it, detaches the loop device and
    removes the directory. root is a directory in it for --btrfs-root."""

    def __init__(self, size="4G"):
        need(os.geteuid() == 0, "btrfs needs root (loop mount)")
        for c in ("mkfs.btrfs", "losetup", "mount", "umount"):
            need(which(c), "%s not installed (btrfs-progs, util-linux)" % c)
        self.dev = None
        self.tmp = tempfile.mkdtemp(prefix="denv-bench-btrfs.", dir=os.environ.get("TMPDIR", "/tmp"))
        self.mnt = os.path.join(self.tmp, "mnt")
        try:
            img = os.path.join(self.tmp, "btrfs.img")
            sh("truncate", "-s", size, img, check=True)
            need(sh("mkfs.btrfs", "-q", img).returncode == 0, "mkfs.btrfs on an image file failed")
            r = sh("losetup", "--find", "--show", img)
            need(r.returncode == 0, "no loop device: " + r.stderr.strip())
            self.dev = r.stdout.strip()
            os.makedirs(self.mnt)
            need(sh("mount", "-t", "btrfs", self.dev, self.mnt).returncode == 0, "cannot mount the loop device")
            self.root = os.path.join(self.mnt, "root")
            os.makedirs(self.root)
        except BaseException:
            self.close()
            raise

    def close(self):
        if os.path.ismount(self.mnt):
            if sh("umount", self.mnt).returncode != 0:
                time.sleep(1)
                if sh("umount", self.mnt).returncode != 0:
                    sh("umount", "-l", self.mnt)
        if self.dev:
            sh("losetup", "-d", self.dev)
        shutil.rmtree(self.tmp, ignore_errors=True)


def parse_ms(v):
    """'47ms', '1.2s', 47 -> milliseconds (float), or None."""
    if isinstance(v, (int, float)):
        return float(v)
    m = re.match(r"^\s*([0-9.]+)\s*(us|µs|ms|s)?\s*$", str(v or ""))
    if not m:
        return None
    return float(m.group(1)) * {"us": 0.001, "µs": 0.001, "ms": 1.0, "s": 1000.0, None: 1.0}[m.group(2)]


def ts(v):
    """An RFC 3339 timestamp with up to nanoseconds -> seconds since the epoch."""
    import datetime
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z$", v or "")
    if not m:
        return None
    base = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return base.timestamp() + (float("0." + m.group(2)) if m.group(2) else 0.0)


def phase_ms(dd):
    """{phase name: milliseconds} of a deployment view."""
    out = {}
    for p in dd.get("phases", []):
        a, b = ts(p.get("StartedAt")), ts(p.get("FinishedAt"))
        if a is not None and b is not None:
            out[p["Name"]] = (b - a) * 1000
    return out


def median(xs):
    xs = sorted(xs)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
