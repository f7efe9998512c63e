"""Shared fixtures. Each test tier finds its runtime through the toolchain; a missing runtime
is a skip with the install command in the reason, never a silent pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from sunk.devenv.paths import tool_path

REPO = Path(__file__).resolve().parent.parent
# Each test directory is one tier; its tests carry the tier's marker.
TIERS = ("unit", "chart", "slurm", "cluster", "e2e", "argocd", "images")


def pytest_collection_modifyitems(items):
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO / "tests").parts
        tier = parts[0] if len(parts) > 1 else "unit"
        marker = "unit" if tier == "argocd" else tier
        if marker in TIERS:
            item.add_marker(getattr(pytest.mark, marker))


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def helm() -> str:
    path = tool_path("helm")
    if path is None:
        pytest.skip("helm not installed: run `make setup`")
    return str(path)
