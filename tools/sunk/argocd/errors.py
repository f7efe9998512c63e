"""The single error type of :mod:`sunk.argocd`."""

from __future__ import annotations

EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_ENVIRONMENT = 3


class ArgoCDGenError(Exception):
    """A problem with the inputs, as a one-line message that names the file or flag at fault.

    ``exit_code`` follows the sunkctl convention: 2 for a usage error (bad flag value, missing
    file, conflicting names), 1 for invalid content (YAML that does not parse, a values file
    that is not a mapping), 3 for an environment failure (cannot write the output).
    """

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message
