"""The sunkctl front door: help, version, completion, and the CLI conventions every command
shares — one error line, `-o` an enum, exit codes, no tracebacks."""

from __future__ import annotations

import json
import re
import textwrap

import pytest
import typer
from typer.testing import CliRunner

from sunk import __version__
from sunk.argocd.errors import ArgoCDGenError, ArgoCDOutputError
from sunk.chartio.helm import HelmError
from sunk.cli.common import SunkCommand
from sunk.cli.main import app
from sunk.errors import InputError, ToolError, UsageError
from sunk.validate.rules import all_rules

GOOD = "clusterName: ok\n"


def invoke(*args: str, env: dict[str, str] | None = None):
    result = CliRunner().invoke(app, list(args), env=env)
    assert "Traceback" not in result.output
    return result


def error_line(result, command: str) -> str:
    """The one line a failing command prints: `sunkctl <command>: error: …`, nothing else."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"sunkctl {command}: error: "), lines[0]
    assert result.stdout == ""
    return lines[0].removeprefix(f"sunkctl {command}: error: ")


@pytest.fixture
def good(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.yaml").write_text(GOOD)
    return tmp_path / "good.yaml"


@pytest.fixture
def no_helm(tmp_path, monkeypatch):
    monkeypatch.delenv("SUNK_HELM", raising=False)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def fake_helm(tmp_path, script: str) -> str:
    path = tmp_path / "fake-helm"
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return str(path)


def test_help_lists_every_command():
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("schema", "validate", "render", "demo", "argocd"):
        assert command in result.output
    assert "Exit codes: 0 clean, 1 findings, 2 usage error" in result.output


def test_version():
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.output.strip() == f"sunkctl {__version__}"


def test_unknown_command_is_a_usage_error():
    assert invoke("frobnicate").exit_code == 2


# ---- one error line ------------------------------------------------------------------------


def leaf_commands(command, path=("sunkctl",)):
    subcommands = getattr(command, "commands", None)
    if not subcommands:
        yield " ".join(path), command
        return
    for name, sub in subcommands.items():
        yield from leaf_commands(sub, (*path, name))


def test_every_command_reports_errors_through_the_one_wrapper():
    commands = dict(leaf_commands(typer.main.get_command(app)))
    assert {"sunkctl validate", "sunkctl render", "sunkctl argocd gen", "sunkctl dev up"} <= set(
        commands
    )
    assert [path for path, cmd in commands.items() if not isinstance(cmd, SunkCommand)] == []


@pytest.mark.parametrize(
    ("args", "command", "code", "message"),
    [
        (["validate", "good.yaml", "--chart", "nope"], "validate", 2, "--chart nope: expected"),
        (["validate", "missing.yaml"], "validate", 2, "missing.yaml: no such file or directory"),
        (["render", "-f", "missing.yaml"], "render", 2, "-f missing.yaml: no such file"),
        (
            ["argocd", "gen", "--repo", "x", "--revision", "main", "--cluster", "prod"],
            "argocd gen",
            2,
            "--repo: 'x' is not a Git repository URL",
        ),
        (["demo", "--helm", "/no/such/helm"], "demo", 3, "--helm /no/such/helm: no such exec"),
    ],
)
def test_errors_are_one_line_with_the_command_path(good, args, command, code, message):
    result = invoke(*args)
    assert result.exit_code == code, result.output
    assert error_line(result, command).startswith(message)


def test_a_multi_line_tool_error_becomes_one_line(good, tmp_path):
    helm = fake_helm(tmp_path, "printf 'Error: boom\\n\\n  second line\\n' >&2; exit 1")
    result = invoke("render", "-f", "good.yaml", "--helm", helm)
    assert result.exit_code == 3
    assert error_line(result, "render") == "Error: boom / second line"


@pytest.mark.parametrize(
    "cls", [InputError, UsageError, ToolError, ArgoCDGenError, ArgoCDOutputError, HelmError]
)
def test_the_wrapper_exits_with_the_class_exit_code(good, monkeypatch, cls):
    def raises(values, set_values):
        raise cls("the message")

    monkeypatch.setattr("sunk.cli.render_cmd.input_errors", raises)
    result = invoke("render", "-f", "good.yaml")
    assert result.exit_code == cls.exit_code
    assert error_line(result, "render") == "the message"


def test_an_os_error_is_one_line_and_exit_3(good):
    result = invoke("validate", "good.yaml", "--no-render", "--generate-baseline", "no/dir/b.json")
    assert result.exit_code == 3
    assert error_line(result, "validate") == "no/dir/b.json: No such file or directory"


def test_a_crash_is_one_line_exit_3_and_its_traceback_is_opt_in(good, monkeypatch):
    def boom(values, set_values):
        raise ZeroDivisionError("surprise\nsecond line")

    monkeypatch.setattr("sunk.cli.render_cmd.input_errors", boom)
    result = invoke("render", "-f", "good.yaml")
    assert result.exit_code == 3
    assert error_line(result, "render") == (
        "internal error: ZeroDivisionError: surprise (SUNKCTL_TRACEBACK=1 shows the traceback)"
    )
    shown = CliRunner().invoke(app, ["render", "-f", "good.yaml"], env={"SUNKCTL_TRACEBACK": "1"})
    assert shown.exit_code == 3
    assert shown.stderr.startswith("Traceback (most recent call last):")
    assert shown.stderr.splitlines()[-1].startswith("sunkctl render: error: internal error:")


# ---- -o/--output is an enum ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "choices"),
    [
        (["validate", "good.yaml", "-o", "xml"], "'text', 'json', 'junit', 'sarif', 'github'"),
        (["render", "-f", "good.yaml", "-o", "yaml"], "'text', 'json'"),
    ],
)
def test_a_bad_output_value_is_a_usage_error_on_one_line(good, args, choices):
    result = invoke(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"sunkctl {args[0]}: error: Invalid value for '-o' / '--output': ")
    assert f"'{args[-1]}' is not one of {choices}" in line
    assert line.endswith("(see --help)")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["render"], "sunkctl render: error: Missing option '-f' / '--values'."),
        (["validate", "--bogus"], "sunkctl validate: error: No such option: --bogus"),
        (["argocd", "gen"], "sunkctl argocd gen: error: Missing option '--repo'."),
    ],
)
def test_every_usage_error_has_the_one_prefix(args, says):
    result = invoke(*args)
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith(says), line


# ---- shell completion ----------------------------------------------------------------------


def test_completion_is_on():
    assert "--install-completion" in invoke("--help").stdout
    script = invoke("--show-completion", "bash")
    assert script.exit_code == 0
    assert "_SUNKCTL_COMPLETE=complete_bash" in script.stdout
    assert "complete -o default -F _sunkctl_completion sunkctl" in script.stdout


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("sunkctl va", ["validate"]),
        ("sunkctl argocd g", ["gen"]),
        ("sunkctl validate -o ", ["text", "json", "junit", "sarif", "github"]),
        ("sunkctl render -o ", ["text", "json"]),
    ],
)
def test_completion_completes_commands_and_output_formats(words, expected):
    env = {
        "_SUNKCTL_COMPLETE": "complete_bash",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split(" ")) - 1),
    }
    result = CliRunner().invoke(app, [], env=env)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == expected


# ---- render: exit codes and -o json (the parts that need no helm) --------------------------


def test_render_help_documents_its_exit_codes():
    text = " ".join(invoke("render", "--help").stdout.split())
    assert "Exit codes: 0 rendered, 1 values refused" in text
    assert "3 tool failure (helm missing or failing" in text


def test_render_without_helm_is_exit_3_and_says_how_to_install_it(good, no_helm):
    result = invoke("render", "-f", "good.yaml")
    assert result.exit_code == 3
    message = error_line(result, "render")
    assert message.startswith("helm not found on PATH: install Helm 3")
    assert "https://helm.sh/docs/intro/install/" in message


def test_render_when_helm_fails_is_exit_3(good, tmp_path):
    helm = fake_helm(
        tmp_path, "echo 'Error: execution error at (slurm/templates/x.yaml)' >&2; exit 1"
    )
    result = invoke("render", "-f", "good.yaml", "--helm", helm)
    assert result.exit_code == 3
    assert error_line(result, "render") == "Error: execution error at (slurm/templates/x.yaml)"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--out", "dir"], "-o json prints one JSON object on stdout and --out writes files"),
        (["--file", "slurm.conf"], "-o json prints every file; --file prints one as text"),
    ],
)
def test_render_json_refuses_what_makes_no_sense(good, extra, message):
    result = invoke("render", "-f", "good.yaml", "-o", "json", *extra)
    assert result.exit_code == 2
    assert error_line(result, "render").startswith(message)
    assert not (good.parent / "dir").exists()


def test_render_json_refused_values_leave_stdout_empty(good, no_helm):
    (good.parent / "bad.yaml").write_text("compute:\n  nodes:\n    gpu:\n      replica: 3\n")
    result = invoke("render", "-f", "bad.yaml", "-o", "json")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "bad.yaml:4:7  SCHEMA  error  compute.nodes.gpu.replica: unknown key" in result.stderr


# ---- validate --list-rules -o json ---------------------------------------------------------


def test_list_rules_json_is_the_rule_table():
    result = invoke("validate", "--list-rules", "-o", "json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["schemaVersion"] == 1 and data["tool"] == {
        "name": "sunkctl",
        "version": __version__,
    }
    rules = {r.id: r for r in all_rules()}
    assert [r["id"] for r in data["rules"]] == sorted(rules)
    for entry in data["rules"]:
        rule = rules[entry["id"]]
        assert entry == {
            "id": rule.id,
            "name": rule.name,
            "severity": str(rule.severity),
            "summary": rule.summary,
            "hint": rule.hint,
            "charts": list(rule.charts),
            "explanation": rule.doc.explanation,
            "failingExample": rule.doc.fails,
            "failingAlso": list(rule.doc.also),
            "passingExample": rule.doc.passes,
        }
        assert entry["explanation"] and entry["failingExample"] and entry["passingExample"]
    text = invoke("validate", "--list-rules").stdout
    assert [line.split()[0] for line in text.splitlines() if line[:1].strip()] == sorted(rules)


def test_list_rules_text_prints_each_docstring_under_its_rule():
    text = invoke("validate", "--list-rules").stdout
    blocks = dict(
        (block.split()[0], block) for block in re.split(r"\n(?=SUNK)", text) if block.strip()
    )
    for rule in all_rules():
        block = blocks[rule.id]
        doc = rule.doc
        assert " ".join(block.split()).find(doc.explanation) > 0, rule.id
        fails = block.index(f"\n    {doc.fails_heading}\n")
        passes = block.index("\n    Passes:\n")
        assert block[fails:passes].rstrip().endswith(textwrap.indent(doc.fails, " " * 8))
        assert block[passes:].rstrip().endswith(textwrap.indent(doc.passes, " " * 8))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["-o", "sarif"], "--list-rules prints text or json, not -o sarif"),
        (["-o", "json", "--output-file", "r.json"], "--list-rules prints the table on stdout"),
    ],
)
def test_list_rules_refuses_other_formats(extra, message):
    result = invoke("validate", "--list-rules", *extra)
    assert result.exit_code == 2
    assert error_line(result, "validate").startswith(message)


def test_the_entry_point_names_itself_sunkctl_whatever_argv0_is(good, monkeypatch, capsys):
    from sunk.cli.main import run

    monkeypatch.setattr("sys.argv", ["/somewhere/__main__.py", "render", "-f", "missing.yaml"])
    with pytest.raises(SystemExit) as exit_:
        run()
    assert exit_.value.code == 2
    assert capsys.readouterr().err == "sunkctl render: error: -f missing.yaml: no such file\n"
