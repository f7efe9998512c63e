"""The errors of :mod:`sunk.argocd`: one family, each class with its sunkctl exit code."""

from __future__ import annotations

from sunk.errors import EXIT_USAGE, InputError, SunkError, ToolError


class ArgoCDGenError(SunkError):
    """A problem with the inputs, as a one-line message that names the file or flag at fault.

    Catch it for every error of ``argocd gen``. Raised as itself it is a usage error (exit 2:
    bad flag value, missing file, conflicting names); its subclasses carry the other codes.
    """

    exit_code = EXIT_USAGE


class ArgoCDInputError(InputError, ArgoCDGenError):
    """Invalid content (exit 1): YAML that does not parse, a values file that is not a mapping,
    generated manifests that fail the Argo CD schema."""


class ArgoCDOutputError(ToolError, ArgoCDGenError):
    """The output cannot be written (exit 3)."""
