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

from sunk.argocd.builders import Bundle, build
from sunk.argocd.errors import ArgoCDGenError
from sunk.argocd.spec import ExtraApp, GenSpec, SlurmRelease, SyncSettings

__all__ = [
    "ArgoCDGenError",
    "Bundle",
    "ExtraApp",
    "GenSpec",
    "SlurmRelease",
    "SyncSettings",
    "build",
]
