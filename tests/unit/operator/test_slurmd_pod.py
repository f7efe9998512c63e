"""The slurmd Pod's security defaults and labels (the real-node e2e tier runs slurmd so)."""

from __future__ import annotations

from sunk.models.crds import NodeSetSpec
from sunk.operator import names
from sunk.operator.common import POD_SECURITY_CONTEXT
from sunk.operator.nodeset.pod import SLURMD_SECURITY_CONTEXT
from sunk.slurmconf.inputs import NodeSetInput
from tests.unit.operator.test_shared_volumes import cluster, container, slurmd_pod


def group(slurmd: dict, labels: dict | None = None) -> NodeSetInput:
    template = {"metadata": {"labels": labels or {}}, "spec": {"containers": [slurmd]}}
    return NodeSetInput("cpu", NodeSetSpec(clusterName="c", template=template))


def test_slurmd_is_unprivileged_with_a_listed_capability_set():
    pod = slurmd_pod(cluster(), group({"name": "slurmd", "image": "slurmd:1"}))
    security = container(pod["spec"], "slurmd")["securityContext"]
    assert security == SLURMD_SECURITY_CONTEXT
    assert security["privileged"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert "SYS_ADMIN" in security["capabilities"]["add"]  # the cgroup remount
    # a copy: changing one Pod's context changes no other
    security["capabilities"]["add"].append("NET_ADMIN")
    assert "NET_ADMIN" not in SLURMD_SECURITY_CONTEXT["capabilities"]["add"]


def test_slurmd_pods_run_under_the_runtime_default_seccomp_profile():
    pod = slurmd_pod(cluster(), group({"name": "slurmd", "image": "slurmd:1"}))
    assert pod["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    # a copy per Pod
    pod["spec"]["securityContext"]["fsGroup"] = 5
    assert "fsGroup" not in POD_SECURITY_CONTEXT


def test_a_templates_pod_security_context_replaces_the_default():
    template = {"spec": {"securityContext": {"runAsUser": 0}, "containers": [{"name": "slurmd"}]}}
    spec = NodeSetSpec(clusterName="c", template=template)
    pod = slurmd_pod(cluster(), NodeSetInput("cpu", spec))
    assert pod["spec"]["securityContext"] == {"runAsUser": 0}


def test_a_groups_security_context_replaces_it_privileged_as_in_sunk():
    mine = {"name": "slurmd", "image": "slurmd:1", "securityContext": {"privileged": True}}
    pod = slurmd_pod(cluster(), group(mine))
    assert container(pod["spec"], "slurmd")["securityContext"] == {"privileged": True}


def test_a_template_cannot_label_slurmd_as_another_component():
    labels = {names.LABEL_COMPONENT: "accounting", "team": "ml"}
    pod = slurmd_pod(cluster(), group({"name": "slurmd", "image": "slurmd:1"}, labels))
    assert pod["metadata"]["labels"][names.LABEL_COMPONENT] == "slurmd"
    assert pod["metadata"]["labels"]["team"] == "ml"
