"""`sunkctl schema`: write (or check) every file generated from the typed models."""

from __future__ import annotations

import typer

from sunk.errors import EXIT_FINDINGS, ToolError
from sunk.resources import checkout_root
from sunk.schema.generate import stale, write_all


def schema(
    check: bool = typer.Option(False, "--check", help="Exit 1 if a generated file is stale."),
) -> None:
    """Write values.schema.json, values.yaml, README tables, CRDs and schemas/ from the models."""
    root = checkout_root()
    if root is None:
        raise ToolError(
            "schema regenerates a checkout's files (charts/, schemas/): run it from a source "
            "checkout (an editable install), or set SUNK_REPO to one"
        )
    if check:
        outdated = stale(root)
        for path in outdated:
            typer.echo(f"stale: {path} (run `sunkctl schema`)", err=True)
        raise typer.Exit(EXIT_FINDINGS if outdated else 0)
    for path in write_all(root):
        typer.echo(f"wrote {path}")
