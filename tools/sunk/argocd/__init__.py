"""Argo CD manifests for a GitOps deployment of open SUNK (``sunkctl argocd gen``).

Pure builders return plain dicts; :mod:`.writer` turns a :class:`~.builders.Bundle` into bytes
with a stable key order. Nothing here prints: the CLI reports.

Modules:
  errors        the one exception type, carrying the CLI exit code
  versions      pinned upstream charts (cert-manager, MOCO)
  spec          the generation inputs and their validation (values files, names, URLs)
  builders      Application / ApplicationSet / argocd-cm builders
  healthchecks  the Lua health checks (health/*.lua) shipped for ``argocd-cm``
  schema        validation against the hand-written Argo CD schemas in ``schemas/``
  writer        deterministic YAML output, stale-file pruning and ``--check``
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sunk.argocd.errors import ArgoCDGenError
from sunk.argocd.spec import ExtraApp, GenSpec, SlurmRelease, SyncSettings

if TYPE_CHECKING:
    from sunk.argocd.builders import Bundle, build


def __getattr__(name: str) -> Any:
    # The builders import the CRD models (a third of a second): only `argocd gen` needs them,
    # not every sunkctl start that imports this package for its option defaults.
    if name in ("Bundle", "build"):
        from sunk.argocd import builders

        return getattr(builders, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ArgoCDGenError",
    "Bundle",
    "ExtraApp",
    "GenSpec",
    "SlurmRelease",
    "SyncSettings",
    "build",
]
