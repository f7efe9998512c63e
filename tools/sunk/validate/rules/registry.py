"""The rule table: stable IDs, names, severities and hints; one small pure function each.

Rule modules import this one to register their rules; this module imports none of them
(`sunk.validate.rules.catalog` lists the families and imports them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sunk.validate.findings import Severity
from sunk.validate.rules.ruledoc import RuleDoc, parse
from sunk.validate.yamlload import Path


@dataclass(frozen=True)
class Hit:
    """One problem a rule found: where (values key path), what, and optionally a better hint."""

    path: Path
    message: str
    hint: str | None = None
    text_line: int | None = None  # a line inside the text at `path` (a script's line)


RuleFunc = Callable[[Any], Iterator[Hit]]


@dataclass(frozen=True)
class Rule:
    id: str
    name: str
    severity: Severity
    summary: str
    hint: str
    charts: tuple[str, ...]
    check: RuleFunc

    @property
    def doc(self) -> RuleDoc:
        """Its check function's docstring, parsed (sunk.validate.rules.ruledoc)."""
        return parse(self.check.__doc__)


RULES: dict[str, Rule] = {}


def rule(
    rule_id: str,
    name: str,
    severity: str,
    summary: str,
    hint: str,
    charts: tuple[str, ...] = ("slurm",),
) -> Callable[[RuleFunc], RuleFunc]:
    def register(func: RuleFunc) -> RuleFunc:
        if rule_id in RULES:
            raise ValueError(f"duplicate rule id {rule_id}")
        RULES[rule_id] = Rule(rule_id, name, Severity(severity), summary, hint, charts, func)
        return func

    return register
