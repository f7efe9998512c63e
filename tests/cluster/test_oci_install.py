"""Both charts installed with the real helm from the OCI registry they were pushed to.

The tier's session control plane already holds the `sunk` release of the checkout's chart,
which owns the two cluster-scoped CRDs; a second release cannot own them too. So this module
starts a control plane of its own (the same ``ControlPlane``, about 4 s) and installs the
pulled `sunk` chart there whole: CRDs, RBAC and the operator's Deployment.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from sunk.devenv.controlplane import ControlPlane, KubeClient
from tests.cluster.conftest import CRDS, _established

REPO = Path(__file__).resolve().parents[2]
NS = "sunk-oci"


@pytest.fixture(scope="module")
def own_control_plane(control_plane_available: None) -> Iterator[ControlPlane]:
    with ControlPlane() as cp:
        yield cp


@pytest.fixture(scope="module")
def installed(published_charts, oci_helm, own_control_plane: ControlPlane):
    """`helm install sunk oci://…/sunk --version V` into the module's control plane."""
    kubeconfig = str(own_control_plane.kubeconfig)
    oci_helm.run(
        "install",
        "sunk",
        published_charts.ref("sunk"),
        "--version",
        published_charts.versions["sunk"],
        "--plain-http",
        "--kubeconfig",
        kubeconfig,
        "-n",
        NS,
        "--create-namespace",
    )
    kube = own_control_plane.client
    for crd in CRDS:
        own_control_plane.wait_for(lambda c=crd: _established(kube, c), 60, f"{crd} Established")
    return published_charts


def test_crds_from_oci_chart_are_served(installed, own_control_plane: ControlPlane):
    kube: KubeClient = own_control_plane.client
    for crd in CRDS:
        body = kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
        assert body["metadata"]["annotations"]["meta.helm.sh/release-name"] == "sunk"
        assert [v["name"] for v in body["spec"]["versions"]] == ["v1alpha1"]


def test_operator_deployment_carries_the_pulled_chart_version(
    installed, own_control_plane: ControlPlane
):
    kube: KubeClient = own_control_plane.client
    chart = yaml.safe_load((REPO / "charts/sunk/Chart.yaml").read_text())
    deploy = kube.get(f"/apis/apps/v1/namespaces/{NS}/deployments/sunk-operator")
    labels = deploy["metadata"]["labels"]
    assert labels["helm.sh/chart"] == f"sunk-{installed.versions['sunk']}"
    assert labels["app.kubernetes.io/version"] == chart["appVersion"]
    assert deploy["spec"]["template"]["spec"]["serviceAccountName"] == "sunk-operator"
    assert kube.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/sunk-operator")["rules"]


def test_helm_records_the_oci_chart(installed, oci_helm, own_control_plane: ControlPlane):
    listed = oci_helm.run(
        "list", "-n", NS, "-o", "yaml", "--kubeconfig", str(own_control_plane.kubeconfig)
    )
    (release,) = yaml.safe_load(listed.stdout)
    assert release["chart"] == f"sunk-{installed.versions['sunk']}"
    assert release["status"] == "deployed"


def test_slurm_chart_from_oci_stores_its_cluster(
    installed, oci_helm, own_control_plane: ControlPlane
):
    kube: KubeClient = own_control_plane.client
    kube.create("/api/v1/namespaces", {"metadata": {"name": "tenant-oci"}})
    oci_helm.run(
        "install",
        "slurm",
        installed.ref("slurm"),
        "--version",
        installed.versions["slurm"],
        "--plain-http",
        "--kubeconfig",
        str(own_control_plane.kubeconfig),
        "-n",
        "tenant-oci",
        "-f",
        str(REPO / "examples/minimal-cpu.yaml"),
    )
    base = "/apis/sunk.coreweave.com/v1alpha1/namespaces/tenant-oci"
    (cluster,) = kube.list(f"{base}/slurmclusters")
    assert cluster["metadata"]["labels"]["helm.sh/chart"] == f"slurm-{installed.versions['slurm']}"
    assert {n["metadata"]["name"] for n in kube.list(f"{base}/nodesets")} >= {"cpu"}
