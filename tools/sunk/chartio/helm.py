"""Find and run helm: ``--helm``, then ``$SUNK_HELM``, then helm on PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sunk.errors import ToolError
from sunk.resources import chart_dir as _chart_dir


class HelmError(ToolError):
    """helm is missing (``missing``) or failed. To sunkctl both are tool failures (exit 3);
    `validate` reports a failing ``helm template`` of the user's values as a finding."""

    def __init__(self, message: str, missing: bool = False):
        super().__init__(message)
        self.missing = missing


INSTALL_HINT = (
    "install Helm 3 (https://helm.sh/docs/intro/install/) and put it on PATH, "
    "or pass --helm PATH or set SUNK_HELM"
)


def _executable(path: str) -> bool:
    return Path(path).is_file() and os.access(path, os.X_OK)


def helm_binary(explicit: str | None = None) -> str:
    """``explicit`` (--helm), else $SUNK_HELM, else helm on PATH. A named binary that is not
    there is an error of its own: it is never silently replaced by another helm."""
    for source, candidate in (("--helm", explicit), ("SUNK_HELM", os.environ.get("SUNK_HELM"))):
        if candidate:
            found = candidate if os.sep in candidate else shutil.which(candidate)
            if found and _executable(found):
                return str(found)
            raise HelmError(f"{source} {candidate}: no such executable; {INSTALL_HINT}", True)
    found = shutil.which("helm")
    if found:
        return found
    raise HelmError(f"helm not found on PATH: {INSTALL_HINT}", missing=True)


def chart_path(name: str) -> Path:
    """The chart's directory; a missing one is a :class:`~sunk.resources.ResourceError`, a
    tool failure like a missing helm."""
    return _chart_dir(name)


@dataclass(frozen=True)
class Release:
    chart: str = "slurm"
    name: str = "slurm"
    namespace: str = "tenant-slurm"
    kube_version: str | None = None
    helm: str | None = None  # --helm; None: $SUNK_HELM, then PATH
    path: Path | None = None  # a chart directory of that name; None: the bundled chart


def template(release: Release, value_files: list[Path], set_values: list[str] = ()) -> str:
    cmd = [
        helm_binary(release.helm),
        "template",
        release.name,
        str(release.path or chart_path(release.chart)),
        "--namespace",
        release.namespace,
    ]
    if release.kube_version:
        cmd += ["--kube-version", release.kube_version]
    for path in value_files:
        cmd += ["-f", str(path)]
    for item in set_values:
        cmd += ["--set", item]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise HelmError(proc.stderr.strip() or f"helm template exited {proc.returncode}")
    return proc.stdout
