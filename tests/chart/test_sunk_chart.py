"""The operator chart: CRDs, operator, RBAC, optional components."""

from __future__ import annotations

import subprocess

import pytest

ALL_ON = (
    "nvidia-device-plugin.enabled=true",
    "moco.enabled=true",
    "operator.podMonitor.enabled=true",
    "operator.vmPodScrape.enabled=true",
)
# The scrape objects are rendered only where their APIs are served.
API_VERSIONS = (
    "monitoring.coreos.com/v1/PodMonitor",
    "operator.victoriametrics.com/v1beta1/VMPodScrape",
)


def kinds(docs):
    return sorted(f"{d['kind']}/{d['metadata']['name']}" for d in docs)


def test_lint_strict_defaults_and_all_switches(helm, repo):
    for sets in ((), ALL_ON):
        cmd = [helm, "lint", "--strict", str(repo / "charts/sunk")]
        for s in sets:
            cmd += ["--set", s]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_default_objects(objects):
    docs = objects("sunk")
    assert kinds(docs) == [
        "ClusterRole/rel-sunk-operator",
        "ClusterRoleBinding/rel-sunk-operator",
        "CustomResourceDefinition/nodesets.sunk.coreweave.com",
        "CustomResourceDefinition/slurmclusters.sunk.coreweave.com",
        "Deployment/rel-sunk-operator",
        "Pod/rel-sunk-operator-test",  # the `helm test` hook
        "Service/rel-sunk-operator-metrics",
        "ServiceAccount/rel-sunk-operator",
    ]


def test_switches_add_their_objects(objects):
    names = kinds(objects("sunk", sets=ALL_ON, api_versions=API_VERSIONS))
    assert "DaemonSet/rel-sunk-nvidia-device-plugin" in names
    assert "PodMonitor/rel-sunk-operator" in names
    assert "VMPodScrape/rel-sunk-operator" in names


@pytest.mark.parametrize("served", [(), API_VERSIONS[:1], API_VERSIONS[1:]])
def test_scrape_objects_only_where_their_api_is_served(objects, served):
    names = kinds(objects("sunk", sets=ALL_ON, api_versions=served))
    assert ("PodMonitor/rel-sunk-operator" in names) == (API_VERSIONS[0] in served)
    assert ("VMPodScrape/rel-sunk-operator" in names) == (API_VERSIONS[1] in served)


def test_notes_warn_when_a_scrape_api_is_missing(helm, repo):
    """helm install has no --api-versions: a client dry run serves neither scrape API."""
    cmd = [helm, "install", "rel", str(repo / "charts/sunk"), "--dry-run=client", "-n", "s"]
    for item in ALL_ON:
        cmd += ["--set", item]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    manifest, notes = proc.stdout.split("NOTES:", 1)
    assert "kind: PodMonitor" not in manifest and "kind: VMPodScrape" not in manifest
    assert "serve monitoring.coreos.com/v1 PodMonitor: none was created" in notes
    assert "serve operator.victoriametrics.com/v1beta1 VMPodScrape: none was created" in notes


def test_crds_can_be_left_out_and_are_kept_on_uninstall(objects):
    docs = objects("sunk", sets=("crds.enabled=false",))
    assert not [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    for crd in [d for d in objects("sunk") if d["kind"] == "CustomResourceDefinition"]:
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_cluster_role_has_no_wildcards_and_moco_is_opt_in(objects):
    def rules(sets=()):
        (role,) = [d for d in objects("sunk", sets=sets) if d["kind"] == "ClusterRole"]
        return role["rules"]

    for rule in rules(ALL_ON):
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], rule
    assert not any("moco.cybozu.com" in r["apiGroups"] for r in rules())
    moco = [r for r in rules(("moco.enabled=true",)) if "moco.cybozu.com" in r["apiGroups"]]
    assert any("mysqlclusters" in r["resources"] and "create" in r["verbs"] for r in moco)


def test_operator_pod_is_hardened_and_tolerates_the_lock(objects):
    (deploy,) = [d for d in objects("sunk") if d["kind"] == "Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = pod["containers"][0]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {"key": "sunk.coreweave.com/lock", "operator": "Exists", "effect": "NoExecute"} in pod[
        "tolerations"
    ]
    assert deploy["spec"]["replicas"] == 2


def test_nodeset_crd_has_scale_status_and_columns(objects):
    (crd,) = [d for d in objects("sunk") if d["metadata"]["name"].startswith("nodesets.")]
    version = crd["spec"]["versions"][0]
    assert version["subresources"]["scale"]["specReplicasPath"] == ".spec.replicas"
    assert "status" in version["subresources"]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "DESIRED",
        "FEASIBLE",
        "CURRENT",
        "READY",
        "DRAIN",
        "AGE",
    ]


def test_sunk_chart_snapshot(render, snapshot):
    proc = render("sunk", sets=ALL_ON, ns="sunk", api_versions=API_VERSIONS)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == snapshot
