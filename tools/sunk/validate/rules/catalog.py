"""The rule families, one explicit list: importing a family registers its rules.

The dependency runs one way: each family imports `registry` and `context`; this module
imports the families; the engine, the CLI and the reporters ask this module for the rules.
"""

from __future__ import annotations

from typing import Any

from sunk.validate.rules import (
    accounting,
    containers,
    gpus_and_resources,
    health_checks,
    images,
    login_and_directory,
    lua_scripts,
    node_groups,
    not_acted_on,
    partitions,
    s6_services,
    scheduler_and_syncer,
    slurm_settings,
    volumes,
)
from sunk.validate.rules.context import RuleContext
from sunk.validate.rules.registry import RULES, Rule

FAMILIES = (
    partitions,
    node_groups,
    gpus_and_resources,
    volumes,
    images,
    slurm_settings,
    lua_scripts,
    s6_services,
    containers,
    accounting,
    scheduler_and_syncer,
    health_checks,
    login_and_directory,
    not_acted_on,
)


def all_rules() -> list[Rule]:
    """Every registered rule, by ID."""
    return [RULES[key] for key in sorted(RULES)]


def run_rules(ctx: RuleContext, rules: list[Rule] | None = None) -> list[tuple[Rule, Any]]:
    """(rule, hit) pairs; a rule that crashes on malformed input propagates (engine decides)."""
    out = []
    for item in rules if rules is not None else all_rules():
        if ctx.chart not in item.charts:
            continue
        for hit in item.check(ctx):
            out.append((item, hit))
    return out
