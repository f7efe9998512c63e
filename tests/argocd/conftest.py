"""A throwaway repository layout for argocd tests: values files under examples/, a directory of
plain manifests for an extra Application."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fake_repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "examples").mkdir(parents=True)
    for name in ("slurm-a.yaml", "b.yaml"):
        shutil.copy(FIXTURES / "values" / name, root / "examples" / name)
    (root / "deploy" / "storage").mkdir(parents=True)
    (root / "deploy" / "storage" / "pvc.yaml").write_text(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: home}\n"
    )
    return root
