"""The command line without helm (--no-render): formats, exit codes, usage errors."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from sunk.cli.main import app

BROKEN = (
    "compute:\n  nodes:\n    gpu:\n      replica: 3\n  partitions:\n"
    "    - name: p\n      nodeSets: [nope]\n"
    "login:\n  image: {repository: x, tag: latest}\n"
)


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.yaml").write_text(BROKEN)
    (tmp_path / "good.yaml").write_text("clusterName: ok\n")
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(app, ["validate", *args])


def test_text_output_and_exit_1(files):
    result = run("bad.yaml", "--no-render")
    assert result.exit_code == 1
    assert "bad.yaml:4:7  SCHEMA  error  compute.nodes.gpu.replica: unknown key" in result.stdout
    assert "bad.yaml:7:18  SUNK001  error" in result.stdout
    assert "hint:" in result.stdout


def test_clean_is_0_and_warnings_need_strict(files):
    assert run("good.yaml", "--no-render").exit_code == 0
    (files / "warn.yaml").write_text("login:\n  image: {repository: x, tag: latest}\n")
    assert run("warn.yaml", "--no-render").exit_code == 0
    assert run("warn.yaml", "--no-render", "--strict").exit_code == 1


def test_json_format(files):
    result = run("bad.yaml", "--no-render", "-o", "json")
    data = json.loads(result.stdout)
    assert data["schemaVersion"] == 1 and data["tool"]["name"] == "sunkctl"
    keys = {
        "ruleId",
        "severity",
        "message",
        "file",
        "line",
        "column",
        "keyPath",
        "resource",
        "hint",
    }
    assert all(set(f) == keys for f in data["findings"])
    assert data["summary"]["errors"] == 2 and data["summary"]["warnings"] == 2


def test_junit_format(files):
    result = run("bad.yaml", "good.yaml", "--no-render", "-o", "junit")
    root = ET.fromstring(result.stdout)
    assert root.tag == "testsuites"
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"bad.yaml", "good.yaml"}
    cases = {c.get("name"): c for c in suites["bad.yaml"].iter("testcase")}
    assert set(cases) == {"yaml", "schema", "rules"}
    assert cases["schema"].find("failure") is not None
    assert suites["good.yaml"].get("failures") == "0"


def test_sarif_format(files):
    data = json.loads(run("bad.yaml", "--no-render", "-o", "sarif").stdout)
    assert data["version"] == "2.1.0"
    (run_,) = data["runs"]
    assert run_["tool"]["driver"]["name"] == "sunkctl"
    rule_ids = {r["id"] for r in run_["tool"]["driver"]["rules"]}
    for result in run_["results"]:
        assert result["ruleId"] in rule_ids
        assert result["level"] in ("error", "warning", "note")
        assert result["message"]["text"]
        loc = result["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"] == "bad.yaml" and loc["region"]["startLine"] >= 1


def test_github_format(files):
    lines = run("bad.yaml", "--no-render", "-o", "github").stdout.splitlines()
    assert any(
        line.startswith("::error file=bad.yaml,line=4,col=7,title=SCHEMA::") for line in lines
    )
    assert any(line.startswith("::warning file=bad.yaml,line=9") for line in lines)


def test_output_file_keeps_text_on_stdout(files):
    result = run("bad.yaml", "--no-render", "-o", "sarif", "--output-file", "out/r.sarif")
    assert result.exit_code == 1
    assert json.loads((files / "out/r.sarif").read_text())["version"] == "2.1.0"
    assert "SUNK001" in result.stdout


def test_generate_and_use_a_baseline(files):
    result = run("bad.yaml", "--no-render", "--generate-baseline", "base.json")
    assert result.exit_code == 0
    entries = json.loads((files / "base.json").read_text())
    assert {e["ruleId"] for e in entries} == {"SCHEMA", "SUNK001", "SUNK016", "SUNK017"}
    assert run("bad.yaml", "--no-render", "--baseline", "base.json", "--strict").exit_code == 0


def test_list_rules():
    result = CliRunner().invoke(app, ["validate", "--list-rules"])
    assert result.exit_code == 0 and "SUNK001" in result.stdout and "SUNK023" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.yaml"], "missing.yaml: no such file or directory"),
        (["good.yaml", "--chart", "nope"], "--chart nope: expected slurm, sunk, a chart directory"),
        (["good.yaml", "--set", "novalue"], "--set novalue"),
        (["good.yaml", "-f", "missing.yaml"], "-f missing.yaml: no such file"),
        (["good.yaml", "--baseline", "missing.json"], "--baseline missing.json: "),
        (["good.yaml", "-o", "text", "--output-file", "x"], "--output-file needs a machine"),
        (["good.yaml", "--kube-version", "banana"], "--kube-version 'banana': expected X.Y"),
        (["good.yaml", "--kube-version", "1.2"], "--kube-version"),
        ([], "nothing to validate: give PATHS, -f files or --set"),
    ],
)
def test_usage_errors_exit_2_with_one_error_line(files, args, message):
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"sunkctl validate: error: {message}"), line


def test_a_bad_format_is_a_usage_error(files):
    result = run("good.yaml", "-o", "xml")
    assert result.exit_code == 2
    assert result.stderr.startswith("sunkctl validate: error: Invalid value for '-o' / '--output'")


def test_missing_helm_is_exit_3_and_says_how_to_install_it(files, monkeypatch, tmp_path):
    monkeypatch.delenv("SUNK_HELM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no helm on it
    result = run("good.yaml")
    assert result.exit_code == 3, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith("sunkctl validate: error: helm not found on PATH")
    assert "https://helm.sh/docs/intro/install/" in result.stderr
    assert "--helm" in result.stderr and "SUNK_HELM" in result.stderr


@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_named_helm_that_is_missing_is_not_replaced(files, monkeypatch, tmp_path, how):
    missing = str(tmp_path / "no-such-helm")
    args = ["good.yaml"]
    if how == "flag":
        args += ["--helm", missing]
    else:
        monkeypatch.setenv("SUNK_HELM", missing)
    result = run(*args)
    assert result.exit_code == 3, result.output
    source = "--helm" if how == "flag" else "SUNK_HELM"
    assert f"{source} {missing}: no such executable" in " ".join(result.stderr.split())


def test_helm_from_the_flag_is_the_one_run(files, monkeypatch, tmp_path):
    fake = tmp_path / "fake-helm"
    fake.write_text("#!/bin/sh\necho 'fake helm ran' >&2\nexit 1\n")
    fake.chmod(0o755)
    result = run("good.yaml", "--helm", str(fake))
    assert result.exit_code == 1, result.output
    assert "fake helm ran" in result.output


def test_unexpected_crash_is_one_line_and_exit_3(files, monkeypatch):
    import sunk.validate.engine as engine

    def boom(options):
        raise ZeroDivisionError("surprise")

    monkeypatch.setattr("sunk.cli.validate_cmd.run_validate", boom)
    result = run("good.yaml", "--no-render")
    assert result.exit_code == 3
    assert result.stderr == (
        "sunkctl validate: error: internal error: ZeroDivisionError: surprise "
        "(rerun with --traceback)\n"
    )
    assert engine  # the library is untouched
    result = run("good.yaml", "--no-render", "--traceback")
    assert result.exit_code == 3
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert "ZeroDivisionError: surprise" in result.stderr
