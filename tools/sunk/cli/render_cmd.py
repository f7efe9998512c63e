"""`sunkctl render`: the Slurm files a values file produces."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from pydantic import ValidationError
from rich.markup import escape

from sunk.chartio.helm import Release, template
from sunk.chartio.manifests import parse_release
from sunk.cli.common import Output, err, existing_files, helm_option, out, write_or_print
from sunk.errors import EXIT_FINDINGS, InputError, UsageError
from sunk.slurmconf import Rendered, RenderError, render_all
from sunk.validate import Options
from sunk.validate import validate as run_validate
from sunk.validate.findings import SCHEMA, YAML, Report
from sunk.validate.reporters import render_text

# Findings that stop a render: unreadable YAML, schema errors, quantities out of range, Lua
# scripts the renderer would refuse (said here with the values file's line).
REFUSED = (YAML, SCHEMA, "SUNK025", "SUNK029", "SUNK030")

EPILOG = (
    "Exit codes: 0 rendered, 1 values refused (YAML, schema or range errors, or the Slurm "
    "renderer rejects them), 2 usage error, 3 tool failure (helm missing or failing, a file "
    "that cannot be written)."
)
REGISTRATIONS = "slurmd-registration.txt"  # text output: the registrations as one more file


def input_errors(values: list[Path], set_values: list[str]) -> Report:
    """The YAML, schema and range errors `validate` reports for these files (same loading
    rules: size and alias limits, duplicate keys, YAML 1.1 keys; same schema)."""
    report = run_validate(
        Options(values=[str(p) for p in values], sets=list(set_values), chart="slurm", render=False)
    )
    report.findings = [f for f in report.errors if f.rule_id in REFUSED]
    return report


def as_json(rendered: Rendered) -> str:
    """`-o json`: one object with every file, each NodeSet's slurmd --conf and the warnings."""
    data = {
        "schemaVersion": 1,
        "files": dict(rendered.files),
        "registrations": dict(rendered.registrations),
        "configHash": rendered.config_hash,
        "warnings": list(rendered.warnings),
    }
    return json.dumps(data, indent=2) + "\n"


def render(
    values: list[Path] = typer.Option(
        ..., "-f", "--values", help="Values file(s) of the slurm chart."
    ),
    set_values: list[str] = typer.Option([], "--set", help="helm --set overrides."),
    namespace: str = typer.Option("tenant-slurm", "-n", "--namespace", help="Release namespace."),
    file: str | None = typer.Option(None, "--file", help="Print only this file (e.g. slurm.conf)."),
    out_dir: Path | None = typer.Option(None, "--out", help="Write the files into this directory."),
    output: Output = typer.Option(
        Output.text,
        "-o",
        "--output",
        help="text: every file under a `### name` header; json: one object {schemaVersion, "
        "files, registrations, configHash, warnings}.",
    ),
    helm: str | None = helm_option(),
) -> None:
    """Render slurm.conf, gres.conf, cgroup.conf, topology.conf, … through the real chart.

    The values are read as `sunkctl validate` reads them; YAML and schema errors stop the
    render (exit 1) with their file:line and key path."""
    if output is Output.json and out_dir is not None:
        raise UsageError("-o json prints one JSON object on stdout and --out writes files: use one")
    if output is Output.json and file is not None:
        raise UsageError("-o json prints every file; --file prints one as text: use one")
    existing_files(values)
    report = input_errors(values, set_values)
    if report.findings:
        # With -o json stdout carries the JSON object or nothing: the findings go to stderr.
        render_text(report, err if output is Output.json else out, err)
        raise typer.Exit(EXIT_FINDINGS)
    # helm missing or failing is a HelmError, a ToolError: exit 3.
    manifest = template(Release(namespace=namespace, helm=helm), values, set_values)
    try:
        inputs = parse_release(manifest).cluster_inputs(namespace)
        rendered = render_all(inputs)
    except RenderError as exc:
        raise InputError(f"Slurm renderer: {exc}") from exc
    except (ValidationError, ValueError, KeyError, TypeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"rendered custom resources unreadable: {first}") from exc
    if output is Output.json:
        typer.echo(as_json(rendered), nl=False)
        return
    files = dict(rendered.files)
    files[REGISTRATIONS] = "".join(
        f'{name}: slurmd -Z --conf "{conf}"\n' for name, conf in rendered.registrations.items()
    )
    for warning in rendered.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}")
    write_or_print(files, out_dir, file)
