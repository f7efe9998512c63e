"""The argocd-cm Lua health checks under gopher-lua with Argo CD's libraries (``luarun``).

NodeSet and SlurmCluster objects come from the operator's own reconcilers
(``operator_status``), so the verdicts are checked against the statuses the operator really
writes. Application fixtures stay in Argo CD's ``health_test.yaml`` format (Argo CD writes
that status, not us)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from sunk.argocd import healthchecks as health
from tests.argocd import operator_status as op
from tests.argocd.luarun import CHECKS, run_check, run_many

pytestmark = pytest.mark.unit

HERE = Path(__file__).parent / "health"
N, C = health.NODESET_KEY, health.SLURMCLUSTER_KEY
TOO_OLD = "this object comes from a slurm chart that needs operator >= 99.0.0"
MEMORY = "NodeSet cpu: memory 1Gi minus reservedMemory 2Gi leaves no memory for Slurm"

# (scenario, check, status, start of message): the verdict Argo CD must give for the object
# the operator left behind.
OPERATOR_CASES: list[tuple[Callable[[], dict[str, Any]], str, str, str]] = [
    (
        op.nodeset_invalid_spec,
        N,
        "Degraded",
        "Ready (InvalidSpec): the spec is invalid (1 problem)",
    ),
    (op.nodeset_impossible_sizing, N, "Degraded", f"Ready (ConfigInvalid): {MEMORY}"),
    (op.nodeset_operator_too_old, N, "Degraded", f"Ready (OperatorTooOld): {TOO_OLD}"),
    (op.nodeset_pod_name_conflict, N, "Degraded", "NodeConflict (NodeConflict): n2: pod name"),
    # SUNK's overlapping groups: the other NodeSet claimed n1 first; this one runs on n2
    (op.nodeset_node_claimed_elsewhere, N, "Healthy", "1/1 nodes ready"),
    (op.nodeset_cluster_not_found, N, "Progressing", "Ready (ClusterNotFound): no SlurmCluster"),
    (op.nodeset_pods_starting, N, "Progressing", "Ready (Progressing): 0/2 ready"),
    (op.nodeset_rolling_update, N, "Progressing", "RollingUpdate (TemplateChanged): 2 Pods"),
    (
        op.nodeset_update_blocked,
        N,
        "Degraded",
        "RollingUpdate (UpdateBlocked): the new template does not fit n1: memory: requests",
    ),
    (op.nodeset_generation_not_observed, N, "Progressing", "Waiting for the NodeSet controller"),
    (op.nodeset_all_ready, N, "Healthy", "2/2 nodes ready"),
    (op.nodeset_fixed_after_invalid, N, "Healthy", "2/2 nodes ready"),
    (op.nodeset_replicas_1000, N, "Healthy", "2/1000 nodes ready (all 2 feasible Nodes)"),
    (
        op.cluster_invalid_spec,
        C,
        "Degraded",
        "Ready (InvalidSpec): the spec is invalid (1 problem)",
    ),
    (op.cluster_config_invalid, C, "Degraded", f"Ready (ConfigInvalid): {MEMORY}"),
    (op.cluster_operator_too_old, C, "Degraded", f"Ready (OperatorTooOld): {TOO_OLD}"),
    (
        op.cluster_database_unavailable,
        C,
        "Degraded",
        "AccountingReady (DatabaseUnavailable): accounting.external.passwordSecret is not set",
    ),
    (op.cluster_key_missing, C, "Degraded", "Ready (KeyMissing): munge key Secret slurm-munge"),
    (op.cluster_apply_refused, C, "Degraded", "Degraded (ServiceApplyFailed): PATCH"),
    (op.cluster_starting, C, "Progressing", "Ready (Progressing)"),
    (op.cluster_generation_not_observed, C, "Progressing", "Waiting for the SlurmCluster"),
    (op.cluster_all_ready, C, "Healthy", "Ready (AllComponentsReady)"),
]


@pytest.mark.parametrize(
    ("scenario", "key", "status", "message"),
    [pytest.param(*case, id=case[0].__name__) for case in OPERATOR_CASES],
)
def test_operator_written_status(
    scenario: Callable[[], dict[str, Any]], key: str, status: str, message: str
) -> None:
    obj = scenario()
    result = run_check(key, obj)
    assert result["status"] == status, (result, obj.get("status"))
    assert result["message"].startswith(message), result


def test_missing_status_is_progressing() -> None:
    nodeset, cluster = op.nodeset(), op.slurm_cluster()
    assert run_check(N, nodeset)["status"] == "Progressing"
    assert run_check(C, cluster) == {
        "status": "Progressing",
        "message": "Waiting for the SlurmCluster controller to report conditions",
    }


def test_operator_cases_cover_every_verdict_for_both_kinds() -> None:
    seen = {(key, status) for _, key, status, _ in OPERATOR_CASES}
    for key in (N, C):
        assert {(key, s) for s in ("Healthy", "Progressing", "Degraded")} <= seen


def test_string_library_only_with_open_libs() -> None:
    """The runner loads Argo CD's library set: without useOpenLibs a script that reaches the
    string library fails, so ``needs_open_libs`` is not decoration."""
    obj = op.cluster_apply_refused()
    assert CHECKS[C].needs_open_libs
    (closed,) = run_many(C, [obj], open_libs=False)
    assert "string" in closed.get("error", ""), closed
    assert run_check(C, obj)["status"] == "Degraded"
    (application,) = run_many(health.APPLICATION_KEY, [{}], open_libs=False)
    assert application == {"status": "Progressing", "message": ""}


def _application_cases() -> list[Any]:
    cases = []
    for test_file in sorted(HERE.glob("*/*/health_test.yaml")):
        group, kind = test_file.parent.parent.name, test_file.parent.name
        for case in yaml.safe_load(test_file.read_text())["tests"]:
            input_path = test_file.parent / case["inputPath"]
            cases.append(
                pytest.param(
                    f"{group}_{kind}", input_path, case["healthStatus"], id=input_path.stem
                )
            )
    return cases


@pytest.mark.parametrize(("key", "input_path", "expected"), _application_cases())
def test_application_fixture(key: str, input_path: Path, expected: dict[str, str]) -> None:
    assert run_check(key, yaml.safe_load(input_path.read_text())) == expected


def test_application_check_needs_no_open_libs() -> None:
    assert len(_application_cases()) >= 4
    assert "string." not in health.load_script(health.APPLICATION_KEY)
    assert not CHECKS[health.APPLICATION_KEY].needs_open_libs


@pytest.mark.parametrize("key", sorted(CHECKS))
def test_checks_survive_odd_objects(key: str) -> None:
    # Empty object, empty status, conditions without reason: a status, never a Lua error.
    objects = [
        {},
        {"status": {}},
        {"metadata": {}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}},
    ]
    for result in run_many(key, objects):
        assert "error" not in result, result
        assert result["status"] in {"Healthy", "Progressing", "Degraded", "Suspended"}
        assert isinstance(result["message"], str)
