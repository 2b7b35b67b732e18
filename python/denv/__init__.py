"""denv: a client of the denv control plane, and adapters for Harbor, Inspect and OpenEnv.

The adapters live in ``denv.harbor``, ``denv.inspect`` and ``denv.openenv`` and
import their framework only when imported themselves.
"""

from denv.client import (
    AsyncClient,
    Batch,
    BatchMember,
    Client,
    CommandOutput,
    DenvError,
    DenvTimeout,
    ExecResult,
    Sandbox,
    Verdict,
    shell_command,
)

from denv._version import VERSION as __version__

__all__ = [
    "AsyncClient",
    "Batch",
    "BatchMember",
    "Client",
    "CommandOutput",
    "DenvError",
    "DenvTimeout",
    "ExecResult",
    "Sandbox",
    "Verdict",
    "shell_command",
    "__version__",
]
