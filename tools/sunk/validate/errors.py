"""Errors that end a validation run early (the CLI maps them to exit codes 2 and 3)."""


class UsageError(ValueError):
    """Bad arguments: a missing path, a bad --set, an unknown chart or Kubernetes version."""


class ToolError(RuntimeError):
    """The environment cannot run a step: helm missing, schema bundle missing or broken."""
