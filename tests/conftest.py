"""Shared fixtures. Each test tier finds its runtime through the toolchain; a missing runtime
is a skip with the install command in the reason, never a silent pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from sunk.devenv.paths import tool_path

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def helm() -> str:
    path = tool_path("helm")
    if path is None:
        pytest.skip("helm not installed: run `make setup`")
    return str(path)
