"""The sunk chart's Slurm alerts in Prometheus' own rule engine (`pytest -k promtool`).

The PrometheusRule the chart renders is handed to `promtool check rules`, then to
`promtool test rules` with series written the way the operator exports them (two operator
replicas, each with its own `pod` label, as during a leader change). Every alert has a case
where it fires, with its labels and rendered annotations, and one where it stays quiet.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.chart.test_sunk_metrics import RULE_API, RULE_ON, of_kind
from tests.conftest import toolchain_binary

LABELS = 'namespace="tenant-a", cluster="prod"'
WHO = "tenant-a/prod"


@pytest.fixture(scope="module")
def promtool() -> str:
    return toolchain_binary("promtool")


def series(name: str, values: str, pods: tuple[str, ...] = ("op-0", "op-1"), **labels: str):
    """One series per operator replica: the rules' `max by` must merge them into one alert."""
    extra = "".join(f', {k}="{v}"' for k, v in labels.items())
    return [{"series": f'{name}{{{LABELS}, pod="{pod}"{extra}}}', "values": values} for pod in pods]


def alert(**annotations: str) -> dict:
    return {
        "exp_labels": {"severity": "warning", "namespace": "tenant-a", "cluster": "prod"},
        "exp_annotations": annotations,
    }


# (alert, input series, [(eval time, expected alerts)]); `[]` means quiet at that time.
CASES = [
    (
        "SlurmMetricsDown",
        series("slurm_metrics_up", "0x20"),
        [
            ("9m", []),
            (
                "11m",
                [
                    alert(
                        summary=f"The operator cannot read Slurm cluster {WHO} from slurmrestd.",
                        description="slurm_metrics_up has been 0 for 10 minutes; the cluster's "
                        "Slurm metrics are missing. Check slurmrestd and the operator's log.",
                    )
                ],
            ),
        ],
    ),
    ("SlurmMetricsDown", series("slurm_metrics_up", "1x20"), [("15m", [])]),
    (
        # the last success stays at time 0, so its age is the evaluation time
        "SlurmMetricsStale",
        series("slurm_metrics_last_success_timestamp_seconds", "0x30"),
        [
            ("14m", []),
            (
                "16m",
                [
                    alert(
                        summary=f"No fresh metrics from Slurm cluster {WHO}.",
                        description="The last successful read from slurmrestd is 16m 0s old.",
                    )
                ],
            ),
        ],
    ),
    (
        "SlurmMetricsStale",
        series("slurm_metrics_last_success_timestamp_seconds", "0+60x30"),
        [("25m", [])],
    ),
    (
        "SlurmNodesUnavailable",
        [
            *series("slurm_nodes_down", "3x20"),
            *series("slurm_nodes_drain", "2x20"),
            *series("slurm_nodes_total", "10x20"),
        ],
        [
            ("14m", []),
            (
                "16m",
                [
                    alert(
                        summary=f"Many nodes of Slurm cluster {WHO} are down or drained.",
                        description="50% of the cluster's Slurm nodes are down or drained "
                        "(threshold 0.1).",
                    )
                ],
            ),
        ],
    ),
    (
        "SlurmNodesUnavailable",
        [
            *series("slurm_nodes_down", "1x20"),
            *series("slurm_nodes_drain", "0x20"),
            *series("slurm_nodes_total", "10x20"),
        ],
        [("16m", [])],  # 10%: at the threshold, not above it
    ),
    (
        "SlurmPartitionHealthDrained",
        [
            *series("slurm_partition_nodes_health_drained", "2x20", partition="gpu"),
            *series("slurm_partition_nodes_total", "8x20", partition="gpu"),
            *series("slurm_partition_nodes_health_drained", "0x20", partition="cpu"),
            *series("slurm_partition_nodes_total", "4x20", partition="cpu"),
        ],
        [
            ("14m", []),
            (
                "16m",
                [
                    {
                        "exp_labels": {
                            "severity": "warning",
                            "namespace": "tenant-a",
                            "cluster": "prod",
                            "partition": "gpu",
                        },
                        "exp_annotations": {
                            "summary": "Health checks drained many nodes of partition gpu in "
                            f"Slurm cluster {WHO}.",
                            "description": "25% of the partition's nodes are drained by failing "
                            "health checks (threshold 0.1); slurm_nodes_health_drained names "
                            "the checks.",
                        },
                    }
                ],
            ),
        ],
    ),
    (
        "SlurmJobsStuckPending",
        [*series("slurm_queue_pending", "5x40"), *series("slurm_queue_running", "0x40")],
        [
            ("29m", []),
            (
                "31m",
                [
                    alert(
                        summary=f"Jobs of Slurm cluster {WHO} pend while none runs.",
                        description="5 jobs have been pending for 30m with no job running.",
                    )
                ],
            ),
        ],
    ),
    (
        "SlurmJobsStuckPending",
        [*series("slurm_queue_pending", "5x40"), *series("slurm_queue_running", "1x40")],
        [("35m", [])],
    ),
]


@pytest.fixture(scope="module")
def rule_file(objects, tmp_path_factory) -> Path:
    (rule,) = of_kind(objects("sunk", sets=RULE_ON, api_versions=RULE_API), "PrometheusRule")
    path = tmp_path_factory.mktemp("promtool") / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
    return path


def promtool_run(promtool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120)


def test_promtool_check_rules_accepts_the_charts_alerts(promtool, rule_file):
    proc = promtool_run(promtool, "check", "rules", str(rule_file))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS: 5 rules found" in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_promtool_every_alert_has_a_firing_and_a_quiet_case(rule_file):
    alerts = {
        r["alert"] for g in yaml.safe_load(rule_file.read_text())["groups"] for r in g["rules"]
    }
    fired = {name for name, _, evals in CASES if any(expected for _, expected in evals)}
    quiet = {name for name, _, evals in CASES if any(not expected for _, expected in evals)}
    assert alerts == fired == quiet


@pytest.mark.parametrize(("name", "inputs", "evals"), CASES, ids=[c[0] for c in CASES])
def test_promtool_test_rules(promtool, rule_file, tmp_path, name, inputs, evals):
    tests = {
        "rule_files": [str(rule_file)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "alert_rule_test": [
                    {"eval_time": at, "alertname": name, "exp_alerts": expected}
                    for at, expected in evals
                ],
            }
        ],
    }
    path = tmp_path / "tests.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    proc = promtool_run(promtool, "test", "rules", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_promtool_test_rules_fails_a_wrong_expectation(promtool, rule_file, tmp_path):
    """The harness can fail: the firing SlurmMetricsDown case expected quiet."""
    name, inputs, _ = CASES[0]
    tests = {
        "rule_files": [str(rule_file)],
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "alert_rule_test": [{"eval_time": "11m", "alertname": name, "exp_alerts": []}],
            }
        ],
    }
    path = tmp_path / "tests.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    proc = promtool_run(promtool, "test", "rules", str(path))
    assert proc.returncode == 1 and "SlurmMetricsDown" in proc.stdout + proc.stderr
