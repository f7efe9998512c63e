"""Report formats: text (Rich), json, junit, sarif 2.1.0 and GitHub workflow annotations.

Every reporter is `render(report, rules) -> str` except text, which prints to a Rich console
handed in by the CLI (the library itself never prints).
"""

from __future__ import annotations

from sunk.validate.reporters.github import render_github
from sunk.validate.reporters.json_report import render_json
from sunk.validate.reporters.junit import render_junit
from sunk.validate.reporters.rule_table import render_rules_json, render_rules_text
from sunk.validate.reporters.sarif import render_sarif
from sunk.validate.reporters.text import render_text

FORMATS = ("text", "json", "junit", "sarif", "github")
RENDERERS = {
    "json": render_json,
    "junit": render_junit,
    "sarif": render_sarif,
    "github": render_github,
}

__all__ = ["FORMATS", "RENDERERS", "render_rules_json", "render_rules_text", "render_text"]
