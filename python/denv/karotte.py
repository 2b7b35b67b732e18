"""``denv import karotte DIR``: a Karotte environment as a denv project.

A Karotte environment (what ``karotte create-env`` writes) is one image, built
from its ``Containerfile``, and a Python package ``environment`` under
``src/`` whose ``get_tasks()`` returns Task classes; a task's steps carry
``instructions``, ``submission_paths`` and a ``judge``. The tasks are read
with Karotte's own classes, in a child Python (``DENV_KAROTTE_PYTHON``, else
this one) that has the ``karotte`` package and imports the environment with
``KAROTTE_CONTAINERIZED=1``, so every path is the one inside the image.

The project (see denv(1), IMPORT AND EXPORT): service ``karotte`` built from
the environment, running as the student (``KAROTTE_DEMOTE_ID``, 1000) with
``/workdir`` as a volume, egress denied; ``submission_paths`` become
``verifier.collect``; the judge of the first task's last file-judged step
(an ``ExecutableJudge``) becomes the verifier command, run by ``denv verify``
over the collected copy under ``/submission``. Karotte's judges that read the
transcript (``RegexJudge``, rubric judges) have no file to grade and are
listed, not run. The steps are written to ``tasks/<task>/``; denv rewrites no
step or judge.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from denv.interop import IDLE_CMD, InteropError, _name

SERVICE = "karotte"
STUDENT_UID = 1000  # Karotte's KAROTTE_DEMOTE_ID default
WORKDIR = "/workdir"  # Karotte's STUDENT_WORKDIR
# Karotte's own caps run in its VM; these are the compose caps denv enforces
# instead (the blog's example: 4 GiB and 1024 processes).
MEM_LIMIT = "4g"
PIDS_LIMIT = 1024
LOAD_TIMEOUT = 120
SCORE_FILE = "/logs/verifier/karotte-score.json"
CONTAINERFILES = ("Containerfile", "Dockerfile")
COPY_SKIP = {".venv", ".git", "out", "__pycache__", ".pytest_cache"}

# Runs in the child: Karotte's loader, then each step's fields as JSON.
LOADER = r'''
import json, sys
from karotte.load_tasks import load_all_task_classes
from karotte.schemas.evaluation_run_config import EvaluationRunConfig
from karotte.judges import ExecutableJudge

cfg = EvaluationRunConfig(run_id="", task_id="", model="", model_api_key="")
out = []
for cls in load_all_task_classes():
    task = cls(cfg)
    steps = []
    for step in task.steps:
        s = {"name": type(step).__name__, "instructions": step.instructions,
             "submission_paths": [str(p) for p in (step.submission_paths or ())]}
        try:
            j = step.judge
        except Exception as e:  # a judge built only after pre_scoring_hook
            s["judge"] = {"type": None, "error": f"{type(e).__name__}: {e}"}
        else:
            s["judge"] = {"type": type(j).__name__}
            if isinstance(j, ExecutableJudge):
                s["judge"].update(argv=list(j.subprocess_run_args), cwd=j.cwd)
        steps.append(s)
    out.append({"id": task.id, "tools": list(task.tools), "steps": steps})
print(json.dumps({"python": sys.executable, "tasks": out}))
'''

# The grader: Karotte's ExecutableJudge protocol (the judge writes {score}
# to its last argument; a failed judge scores 0) into denv's reward.txt.
JUDGE_WRAPPER = ("out=" + SCORE_FILE + "; rm -f \"$out\"; cd {cwd} 2>/dev/null || cd /; "
                 "if \"$@\"; then python3 -c 'import json,sys; print(float(json.load(open(sys.argv[1]))[\"score\"]))' "
                 "\"$out\" > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt; "
                 "else echo 0 > /logs/verifier/reward.txt; fi")


def load_tasks(src: Path) -> dict[str, Any]:
    """The environment's tasks, read by Karotte itself: {python, tasks: [...]}."""
    pkg = src / "src" / "environment"
    if not (pkg / "__init__.py").is_file():
        raise InteropError(f"{src}: not a Karotte environment (no src/environment/__init__.py)")
    py = os.environ.get("DENV_KAROTTE_PYTHON") or sys.executable
    path = os.pathsep.join([str(src.resolve() / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = dict(os.environ, KAROTTE_CONTAINERIZED="1", PYTHONPATH=path)
    env.pop("PYTHONSAFEPATH", None)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # karotte imports litellm: no fetch
    try:
        r = subprocess.run([py, "-c", LOADER], capture_output=True, text=True, env=env,
                           timeout=LOAD_TIMEOUT, cwd=src)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InteropError(f"reading the Karotte tasks with {py}: {e}") from None
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        if "No module named 'karotte'" in r.stderr:
            last += " (install karotte, or set DENV_KAROTTE_PYTHON to a Python that has it)"
        raise InteropError(f"reading the Karotte tasks with {py}: {last}")
    doc: dict[str, Any] = json.loads(r.stdout.strip().splitlines()[-1])
    if not doc["tasks"]:
        raise InteropError(f"{src}: get_tasks() returned no tasks")
    return doc


def _in_submission(arg: str, paths: list[str]) -> str:
    """An argument naming a submitted path names its collected copy instead."""
    for p in paths:
        if arg == p or arg.startswith(p.rstrip("/") + "/"):
            return "/submission" + arg
    return arg


def verifier_of(doc: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The verifier for the first task (its last step with an ExecutableJudge), and which step it is."""
    task = doc["tasks"][0]
    collect = list(dict.fromkeys(p for s in task["steps"] for p in s["submission_paths"]))
    for step in reversed(task["steps"]):
        j = step["judge"]
        if j.get("type") != "ExecutableJudge":
            continue
        argv = list(j["argv"])
        if argv and argv[0] == doc["python"]:  # sys.executable where the tasks were read
            argv[0] = "python3"
        argv = [_in_submission(a, collect) for a in argv[:-1]] + [SCORE_FILE]
        script = JUDGE_WRAPPER.format(cwd=shlex.quote(j.get("cwd") or WORKDIR))
        return ({"service": SERVICE, "command": ["sh", "-c", script, "sh", *argv],
                 "collect": collect}, f"{task['id']}/{step['name']}")
    return None, ""


def import_karotte(src: str | os.PathLike[str], out: str | os.PathLike[str]) -> dict[str, Any]:
    """Write the project for the Karotte environment at src into out; the compose document."""
    src, out = Path(src), Path(out)
    containerfile = next((n for n in CONTAINERFILES if (src / n).is_file()), None)
    if containerfile is None:
        raise InteropError(f"{src}: no Containerfile (the environment's image)")
    if out.exists() and any(out.iterdir()):
        raise InteropError(f"{out}: exists and is not empty")
    doc = load_tasks(src)
    verifier, judged = verifier_of(doc)
    uid = os.environ.get("KAROTTE_DEMOTE_ID", str(STUDENT_UID))
    xd: dict[str, Any] = {"kind": "rl-environment", "egress": "deny", "agent": {"service": SERVICE}}
    if verifier:
        xd["verifier"] = verifier
    else:
        print(f"denv: no step of {doc['tasks'][0]['id']} has a file judge (ExecutableJudge): "
              "the project has no verifier", file=sys.stderr)
    compose = {
        "x-denv": xd,
        "services": {SERVICE: {
            "build": {"context": "environment", "dockerfile": containerfile},
            "user": f"{uid}:{uid}", "command": IDLE_CMD,
            "mem_limit": MEM_LIMIT, "pids_limit": PIDS_LIMIT,
            "volumes": [f"student:{WORKDIR}"]}},
        "volumes": {"student": {}},
    }
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src, out / "environment", ignore=lambda d, names: [n for n in names if n in COPY_SKIP])
    head = f"# Written by denv import karotte from {src.resolve()}"
    if judged:
        head += f"\n# The verifier is the judge of step {judged}."
    (out / "docker-compose.yaml").write_text(head + "\n" + yaml.safe_dump(compose, sort_keys=False))
    for task in doc["tasks"]:
        d = out / "tasks" / _name(task["id"])
        d.mkdir(parents=True)
        parts = [f"## Step {i + 1}: {s['name']}\n\n{s['instructions'].strip()}\n"
                 for i, s in enumerate(task["steps"])]
        (d / "instruction.md").write_text("\n".join(parts))
        (d / "karotte.json").write_text(json.dumps(task, indent=2) + "\n")
    return compose
