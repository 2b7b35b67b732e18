"""denvd decides readiness itself (health.c, ready.c), on real Docker
through the fake control plane. Every healthcheck here has a 60 s interval,
so Docker's own state would not turn healthy within the create's budget of
the test: each service must be found ready by denvd's own test, and the
readiness evidence must name it. PostgreSQL and Redis with their stock
healthchecks are asked directly; a file check runs through exec and fails
until the service makes the file; a service without a healthcheck is ready
when running; a service whose healthcheck never passes is not ready."""
import os
import secrets
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fakecp import FakeCP, Denvd, TAP, remove_project  # noqa: E402

binary, tmp = sys.argv[1], sys.argv[2]
t = TAP()
env = "env_RD" + secrets.token_hex(5).upper()
cp = FakeCP()
d = Denvd(binary, tmp, cp.url, token=cp.token,
          extra=["--probe-image", "denv-test/busybox", "--probe-url", "http://127.0.0.1:9/"])
SLOW = {"interval": "60s", "retries": 3}


def svc(name, image, command, health=None, depends=()):
    s = {"name": name, "image": image, "command": command, "env": {"POSTGRES_PASSWORD": "pw"}, "ports": [],
         "volumes": [], "depends_on": list(depends), "user": "",
         "resources": {"memory_mb": 0, "pids": 0, "cpus": 0}}
    if health:
        s["health"] = dict(SLOW, test=health)
    return s


DB = dict(svc("db", "denv-test/debian", ["postgres"], ["CMD-SHELL", "pg_isready -U postgres"]),
          volumes=["pg:/var/lib/postgresql/data"])
spec = {"version": "ver_ready", "egress": "deny", "volumes": ["pg"], "warm": [], "services": [
    DB,
    svc("cache", "denv-test/debian", ["redis-server", "--save", ""], ["CMD", "redis-cli", "ping"]),
    svc("web", "denv-test/busybox", ["sh", "-c", "sleep 1; touch /tmp/ready; exec sleep 3600"],
        ["CMD-SHELL", "test -f /tmp/ready"]),
    svc("plain", "denv-test/busybox", ["sleep", "3600"], depends=["web"]),
]}

try:
    d.start()
    t.ok(cp.wait_conn(15), "denvd joins", d.logtext())
    t0 = time.time()
    res, prog, _, _ = cp.command("env.create", env, spec, timeout=240)
    t.diag("env.create took %.2f s" % (time.time() - t0))
    if not t.ok(res and res["ok"], "env.create: every service ready long before Docker's 60 s interval",
                (res, d.logtext()[-3000:])):
        raise SystemExit(t.done())
    rd = {r["service"]: r for r in res["payload"].get("readiness", [])}
    t.diag("readiness: %s" % rd)
    t.ok(set(rd) == {"db", "cache", "web", "plain"} and len(res["payload"]["readiness"]) == 4,
         "one readiness record per service, the dependency's once", res["payload"].get("readiness"))
    db = rd.get("db", {})
    t.ok(db.get("test") == "postgres" and "startup packet on 127.0.0.1:5432: accepting" in db.get("detail", ""),
         "db: PostgreSQL's own answer to a startup packet", (db, prog))
    t.ok(rd.get("cache", {}).get("test") == "redis" and "PING" in rd["cache"].get("detail", ""),
         "cache: Redis answered PING", rd.get("cache"))
    web = rd.get("web", {})
    t.ok(web.get("test") == "exec" and web.get("tries", 0) > 1 and "test -f /tmp/ready" in web.get("detail", ""),
         "web: its healthcheck through exec, failing until the file was there, then passing", web)
    t.ok(rd.get("plain", {}).get("test") == "running", "plain: no healthcheck, ready when running", rd.get("plain"))
    t.ok(all(isinstance(r.get("ready_ms"), int) and r["ready_ms"] >= 0 for r in rd.values()),
         "each record says when (ready_ms)", rd)

    # A fork of the database: PostgreSQL starts in crash recovery, told to
    # sync its data directory with one syncfs (pgfork.c); its data is there.
    r, _, _, _ = cp.command("env.exec", env, {"service": "db", "cmd": [
        "su", "postgres", "-c", "psql -q -h /run/postgresql -c 'CREATE TABLE kept AS SELECT 42 AS n'"],
        "timeout_sec": 60}, timeout=120)
    t.ok(r and r["ok"] and r["payload"].get("exit_code") == 0, "a table written in the parent", r)
    snap = "ver_RS" + secrets.token_hex(3).upper()
    r, _, _, _ = cp.command("env.snapshot", env, {"name": snap}, timeout=300)
    t.ok(r and r["ok"], "the parent snapshotted", r)
    fk = {"from_env": env, "from_snapshot": snap, "services": [DB], "volumes": ["pg"], "egress": "deny"}
    r, prog, _, _ = cp.command("env.fork", env + "F", fk, timeout=300)
    p = (r or {}).get("payload") or {}
    t.ok(r and r["ok"] and p.get("pg_syncfs") == ["db"] and
         any("one syncfs" in x for x in prog), "the fork's PostgreSQL recovers with one syncfs (pg_syncfs)", (r, prog))
    fdb = [x for x in p.get("readiness", []) if x.get("service") == "db"]
    t.ok(fdb and fdb[0].get("test") == "postgres", "the fork's db found ready by its startup packet", fdb)
    r, _, _, _ = cp.command("env.exec", env + "F", {"service": "db", "cmd": [
        "su", "postgres", "-c", "psql -qtA -h /run/postgresql -c 'SELECT n FROM kept'; "
        "psql -qtA -h /run/postgresql -c 'SHOW recovery_init_sync_method'"], "timeout_sec": 60}, timeout=120)
    t.ok(r and r["ok"] and r["payload"].get("stdout", "").split() == ["42", "syncfs"],
         "the fork has the parent's table, and its server runs with syncfs", r)
    spec_file = os.path.join(d.data, "envs", env + "F", "spec.json")
    t.ok(os.path.exists(spec_file) and "recovery_init_sync_method" not in open(spec_file).read(),
         "spec.json keeps the command as written", spec_file)
    cp.command("env.destroy", env + "F", {}, timeout=120)
    cp.command("env.destroy", env, {}, timeout=120)

    # A healthcheck that never passes keeps the service not ready: the
    # create fails at the budget (base + interval x retries, here made short).
    never = {"version": "ver_never", "egress": "deny", "volumes": [], "warm": [], "services": [
        dict(svc("stuck", "denv-test/busybox", ["sleep", "3600"], ["CMD-SHELL", "false"]),
             health={"test": ["CMD-SHELL", "false"], "interval": "1s", "retries": 1})]}
    res, _, _, _ = cp.command("env.create", env + "N", never, timeout=240)
    err = (res or {}).get("error", "")
    t.ok(res and not res["ok"] and 'service "stuck"' in err and ("not healthy" in err or "unhealthy" in err),
         "a healthcheck that never passes: the create fails naming the service", res)
    cp.command("env.destroy", env + "N", {}, timeout=120)
    t.ok(d.proc.poll() is None, "denvd still running")
finally:
    d.kill()
    remove_project(env.lower())
    remove_project(env.lower() + "n")
    remove_project(env.lower() + "f")
sys.exit(t.done())
