"""End to end: the app-of-apps generated for every example points at charts and value files
that pass `sunkctl validate`, and generating twice gives the same bytes."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from sunk.cli.main import app
from tests.chart.conftest import EXAMPLES

SHA = "0123456789abcdef0123456789abcdef01234567"


def generate(repo: Path, out: Path) -> dict[str, bytes]:
    args = [
        "argocd",
        "gen",
        "--repo",
        "https://git.example.com/org/clusters.git",
        "--revision",
        SHA,
        "--cluster",
        "prod",
        "--out",
        str(out),
        "--repo-root",
        str(repo),
    ]
    for example in EXAMPLES:
        args += ["-f", str(example)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*.yaml"))}


def test_generated_children_validate_and_output_is_deterministic(helm, repo):
    out = repo / "out" / "argocd-e2e-test"
    try:
        first = generate(repo, out)
        second = generate(repo, out)
        assert first == second
        slurm_apps = []
        for name, text in first.items():
            doc = yaml.safe_load(text)
            if doc.get("kind") != "Application" or "source" not in doc["spec"]:
                continue
            source = doc["spec"]["source"]
            if source.get("path") == "charts/slurm":
                slurm_apps.append(name)
                chart_dir = repo / source["path"]
                for value_file in source["helm"]["valueFiles"]:
                    path = (chart_dir / value_file).resolve()
                    assert path.is_file(), (name, value_file)
                    result = CliRunner().invoke(app, ["validate", str(path)])
                    assert result.exit_code == 0, (name, result.output)
            elif source.get("path") == "charts/sunk":
                assert (repo / "charts/sunk/Chart.yaml").is_file()
        assert len(slurm_apps) == len(EXAMPLES)
    finally:
        import shutil

        shutil.rmtree(repo / "out", ignore_errors=True)
