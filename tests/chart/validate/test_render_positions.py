"""RENDER findings carry a position: a chart template's `fail` that names a values key points
at that key's line in the values file; one that names none points at the template's file and
line, as helm reports them. The chart here is a copy of ours with one more template that
fails (values that pass our schema and rules never reach our own `fail`s)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sunk.cli.main import app

REPO = Path(__file__).resolve().parents[3]
VALUES = """\
compute:
  nodes:
    cpu:
      definitions: [cpu-epyc]
      replicas: 2
"""


def failing_chart(tmp_path: Path, body: str) -> Path:
    chart = tmp_path / "slurm"
    shutil.copytree(REPO / "charts" / "slurm", chart)
    (chart / "templates" / "zz-refuse.yaml").write_text(
        "# a template that refuses\n{{- if .Values.compute.nodes.cpu }}\n" + body + "\n{{- end }}\n"
    )
    return chart


def render_finding(chart: Path, values: Path) -> dict:
    result = CliRunner().invoke(app, ["validate", str(values), "--chart", str(chart), "-o", "json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    found = [f for f in report["findings"] if f["ruleId"] == "RENDER"]
    assert len(found) == 1, found
    return found[0]


@pytest.fixture
def values(tmp_path: Path) -> Path:
    path = tmp_path / "values.yaml"
    path.write_text(VALUES)
    return path


def test_a_fail_naming_a_values_key_points_at_its_line(tmp_path: Path, values: Path) -> None:
    chart = failing_chart(
        tmp_path, '{{- fail "compute.nodes.cpu.replicas: this test chart refuses it" }}'
    )
    finding = render_finding(chart, values)
    assert finding["file"] == str(values)
    assert finding["line"] == 5  # `replicas: 2`
    assert finding["keyPath"] == "compute.nodes.cpu.replicas"
    assert "this test chart refuses it" in finding["message"]


def test_a_fail_naming_no_key_points_at_the_template(tmp_path: Path, values: Path) -> None:
    chart = failing_chart(tmp_path, '{{- fail "no key here" }}')
    finding = render_finding(chart, values)
    assert finding["file"] == str(chart / "templates" / "zz-refuse.yaml")
    assert finding["line"] == 3
    assert "no key here" in finding["message"]
