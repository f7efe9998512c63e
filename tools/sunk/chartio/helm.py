"""Find and run the pinned helm binary."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sunk.devenv.paths import repo_root, tool_path


class HelmError(RuntimeError):
    """helm is missing (environment) or rejected the chart/values (findings)."""

    def __init__(self, message: str, missing: bool = False):
        super().__init__(message)
        self.missing = missing


def helm_binary() -> str:
    """$SUNKCTL_HELM, the project's pinned helm, or helm on PATH."""
    candidates = [os.environ.get("SUNKCTL_HELM"), tool_path("helm"), shutil.which("helm")]
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            return str(candidate)
    raise HelmError("helm not found: run `make setup` or set SUNKCTL_HELM", missing=True)


def chart_path(name: str) -> Path:
    return repo_root() / "charts" / name


@dataclass(frozen=True)
class Release:
    chart: str = "slurm"
    name: str = "slurm"
    namespace: str = "tenant-slurm"
    kube_version: str | None = None


def template(release: Release, value_files: list[Path], set_values: list[str] = ()) -> str:
    cmd = [
        helm_binary(),
        "template",
        release.name,
        str(chart_path(release.chart)),
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
