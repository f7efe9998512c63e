"""One spec change that moves every Slurm daemon to a newer release is rolled out in Slurm's
order: slurmdbd first; slurmctld once slurmdbd runs it, rolled out and ready; slurmrestd and
login once slurmctld does; a NodeSet's slurmds once ``status.slurmctldRelease`` says so.
Each waiting component keeps the images it runs and says why (SlurmUpgradeWaiting)."""

from __future__ import annotations

import asyncio
from typing import Any

from sunk.models.crds import NodeSetSpec, SlurmClusterSpec
from sunk.operator.cluster import upgrade
from sunk.operator.nodeset.reconcile import version_skew
from tests.argocd.operator_status import NS, bump, node, nodeset, reconcile, slurm_cluster
from tests.fakes.kube import FakeKube

OLD, NEW = "0.1.0-slurm24.11", "0.2.0-slurm26.05"
WORKLOADS = {  # component → (kind, name, daemon container)
    "accounting": ("Deployment", "slurm-accounting", "slurmdbd"),
    "controller": ("StatefulSet", "slurm-controller", "slurmctld"),
    "rest": ("Deployment", "slurm-rest", "slurmrestd"),
    "login": ("StatefulSet", "slurm-login", "sshd"),
}


def images(tag: str) -> dict[str, Any]:
    image = {"repository": "opensunk/controller", "tag": tag}
    login = {"repository": "opensunk/login", "tag": tag}
    return {
        "controller": {"image": image},
        "accounting": {"image": image},
        "rest": {"image": image},
        "login": {"enabled": True, "image": login},
    }


def workload(kube: FakeKube, component: str) -> dict[str, Any]:
    kind, name, _ = WORKLOADS[component]
    found = [o for o in kube.of_kind(kind) if o["metadata"]["name"] == name]
    assert found, (kind, name, [o["metadata"]["name"] for o in kube.of_kind(kind)])
    return found[0]


def runs(kube: FakeKube, component: str) -> str:
    """The tag of the daemon container the stored workload runs."""
    _, _, daemon = WORKLOADS[component]
    containers = workload(kube, component)["spec"]["template"]["spec"]["containers"]
    return next(c["image"] for c in containers if c["name"] == daemon).rsplit(":", 1)[1]


def set_ready(kube: FakeKube, component: str, ready: bool) -> None:
    obj = workload(kube, component)
    replicas = obj["spec"].get("replicas", 1)
    obj["status"] = {"readyReplicas": replicas if ready else 0, "updatedReplicas": replicas}
    kube.put(obj)


def all_ready(kube: FakeKube) -> None:
    for component in WORKLOADS:
        set_ready(kube, component, True)
    for obj in kube.of_kind("StatefulSet"):  # MariaDB too
        obj.setdefault("status", {"readyReplicas": 1})
        kube.put(obj)


def condition(kube: FakeKube, kind: str, name: str, type_: str) -> dict[str, Any]:
    conds = kube.read(kind, name, NS)["status"]["conditions"]
    return next(c for c in conds if c["type"] == type_)


def cluster_on(tag: str) -> FakeKube:
    kube = FakeKube()
    kube.put(slurm_cluster(images(tag)))
    kube.put(node("n1", "10.0.1.1"))
    reconcile(kube, "SlurmCluster", "slurm")
    all_ready(kube)
    reconcile(kube, "SlurmCluster", "slurm")
    return kube


def test_slurm_upgrade_rolls_the_control_plane_in_slurms_order():
    kube = cluster_on(OLD)
    assert kube.read("SlurmCluster", "slurm", NS)["status"]["slurmctldRelease"] == "24.11"

    bump(kube, "SlurmCluster", "slurm", lambda spec: spec.update(images(NEW)))
    reconcile(kube, "SlurmCluster", "slurm")
    assert [runs(kube, c) for c in WORKLOADS] == [NEW, OLD, OLD, OLD]
    ctld = condition(kube, "SlurmCluster", "slurm", "ControllerReady")
    assert (ctld["status"], ctld["reason"]) == ("False", "SlurmUpgradeWaiting")
    assert ctld["message"].startswith("Slurm 26.05 waits for Accounting to run it, rolled out")
    for component in ("Rest", "Login"):  # they wait on the controller, which waits
        cond = condition(kube, "SlurmCluster", "slurm", f"{component}Ready")
        assert "waits for Controller to run it" in cond["message"], cond
    events = [e["message"] for e in kube.of_kind("Event") if e["reason"] == "SlurmUpgradeWaiting"]
    assert events and events[0].startswith("controller: Slurm 26.05 waits for Accounting")

    set_ready(kube, "accounting", False)  # slurmdbd 26.05 starting: converting the database
    reconcile(kube, "SlurmCluster", "slurm")
    assert [runs(kube, c) for c in WORKLOADS] == [NEW, OLD, OLD, OLD]
    acct = condition(kube, "SlurmCluster", "slurm", "AccountingReady")
    assert "first start converts the database" in acct["message"], acct

    set_ready(kube, "accounting", True)
    reconcile(kube, "SlurmCluster", "slurm")
    assert [runs(kube, c) for c in WORKLOADS] == [NEW, NEW, OLD, OLD]
    status = kube.read("SlurmCluster", "slurm", NS)["status"]
    assert status["slurmctldRelease"] == "24.11"  # kept while the controller rolls

    set_ready(kube, "controller", False)
    reconcile(kube, "SlurmCluster", "slurm")
    assert [runs(kube, c) for c in WORKLOADS] == [NEW, NEW, OLD, OLD]
    assert kube.read("SlurmCluster", "slurm", NS)["status"]["slurmctldRelease"] == "24.11"

    set_ready(kube, "controller", True)
    reconcile(kube, "SlurmCluster", "slurm")
    assert [runs(kube, c) for c in WORKLOADS] == [NEW, NEW, NEW, NEW]
    assert kube.read("SlurmCluster", "slurm", NS)["status"]["slurmctldRelease"] == "26.05"
    held = [c for c in kube.read("SlurmCluster", "slurm", NS)["status"]["conditions"]
            if c["reason"] == "SlurmUpgradeWaiting"]  # fmt: skip
    assert held == []


def test_slurm_upgrade_holds_a_nodesets_slurmds_until_slurmctld_runs_the_release():
    cluster = SlurmClusterSpec.model_validate({"clusterName": "slurm", **images(NEW)})
    body = nodeset(image=f"opensunk/slurmd:{NEW}")
    spec = NodeSetSpec.model_validate(body["spec"])
    reason, why = version_skew(cluster, spec, running="24.11") or (None, "")
    assert reason is not None and reason.name == "SlurmUpgradeWaiting", why
    assert why.startswith("the slurmd image runs Slurm 26.05; slurmctld runs 24.11 and is being")
    assert version_skew(cluster, spec, running="26.05") is None
    assert version_skew(cluster, spec) is None  # no status yet: the spec's release
    old_ctld = SlurmClusterSpec.model_validate({"clusterName": "slurm", **images(OLD)})
    reason, _ = version_skew(old_ctld, spec, running="24.11") or (None, "")
    assert reason is not None and reason.name == "SlurmVersionSkew"  # nothing on its way

    kube = cluster_on(OLD)
    bump(kube, "SlurmCluster", "slurm", lambda s: s.update(images(NEW)))
    kube.put(nodeset(image=f"opensunk/slurmd:{NEW}"))
    reconcile(kube, "NodeSet", "cpu")
    ready = condition(kube, "NodeSet", "cpu", "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "SlurmUpgradeWaiting")
    assert kube.of_kind("Pod") == []  # nothing created on a slurmctld that would refuse it


def test_slurm_upgrade_order_leaves_fresh_installs_rollbacks_and_untagged_images_alone():
    # a fresh install: nothing runs yet, everything is created at once
    kube = FakeKube()
    kube.put(slurm_cluster(images(NEW)))
    reconcile(kube, "SlurmCluster", "slurm")
    assert [runs(kube, c) for c in WORKLOADS] == [NEW] * 4
    # a rollback is not ordered
    all_ready(kube)
    reconcile(kube, "SlurmCluster", "slurm")
    bump(kube, "SlurmCluster", "slurm", lambda spec: spec.update(images(OLD)))
    reconcile(kube, "SlurmCluster", "slurm")
    assert [runs(kube, c) for c in WORKLOADS] == [OLD] * 4
    # a tag that names no release is never held
    kube = cluster_on(OLD)
    bump(kube, "SlurmCluster", "slurm", lambda spec: spec.update(images("site-build-7")))
    reconcile(kube, "SlurmCluster", "slurm")
    assert [runs(kube, c) for c in WORKLOADS] == ["site-build-7"] * 4


def test_settled_reads_the_workload_status():
    live = {"metadata": {"generation": 2}, "spec": {"replicas": 2}}
    ok = {"observedGeneration": 2, "readyReplicas": 2, "updatedReplicas": 2,
          "currentRevision": "a", "updateRevision": "a"}  # fmt: skip
    assert upgrade.settled({**live, "status": ok})
    for change in ({"observedGeneration": 1}, {"readyReplicas": 1}, {"updatedReplicas": 1},
                   {"updateRevision": "b"}, {"replicas": 3}):  # fmt: skip
        assert not upgrade.settled({**live, "status": {**ok, **change}}), change


def test_slurm_upgrade_order_holds_nothing_on_a_settled_cluster():
    """Every component reports the release it runs; none is held."""
    kube = cluster_on(OLD)
    objects = [workload(kube, c) for c in WORKLOADS]
    staging = asyncio.run(upgrade.stage(kube, objects))
    assert staging.held == {} and staging.running == dict.fromkeys(WORKLOADS, "24.11")
