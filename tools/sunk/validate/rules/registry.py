"""The rule table: stable IDs, names, severities and hints; one small pure function each."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sunk.validate.findings import Severity
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


def all_rules() -> list[Rule]:
    from sunk.validate.rules import (  # noqa: F401  (registers the rules)
        builtin,
        lua,
        not_acted_on,
        s6,
    )

    return [RULES[key] for key in sorted(RULES)]
