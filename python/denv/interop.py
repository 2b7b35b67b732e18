"""Projects in and out of other frameworks' formats: ``denv import`` and ``denv export``.

    python -m denv.interop import harbor TASK_DIR [-o OUT] [--project P] [--deploy]
    python -m denv.interop export harbor REF OUT [--project-dir DIR]
    python -m denv.interop export openenv REF OUT

The C CLI's ``denv import`` and ``denv export`` run this module (see
src/cli/cmd_interop.c for why): a Harbor task is TOML, a Karotte environment
is Python, and an OpenEnv environment is a Python server, so the formats are
read and written where their own parsers live.

An imported Harbor task becomes a project directory::

    OUT/docker-compose.yaml   the task as compose + x-denv (agent, verifier, caps, egress)
    OUT/environment/          the task's build context, plus Dockerfile.denv
    OUT/tasks/NAME/           instruction.md, task.toml, solution/, tests/ as they were

The verifier is the task's ``tests/`` carried inside the verifier command
(a gzipped tar in base64 words), so the tests never sit in the agent's image
or volumes; ``denv verify`` unpacks them in the grader's fork and runs
``tests/test.sh`` there as root, which is what Harbor's shared verifier does
after the agent's turn.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import re
import shlex
import shutil
import sys
import tarfile
import tomllib
from pathlib import Path
from typing import Any

import yaml

SERVICE = "main"  # Harbor's agent service, and the one an imported task gets
AGENT_USER = "1000:1000"  # when the task names no user: denv's agent is never root
COMPOSE_NAMES = ("docker-compose.yaml", "docker-compose.yml")
IDLE_CMD = ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done"]
DENV_DOCKERFILE = "Dockerfile.denv"
# The tests ride in the verifier's argv: each word under the compose limit on
# one string (SPEC_MAX_STRING, 4096), the whole under this many bytes.
TESTS_WORD = 3072
TESTS_MAX = 256 * 1024
VERIFIER_TIMEOUT_MAX = 86400
NAME_MAX = 63
_NAME_BAD = re.compile(r"[^A-Za-z0-9._-]+")
# The grader's script: unpack the tests carried in "$@", then run test.sh
# where Harbor would (the workdir, bash when the image has it).
UNPACK = ("set -e; mkdir -p /tests /logs/verifier; printf %s \"$@\" | base64 -d | tar -xzf - -C /tests; "
          "{env}cd {workdir} 2>/dev/null || cd /; "
          "if command -v bash >/dev/null 2>&1; then exec bash /tests/test.sh; fi; exec sh /tests/test.sh")


class InteropError(RuntimeError):
    """A directory that cannot be imported or a version that cannot be exported; the text says why."""


def _name(s: str) -> str:
    """A valid denv name (letters, digits, . _ -; 63 at most)."""
    n = _NAME_BAD.sub("-", s).strip("-._")[:NAME_MAX].rstrip("-._")
    return n or "task"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise InteropError(f"{path.parent}: not a Harbor task (no task.toml)") from None
    except tomllib.TOMLDecodeError as e:
        raise InteropError(f"{path}: {e}") from None


def _tests_words(tests: Path) -> list[str]:
    """tests/ as a gzipped tar in base64, cut into argv words."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for p in sorted(tests.rglob("*")):
            t.add(p, arcname=str(p.relative_to(tests)), recursive=False)
    raw = buf.getvalue()
    if len(raw) > TESTS_MAX:
        raise InteropError(f"{tests}: {len(raw)} bytes compressed; the verifier carries at most {TESTS_MAX}")
    b64 = base64.b64encode(raw).decode()
    return [b64[i:i + TESTS_WORD] for i in range(0, len(b64), TESTS_WORD)]


def _dockerfile_workdir(text: str) -> str | None:
    """The last WORKDIR of a Dockerfile (an absolute one), or None."""
    wd = None
    for line in text.splitlines():
        parts = line.strip().split(None, 1)
        if len(parts) == 2 and parts[0].upper() == "WORKDIR" and parts[1].startswith("/"):
            wd = parts[1].strip()
    return wd


def _user(agent: dict[str, Any]) -> str:
    u = agent.get("user")
    if u is None or str(u) in ("", "root", "0", "0:0"):
        return AGENT_USER
    return str(u)


def _egress(env: dict[str, Any]) -> str:
    """The Harbor adapter's rule: allow only when the task asks for the internet."""
    if env.get("allow_internet") is True or env.get("network_mode") == "public":
        return "allow"
    return "deny"


def _caps(env: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if env.get("gpus"):
        raise InteropError(f"the task asks for {env['gpus']} GPU(s); denv has no GPU passthrough yet")
    if env.get("cpus"):
        out["cpus"] = float(env["cpus"])
    if env.get("memory_mb"):
        out["mem_limit"] = f"{int(env['memory_mb'])}m"
    return out


def _owned_dockerfile(base: str, workdir: str | None, user: str, copy_context: bool) -> str:
    """base (a Dockerfile's text) with the agent's workdir made the agent's:
    the task's files are root's in its image and the agent is not root here."""
    lines = [base.rstrip("\n"), "", "# denv import: the agent (not root on denv) owns its workdir", "USER root"]
    if workdir:
        if copy_context:  # Harbor uploads an image task's environment/ to the workdir
            lines.append(f"COPY . {workdir}/")
            lines.append(f"RUN rm -f {workdir}/{DENV_DOCKERFILE}")
        lines.append(f"RUN mkdir -p {workdir} && chown -R {user} {workdir}")
        lines.append(f"WORKDIR {workdir}")  # where Harbor's agent starts, in the export too
    return "\n".join(lines) + "\n"


def _verifier(task: dict[str, Any], tests: Path, workdir: str | None) -> dict[str, Any]:
    if not (tests / "test.sh").is_file():
        raise InteropError(f"{tests}: no test.sh")
    ver = task.get("verifier") or {}
    env = "".join(f"export {k}={shlex.quote(str(v))}; " for k, v in (ver.get("env") or {}).items()
                  if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(k)))
    script = UNPACK.format(env=env, workdir=shlex.quote(workdir or "/"))
    timeout = int(float(ver.get("timeout_sec") or 600))
    return {"service": SERVICE, "command": ["sh", "-c", script, "sh", *_tests_words(tests)],
            "collect": [], "timeout_sec": max(1, min(timeout, VERIFIER_TIMEOUT_MAX))}


def import_harbor(src: str | os.PathLike[str], out: str | os.PathLike[str]) -> dict[str, Any]:
    """Write the project for the Harbor task at src into out; the compose document."""
    src, out = Path(src), Path(out)
    task = _read_toml(src / "task.toml")
    env = task.get("environment") or {}
    user = _user(task.get("agent") or {})
    name = _name(((task.get("task") or {}).get("name") or src.name).split("/")[-1])
    env_dir = src / "environment"
    if out.exists() and any(out.iterdir()):
        raise InteropError(f"{out}: exists and is not empty")
    compose_src = next((env_dir / n for n in COMPOSE_NAMES if (env_dir / n).is_file()), None)
    workdir = env.get("workdir")
    if compose_src is None and not env.get("docker_image") and not (env_dir / "Dockerfile").is_file():
        raise InteropError(f"{src}: neither [environment] docker_image nor environment/Dockerfile "
                           "nor environment/docker-compose.yaml")
    out.mkdir(parents=True, exist_ok=True)
    if env_dir.is_dir():
        shutil.copytree(env_dir, out / "environment", dirs_exist_ok=True)
    else:
        (out / "environment").mkdir()
    if compose_src is not None:
        doc = yaml.safe_load(compose_src.read_text()) or {}
        main = (doc.get("services") or {}).get(SERVICE)
        if not isinstance(main, dict):
            raise InteropError(f"{compose_src}: no service {SERVICE!r} (Harbor's agent service)")
        workdir = _own_service(main, out / "environment", workdir, user, image_context=False)
        # the compose file moves up one directory: its build contexts with it
        for svc in (doc.get("services") or {}).values():
            b = svc.get("build") if isinstance(svc, dict) else None
            if isinstance(b, str):
                svc["build"] = b = {"context": b}
            if isinstance(b, dict):
                b["context"] = os.path.normpath(os.path.join("environment", b.get("context") or "."))
        (out / "environment" / compose_src.name).unlink()
    else:
        main = {}
        if not workdir and (env_dir / "Dockerfile").is_file():
            workdir = _dockerfile_workdir((env_dir / "Dockerfile").read_text())
        workdir = workdir or "/app"
        if env.get("docker_image"):
            main["image"] = env["docker_image"]
        else:
            main["build"] = {"context": ".", "dockerfile": "Dockerfile"}
        _own_service(main, out / "environment", workdir, user, image_context=bool(env.get("docker_image")))
        main["build"]["context"] = "environment"
        main["command"] = IDLE_CMD
        main["volumes"] = [f"work:{workdir}"]
        doc = {"services": {SERVICE: main}, "volumes": {"work": {}}}
    if env.get("env"):
        main.setdefault("environment", {}).update({str(k): str(v) for k, v in env["env"].items()})
    for k, v in _caps(env).items():
        main.setdefault(k, v)
    main["user"] = user
    xd: dict[str, Any] = doc["x-denv"] if isinstance(doc.get("x-denv"), dict) else {}
    doc = {"x-denv": {"kind": "rl-environment", "egress": _egress(env), **xd,
                      "agent": {"service": SERVICE},
                      "verifier": _verifier(task, src / "tests", workdir)},
           **{k: v for k, v in doc.items() if k != "x-denv"}}
    (out / "docker-compose.yaml").write_text(
        "# Written by denv import harbor from " + str(src.resolve()) + "\n" + yaml.safe_dump(doc, sort_keys=False))
    tdir = out / "tasks" / name
    tdir.mkdir(parents=True)
    for part in ("instruction.md", "task.toml", "solution", "tests"):
        p = src / part
        if p.is_dir():
            shutil.copytree(p, tdir / part)
        elif p.is_file():
            shutil.copy2(p, tdir / part)
    return doc


def _own_service(svc: dict[str, Any], ctx: Path, workdir: str | None, user: str,
                 image_context: bool) -> str | None:
    """Point svc at environment/Dockerfile.denv: its image (or Dockerfile) with
    the workdir chowned to the agent's user. The workdir (given, else the
    Dockerfile's), or None."""
    if "image" in svc and "build" not in svc:
        base = f"FROM {svc.pop('image')}"
        svc["build"] = {"context": ".", "dockerfile": DENV_DOCKERFILE}
    else:
        b = svc.get("build")
        if isinstance(b, str):
            b = {"context": b}
        b = dict(b or {})
        sub = ctx / (b.get("context") or ".")
        base = (sub / (b.get("dockerfile") or "Dockerfile")).read_text()
        ctx = sub
        b["dockerfile"] = DENV_DOCKERFILE
        svc["build"] = b
        if not workdir:
            workdir = _dockerfile_workdir(base)
    (ctx / DENV_DOCKERFILE).write_text(_owned_dockerfile(base, workdir, user, image_context))
    return workdir


# ---- export ----


def _find_version(c: Any, ref: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """REF is PROJECT@VERSION, ENV@VERSION or ENV (its current version): (env row, version row)."""
    who, _, ver = ref.partition("@")
    envs: list[dict[str, Any]] = []
    if who.startswith("env_"):
        doc = c._json("GET", f"/v1/envs/{who}")
        envs = [doc.get("environment") or doc]
    else:
        proj, _, env_name = who.partition("/")
        envs = c._json("GET", f"/v1/projects/{proj}/envs").get("environments") or []
        if env_name:
            envs = [e for e in envs if e.get("Name") == env_name]
    for e in envs:
        want = ver or e.get("CurrentVersionID")
        for v in c._json("GET", f"/v1/envs/{e['ID']}/versions").get("versions") or []:
            if v.get("ID") == want:
                return e, v
    raise InteropError(f"{ref}: no such version (use PROJECT@VERSION, ENV@VERSION or an environment id)")


def _service(spec: dict[str, Any], name: str) -> dict[str, Any]:
    for s in spec.get("services") or []:
        if s.get("name") == name:
            return dict(s)
    raise InteropError(f"the version has no service {name!r}")


TEST_WRAPPER = """#!/bin/sh
# Written by denv export from {ref}: the version's x-denv.verifier, run as
# denv verify runs it (the collected paths under /submission, the reward in
# /logs/verifier/reward.txt, else the last word the grader printed).
mkdir -p /submission /logs/verifier
for p in {collect}; do
  [ -e "$p" ] || continue
  mkdir -p "/submission$(dirname "$p")" && cp -a "$p" "/submission$p"
done
export SUBMISSION=/submission
rm -f /logs/verifier/reward.txt
{argv} > /logs/verifier/grader.out 2>&1
rc=$?
cat /logs/verifier/grader.out
if [ ! -s /logs/verifier/reward.txt ]; then
  last=$(tr -s ' \\t\\n' '\\n\\n\\n' < /logs/verifier/grader.out | tail -n 1)
  case $last in
  ''|*[!0-9.-]*) echo 0 > /logs/verifier/reward.txt ;;
  *) echo "$last" > /logs/verifier/reward.txt ;;
  esac
fi
exit $rc
"""


def _task_toml(name: str, desc: str, svc: dict[str, Any], spec: dict[str, Any],
               verifier: dict[str, Any], image: str | None, ref: str) -> str:
    res = svc.get("resources") or {}
    lines = ['schema_version = "1.4"', "", "[task]", f"name = {json.dumps('denv/' + name)}", 'version = "1.0.0"',
             f"description = {json.dumps(desc)}", "", "[metadata]", f"denv_version = {json.dumps(ref)}", "",
             "[verifier]", f"timeout_sec = {float(verifier.get('timeout_sec') or 600)}",
             'environment_mode = "shared"', "",
             # No [agent] user: Harbor's exec needs a name in /etc/passwd, and
             # the image's default user (root, Dockerfile.denv says USER root)
             # is what Harbor's oracle gets on Docker too.
             "[environment]",
              f"network_mode = {json.dumps('public' if spec.get('egress') == 'allow' else 'no-network')}"]
    if image:
        lines.append(f"docker_image = {json.dumps(image)}")
    if res.get("cpus"):
        lines.append(f"cpus = {res['cpus']}")
    if res.get("memory_mb"):
        lines.append(f"memory_mb = {int(res['memory_mb'])}")
    env = svc.get("env") or {}
    if env:
        lines.append("[environment.env]")
        lines += [f"{json.dumps(k)} = {json.dumps(str(v))}" for k, v in sorted(env.items())]
    return "\n".join(lines) + "\n"


def _compose_of(spec: dict[str, Any]) -> dict[str, Any]:
    """The version's services as a compose file Harbor runs, every image pinned."""
    services: dict[str, Any] = {}
    for s in spec.get("services") or []:
        svc: dict[str, Any] = {"image": s.get("image")}
        if s.get("command"):
            svc["command"] = s["command"]
        if s.get("env"):
            svc["environment"] = s["env"]
        if s.get("volumes"):
            svc["volumes"] = s["volumes"]
        if s.get("depends_on"):
            svc["depends_on"] = s["depends_on"]
        h = s.get("health") or {}
        if h.get("test"):
            svc["healthcheck"] = {k: v for k, v in h.items() if v not in (None, "", 0)}
        res = s.get("resources") or {}
        if res.get("memory_mb"):
            svc["mem_limit"] = f"{int(res['memory_mb'])}m"
        if res.get("cpus"):
            svc["cpus"] = res["cpus"]
        services[s["name"]] = svc
    return {"services": services, "volumes": {v: {} for v in spec.get("volumes") or []}}


def export_harbor(c: Any, ref: str, out: str | os.PathLike[str],
                  project_dir: str | os.PathLike[str] = ".") -> list[Path]:
    """One Harbor task directory per task of the project (tasks/*/instruction.md), from version REF."""
    env, ver = _find_version(c, ref)
    spec = ver.get("Spec") or {}
    verifier = spec.get("verifier") or {}
    agent = (spec.get("agent") or {}).get("service")
    if not agent or not verifier:
        raise InteropError(f"{ref}: the version declares no x-denv.agent and x-denv.verifier to export")
    if verifier.get("image"):
        raise InteropError(f"{ref}: a verifier with an image of its own is not exported yet "
                           "(x-denv.verifier.service is)")
    svc = _service(spec, agent)
    multi = len(spec.get("services") or []) > 1
    if multi and agent != SERVICE:
        raise InteropError(f"{ref}: Harbor runs a compose task's agent in service {SERVICE!r}, not {agent!r}")
    if verifier.get("service") != agent:
        raise InteropError(f"{ref}: the verifier runs in {verifier.get('service')!r}, not the agent's service")
    tasks = sorted(p.parent for p in Path(project_dir, "tasks").glob("*/instruction.md"))
    if not tasks:
        raise InteropError(f"{Path(project_dir).resolve()}: no tasks/*/instruction.md to export")
    pinned = f"{ref.partition('@')[0]}@{ver['ID']}"
    argv = " ".join(shlex.quote(a) for a in verifier.get("command") or [])
    collect = " ".join(shlex.quote(p) for p in verifier.get("collect") or []) or "''"
    out = Path(out)
    written = []
    for t in tasks:
        d = out / t.name
        if d.exists():
            raise InteropError(f"{d}: exists")
        (d / "environment").mkdir(parents=True)
        (d / "tests").mkdir()
        shutil.copy2(t / "instruction.md", d / "instruction.md")
        if (t / "solution").is_dir():
            shutil.copytree(t / "solution", d / "solution")
        first = (t / "instruction.md").read_text().strip().splitlines()
        desc = first[0] if first else t.name
        if multi:
            (d / "environment" / "docker-compose.yaml").write_text(yaml.safe_dump(_compose_of(spec), sort_keys=False))
        (d / "task.toml").write_text(_task_toml(t.name, desc, svc, spec, verifier,
                                                None if multi else svc.get("image"), pinned))
        test = d / "tests" / "test.sh"
        test.write_text(TEST_WRAPPER.format(ref=pinned, collect=collect, argv=argv))
        test.chmod(0o755)
        written.append(d)
    return written


OPENENV_SERVER = '''"""OpenEnv server for the denv version {ref}, written by denv export --openenv.

reset() forks the version through denv (a fresh copy of the world, data
included) and step() runs a shell command in its agent service. The control
plane is DENV_SERVER, the key DENV_API_KEY, both from the environment.
"""
from __future__ import annotations

from typing import Any

from openenv.core.env_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

from denv import Client, shell_command

VERSION = {version!r}
SERVICE = {service!r}


class CommandAction(Action):
    command: str
    timeout_sec: int = 120


class CommandObservation(Observation):
    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0
    env_id: str = ""


class DenvVersionEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._c = Client()
        self._env: str | None = None
        self._state = State(episode_id=None, step_count=0)

    def _drop(self) -> None:
        if self._env:
            env, self._env = self._env, None
            self._c.destroy(env)

    def reset(self, seed: Any = None, episode_id: str | None = None, **kw: Any) -> CommandObservation:
        self._drop()
        self._env = self._c.sandbox(from_version=VERSION).id
        self._state = State(episode_id=episode_id or self._env, step_count=0)
        return CommandObservation(env_id=self._env, done=False, reward=None)

    def step(self, action: CommandAction, timeout_s: float | None = None, **kw: Any) -> CommandObservation:
        if not self._env:
            self.reset()
        self._state.step_count += 1
        r = self._c.exec(self._env, SERVICE, shell_command(action.command), timeout_sec=action.timeout_sec)
        return CommandObservation(stdout=r.stdout, stderr=r.stderr, exit_code=r.exit_code,
                                  env_id=self._env or "", done=False, reward=None)

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        self._drop()


app = create_app(DenvVersionEnvironment, CommandAction, CommandObservation, env_name={name!r})
'''

OPENENV_DOCKERFILE = """# denv export --openenv {ref}: the version's agent service image, pinned,
# with the OpenEnv server on top (it forks the version through denv).
FROM {image}
USER root
COPY . /opt/denv-openenv
RUN pip install --no-cache-dir openenv-core denv uvicorn
ENV PYTHONPATH=/opt/denv-openenv
EXPOSE 8000
CMD ["python3", "-m", "uvicorn", "server.app:app", "--host", "0.0.0.0", "--port", "8000"]
"""


def export_openenv(c: Any, ref: str, out: str | os.PathLike[str]) -> Path:
    """An OpenEnv environment package for version REF."""
    env, ver = _find_version(c, ref)
    spec = ver.get("Spec") or {}
    agent = (spec.get("agent") or {}).get("service") or (spec.get("services") or [{}])[0].get("name")
    svc = _service(spec, agent)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise InteropError(f"{out}: exists and is not empty")
    name = _name(env.get("Name") or "denv-env")
    pinned = f"{ref.partition('@')[0]}@{ver['ID']}"
    (out / "server").mkdir(parents=True)
    (out / "server" / "__init__.py").write_text("")
    (out / "server" / "app.py").write_text(OPENENV_SERVER.format(ref=pinned, version=ver["ID"],
                                                                 service=agent, name=name))
    (out / "openenv.yaml").write_text(yaml.safe_dump(
        {"spec_version": 1, "name": name, "type": "space", "runtime": "fastapi",
         "app": "server.app:app", "port": 8000, "denv_version": pinned}, sort_keys=False))
    (out / "Dockerfile").write_text(OPENENV_DOCKERFILE.format(ref=pinned, image=svc.get("image")))
    return out


# ---- command line ----


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="denv", description="import and export other frameworks' formats")
    sub = p.add_subparsers(dest="verb", required=True)
    imp = sub.add_parser("import")
    imp.add_argument("format", choices=["harbor", "karotte"])
    imp.add_argument("dir")
    imp.add_argument("-o", "--out")
    imp.add_argument("--project")
    imp.add_argument("--env", default="alpha")
    imp.add_argument("--deploy", action="store_true")
    exp = sub.add_parser("export")
    exp.add_argument("format", choices=["harbor", "openenv"])
    exp.add_argument("ref")
    exp.add_argument("out")
    exp.add_argument("--project-dir", default=".")
    return p


def _deploy(out: Path, project: str, env: str) -> None:
    from denv.client import Client

    c = Client()
    c.ensure_project(project)
    dep = c.deploy(project, out / "docker-compose.yaml", env=env)
    status = dep.get("Status")
    print(f"deployment {dep.get('ID')}: {status}; environment {dep.get('EnvID')} version {dep.get('VersionID')}")
    if status != "succeeded":
        raise InteropError(f"deployment {dep.get('ID')} {status}: {dep.get('Error') or ''}".rstrip(": "))


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    try:
        if a.verb == "import":
            src = Path(a.dir)
            if a.format == "harbor":
                out = Path(a.out or f"denv-{src.resolve().name}")
                import_harbor(src, out)
            else:
                from denv import karotte

                out = Path(a.out or f"denv-{src.resolve().name}")
                karotte.import_karotte(src, out)
            print(f"wrote {out / 'docker-compose.yaml'}")
            if a.deploy:
                _deploy(out, a.project or _name(out.resolve().name), a.env)
            return 0
        from denv.client import Client

        c = Client()
        if a.format == "harbor":
            for d in export_harbor(c, a.ref, a.out, a.project_dir):
                print(f"wrote {d}")
        else:
            print(f"wrote {export_openenv(c, a.ref, a.out)}")
        return 0
    except (InteropError, OSError, ValueError) as e:
        print(f"denv: {e}", file=sys.stderr)
        return 1
    except RuntimeError as e:  # DenvError
        print(f"denv: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
