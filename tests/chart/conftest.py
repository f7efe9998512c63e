from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


@pytest.fixture(scope="session")
def render(helm, repo):
    """helm template of a chart with values files / --set; returns (rc, stdout, stderr)."""

    def _render(
        chart: str,
        *files: Path,
        sets: tuple[str, ...] = (),
        ns: str = "tenant-slurm",
        api_versions: tuple[str, ...] = (),
    ):
        cmd = [helm, "template", "rel", str(repo / "charts" / chart), "-n", ns]
        for api in api_versions:
            cmd += ["--api-versions", api]
        for f in files:
            cmd += ["-f", str(f)]
        for s in sets:
            cmd += ["--set", s]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        return proc

    return _render


@pytest.fixture(scope="session")
def objects(render):
    def _objects(
        chart: str, *files: Path, sets: tuple[str, ...] = (), api_versions: tuple[str, ...] = ()
    ):
        proc = render(chart, *files, sets=sets, api_versions=api_versions)
        assert proc.returncode == 0, proc.stderr
        return [d for d in yaml.safe_load_all(proc.stdout) if d]

    return _objects


def write_values(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "values.yaml"
    path.write_text(text)
    return path
