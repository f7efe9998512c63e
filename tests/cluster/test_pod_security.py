"""The Pod Security Admission level each namespace needs, as the real API server's PodSecurity
admission judges the Pods we make (server-side dry runs into namespaces that enforce a level):
the operator's Pod passes `restricted`; the control-plane and login Pods pass `baseline`; the
slurmd Pods need `privileged` (their capability set is beyond baseline's). The README's table
says the same."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sunk.devenv.controlplane import KubeAPIError
from tests.unit.operator.test_cluster_objects import context
from tests.unit.operator.test_shared_volumes import cluster, nodeset, slurmd_pod

SUNK_CHART = Path(__file__).resolve().parents[2] / "charts" / "sunk"
LEVELS = ("restricted", "baseline", "privileged")


@pytest.fixture(scope="module")
def levels(control_plane, kube) -> Iterator[dict[str, str]]:
    """One namespace enforcing each level."""
    names = {level: f"psa-{level}-{uuid.uuid4().hex[:5]}" for level in LEVELS}
    for level, name in names.items():
        labels = {"pod-security.kubernetes.io/enforce": level}
        kube.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": labels}})
        control_plane.wait_for(
            lambda n=name: kube.get(f"/api/v1/namespaces/{n}/serviceaccounts/default"), 30, name
        )
    yield names
    for name in names.values():
        kube.delete(f"/api/v1/namespaces/{name}", missing_ok=True)


def admitted(kube, namespace: str, name: str, spec: dict[str, Any]) -> str:
    """'' when a dry-run create of a Pod with ``spec`` is admitted, else the refusal (under
    the namespace's `default` ServiceAccount: the components' own are not made here)."""
    spec = {k: v for k, v in spec.items() if k != "serviceAccountName"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
    try:
        kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod, query={"dryRun": "All"})
    except KubeAPIError as exc:
        assert exc.status == 403, exc
        return str(exc)
    return ""


def strictest(kube, levels: dict[str, str], name: str, spec: dict[str, Any]) -> str:
    return next(level for level in LEVELS if not admitted(kube, levels[level], name, spec))


def control_plane_pods() -> dict[str, dict[str, Any]]:
    from sunk.operator.cluster.objects import desired_objects

    pods = {}
    for obj in desired_objects(context()):
        if obj["kind"] not in ("StatefulSet", "Deployment"):
            continue
        spec = obj["spec"]["template"]["spec"]
        # a StatefulSet's claims become volumes of its Pods, as the controller makes them
        claims = [t["metadata"]["name"] for t in obj["spec"].get("volumeClaimTemplates", [])]
        spec["volumes"] = [
            *spec.get("volumes", []),
            *({"name": c, "persistentVolumeClaim": {"claimName": f"{c}-0"}} for c in claims),
        ]
        pods[obj["metadata"]["name"]] = spec
    return pods


def test_the_control_plane_pods_need_baseline_or_pass_restricted(kube, levels):
    """slurmdbd's and slurmrestd's Pods (every container non-root, no capability) pass
    restricted; the controller (its state-owner init container), MariaDB and login start
    something as root with baseline's capabilities."""
    pods = control_plane_pods()
    assert sorted(pods) == ["c-accounting", "c-controller", "c-login", "c-mariadb", "c-rest"]
    expected = {"c-accounting": "restricted", "c-rest": "restricted"}
    for name, spec in pods.items():
        assert strictest(kube, levels, name, spec) == expected.get(name, "baseline"), name
    # restricted refuses the others for running as root with added capabilities, nothing more
    refusal = admitted(kube, levels["restricted"], "c-controller", pods["c-controller"])
    assert "runAsNonRoot" in refusal and "capabilities" in refusal
    assert "state-owner" in refusal and "slurmctld" not in refusal, refusal


def test_the_slurmd_pods_need_privileged(kube, levels):
    spec = slurmd_pod(cluster(), nodeset())["spec"]
    refusal = admitted(kube, levels["baseline"], "slurmd", spec)
    assert "non-default capabilities" in refusal and "SYS_ADMIN" in refusal, refusal
    assert strictest(kube, levels, "slurmd", spec) == "privileged"


def test_the_operator_pod_passes_restricted(kube, levels, helm):
    rendered = subprocess.run(
        [helm, "template", "sunk", str(SUNK_CHART), "-n", "sunk"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    (deployment,) = [
        d for d in yaml.safe_load_all(rendered)
        if d and d["kind"] == "Deployment" and d["metadata"]["name"] == "sunk-operator"
    ]  # fmt: skip
    spec = deployment["spec"]["template"]["spec"]
    assert strictest(kube, levels, "operator", spec) == "restricted"
