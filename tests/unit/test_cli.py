"""The sunkctl front door: help, version, and errors without tracebacks."""

from __future__ import annotations

from typer.testing import CliRunner

from sunk import __version__
from sunk.cli.main import app


def test_help_lists_every_command():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("schema", "validate", "render", "demo", "argocd"):
        assert command in result.output
    assert "Exit codes: 0 clean, 1 findings, 2 usage error" in result.output


def test_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"sunkctl {__version__}"


def test_render_of_a_missing_file_is_a_usage_error_not_a_traceback(tmp_path):
    result = CliRunner().invoke(app, ["render", "-f", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "no such file" in result.output
    assert "Traceback" not in result.output


def test_unknown_command_is_a_usage_error():
    result = CliRunner().invoke(app, ["frobnicate"])
    assert result.exit_code == 2
