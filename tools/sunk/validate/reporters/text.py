"""Human output: `file:line:col  SUNK003  error  message` + hint, then a summary line."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from sunk.validate.findings import Report, Severity
from sunk.validate.reporters.common import ordered


def render_text(report: Report, console: Console, notes: Console | None = None) -> None:
    notes = notes or console
    if report.chart_source:
        notes.print(f"[dim]{escape(report.chart_source)}[/]")
    for note in report.notes:
        notes.print(f"[dim]note: {escape(note)}[/]")
    for f in ordered(report):
        color = "red" if f.severity == Severity.ERROR else "yellow"
        console.print(
            f"{escape(f.location())}  [bold]{f.rule_id}[/]  [{color}]{f.severity}[/]  "
            f"{escape(f.message)}"
        )
        if f.hint:
            console.print(f"    [dim]hint: {escape(f.hint)}[/]")
    s = report.summary()
    verdict = "[red]invalid[/]" if s["errors"] else "[green]valid[/]"
    console.print(
        f"{verdict}: {s['files']} file(s), {s['errors']} error(s), {s['warnings']} warning(s)"
        + (f", {s['suppressed']} suppressed" if s["suppressed"] else "")
        + (f", {s['skipped']} skipped" if s["skipped"] else "")
    )
