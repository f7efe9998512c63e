"""GitHub Actions workflow commands: `::error file=…,line=…,col=…,title=ID::message`."""

from __future__ import annotations

from sunk.validate.findings import Report, Severity
from sunk.validate.reporters.common import ordered


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_prop(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: Report) -> str:
    lines = []
    for f in ordered(report):
        level = "error" if f.severity == Severity.ERROR else "warning"
        props = []
        if f.file:
            props.append(f"file={_escape_prop(f.file)}")
        if f.line is not None:
            props.append(f"line={f.line}")
        if f.column is not None:
            props.append(f"col={f.column}")
        props.append(f"title={_escape_prop(f.rule_id)}")
        message = f.message + (f" — {f.hint}" if f.hint else "")
        lines.append(f"::{level} {','.join(props)}::{_escape_data(message)}")
    for note in report.notes:
        lines.append(f"::notice::{_escape_data(note)}")
    return "".join(line + "\n" for line in lines)
