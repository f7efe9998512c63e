from __future__ import annotations

from sunk import __version__
from sunk.validate.findings import Finding, Report

TOOL = {"name": "sunkctl", "version": __version__}


def ordered(report: Report) -> list[Finding]:
    return sorted(
        report.findings,
        key=lambda f: (f.file or "", f.line or 0, f.column or 0, f.rule_id, f.message),
    )
