"""The AppProject `argocd gen` writes lets through every cluster-scoped object our charts
render, and only by the names they render: both charts through the real helm (the sunk
chart with its defaults and every optional part, the slurm chart with every example), each
cluster-scoped object matched as Argo CD 3 matches ``clusterResourceWhitelist``."""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from sunk.argocd import build
from sunk.argocd.spec import GenSpec, resolve_releases

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
# Kinds the Kubernetes API serves without a namespace that a chart could render.
CLUSTER_SCOPED = {
    ("", "Namespace"),
    ("", "PersistentVolume"),
    ("", "Node"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("storage.k8s.io", "StorageClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("apiregistration.k8s.io", "APIService"),
}
SUNK_OPTIONAL = (
    "nvidia-device-plugin.enabled=true",
    "metrics.dashboard.enabled=true",
    "metrics.prometheusRule.enabled=true",
    "operator.watchNamespaces={a,b}",
)


def permitted(whitelist: list[dict[str, str]], obj: dict[str, Any]) -> bool:
    group = obj["apiVersion"].rpartition("/")[0]
    name = obj["metadata"]["name"]
    return any(
        item["group"] in ("*", group)
        and item["kind"] in ("*", obj["kind"])
        and (not item.get("name") or fnmatch.fnmatchcase(name, item["name"]))
        for item in whitelist
    )


def cluster_scoped(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if (o["apiVersion"].rpartition("/")[0], o["kind"]) in CLUSTER_SCOPED]


@pytest.fixture(scope="module")
def whitelist(tmp_path_factory) -> list[dict[str, str]]:
    """The project of a bundle without cert-manager and MOCO: only what our charts need."""
    root = tmp_path_factory.mktemp("repo")
    (root / "site.yaml").write_text("clusterName: site\n")
    spec = GenSpec(
        repo_url="https://git.example.com/org/clusters.git",
        revision="0" * 40,
        cluster="prod",
        apps_path="argocd/apps",
        slurm=resolve_releases([root / "site.yaml"], root),
        app_project=True,
        project="sunk-prod",
        chart_registry="oci.example.com/charts",
        chart_version="0.1.0",
    )
    (project,) = [o for o in build(spec).objects() if o["kind"] == "AppProject"]
    return project["spec"]["clusterResourceWhitelist"]


def test_sunk_chart_cluster_objects_are_permitted(helm, whitelist) -> None:
    for sets in ((), SUNK_OPTIONAL):
        # As Argo CD renders it: release `sunk` (builders.sunk_app), namespace sunk-system.
        cmd = [helm, "template", "sunk", str(REPO / "charts/sunk"), "-n", "sunk-system"]
        for item in sets:
            cmd += ["--set", item]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        rendered = cluster_scoped([d for d in yaml.safe_load_all(proc.stdout) if d])
        assert {o["kind"] for o in rendered} >= {"CustomResourceDefinition", "ClusterRole"}
        for obj in rendered:
            assert permitted(whitelist, obj), (obj["kind"], obj["metadata"]["name"])


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_slurm_chart_renders_nothing_cluster_scoped(objects, example) -> None:
    assert cluster_scoped(objects("slurm", example)) == []


def test_other_crds_and_roles_are_refused(whitelist) -> None:
    def obj(api: str, kind: str, name: str) -> dict[str, Any]:
        return {"apiVersion": api, "kind": kind, "metadata": {"name": name}}

    crd = "apiextensions.k8s.io/v1"
    assert permitted(whitelist, obj(crd, "CustomResourceDefinition", "nodesets.sunk.coreweave.com"))
    assert not permitted(whitelist, obj(crd, "CustomResourceDefinition", "foos.example.com"))
    rbac = "rbac.authorization.k8s.io/v1"
    assert not permitted(whitelist, obj(rbac, "ClusterRole", "cluster-admin"))
    assert not permitted(whitelist, obj(rbac, "ClusterRoleBinding", "everyone-admin"))
    assert permitted(whitelist, obj("v1", "Namespace", "site"))
    assert not permitted(whitelist, obj("v1", "Namespace", "kube-system"))
