"""What every validation step produces: findings, collected into one report."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


# Rule IDs of the steps that are not semantic rules.
YAML, SCHEMA, RENDER, K8S = "YAML", "SCHEMA", "RENDER", "K8S"

# The check (JUnit test case / grouping) each non-rule ID belongs to; rules are "rules".
CHECKS = {YAML: "yaml", SCHEMA: "schema", RENDER: "render", K8S: "kubernetes"}


@dataclass(frozen=True)
class Finding:
    rule_id: str
    severity: Severity
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    key_path: str | None = None
    resource: dict[str, str] | None = None
    hint: str | None = None

    @property
    def check(self) -> str:
        return CHECKS.get(self.rule_id, "rules")

    def location(self) -> str:
        parts = [self.file or "-"]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {
            "ruleId": data["rule_id"],
            "severity": str(self.severity),
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "keyPath": self.key_path,
            "resource": self.resource,
            "hint": self.hint,
        }


@dataclass
class FileResult:
    """One values file (or the -f/--set stack when no PATHS are given) and its chart."""

    file: str
    chart: str
    checks: list[str] = field(default_factory=list)  # checks that ran, for JUnit
    rendered: int = 0  # objects rendered by helm


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    files: list[FileResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # skipped files and the like
    suppressed: int = 0  # findings removed by inline ignores or the baseline
    chart_source: str | None = None  # a chart named by path or oci://: which one was used

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == Severity.ERROR]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == Severity.WARNING]

    def exit_code(self, strict: bool) -> int:
        if self.errors or (strict and self.warnings):
            return 1
        return 0

    def summary(self) -> dict[str, int]:
        """kubeconform's vocabulary: files valid/invalid; plus finding counts."""
        bad = {f.file for f in self.errors}
        return {
            "files": len(self.files),
            "valid": sum(1 for r in self.files if r.file not in bad),
            "invalid": sum(1 for r in self.files if r.file in bad),
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "skipped": len(self.notes),
            "suppressed": self.suppressed,
        }
