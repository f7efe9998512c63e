"""`sunkctl render`: the Slurm files a values file produces."""

from __future__ import annotations

from pathlib import Path

import typer
from pydantic import ValidationError
from rich.markup import escape

from sunk.chartio.helm import Release, template
from sunk.chartio.manifests import parse_release
from sunk.cli.common import (
    EXIT_ENV,
    EXIT_FINDINGS,
    EXIT_USAGE,
    err,
    existing_files,
    fail,
    helm_option,
    out,
    reported_errors,
    write_or_print,
)
from sunk.slurmconf import RenderError, render_all
from sunk.validate import Options
from sunk.validate import validate as run_validate
from sunk.validate.errors import ToolError, UsageError
from sunk.validate.findings import SCHEMA, YAML, Report
from sunk.validate.reporters import render_text

# Findings that stop a render: unreadable YAML, schema errors, quantities out of range, Lua
# scripts the renderer would refuse (said here with the values file's line).
REFUSED = (YAML, SCHEMA, "SUNK025", "SUNK028", "SUNK029")


def input_errors(values: list[Path], set_values: list[str]) -> Report:
    """The YAML, schema and range errors `validate` reports for these files (same loading
    rules: size and alias limits, duplicate keys, YAML 1.1 keys; same schema)."""
    report = run_validate(
        Options(values=[str(p) for p in values], sets=list(set_values), chart="slurm", render=False)
    )
    report.findings = [f for f in report.errors if f.rule_id in REFUSED]
    return report


def render(
    values: list[Path] = typer.Option(
        ..., "-f", "--values", help="Values file(s) of the slurm chart."
    ),
    set_values: list[str] = typer.Option([], "--set", help="helm --set overrides."),
    namespace: str = typer.Option("tenant-slurm", "-n", "--namespace", help="Release namespace."),
    file: str | None = typer.Option(None, "--file", help="Print only this file (e.g. slurm.conf)."),
    out_dir: Path | None = typer.Option(None, "--out", help="Write the files into this directory."),
    helm: str | None = helm_option(),
) -> None:
    """Render slurm.conf, gres.conf, cgroup.conf, topology.conf, … through the real chart.

    The values are read as `sunkctl validate` reads them; YAML and schema errors stop the
    render (exit 1) with their file:line and key path."""
    existing_files(values)
    try:
        report = input_errors(values, set_values)
    except UsageError as exc:
        fail(escape(str(exc)), EXIT_USAGE)
    except ToolError as exc:
        fail(escape(str(exc)), EXIT_ENV)
    if report.findings:
        render_text(report, out, err)
        raise typer.Exit(EXIT_FINDINGS)
    with reported_errors():
        manifest = template(Release(namespace=namespace, helm=helm), values, set_values)
        try:
            inputs = parse_release(manifest).cluster_inputs(namespace)
            rendered = render_all(inputs)
        except RenderError as exc:
            fail(escape(f"Slurm renderer: {exc}"), EXIT_FINDINGS)
        except (ValidationError, ValueError, KeyError, TypeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            fail(escape(f"rendered custom resources unreadable: {first}"), EXIT_FINDINGS)
    files = dict(rendered.files)
    files["slurmd-registration.txt"] = "".join(
        f'{name}: slurmd -Z --conf "{conf}"\n' for name, conf in rendered.registrations.items()
    )
    for warning in rendered.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}")
    write_or_print(files, out_dir, file)
