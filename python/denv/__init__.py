"""denv: a client of the denv control plane, and adapters for Harbor, Inspect and OpenEnv.

The adapters live in ``denv.harbor``, ``denv.inspect`` and ``denv.openenv`` and
import their framework only when imported themselves.
"""

from denv.client import (
    AsyncClient,
    Batch,
    BatchMember,
    Client,
    DenvError,
    DenvTimeout,
    ExecResult,
    Sandbox,
    Verdict,
    shell_command,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "Batch",
    "BatchMember",
    "Client",
    "DenvError",
    "DenvTimeout",
    "ExecResult",
    "Sandbox",
    "Verdict",
    "shell_command",
    "__version__",
]
