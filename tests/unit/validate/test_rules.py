from __future__ import annotations

import pytest

from sunk.validate.rules import all_rules
from sunk.validate.rules.catalog import run_rules
from sunk.validate.rules.context import RuleContext
from sunk.validate.rules.node_groups import _key_compatible
from sunk.validate.rules.slurm_settings import slurm_conf_keys
from tests.unit.validate.conftest import at, ids


def test_rule_table_is_stable_and_complete():
    rules = all_rules()
    assert [r.id for r in rules] == sorted(r.id for r in rules)
    assert len({r.name for r in rules}) == len(rules)
    assert {r.id for r in rules} >= {f"SUNK{n:03d}" for n in range(1, 24)}
    for r in rules:
        assert r.summary and r.hint and str(r.severity) in ("error", "warning")


def test_rules_are_pure_functions_over_plain_values():
    values = {
        "compute": {
            "nodes": {"a": {"replicas": 1}},
            "partitions": [{"name": "p", "nodeSets": ["b"]}],
        }
    }
    hits = run_rules(RuleContext.build(values))
    assert ("SUNK001", ("compute", "partitions", 0, "nodeSets", 0)) in {
        (rule.id, hit.path) for rule, hit in hits
    }


@pytest.mark.parametrize(
    ("reqs", "ok"),
    [
        ([("In", {"x"}), ("In", {"y"})], False),
        ([("In", {"x", "y"}), ("In", {"y"})], True),
        ([("In", {"x"}), ("NotIn", {"x"})], False),
        ([("Exists", set()), ("DoesNotExist", set())], False),
        ([("NotIn", {"x"}), ("DoesNotExist", set())], True),
        ([("Exists", set()), ("In", {"x"})], True),
    ],
)
def test_affinity_key_compatibility(reqs, ok):
    assert _key_compatible([(op, frozenset(v)) for op, v in reqs]) is ok


def test_disjoint_pools_do_not_overlap(check):
    pool = (
        "      affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: "
        "{{nodeSelectorTerms: [{{matchExpressions: [{{key: pool, operator: In, values: [{}]}}]}}]"
        "}}}}}}\n"
    )
    text = (
        "compute:\n  nodes:\n    a:\n      definitions: [cpu-epyc]\n"
        + pool.format("a")
        + "    b:\n      definitions: [cpu-epyc]\n"
        + pool.format("b")
    )
    assert "SUNK008" not in ids(check(text))


def test_overlapping_groups_are_a_warning_that_explains_the_claim(check):
    """SUNK allows groups without a Node pool: one NodeSet claims each Node at run time."""
    text = (
        "compute:\n  nodes:\n    a:\n      definitions: [cpu-epyc]\n"
        "    b:\n      definitions: [cpu-epyc]\n"
    )
    report = check(text)
    (finding,) = [f for f in report.findings if f.rule_id == "SUNK008"]
    assert (str(finding.severity), finding.line, finding.key_path) == (
        "warning",
        5,
        "compute.nodes.b",
    )
    assert "can land on the same Nodes as `a` (it has no required node affinity)" in (
        finding.message
    )
    assert "one NodeSet only, the first to claim it" in finding.message
    assert report.exit_code(strict=False) == 0
    assert report.exit_code(strict=True) == 1


def test_slurm_keys_are_case_insensitive(check):
    assert "defmempercpu" in slurm_conf_keys()
    report = check("slurmConfig:\n  defmempercpu: 1\n  SchedulerParamters: x\n")
    assert at(report) == {("SUNK011", 3)}
    assert "did you mean `SchedulerParameters`" in report.findings[0].message


def test_inline_ignore_on_the_line_or_above(check):
    text = (
        "slurmConfig:\n  FastSchedule: 1  # sunkctl: ignore=SUNK011\n"
        "  # sunkctl: ignore=SUNK012\n  ClusterName: x\n  Bogus: 1\n"
    )
    report = check(text)
    assert at(report) == {("SUNK011", 5)}
    assert report.suppressed == 2


def test_baseline_suppresses_known_findings(check):
    text = "slurmConfig:\n  FastSchedule: 1\n  Bogus: 1\n"
    baseline = [{"ruleId": "SUNK011", "file": "values.yaml", "keyPath": "slurmConfig.Bogus"}]
    report = check(text, baseline=baseline)
    assert at(report) == {("SUNK011", 2)} and report.suppressed == 1


def test_sunk_chart_files_are_detected(check):
    report = check("operator:\n  replicas: 2\n  image: {repository: x, tag: latest}\n")
    assert report.files[0].chart == "sunk"
    assert at(report) == {("SUNK016", 3)}


def test_manifests_are_skipped_with_a_note(check):
    report = check("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    assert not report.files and not report.findings
    assert "skipped" in report.notes[0]


def test_readme_lists_every_rule(repo):
    readme = (repo / "tools/sunk/validate/README.md").read_text()
    for r in all_rules():
        assert f"| {r.id} | `{r.name}` | {r.severity} |" in readme
