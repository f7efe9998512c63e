"""Both charts sunk_chart with the real helm on the real API server."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sunk.devenv.controlplane import KubeAPIError
from tests.cluster.conftest import SUNK_NS

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
# Written only from SUNK's documentation (tests/chart/validate/test_sunk_documented.py).
SUNK_DOCUMENTED = REPO / "tests/chart/validate/fixtures/sunk-documented.yaml"


def test_operator_objects_stored(sunk_chart, kube):
    deploy = kube.get(f"/apis/apps/v1/namespaces/{SUNK_NS}/deployments/sunk-operator")
    assert deploy["spec"]["template"]["spec"]["serviceAccountName"] == "sunk-operator"
    role = kube.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/sunk-operator")
    assert all("*" not in r["verbs"] and "*" not in r["resources"] for r in role["rules"])


@pytest.mark.parametrize("example", [*EXAMPLES, SUNK_DOCUMENTED], ids=lambda p: p.stem)
def test_slurm_release_for_every_example(sunk_chart, kube, namespace, example):
    sunk_chart("install", "slurm", str(REPO / "charts/slurm"), "-n", namespace, "-f", str(example))
    base = f"/apis/sunk.coreweave.com/v1alpha1/namespaces/{namespace}"
    assert len(kube.list(f"{base}/slurmclusters")) == 1
    rendered = sunk_chart("template", "slurm", str(REPO / "charts/slurm"), "-f", str(example))
    expected = [d for d in yaml.safe_load_all(rendered.stdout) if d and d["kind"] == "NodeSet"]
    assert len(kube.list(f"{base}/nodesets")) == len(expected)


def test_upgrade_and_uninstall_leave_nothing_of_the_release(sunk_chart, kube, namespace):
    example = str(REPO / "examples/minimal-cpu.yaml")
    chart = str(REPO / "charts/slurm")
    sunk_chart("install", "slurm", chart, "-n", namespace, "-f", example)
    sunk_chart(
        "upgrade",
        "slurm",
        chart,
        "-n",
        namespace,
        "-f",
        example,
        "--set",
        "compute.nodes.cpu.replicas=5",
        "--set",
        "compute.nodes.extra.replicas=1",
    )
    base = f"/apis/sunk.coreweave.com/v1alpha1/namespaces/{namespace}"
    assert kube.get(f"{base}/nodesets/cpu")["spec"]["replicas"] == 5
    assert kube.get(f"{base}/nodesets/extra")["spec"]["clusterName"] == "minimal"
    sunk_chart("uninstall", "slurm", "-n", namespace, "--wait")
    assert kube.list(f"{base}/nodesets") == []
    assert kube.list(f"{base}/slurmclusters") == []
    assert (
        kube.list(
            f"/api/v1/namespaces/{namespace}/configmaps",
            label_selector="app.kubernetes.io/instance=slurm",
        )
        == []
    )


INVALID = [
    ({"clusterName": "c", "replicas": -1}, "spec.replicas"),
    ({"clusterName": "c", "podNamePrefix": "Bad_Prefix"}, "spec.podNamePrefix"),
    ({"clusterName": "c", "gresGpu": "h100:x"}, "spec.gresGpu"),
]


@pytest.mark.parametrize(("spec", "field"), INVALID)
def test_invalid_nodeset_rejected_naming_the_field(sunk_chart, kube, namespace, spec, field):
    body = {
        "apiVersion": "sunk.coreweave.com/v1alpha1",
        "kind": "NodeSet",
        "metadata": {"name": "bad"},
        "spec": spec,
    }
    with pytest.raises(KubeAPIError) as err:
        kube.create(f"/apis/sunk.coreweave.com/v1alpha1/namespaces/{namespace}/nodesets", body)
    assert err.value.status == 422
    assert field in str(err.value)


def test_cel_rules_are_enforced(sunk_chart, kube, namespace):
    base = f"/apis/sunk.coreweave.com/v1alpha1/namespaces/{namespace}/nodesets"
    kube.create(
        base,
        {
            "apiVersion": "sunk.coreweave.com/v1alpha1",
            "kind": "NodeSet",
            "metadata": {"name": "ok"},
            "spec": {"clusterName": "c"},
        },
    )
    with pytest.raises(KubeAPIError) as err:
        kube.patch(f"{base}/ok", {"spec": {"clusterName": "other"}})
    assert err.value.status == 422 and "spec.clusterName" in str(err.value)
    assert "is immutable" in str(err.value)
    clusters = f"/apis/sunk.coreweave.com/v1alpha1/namespaces/{namespace}/slurmclusters"
    body = {
        "apiVersion": "sunk.coreweave.com/v1alpha1",
        "kind": "SlurmCluster",
        "metadata": {"name": "c"},
        "spec": {
            "clusterName": "c",
            "compute": {
                "partitions": [
                    {"name": "a", "nodeSets": ["x"], "default": True},
                    {"name": "b", "nodeSets": ["x"], "default": True},
                ]
            },
        },
    }
    with pytest.raises(KubeAPIError) as err:
        kube.create(clusters, body)
    assert "at most one partition may be the default" in str(err.value)
    body["spec"]["compute"]["partitions"][1]["default"] = False
    body["spec"]["accounting"] = {"database": {"type": "external"}}
    with pytest.raises(KubeAPIError) as err:
        kube.create(clusters, body)
    assert "an external accounting database needs external.host" in str(err.value)
