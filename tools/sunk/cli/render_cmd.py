"""`sunkctl render`: the Slurm files a values file produces."""

from __future__ import annotations

from pathlib import Path

import typer

from sunk.chartio.helm import Release, template
from sunk.chartio.manifests import parse_release
from sunk.cli.common import (
    EXIT_FINDINGS,
    err,
    existing_files,
    fail,
    reported_errors,
    write_or_print,
)
from sunk.slurmconf import RenderError, render_all


def render(
    values: list[Path] = typer.Option(
        ..., "-f", "--values", help="Values file(s) of the slurm chart."
    ),
    set_values: list[str] = typer.Option([], "--set", help="helm --set overrides."),
    namespace: str = typer.Option("tenant-slurm", "-n", "--namespace", help="Release namespace."),
    file: str | None = typer.Option(None, "--file", help="Print only this file (e.g. slurm.conf)."),
    out_dir: Path | None = typer.Option(None, "--out", help="Write the files into this directory."),
) -> None:
    """Render slurm.conf, gres.conf, cgroup.conf, topology.conf, … through the real chart."""
    existing_files(values)
    with reported_errors():
        manifest = template(Release(namespace=namespace), values, set_values)
        inputs = parse_release(manifest).cluster_inputs(namespace)
        try:
            rendered = render_all(inputs)
        except RenderError as exc:
            fail(str(exc), EXIT_FINDINGS)
    files = dict(rendered.files)
    files["slurmd-registration.txt"] = "".join(
        f'{name}: slurmd -Z --conf "{conf}"\n' for name, conf in rendered.registrations.items()
    )
    for warning in rendered.warnings:
        err.print(f"[yellow]warning:[/] {warning}")
    write_or_print(files, out_dir, file)
