"""Every example validates clean through the whole pipeline (helm + kubeconform)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sunk.cli.main import app
from tests.chart.conftest import EXAMPLES

# Findings an example is expected to have (none: every example is clean).
KNOWN: dict[str, set[str]] = {}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_validates(helm, example):
    result = CliRunner().invoke(app, ["validate", str(example), "-o", "json"])
    report = json.loads(result.stdout)
    errors = {f["ruleId"] for f in report["findings"] if f["severity"] == "error"}
    expected = KNOWN.get(example.stem, set())
    assert errors == expected, report["findings"]
    assert result.exit_code == (1 if expected else 0), result.output
    assert "render" in report["files"][0]["checks"]
    assert "kubernetes" in report["files"][0]["checks"]


def test_examples_directory_as_a_gitops_repo(helm, repo, monkeypatch):
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(app, ["validate", "examples", "-o", "json"])
    report = json.loads(result.stdout)
    assert report["summary"]["files"] == len(EXAMPLES)
    assert [f for f in report["findings"] if f["severity"] == "error"] == []
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "example", [e for e in EXAMPLES if e.stem not in KNOWN][:2], ids=lambda p: p.stem
)
def test_example_without_kubeconform(helm, example, monkeypatch):
    """The Python fallback validates the same objects against the same bundle."""
    monkeypatch.setenv("SUNKCTL_NO_KUBECONFORM", "1")
    result = CliRunner().invoke(app, ["validate", str(example)])
    assert result.exit_code == 0, result.output
