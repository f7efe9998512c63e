"""Golden output of ``argocd gen`` for the fixture values files (syrupy).

Review changes with ``pytest tests/argocd --snapshot-update`` and read the diff: these files are
what lands in users' GitOps repositories.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sunk.cli.main import app

pytestmark = pytest.mark.unit

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.mark.parametrize(
    "style_args",
    [
        pytest.param(("--style", "app-of-apps"), id="app-of-apps"),
        pytest.param(
            ("--style", "appset", "--auto-sync", "--self-heal", "--ignore-replicas"), id="appset"
        ),
    ],
)
def test_generated_tree(fake_repo: Path, snapshot, style_args: tuple[str, ...]) -> None:
    argv = ["argocd", "gen", "--repo", "https://git.example.com/org/sunk.git", "--revision", SHA]
    argv += ["--cluster", "prod", "--repo-root", str(fake_repo), "--out", str(fake_repo / "argocd")]
    argv += [
        "-f",
        str(fake_repo / "examples/slurm-a.yaml"),
        "-f",
        str(fake_repo / "examples/b.yaml"),
    ]
    argv += ["--extra-app", f"storage={fake_repo / 'deploy/storage'}@slurm-a", *style_args]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    out = fake_repo / "argocd"
    tree = {p.relative_to(out).as_posix(): p.read_text() for p in sorted(out.rglob("*.yaml"))}
    assert tree == snapshot
