"""Fixtures shared by the unit tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from sunk.validate import Options, validate


@pytest.fixture
def check(tmp_path: Path, monkeypatch):
    """Validate YAML text without helm; returns the Report."""
    monkeypatch.chdir(tmp_path)

    def _check(text: str, name: str = "values.yaml", **kwargs):
        (tmp_path / name).write_text(text)
        return validate(Options(paths=[name], render=False, **kwargs))

    return _check
