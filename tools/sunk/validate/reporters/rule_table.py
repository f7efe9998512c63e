"""The rule table (`sunkctl validate --list-rules`): each rule's ID, name, severity, summary and
fix, then its documentation (explanation, failing and passing example), as text or JSON."""

from __future__ import annotations

import json
import textwrap

from sunk.validate.reporters.common import TOOL
from sunk.validate.rules.registry import Rule

WIDTH = 100
INDENT = "    "


def render_rules_text(rules: list[Rule]) -> str:
    """Each rule's line and fix, then its documentation indented under it (so every line that
    starts in the first column is a rule ID)."""
    width = max(len(rule.name) for rule in rules)
    lines: list[str] = []
    for rule in rules:
        doc = rule.doc
        lines.append(f"{rule.id}  {rule.name:<{width}}  {rule.severity!s:<7}  {rule.summary}")
        lines.append(f"{'':7}  {'':<{width}}  {'':7}  fix: {rule.hint}")
        if doc.explanation:
            lines.append("")
            lines.extend(
                textwrap.wrap(
                    doc.explanation,
                    WIDTH,
                    initial_indent=INDENT,
                    subsequent_indent=INDENT,
                    break_on_hyphens=False,  # `did-you-mean`, key paths: whole words
                )
            )
        for heading, example in ((doc.fails_heading, doc.fails), ("Passes:", doc.passes)):
            if example is not None:
                lines.append("")
                lines.append(f"{INDENT}{heading}")
                lines.extend(textwrap.indent(example, INDENT * 2).splitlines())
        lines.append("")
    return "\n".join(lines)


def render_rules_json(rules: list[Rule]) -> str:
    """`{schemaVersion, tool, rules[]}`; the examples are YAML text (null when missing), and
    `failingAlso` lists the other rules the failing example fires."""
    data = {
        "schemaVersion": 1,
        "tool": TOOL,
        "rules": [
            {
                "id": r.id,
                "name": r.name,
                "severity": str(r.severity),
                "summary": r.summary,
                "hint": r.hint,
                "charts": list(r.charts),
                "explanation": r.doc.explanation,
                "failingExample": r.doc.fails,
                "failingAlso": list(r.doc.also),
                "passingExample": r.doc.passes,
            }
            for r in rules
        ],
    }
    return json.dumps(data, indent=2) + "\n"
