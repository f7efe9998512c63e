"""`sunkctl render` through the real chart: `-o json` carries what the text output and `--out`
carry, and nothing else reaches stdout."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from sunk.cli.main import app
from sunk.cli.render_cmd import REGISTRATIONS

EXAMPLE = "multi-pool.yaml"


@pytest.fixture
def example(repo, helm, monkeypatch):
    monkeypatch.setenv("SUNK_HELM", helm)
    return str(repo / "examples" / EXAMPLE)


def render(*args: str):
    result = CliRunner().invoke(app, ["render", *args])
    assert result.exit_code == 0, result.output
    return result


def sections(text: str) -> dict[str, str]:
    """The text output: each file under a `### name` line."""
    parts = re.split(r"^### (\S+)\n", text, flags=re.M)
    assert parts[0] == ""
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_json_is_one_object_with_the_files_registrations_and_warnings(example):
    result = render("-f", example, "-o", "json")
    data = json.loads(result.stdout)
    assert set(data) == {"schemaVersion", "files", "registrations", "configHash", "warnings"}
    assert data["schemaVersion"] == 1 and isinstance(data["warnings"], list)
    assert re.fullmatch(r"[0-9a-f]{16}", data["configHash"])
    assert "ClusterName=" in data["files"]["slurm.conf"]
    assert len(data["registrations"]) > 1  # multi-pool: one per NodeSet
    # The text output carries the same files, plus the registrations as one more file.
    text = sections(render("-f", example).stdout)
    assert {name: body for name, body in text.items() if name != REGISTRATIONS} == data["files"]
    assert text[REGISTRATIONS] == "".join(
        f'{name}: slurmd -Z --conf "{conf}"\n' for name, conf in data["registrations"].items()
    )
    assert result.stderr == ""


def test_out_writes_the_same_files(example, tmp_path):
    data = json.loads(render("-f", example, "-o", "json").stdout)
    result = render("-f", example, "--out", str(tmp_path / "out"))
    written = {p.name: p.read_text() for p in (tmp_path / "out").iterdir()}
    assert {k: v for k, v in written.items() if k != REGISTRATIONS} == data["files"]
    assert result.stdout == ""
    assert f"wrote {tmp_path / 'out' / 'slurm.conf'}" in result.stderr
