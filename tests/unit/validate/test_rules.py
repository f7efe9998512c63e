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
        "slurmConfig:\n  AccountingStorageLoc: x  # sunkctl: ignore=SUNK011\n"
        "  # sunkctl: ignore=SUNK012\n  ClusterName: x\n  Bogus: 1\n"
    )
    report = check(text)
    assert at(report) == {("SUNK011", 5)}
    assert report.suppressed == 2


def test_baseline_suppresses_known_findings(check):
    text = "slurmConfig:\n  AccountingStorageLoc: x\n  Bogus: 1\n"
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


def test_unknown_container_options_are_found_at_their_line(check):
    text = (
        "compute:\n"
        "  pyxis:\n"
        "    plugstackOptions:\n"
        "      - container_scope=job\n"
        "      - container_image_save=/tmp\n"
        "      - sbatch_support=1\n"
        "      - nokey\n"
    )
    report = check(text)
    assert at(report) == {("SUNK037", 5), ("SUNK037", 7)}
    finding = next(f for f in report.findings if f.line == 5)
    assert finding.key_path == "compute.pyxis.plugstackOptions[1]"
    assert "`container_image_save`" in finding.message
    assert str(finding.severity) == "warning"


def test_container_options_are_not_checked_with_the_plugin_off(check):
    text = "compute:\n  pyxis:\n    enabled: false\n    plugstackOptions: [pyxis_only=1]\n"
    assert ids(check(text)) == set()


def test_mpi_env_without_containers_fires_on_what_the_user_set(check):
    text = (
        "compute:\n"
        "  pyxis:\n"
        "    enabled: false\n"
        "  mpi:\n"
        "    env:\n"
        "      OMPI_MCA_pml: ucx\n"
        "      OMPI_MCA_btl: self,vader,tcp\n"  # the chart's own value: quiet
        "      OMPI_MCA_btl_tcp_if_include: null\n"  # not set anyway: quiet
        "      UCX_TLS: tcp\n"
    )
    report = check(text)
    assert at(report) == {("SUNK038", 6), ("SUNK038", 9)}
    finding = next(f for f in report.findings if f.line == 6)
    assert finding.key_path == "compute.mpi.env.OMPI_MCA_pml"
    assert "compute.pyxis.enabled is false" in finding.message
    assert str(finding.severity) == "warning"


@pytest.mark.parametrize(
    "text",
    [
        "compute:\n  pyxis: {enabled: false}\n",  # the defaults, untouched
        "compute:\n  pyxis: {enabled: false}\n  mpi: {env: {}}\n",
        "compute:\n  mpi: {env: {OMPI_MCA_pml: ucx}}\n",  # containers on (the default)
        "compute:\n  pyxis: {enabled: true}\n  mpi: {env: {OMPI_MCA_pml: ucx}}\n",
    ],
)
def test_mpi_env_without_containers_is_quiet_otherwise(check, text):
    assert "SUNK038" not in ids(check(text))


@pytest.mark.parametrize("key", ["TaskProlog", "taskprolog", "TASKPROLOG"])
def test_a_task_prolog_with_containers_is_found_in_any_case(check, key):
    report = check(f"slurmConfig:\n  {key}: /opt/site/task_prolog.sh\n")
    assert at(report) == {("SUNK039", 2)}
    (finding,) = report.findings
    assert finding.key_path == f"slurmConfig.{key}"
    assert "status 127" in finding.message
    assert str(finding.severity) == "warning"


@pytest.mark.parametrize(
    "text",
    [
        "compute:\n  pyxis: {enabled: false}\nslurmConfig:\n  TaskProlog: /opt/p.sh\n",
        "slurmConfig:\n  TaskProlog: ''\n",
        "slurmConfig:\n  TaskEpilog: /opt/e.sh\n",
    ],
)
def test_a_task_prolog_is_fine_without_containers(check, text):
    assert "SUNK039" not in ids(check(text))


@pytest.mark.parametrize(
    ("text", "found"),
    [
        # checks without a schedule; a schedule without checks
        ("healthCheck:\n  mounts: [/scratch]\n", {("SUNK047", 1)}),
        ("healthCheck:\n  interval: 60\n", {("SUNK047", 2)}),
        # verify without a periodic check
        (
            "healthCheck:\n  nodeConditions:\n    - {type: GpuXidError, verify: true}\n",
            {("SUNK047", 3)},
        ),
        # Node conditions with the Syncer off
        (
            "syncer: {enabled: false}\nhealthCheck:\n  nodeConditions:\n    - type: GpuXid\n",
            {("SUNK047", 3)},
        ),
        # fine: periodic checks, and conditions that verify through them
        (
            "healthCheck:\n  interval: 60\n  mounts: [/scratch]\n"
            "  nodeConditions:\n    - {type: GpuXidError, verify: true}\n",
            set(),
        ),
        ("healthCheck:\n  prolog: true\n  gpuCount: true\n", set()),
    ],
)
def test_health_check_settings_that_cannot_act_are_warned(check, text, found):
    report = check(text)
    assert {x for x in at(report) if x[0] == "SUNK047"} == found
    assert all(str(f.severity) == "warning" for f in report.findings if f.rule_id == "SUNK047")


def test_health_check_program_in_slurm_config_is_warned_only_beside_periodic_checks(check):
    periodic = "healthCheck:\n  interval: 60\n  mounts: [/scratch]\n"
    report = check(periodic + "slurmConfig:\n  healthcheckprogram: /usr/sbin/nhc\n")
    (finding,) = [f for f in report.findings if f.rule_id == "SUNK048"]
    assert finding.key_path == "slurmConfig.healthcheckprogram" and finding.line == 5
    assert "periodic checks do not run" in finding.message
    report = check(periodic + "slurmConfig:\n  HealthCheckInterval: 300\n")
    assert "overrides healthCheck" in next(f.message for f in report.findings)
    # a site's own program without our checks, or our checks from the prolog only: quiet
    alone = "slurmConfig:\n  HealthCheckProgram: /usr/sbin/nhc\n  HealthCheckInterval: 300\n"
    assert "SUNK048" not in ids(check(alone))
    prolog = "healthCheck: {prolog: true, mounts: [/x]}\nslurmConfig: {HealthCheckProgram: /n}\n"
    assert "SUNK048" not in ids(check(prolog))
