"""Semantic rules over resolved node groups, partitions and Slurm settings."""

from sunk.validate.rules.context import RuleContext, run_rules
from sunk.validate.rules.registry import RULES, Hit, Rule, all_rules

__all__ = ["RULES", "Hit", "Rule", "RuleContext", "all_rules", "run_rules"]
