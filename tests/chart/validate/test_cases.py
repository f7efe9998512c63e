"""Table-driven: every broken values file under cases/ fails (exit 1) with the expected
rule or schema error at the expected line, through the real CLI (helm + kubeconform).

A case marks what it expects in comments: `# expect: ID` on the offending line (the finding
must be at that line of that file), `# expect-any: ID` anywhere (findings without a line,
like RENDER and K8S), and `# strict` to fail on warnings.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sunk.cli.main import app

CASES = sorted((Path(__file__).parent / "cases").glob("*.yaml"))
_AT = re.compile(r"#\s*expect:\s*([A-Z0-9]+)")
_ANY = re.compile(r"#\s*expect-any:\s*([A-Z0-9]+)")


def expectations(path: Path) -> tuple[set[tuple[str, int]], set[str], bool]:
    at, anywhere, strict = set(), set(), False
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        at |= {(rule, number) for rule in _AT.findall(line)}
        anywhere |= set(_ANY.findall(line))
        strict |= line.strip() == "# strict"
    return at, anywhere, strict


def test_there_are_enough_cases():
    assert len(CASES) >= 40
    for case in CASES:
        at, anywhere, _ = expectations(case)
        assert at or anywhere, f"{case.name} expects nothing"


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_case(helm, case, monkeypatch):
    monkeypatch.chdir(case.parent)
    at, anywhere, strict = expectations(case)
    args = ["validate", case.name, "-o", "json", *(["--strict"] if strict else [])]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    found = {(f["ruleId"], f["line"]) for f in report["findings"] if f["file"] == case.name}
    ids = {f["ruleId"] for f in report["findings"]}
    for rule, line in sorted(at):
        assert (rule, line) in found, f"{case.name}:{line} expected {rule}; got {sorted(found)}"
    for rule in anywhere:
        assert rule in ids, f"{case.name}: expected {rule}; got {sorted(ids)}"
    for finding in report["findings"]:
        assert finding["message"] and finding["severity"] in ("error", "warning")
