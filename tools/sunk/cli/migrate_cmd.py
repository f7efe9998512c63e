"""`sunkctl migrate`: a SUNK 7.x values file → values for this `slurm` chart."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.markup import escape

from sunk.cli.common import err, existing_files
from sunk.migrate import Action, Level, Note, check_output, dump, migrate_file
from sunk.validate import Finding, Severity
from sunk.validate.engine import display_name
from sunk.validate.paths import dotted, undotted

HELP = "\n\n".join(
    [
        "Migrate a SUNK 7.x `slurm` chart values file to this chart's values: renamed keys "
        "are moved, removed ones dropped with a note each, and what cannot be carried (an "
        "in-chart Bitnami MySQL, partition lines naming Slurm hosts, ConfigMaps of files this "
        "chart does not mount…) fails naming the file, line and key path.",
        "The result is checked with `sunkctl validate`'s schema and rules before it is "
        "written (to -o FILE, or stdout); notes and warnings go to stderr.",
        "Exit codes: 0 migrated, 1 something cannot be carried (nothing written), 2 usage "
        "error, 3 tool or environment failure.",
    ]
)
COLORS = {Level.ERROR: "red", Level.WARNING: "yellow", Level.NOTE: "dim"}


def migrate(
    values: Path = typer.Option(
        ..., "-f", "--values", help="The SUNK 7.x slurm chart values file.", show_default=False
    ),
    output: Path | None = typer.Option(
        None,
        "-o",
        "--output",
        help="Write the migrated values here (default: stdout).",
        metavar="FILE",
    ),
) -> None:
    """Migrate a SUNK 7.x slurm chart values file to this chart's values."""
    existing_files([values])
    source = display_name(values)
    result = migrate_file(str(values), source)
    text, findings = None, []
    if not result.errors:
        text = dump(result.values, source)
        findings = check_output(text)
    target = display_name(output) if output is not None else "stdout"
    for note in sorted(result.notes, key=lambda n: n.line or 0):
        _print_note(source, note)
    # validate's findings name lines of the migrated text; the 7.x key is added when known
    label = target if output is not None else f"{source} (migrated)"
    for finding in findings:
        origin = result.source_of(undotted(finding.key_path or ""))
        _print_finding(label, finding, dotted(origin) if origin else None)
    refused = [f for f in findings if f.severity == Severity.ERROR]
    if result.errors or refused or text is None:
        count = len(result.errors) + len(refused)
        err.print(f"[red]not migrated[/]: {count} error(s); nothing written")
        raise typer.Exit(1)
    if output is None:
        sys.stdout.write(text)
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text)
    err.print(_summary(source, target, result.notes, findings))


def _print_note(source: str, note: Note) -> None:
    where = source if note.line is None else f"{source}:{note.line}:{note.column}"
    subject = f"{note.path}: " if note.path else ""
    err.print(
        f"{escape(where)}  [bold]{note.action}[/]  [{COLORS[note.level]}]{note.level}[/]  "
        f"{escape(subject + note.message)}"
    )
    if note.hint:
        err.print(f"    [dim]hint: {escape(note.hint)}[/]")


def _print_finding(label: str, f: Finding, origin: str | None) -> None:
    """A finding of the migrated values (validate's own line, placed in the output)."""
    where = label if f.line is None else f"{label}:{f.line}:{f.column}"
    color = "red" if f.severity == Severity.ERROR else "yellow"
    subject = f"{f.key_path}: " if f.key_path and f.key_path not in f.message else ""
    came = f" (from 7.x {origin})" if origin and origin != f.key_path else ""
    err.print(
        f"{escape(where)}  [bold]{f.rule_id}[/]  [{color}]{f.severity}[/]  "
        f"{escape(subject + f.message + came)}"
    )
    if f.hint:
        err.print(f"    [dim]hint: {escape(f.hint)}[/]")


def _summary(source: str, target: str, notes: list[Note], findings: list[Finding]) -> str:
    renamed = sum(1 for n in notes if n.action == Action.RENAMED)
    dropped = sum(1 for n in notes if n.action == Action.DROPPED)
    warnings = sum(1 for n in notes if n.level == Level.WARNING) + len(findings)
    return (
        f"[green]migrated[/]: {escape(source)} → {escape(target)}: {renamed} renamed, "
        f"{dropped} dropped, {warnings} warning(s)"
    )


migrate.__doc__ = HELP
