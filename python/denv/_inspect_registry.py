"""Inspect's entry point (group ``inspect_ai``): importing this registers sandbox ``denv``."""

from denv.inspect import DenvSandbox, DenvSandboxConfig  # noqa: F401  (registers on import)
