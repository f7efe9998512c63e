"""The errors sunkctl reports, each carrying the exit code it ends the command with.

Base layer: imports nothing of ``sunk``, so every package can raise these. The library raises;
only the CLI (:class:`sunk.cli.common.SunkCommand`) prints them, as one line, and exits with
their ``exit_code``:

  0  clean (no error)
  1  :class:`InputError` — the input's content is invalid (a findings-like failure)
  2  :class:`UsageError` — bad arguments: a flag value, a missing file, clashing names
  3  :class:`ToolError`  — the environment cannot do the work: helm missing or failing, charts
     or schemas not found, a file that cannot be written
"""

from __future__ import annotations

from typing import ClassVar

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_ENV = 0, 1, 2, 3


class SunkError(Exception):
    """A problem reported as one line that names the file or flag at fault."""

    exit_code: ClassVar[int] = EXIT_ENV

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InputError(SunkError):
    """The input's content is invalid: YAML that does not parse, values the renderer rejects."""

    exit_code = EXIT_FINDINGS


class UsageError(SunkError, ValueError):
    """Bad arguments: a missing path, a bad --set, an unknown chart or Kubernetes version."""

    exit_code = EXIT_USAGE


class ToolError(SunkError, RuntimeError):
    """The environment cannot run a step: helm missing or failing, a schema bundle missing."""

    exit_code = EXIT_ENV
