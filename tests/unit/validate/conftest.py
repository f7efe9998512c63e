from __future__ import annotations


def ids(report) -> set[str]:
    return {f.rule_id for f in report.findings}


def at(report) -> set[tuple[str, int | None]]:
    return {(f.rule_id, f.line) for f in report.findings}
