"""Semantic rules over resolved node groups, partitions and Slurm settings."""

from sunk.validate.rules.catalog import FAMILIES, all_rules, run_rules
from sunk.validate.rules.context import RuleContext
from sunk.validate.rules.registry import RULES, Hit, Rule

__all__ = ["FAMILIES", "RULES", "Hit", "Rule", "RuleContext", "all_rules", "run_rules"]
