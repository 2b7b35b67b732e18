"""Inspect's own sandbox checks on denv: every ``test_*`` of the installed
``inspect_ai.util._sandbox.self_check`` (imported, not copied), each run against
a sandbox Inspect's registry resolves for ``denv`` and made as Inspect makes one
(``task_init``, ``sample_init``, ``sample_cleanup``).

    python inspect_selfcheck.py IMAGE[,user=NAME][,workdir=DIR] ...

runs them on one sandbox per image (``user=NAME`` and ``workdir=DIR`` make that user the sandbox's
exec user and directory, as compose's ``user:`` and ``working_dir:`` do for Inspect's Docker sandbox) and prints
one line per check, then ``inspect self-check IMAGE: N/M passed``. Skipped, as
Inspect's own runner skips them for a root Docker sandbox: the two write checks
on a file without write bits, which root may write. Exits 1 if any check failed.
"""

from __future__ import annotations

import sys
import time
import traceback

import anyio

import inspect_ai.util._sandbox.self_check as self_check
from inspect_ai.util._sandbox.registry import registry_find_sandboxenv

# Inspect's runner (tests/tools/test_sandbox_docker_and_local.py) skips these
# for its root Docker sandbox: "Root user always has write permissions".
ROOT_SKIPS = {"test_write_text_file_without_permissions", "test_write_binary_file_without_permissions"}
# (image substring, check) -> what the image lacks that the check needs; such a
# check still runs, and its failure is counted apart (a pass would be news).
IMAGE_GAPS = {
    ("busybox", "test_exec_permission_error"): "no /etc/passwd to try to run",
    ("busybox", "test_cwd_custom"): "no /usr/bin/env",
    ("busybox", "test_exec_as_user"): "no adduser and no su",
}


async def run_image(spec: str) -> tuple[int, int, int]:
    from denv.inspect import DenvSandboxConfig

    image, *opts = spec.split(",")
    kv = dict(o.split("=", 1) for o in opts)
    user = kv.get("user", "")
    cls = registry_find_sandboxenv("denv")
    cfg = DenvSandboxConfig(image=image, user=user or None, workdir=kv.get("workdir"))
    task = f"selfcheck-{image}"
    await cls.task_init(task, cfg)
    envs = await cls.sample_init(task, cfg, {})
    passed = failed = skipped = gaps = 0
    try:
        sbx = envs["default"]
        root = not user or user == "root"
        for name in self_check.__all__:
            if root and name in ROOT_SKIPS:
                skipped += 1
                print(f"skip {name} (root may write a file without w bits, as in Inspect's Docker runner)", flush=True)
                continue
            t0 = time.monotonic()
            try:
                await getattr(self_check, name)(sbx)
            except BaseException as e:  # noqa: BLE001 - a check's failure of any kind is reported
                if isinstance(e, KeyboardInterrupt):
                    raise
                tb = traceback.format_exception_only(type(e), e)[-1].strip()
                gap = next((why for (img, n), why in IMAGE_GAPS.items() if n == name and img in image), None)
                if gap:
                    gaps += 1
                    print(f"gap  {name}: the image has {gap} ({tb[:200]})", flush=True)
                    continue
                failed += 1
                print(f"FAIL {name} ({time.monotonic() - t0:.1f} s): {tb[:400]}", flush=True)
            else:
                passed += 1
                print(f"ok   {name} ({time.monotonic() - t0:.1f} s)", flush=True)
    finally:
        await cls.sample_cleanup(task, cfg, envs, False)
        await cls.task_cleanup(task, cfg, True)
    label = f"{image}" + (f" as {user}" if user else "")
    print(f"inspect self-check {label}: {passed}/{passed + failed + skipped + gaps} passed"
          + (f", {skipped} skipped as Inspect's own runner skips them" if skipped else "")
          + (f", {gaps} need what the image lacks" if gaps else ""), flush=True)
    return passed, failed, skipped


def main(argv: list[str]) -> int:
    bad = 0
    for spec in argv:
        _, failed, _ = anyio.run(run_image, spec)
        bad += failed
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
