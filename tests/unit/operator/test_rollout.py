"""Self-healing rollouts of the control plane, on the in-memory API
(``tests.fakes.kube.FakeKube``): conditions name the Pod and quote the kubelet or the
scheduler, and a stuck Pod of an older StatefulSet revision is replaced once the template is
fixed (Kubernetes' "forced rollback"), while a Pod of the current revision, a Ready one and a
starting one are left alone. The statuses the StatefulSet controller and the kubelet would
write are set by hand here; the e2e tier proves it with theirs."""

from __future__ import annotations

import asyncio
from typing import Any

from sunk.operator import names
from sunk.operator.cluster import rollout
from sunk.operator.pod_health import stuck, why_not_ready
from tests.argocd import operator_status as op
from tests.fakes.kube import FakeKube


def pod(
    name: str,
    revision: str,
    *,
    waiting: tuple[str, str] | None = None,
    ready: bool = False,
    unschedulable: str = "",
    last_exit: int | None = None,
    component: str = "database",
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Pending", "conditions": []}
    if unschedulable:
        status["conditions"].append(
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": unschedulable}
        )  # fmt: skip
    if ready:
        status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    container: dict[str, Any] = {"name": "mariadb", "ready": ready, "state": {}}
    if waiting:
        container["state"] = {"waiting": {"reason": waiting[0], "message": waiting[1]}}
    elif not ready and not unschedulable:
        container["state"] = {"waiting": {"reason": "ContainerCreating"}}
    if last_exit is not None:
        container["lastState"] = {"terminated": {"exitCode": last_exit, "reason": "Error"}}
    if not unschedulable:
        status["containerStatuses"] = [container]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": op.NS,
            "labels": {
                "sunk.coreweave.com/cluster": "slurm",
                "app.kubernetes.io/component": component,
                rollout.REVISION_LABEL: revision,
            },
        },
        "spec": {},
        "status": status,
    }


def statefulset(update: str, generation: int = 2, observed: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "slurm-mariadb", "namespace": op.NS, "generation": generation},
        "spec": {"replicas": 1},
        "status": {"observedGeneration": observed, "updateRevision": update, "readyReplicas": 0},
    }


def template_hash(pod: dict) -> str:
    return pod["metadata"]["annotations"][names.ANN_TEMPLATE_HASH]


def removals(kube: FakeKube) -> list[str]:
    """The Pods marked for removal (drained in Slurm, then deleted)."""
    return sorted(
        p["metadata"]["name"]
        for p in kube.of_kind("Pod")
        if names.ANN_REMOVAL in (p["metadata"].get("annotations") or {})
    )


PULL = ("ImagePullBackOff", 'Back-off pulling image "mariadb:bad"')


def test_rollout_why_not_ready_quotes_the_kubelet_and_the_scheduler():
    assert why_not_ready(pod("db-0", "a", waiting=PULL)) == (
        'db-0: mariadb: ImagePullBackOff: Back-off pulling image "mariadb:bad"'
    )
    crash = pod("db-0", "a", waiting=("CrashLoopBackOff", "back-off 5m0s"), last_exit=1)
    assert why_not_ready(crash) == "db-0: mariadb: CrashLoopBackOff: exit code 1 (Error)"
    nowhere = pod("db-0", "a", unschedulable="0/2 nodes are available: 2 Insufficient cpu.")
    assert why_not_ready(nowhere) == (
        "db-0: Unschedulable: 0/2 nodes are available: 2 Insufficient cpu."
    )
    assert why_not_ready(pod("db-0", "a")) == "db-0: mariadb: ContainerCreating"
    assert all(stuck(p) for p in (pod("x", "a", waiting=PULL), crash, nowhere))
    assert not stuck(pod("x", "a")) and not stuck(pod("x", "a", ready=True))


def test_rollout_replaces_only_stuck_pods_of_an_older_revision():
    old_stuck = pod("db-0", "a", waiting=PULL)
    new_stuck = pod("db-1", "b", waiting=PULL)
    old_ready = pod("db-2", "a", ready=True)
    old_starting = pod("db-3", "a")
    old_unschedulable = pod("db-4", "a", unschedulable="0/2 nodes are available")
    pods = [old_stuck, new_stuck, old_ready, old_starting, old_unschedulable]
    chosen = rollout.outdated_and_stuck(statefulset("b"), pods)
    assert [p["metadata"]["name"] for p in chosen] == ["db-0", "db-4"]
    # The controller has not read the fixed template yet: nothing to compare against.
    assert rollout.outdated_and_stuck(statefulset("b", generation=3, observed=2), pods) == []


def test_rollout_a_fixed_mariadb_image_replaces_the_broken_pod_and_says_so():
    """The issue's case: MariaDB set to an image that cannot be pulled, then corrected. The
    StatefulSet controller rolled to revision b (the fix) but keeps the broken Pod of
    revision a; the reconcile deletes it, says which and why, and AccountingReady names it."""
    kube = FakeKube()
    kube.put(op.slurm_cluster())
    op.reconcile(kube, "SlurmCluster", "slurm")
    op.workloads_ready(kube)
    live = kube.read("StatefulSet", "slurm-mariadb", op.NS)
    live["metadata"]["generation"] = 2
    live["status"] = {"observedGeneration": 2, "updateRevision": "b", "readyReplicas": 0}
    kube.put(live)
    kube.put(pod("slurm-mariadb-0", "a", waiting=PULL))
    cluster = op.reconcile(kube, "SlurmCluster", "slurm")
    conds = {c["type"]: c for c in cluster["status"]["conditions"]}
    accounting = conds["AccountingReady"]
    assert accounting["status"] == "False"
    assert "StatefulSet slurm-mariadb: 0/1 ready" in accounting["message"]
    assert (
        'slurm-mariadb-0: mariadb: ImagePullBackOff: Back-off pulling image "mariadb:bad"'
        in (accounting["message"])
    )
    assert "replaced with the current template: slurm-mariadb-0" in accounting["message"]
    assert [p["metadata"]["name"] for p in kube.of_kind("Pod")] == []
    events = [e for e in kube.of_kind("Event") if e["reason"] == "StuckPodReplaced"]
    assert (
        len(events) == 1 and "slurm-mariadb-0 (mariadb: ImagePullBackOff" in (events[0]["message"])
    )
    assert conds["Ready"]["message"] == "waiting for Accounting (see their conditions)"
    assert all(c["message"] for c in cluster["status"]["conditions"])


def test_rollout_a_pod_of_the_current_revision_is_reported_not_deleted():
    kube = FakeKube()
    kube.put(op.slurm_cluster())
    op.reconcile(kube, "SlurmCluster", "slurm")
    op.workloads_ready(kube)
    live = kube.read("StatefulSet", "slurm-controller", op.NS)
    live["status"] = {"observedGeneration": 1, "updateRevision": "a", "readyReplicas": 0}
    kube.put(live)
    crash = pod(
        "slurm-controller-0", "a", waiting=("CrashLoopBackOff", "back-off"), last_exit=2,
        component="controller",
    )  # fmt: skip
    kube.put(crash)
    health = asyncio.run(rollout.workload_health(kube, live))  # type: ignore[arg-type]
    assert not health.ready and health.replaced == []
    assert "slurm-controller-0: mariadb: CrashLoopBackOff: exit code 2 (Error)" in health.message
    assert [p["metadata"]["name"] for p in kube.of_kind("Pod")] == ["slurm-controller-0"]


def test_update_blocked_keeps_the_pods_whose_node_the_new_template_would_not_fit():
    """Updates keep capacity: a template whose requests exceed the Nodes' allocatable memory
    deletes no Pod; RollingUpdate says UpdateBlocked, naming each Node and the resource."""
    kube, _ = op._ready_nodeset()
    pods = sorted(p["metadata"]["name"] for p in kube.of_kind("Pod"))
    assert len(pods) == 2
    hashes = {template_hash(p) for p in kube.of_kind("Pod")}

    def grow(spec: dict) -> None:
        spec["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "2", "memory": "40Gi"},
            "limits": {"memory": "40Gi"},
        }

    op.bump(kube, "NodeSet", "cpu", grow)
    nodeset = op.reconcile(kube, "NodeSet", "cpu")
    conds = {c["type"]: c for c in nodeset["status"]["conditions"]}
    blocked = conds["RollingUpdate"]
    assert blocked["reason"] == "UpdateBlocked" and blocked["status"] == "True"
    assert "n1: memory: requests" in blocked["message"]
    assert "n2: memory: requests" in blocked["message"]
    assert "allocatable 34359738368" in blocked["message"]
    assert sorted(p["metadata"]["name"] for p in kube.of_kind("Pod")) == pods
    assert {template_hash(p) for p in kube.of_kind("Pod")} == hashes
    assert removals(kube) == []
    # The same update with requests that fit rolls (the old Pods go).
    op.bump(
        kube,
        "NodeSet",
        "cpu",
        lambda spec: spec["template"]["spec"]["containers"][0].update(
            resources={"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "9Gi"}}
        ),
    )
    nodeset = op.reconcile(kube, "NodeSet", "cpu")
    conds = {c["type"]: c for c in nodeset["status"]["conditions"]}
    assert conds["RollingUpdate"]["reason"] == "TemplateChanged"
    assert removals(kube) == ["cpu-001-001"]  # one at a time (maxUnavailable 1)


def test_update_that_fits_rolls_as_before():
    nodeset = op.nodeset_rolling_update()
    conds = {c["type"]: c for c in nodeset["status"]["conditions"]}
    assert conds["RollingUpdate"]["reason"] == "TemplateChanged"
