"""A deleted NodeSet whose Pods are gone still waits while jobs that have not ended name its
partition: its partition line goes with it, and slurmctld ends such jobs (NODE_FAIL, pending
ones included; the slurm tier shows it). The wait is a condition and an Event that name the
jobs, and the finalizer goes once none is left."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from sunk.operator import names
from sunk.operator.nodeset.reconcile import WAIT_RECHECK_SECONDS, reconcile_nodeset
from sunk.syncer.plan import jobs_naming_partition
from sunk.syncer.restd import SlurmApiError
from tests.argocd.operator_status import NS, node, nodeset, slurm_cluster
from tests.fakes.kube import FakeKube


class Link:
    """The cluster's Syncer, as a NodeSet reconcile sees it: the jobs naming a partition."""

    def __init__(self, jobs: list[int] | Exception) -> None:
        self.jobs = jobs
        self.asked: list[str] = []

    def view(self) -> dict[str, Any]:
        return {}

    async def forget(self, node: str) -> None:
        raise AssertionError("no node record to forget")

    async def read_now(self) -> dict[str, Any]:
        return {}

    def unanswered_for(self) -> float:
        return 0.0

    async def partition_jobs(self, partition: str) -> list[int]:
        self.asked.append(partition)
        if isinstance(self.jobs, Exception):
            raise self.jobs
        return self.jobs


def deleted_nodeset() -> FakeKube:
    kube = FakeKube()
    kube.put(slurm_cluster())  # the Syncer is on by default: removals are safe
    kube.put(node("n1", "10.0.1.1"))
    body = nodeset(name="gpu")
    body["metadata"]["finalizers"] = [names.FINALIZER_SAFE_REMOVAL]
    body["metadata"]["deletionTimestamp"] = "2026-12-06T04:00:00Z"
    kube.put(body)  # its Pods are gone already
    return kube


def reconcile(kube: FakeKube, link: Link | None) -> list[float]:
    rechecks: list[float] = []
    body = kube.read("NodeSet", "gpu", NS)
    asyncio.run(
        reconcile_nodeset(kube, body, link_for=lambda _ns, _c: link, recheck=rechecks.append)
    )
    return rechecks


def ready(kube: FakeKube) -> dict[str, Any]:
    conds = kube.read("NodeSet", "gpu", NS)["status"]["conditions"]
    return next(c for c in conds if c["type"] == "Ready")


def events(kube: FakeKube) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in kube.of_kind("Event")]


def test_a_deleted_nodeset_waits_while_jobs_name_its_partition_then_goes():
    kube, link = deleted_nodeset(), Link([3, 4])
    assert reconcile(kube, link) == [WAIT_RECHECK_SECONDS]
    assert link.asked == ["gpu"]
    stored = kube.read("NodeSet", "gpu", NS)
    assert stored["metadata"]["finalizers"] == [names.FINALIZER_SAFE_REMOVAL]
    cond = ready(kube)
    assert (cond["status"], cond["reason"]) == ("False", "PartitionInUse")
    assert cond["message"].startswith("2 job(s) that have not ended name partition gpu (3, 4);")
    assert events(kube) == [("PartitionInUse", cond["message"])]

    reconcile(kube, link)  # still waiting: the same Event is not repeated
    assert len(events(kube)) == 1

    link.jobs = []  # moved or cancelled
    assert reconcile(kube, link) == []
    assert kube.read("NodeSet", "gpu", NS)["metadata"].get("finalizers") in (None, [])


def test_not_knowing_the_jobs_is_not_no_jobs():
    kube = deleted_nodeset()
    reconcile(kube, Link(SlurmApiError("GET /jobs: HTTP 502: slurmctld down")))
    assert kube.read("NodeSet", "gpu", NS)["metadata"]["finalizers"]
    assert ready(kube)["message"] == (
        "cannot read which jobs name partition gpu (GET /jobs: HTTP 502: slurmctld down); waiting"
    )
    reconcile(kube, None)  # no Syncer for the cluster (yet)
    assert kube.read("NodeSet", "gpu", NS)["metadata"]["finalizers"]
    assert "waiting for the cluster's Syncer" in ready(kube)["message"]


def test_removal_grace_period_bounds_the_wait():
    """removalGracePeriodSeconds bounds this wait as it bounds a Pod's: past it the NodeSet
    goes under its jobs, with an Event saying so; before it, the recheck comes no later."""
    kube = deleted_nodeset()
    body = kube.read("NodeSet", "gpu", NS)
    body["metadata"]["deletionTimestamp"] = "2020-01-01T00:00:00Z"  # long ago
    kube.put(body)
    kube.put(slurm_cluster({"syncer": {"removalGracePeriodSeconds": 60}}))
    reconcile(kube, Link([3]))
    assert kube.read("NodeSet", "gpu", NS)["metadata"].get("finalizers") in (None, [])
    (event,) = [e for e in kube.of_kind("Event") if e["reason"] == "PartitionGraceExpired"]
    assert event["message"].startswith("1 job(s) that have not ended name partition gpu (3);")
    assert event["message"].endswith(
        "; removalGracePeriodSeconds (60 s) ran out: the NodeSet goes, and its partition with it"
    )

    kube = deleted_nodeset()
    body = kube.read("NodeSet", "gpu", NS)
    body["metadata"]["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kube.put(body)
    kube.put(slurm_cluster({"syncer": {"removalGracePeriodSeconds": 20}}))
    (again,) = reconcile(kube, Link([3]))
    assert 15 <= again <= 21, again  # before the 30 s recheck: when the grace runs out
    assert kube.read("NodeSet", "gpu", NS)["metadata"]["finalizers"]


def test_without_a_syncer_the_nodeset_goes_with_its_pods():
    """A cluster with the Syncer off has no Slurm state to wait on (as the README says)."""
    kube = deleted_nodeset()
    kube.put(slurm_cluster({"syncer": {"enabled": False}}))
    link = Link([3])
    reconcile(kube, link)
    assert link.asked == []
    assert kube.read("NodeSet", "gpu", NS)["metadata"].get("finalizers") in (None, [])


def test_jobs_naming_a_partition():
    """slurmrestd's /jobs as 24.11 lists them: a multi-partition pending job names each; an
    ended job does not count, unless it is still completing on its nodes."""
    jobs = [
        {"job_id": 3, "partition": "gpu", "job_state": ["PENDING"]},
        {"job_id": 4, "partition": "gpu,cpu", "job_state": ["PENDING"]},
        {"job_id": 5, "partition": "cpu", "job_state": ["RUNNING"]},
        {"job_id": 6, "partition": "gpu", "job_state": ["COMPLETED"]},
        {"job_id": 7, "partition": "gpu", "job_state": ["CANCELLED", "COMPLETING"]},
        {"job_id": 8, "partition": "gpu2", "job_state": ["RUNNING"]},
        {"job_id": 9, "partition": "gpu", "job_state": "SUSPENDED"},
    ]
    assert jobs_naming_partition(jobs, "gpu") == [3, 4, 7, 9]
    assert jobs_naming_partition(jobs, "cpu") == [4, 5]
    assert jobs_naming_partition(jobs, "none") == []
