"""NodeSet feasibility, naming and planning, on plain Node and Pod dictionaries."""

from __future__ import annotations

import pytest

from sunk.models.crds import NodeSetSpec
from sunk.operator import names
from sunk.operator.nodeset.feasibility import evaluate
from sunk.operator.nodeset.naming import pod_name
from sunk.operator.nodeset.plan import budget, plan
from sunk.operator.nodeset.pod import PodContext, template_hash
from sunk.slurmconf.inputs import NodeSetInput
from sunk.syncer.plan import SlurmNode

CTX = PodContext(
    namespace="ns",
    cluster="c",
    conf_servers="c-controller.ns.svc:6817",
    reserved_memory="1Gi",
    munge_secret="c-munge",
    controller_image="ctl:1",
    config_map="c-slurm-config",
)
OWNER = {"metadata": {"name": "gpu", "uid": "u-1"}}


def node(name, ip, labels=None, taints=None, cpu="8", memory="32Gi", gpus=None):
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpus is not None:
        allocatable["nvidia.com/gpu"] = str(gpus)
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or []},
        "status": {
            "allocatable": allocatable,
            "addresses": [{"type": "InternalIP", "address": ip}],
        },
    }


def nodeset(replicas=None, affinity=None, tolerations=None, requests=None, **extra):
    spec = {
        "containers": [
            {
                "name": "slurmd",
                "image": "slurmd:1",
                "resources": {
                    "requests": requests or {"cpu": "2", "memory": "4Gi"},
                    "limits": {"memory": "8Gi"},
                },
            }
        ]
    }
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    return NodeSetInput(
        "gpu", NodeSetSpec(clusterName="c", replicas=replicas, template={"spec": spec}, **extra)
    )


def required(key, *values):
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}
                ]
            }
        }
    }


def test_pod_name_from_internal_ip():
    assert pod_name("h100", "10.174.12.2") == "h100-012-002"
    with pytest.raises(ValueError):
        pod_name("x", "fe80::1")


def test_required_affinity_taints_and_resources():
    ns = nodeset(affinity=required("pool", "gpu"))
    spec = ns.spec.template.spec
    assert evaluate(spec, node("a", "10.0.0.1", {"pool": "gpu"})).feasible
    assert (
        evaluate(spec, node("b", "10.0.0.2", {"pool": "cpu"})).reason
        == "required node affinity does not match"
    )
    tainted = node(
        "c",
        "10.0.0.3",
        {"pool": "gpu"},
        taints=[{"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"}],
    )
    assert "untolerated taint nvidia.com/gpu" in evaluate(spec, tainted).reason
    # PreferNoSchedule does not make a Node infeasible.
    soft = node(
        "d", "10.0.0.4", {"pool": "gpu"}, taints=[{"key": "x", "effect": "PreferNoSchedule"}]
    )
    assert evaluate(spec, soft).feasible
    small = node("e", "10.0.0.5", {"pool": "gpu"}, memory="3Gi")
    assert "insufficient resources (memory" in evaluate(spec, small).reason
    # Through the planner the munge sidecar's requests count too: 4Gi is not enough.
    exact = node("f", "10.0.0.6", {"pool": "gpu"}, memory="4Gi")
    assert "insufficient resources (memory" in plan(ns, OWNER, CTX, [exact], []).infeasible["f"]


def test_one_pod_per_feasible_node_named_and_pinned():
    nodes = [node(f"n{i}", f"10.1.{i}.{i + 1}") for i in range(3)]
    result = plan(nodeset(), OWNER, CTX, nodes, [])
    assert [p["metadata"]["name"] for p in result.create] == [
        "gpu-000-001",
        "gpu-001-002",
        "gpu-002-003",
    ]
    pod = result.create[0]
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert terms == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n0"]}]}
    ]
    assert names.LOCK_TOLERATION in pod["spec"]["tolerations"]
    assert [c["name"] for c in pod["spec"]["containers"]] == ["slurmd", "munge"]
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["SUNK_SLURMD_CONF"] == "Features=gpu CPUs=2 RealMemory=7168"
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert result.claim == ["n0", "n1", "n2"]
    assert result.status["desiredNumberScheduled"] == 3
    assert result.status["numberFeasible"] == 3


def test_replicas_limit_and_scale_down_prefers_not_ready_then_newest():
    nodes = [
        node(f"n{i}", f"10.1.0.{i}", {names.LABEL_NODESET: "gpu", names.LABEL_NAMESPACE: "ns"})
        for i in range(4)
    ]
    first = plan(nodeset(replicas=4), OWNER, CTX, nodes, [])
    pods = first.create
    for index, pod in enumerate(pods):
        pod["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:0{index}Z"
        pod["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    pods[0]["status"] = {"conditions": [{"type": "Ready", "status": "False"}]}
    result = plan(nodeset(replicas=2), OWNER, CTX, nodes, pods)
    assert result.create == []
    # Without Slurm state: the not-ready Pod goes first, then the newest ready one.
    assert result.delete == [("gpu-000-000", "scaled down"), ("gpu-000-003", "scaled down")]
    assert result.release == []  # claims go with the last Pod on the Node
    assert result.status["desiredNumberScheduled"] == 2


def test_node_owned_by_another_nodeset_is_left_to_it_not_a_conflict():
    taken = node("n0", "10.1.0.1", {names.LABEL_NODESET: "other", names.LABEL_NAMESPACE: "ns"})
    result = plan(nodeset(), OWNER, CTX, [taken, node("n1", "10.1.0.2")], [])
    assert result.claimed_elsewhere == {"n0": "used by NodeSet ns/other"}
    assert result.conflicts == {}
    assert [p["spec"]["hostname"] for p in result.create] == ["gpu-000-002"]


def test_colliding_pod_names_are_reported():
    result = plan(nodeset(), OWNER, CTX, [node("a", "10.1.0.1"), node("b", "10.2.0.1")], [])
    assert len(result.create) == 1
    assert "already taken by Node a" in result.conflicts["b"]


def test_infeasible_node_loses_its_pod():
    ns = nodeset(affinity=required("pool", "gpu"))
    good = node("n0", "10.1.0.1", {"pool": "gpu"})
    pods = plan(ns, OWNER, CTX, [good], []).create
    good["metadata"]["labels"]["pool"] = "cpu"
    result = plan(ns, OWNER, CTX, [good], pods)
    assert result.delete == [("gpu-000-001", "Node no longer feasible")]
    assert result.status["numberMisscheduled"] == 1


def test_cordoned_or_not_ready_node_keeps_its_pod():
    """As a DaemonSet would: the Syncer drains the Slurm node instead (k8s: reason)."""
    ns = nodeset()
    n0 = node("n0", "10.1.0.1")
    pods = plan(ns, OWNER, CTX, [n0], []).create
    n0["spec"]["unschedulable"] = True
    n0["spec"]["taints"] = [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
    ]
    result = plan(ns, OWNER, CTX, [n0], pods)
    assert result.delete == [] and result.infeasible == {}
    # a new NodeSet still takes a cordoned Node that it selects
    assert len(plan(nodeset(), OWNER, CTX, [n0], []).create) == 1


def test_a_running_pod_stays_through_noschedule_taints_as_a_daemonset_pod_would():
    """A Node that missed its heartbeats gets the controller-manager's not-ready and
    unreachable taints with both effects (seen with 5,000 kwok Nodes): the Pod stays, as does
    one under an admin's NoSchedule taint or on a Node now short of resources; a new NodeSet
    does not take such a Node. An untolerated NoExecute taint ends the Pod."""
    ns = nodeset()
    n0 = node("n0", "10.1.0.1")
    pods = plan(ns, OWNER, CTX, [n0], []).create
    n0["spec"]["taints"] = [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"},
        {"key": "dedicated", "value": "infra", "effect": "NoSchedule"},
    ]
    n0["status"]["allocatable"]["memory"] = "1Gi"
    result = plan(ns, OWNER, CTX, [n0], pods)
    assert result.delete == [] and result.infeasible == {} and result.create == []
    fresh = plan(nodeset(), OWNER, CTX, [n0], [])  # no Pod there yet
    assert fresh.create == [] and "untolerated taint" in fresh.infeasible["n0"]
    n0["spec"]["taints"].append({"key": "dedicated", "value": "infra", "effect": "NoExecute"})
    result = plan(ns, OWNER, CTX, [n0], pods)
    assert result.delete == [("gpu-000-001", "Node no longer feasible")], result.delete


def test_template_change_rolls_within_max_unavailable():
    nodes = [node(f"n{i}", f"10.1.0.{i}") for i in range(10)]
    pods = plan(nodeset(), OWNER, CTX, nodes, []).create
    for pod in pods:
        pod["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    changed = nodeset(maxUnavailable="20%", features={"staticFeatures": ["new"]})
    assert template_hash(changed) != template_hash(nodeset())
    result = plan(changed, OWNER, CTX, nodes, pods)
    assert len([d for d in result.delete if d[1] == "template changed"]) == 2
    assert result.rolling
    assert budget("10%", 3) == 1 and budget(5, 3) == 5


def test_claim_by_a_deleted_nodeset_is_stale():
    stale = node("n0", "10.1.0.1", {names.LABEL_NODESET: "gone", names.LABEL_NAMESPACE: "ns"})
    result = plan(nodeset(), OWNER, CTX, [stale], [], live_nodesets={("ns", "gpu")})
    assert result.conflicts == {}
    assert result.claim == ["n0"]


def test_claim_from_a_namespace_not_watched_is_kept():
    """A namespaced operator lists NodeSets only where it watches: a claim from elsewhere may
    be live, so the Node stays taken."""
    other = node("n0", "10.1.0.1", {names.LABEL_NODESET: "cpu", names.LABEL_NAMESPACE: "other"})
    result = plan(
        nodeset(), OWNER, CTX, [other], [], live_nodesets={("ns", "gpu")}, seen_namespaces=("ns",)
    )
    assert result.claimed_elsewhere == {"n0": "used by NodeSet other/cpu"}
    assert result.claim == []
    mine = node("n1", "10.1.0.2", {names.LABEL_NODESET: "gone", names.LABEL_NAMESPACE: "ns"})
    result = plan(
        nodeset(), OWNER, CTX, [mine], [], live_nodesets={("ns", "gpu")}, seen_namespaces=("ns",)
    )
    assert result.claim == ["n1"]


def ready_pods(nodes, ns=None):
    pods = plan(ns or nodeset(), OWNER, CTX, nodes, []).create
    for index, pod in enumerate(pods):
        pod["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:{index:02d}Z"
        pod["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    return pods


def slurm_view(**states):
    """Pod name (dashes as underscores) → Slurm states, e.g. gpu_000_001=("IDLE",)."""
    return {
        k.replace("_", "-"): SlurmNode(k.replace("_", "-"), frozenset(v), "")
        for k, v in states.items()
    }


def test_scale_down_uses_slurm_state_not_ready_idle_draining_running_then_newest():
    mine = {names.LABEL_NODESET: "gpu", names.LABEL_NAMESPACE: "ns"}
    nodes = [node(f"n{i}", f"10.1.0.{i}", dict(mine)) for i in range(1, 6)]
    pods = ready_pods(nodes)  # gpu-000-001 (oldest) … gpu-000-005 (newest)
    view = slurm_view(
        gpu_000_001=("IDLE",),
        gpu_000_002=("ALLOCATED",),
        gpu_000_003=("MIXED", "DRAIN"),
        gpu_000_004=("IDLE", "NOT_RESPONDING"),
        gpu_000_005=("ALLOCATED",),
    )
    order = [d[0] for d in plan(nodeset(replicas=0), OWNER, CTX, nodes, pods, slurm=view).delete]
    assert order == ["gpu-000-004", "gpu-000-001", "gpu-000-003", "gpu-000-005", "gpu-000-002"]
    # Scaling down by one removes only the not-responding node; the running ones stay.
    one = plan(nodeset(replicas=4), OWNER, CTX, nodes, pods, slurm=view)
    assert one.delete == [("gpu-000-004", "scaled down")]
    assert one.release == []  # the Node stays claimed while its Pod drains
    gone = [p for p in pods if p["metadata"]["name"] != "gpu-000-004"]
    after = plan(nodeset(replicas=4), OWNER, CTX, nodes, gone, slurm=view)
    assert (after.delete, after.release, after.create) == ([], ["n4"], [])


def test_status_counts_come_from_slurm_state():
    nodes = [node(f"n{i}", f"10.1.0.{i}") for i in range(1, 5)]
    pods = ready_pods(nodes)
    pods[0]["metadata"].setdefault("annotations", {})[names.ANN_REMOVAL] = "scaled down"
    view = slurm_view(
        gpu_000_001=("IDLE", "DRAIN"),
        gpu_000_002=("ALLOCATED",),
        gpu_000_003=("DOWN",),
        gpu_000_004=("IDLE",),
    )
    status = plan(nodeset(), OWNER, CTX, nodes, pods, slurm=view).status
    assert (status["numberDrain"], status["numberIdle"], status["numberAllocated"]) == (2, 1, 1)
    assert (status["numberDown"], status["numberRemoving"]) == (1, 1)
    without = plan(nodeset(), OWNER, CTX, nodes, pods).status
    assert (without["numberDrain"], without["numberAllocated"]) == (0, 0)


def test_rolling_update_counts_draining_pods_and_keeps_them_chosen():
    nodes = [node(f"n{i}", f"10.1.0.{i}") for i in range(1, 5)]
    pods = ready_pods(nodes)
    changed = nodeset(maxUnavailable=1, features={"staticFeatures": ["new"]})
    view = slurm_view(**{f"gpu_000_00{i}": ("ALLOCATED",) for i in range(1, 5)})
    first = plan(changed, OWNER, CTX, nodes, pods, slurm=view)
    # Budget one: the newest running Pod is picked; no other Pod is touched meanwhile.
    assert first.delete == [("gpu-000-004", "template changed")]
    pods[3]["metadata"].setdefault("annotations", {})[names.ANN_REMOVAL] = "template changed"
    view["gpu-000-004"] = SlurmNode("gpu-000-004", frozenset({"ALLOCATED", "DRAIN"}), "k8s: x")
    # Another node went idle meanwhile: the draining Pod still holds the whole budget.
    view["gpu-000-001"] = SlurmNode("gpu-000-001", frozenset({"IDLE"}), "")
    again = plan(changed, OWNER, CTX, nodes, pods, slurm=view)
    assert again.delete == [("gpu-000-004", "template changed")]
    assert again.status["numberOutdated"] == 4


def test_on_delete_strategy_never_replaces_outdated_pods():
    nodes = [node(f"n{i}", f"10.1.0.{i}") for i in range(1, 4)]
    pods = ready_pods(nodes)
    changed = nodeset(
        maxUnavailable="100%",
        features={"staticFeatures": ["new"]},
        updateStrategy={"type": "OnDelete"},
    )
    result = plan(changed, OWNER, CTX, nodes, pods)
    assert result.delete == [] and result.rolling
    assert result.status["numberOutdated"] == 3
    # a deleted Pod comes back with the new template
    recreated = plan(changed, OWNER, CTX, nodes, pods[1:])
    created = recreated.create[0]["metadata"]["annotations"][names.ANN_TEMPLATE_HASH]
    assert created == template_hash(changed)


def test_a_locking_cluster_gives_its_pods_the_hook_token_and_url():
    from dataclasses import replace

    from sunk.operator.nodeset.pod import HOOK_URL_ANNOTATION, build_pod

    ns = nodeset(replicas=1)
    ctx = replace(CTX, locking=True, hook_url="http://op-hook.sunk.svc:8082")
    pod = build_pod(ns, OWNER, ctx, "n1", "n1-pod", {})
    assert pod["metadata"]["annotations"][HOOK_URL_ANNOTATION] == ctx.hook_url
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    sources = volumes["sunk-hook"]["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["audience"] == "sunk.coreweave.com/hook"
    assert volumes["dispatchers"]["configMap"]["name"] == "c-slurm-config"
    mounts = {m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert {"/etc/slurm/prolog.sh", "/etc/slurm/epilog.sh", "/etc/slurm/sunk-lock.sh"} <= mounts
    assert "/var/run/sunk/hook" in mounts
    # Locking on changes the template (Pods roll once); a new hook URL does not.
    assert template_hash(ns, ctx) != template_hash(ns, CTX)
    assert template_hash(ns, ctx) == template_hash(ns, replace(ctx, hook_url="http://x:1"))
    plain = build_pod(ns, OWNER, CTX, "n1", "n1-pod", {})
    assert "sunk-hook" not in {v["name"] for v in plain["spec"]["volumes"]}
    assert HOOK_URL_ANNOTATION not in plain["metadata"]["annotations"]


def test_locking_without_a_hook_still_mounts_the_dispatchers_slurm_conf_names():
    from dataclasses import replace

    from sunk.operator.nodeset.pod import build_pod

    ctx = replace(CTX, locking=True)  # an operator started with --hook-port 0
    pod = build_pod(nodeset(replicas=1), OWNER, ctx, "n1", "n1-pod", {})
    mounts = {m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert {"/etc/slurm/prolog.sh", "/etc/slurm/epilog.sh"} <= mounts
    assert "/etc/slurm/sunk-lock.sh" not in mounts
    assert "sunk-hook" not in {v["name"] for v in pod["spec"]["volumes"]}


def test_slurmd_pods_run_as_the_clusters_slurmd_account_unless_the_template_names_one():
    from dataclasses import replace

    from sunk.models.crds import SlurmClusterSpec
    from sunk.operator.nodeset.pod import build_pod
    from sunk.operator.nodeset.reconcile import pod_context

    ns = nodeset(replicas=1)
    cluster = SlurmClusterSpec.model_validate({"clusterName": "c"})
    ctx = pod_context("ns", "c", cluster, ns.spec)
    pod = build_pod(ns, OWNER, ctx, "n1", "n1-pod", {})
    assert pod["spec"]["serviceAccountName"] == "c-slurmd"
    assert pod["spec"]["automountServiceAccountToken"] is False
    own = NodeSetInput(
        "gpu",
        NodeSetSpec.model_validate(
            {
                **ns.spec.model_dump(mode="json"),
                "template": {"spec": {"serviceAccountName": "mine"}},
            }
        ),
    )
    assert build_pod(own, OWNER, ctx, "n1", "n1-pod", {})["spec"]["serviceAccountName"] == "mine"
    # Running Pods are not replaced for it: they keep their account until replaced.
    assert template_hash(ns, ctx) == template_hash(ns, replace(ctx, service_account=""))
