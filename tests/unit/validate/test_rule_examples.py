"""Every rule's documented examples, proven.

Each rule's docstring (the shape: sunk.validate.rules.ruledoc) carries a failing and a
passing values example. Through `validate` (the rule's first chart, its values.yaml under the
example, as `sunkctl validate` coalesces a file; no helm), the failing example gives findings
of this rule and of no other (nor YAML or schema findings), apart from the rules its heading
names; the passing example gives no finding at all.
"""

from __future__ import annotations

import ast
import pkgutil
import re
from pathlib import Path

import pytest

from sunk.validate.rules import FAMILIES, RULES, all_rules
from sunk.validate.rules import __path__ as rules_path
from sunk.validate.rules.ruledoc import parse

# The modules of the rules package that hold no rules.
NOT_FAMILIES = {"catalog", "context", "registry", "ruledoc"}


def _found(report) -> list[tuple[str, str | None, str]]:
    return [(f.rule_id, f.key_path, f.message) for f in report.findings]


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.id)
def test_the_failing_example_fires_the_rule_and_nothing_else(rule, check):
    doc = rule.doc
    assert not doc.problems, f"{rule.id} docstring: {'; '.join(doc.problems)}"
    assert set(doc.also) <= set(RULES) - {rule.id}, f"{rule.id}: `also` names {doc.also}"
    report = check(doc.fails + "\n", chart=rule.charts[0])
    fired = {f.rule_id for f in report.findings}
    assert rule.id in fired, f"{rule.id}'s failing example does not fire it: {_found(report)}"
    assert fired == {rule.id, *doc.also}, f"{rule.id}'s failing example: {_found(report)}"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.id)
def test_the_passing_example_gives_no_finding(rule, check):
    doc = rule.doc
    assert doc.passes, f"{rule.id} has no `Passes:` example"
    report = check(doc.passes + "\n", chart=rule.charts[0])
    assert not report.findings, f"{rule.id}'s passing example: {_found(report)}"


def test_every_rule_module_is_a_listed_family():
    modules = {m.name for m in pkgutil.iter_modules(rules_path)} - NOT_FAMILIES
    assert modules == {f.__name__.rsplit(".", 1)[-1] for f in FAMILIES}
    assert {r.check.__module__ for r in all_rules()} == {f.__name__ for f in FAMILIES}


def test_the_registry_imports_no_rule_module():
    """One way: families import the registry and the context, never the reverse."""
    families = {f.__name__ for f in FAMILIES} | {"sunk.validate.rules.catalog"}
    for name in ("registry", "context", "ruledoc"):
        tree = ast.parse((Path(rules_path[0]) / f"{name}.py").read_text())
        imported = {
            f"{node.module}.{alias.name}" if isinstance(node, ast.ImportFrom) else alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        } | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not imported & families, f"{name}.py imports {imported & families}"


def test_the_readme_names_each_rule_s_module(repo):
    readme = (repo / "tools/sunk/validate/README.md").read_text()
    table = dict(re.findall(r"^\| `(\w+)\.py` \| ([A-Z0-9, ]+) \|$", readme, re.M))
    modules: dict[str, list[str]] = {}
    for rule in all_rules():
        modules.setdefault(rule.check.__module__.rsplit(".", 1)[-1], []).append(rule.id)
    assert {m: ", ".join(ids) for m, ids in modules.items()} == table


DOC = """What it finds.
More of the same paragraph.

Fails (also SUNK001):
    compute:
      nodes: {}

Passes:
    compute: {}
"""


def test_a_docstring_parses_into_one_paragraph_and_two_examples():
    doc = parse(DOC)
    assert doc.explanation == "What it finds. More of the same paragraph."
    assert doc.fails == "compute:\n  nodes: {}"
    assert doc.passes == "compute: {}"
    assert doc.also == ("SUNK001",) and doc.fails_heading == "Fails (also SUNK001):"
    assert doc.problems == ()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Only prose.", "no `Fails:` example"),
        ("Prose.\n\nFails:\n    a: 1\n", "no `Passes:` example"),
        ("One.\n\nTwo.\n\nFails:\n    a: 1\n\nPasses:\n    a: 2\n", "2 paragraphs, not one"),
        ("P.\n\nFails:\n    a: 1\nb: 2\n\nPasses:\n    a: 2\n", "`b: 2` follows an example"),
        ("P.\n\nFails:\n    a: 1\n\nFails:\n    a: 3\n\nPasses:\n    a: 2\n", "appears twice"),
        ("P.\n\nFails:\n    a: 1\n\nPasses (also SUNK001):\n    a: 2\n", "only a failing"),
        (None, "no `Passes:` example"),
    ],
)
def test_a_malformed_docstring_is_described(text, problem):
    assert any(problem in p for p in parse(text).problems), parse(text).problems
