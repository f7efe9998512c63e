"""A rolling update chooses which slurmd Pod goes first on Slurm state read at that moment.
When slurmrestd does not answer (it is replaced in the same Slurm upgrade that changes the
slurmd image), no Pod is chosen: a blind choice took the busy node by name order, and its
mark held the rollout's only unavailable slot until the job ended (the e2e Slurm upgrade
waited on it). The NodeSet looks again soon, and then takes the idle node."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from sunk.operator import names
from sunk.operator.nodeset.reconcile import (
    BLIND_HOLD_SECONDS,
    BLIND_RECHECK_SECONDS,
    reconcile_nodeset,
)
from sunk.syncer.plan import SlurmNode
from tests.argocd import operator_status as op
from tests.fakes.kube import FakeKube

BUSY, IDLE = "cpu-001-001", "cpu-001-002"  # by name, the busy node would go first


class Link:
    """The Syncer as a NodeSet reconcile sees it: a view gone stale, a read now that answers
    ``now`` (None: slurmrestd does not answer), slurmrestd silent for ``silent`` seconds."""

    def __init__(self, now: Mapping[str, SlurmNode] | None, silent: float = 20.0) -> None:
        self.now = now
        self.reads = 0
        self.silent = silent

    def unanswered_for(self) -> float:
        return self.silent

    def view(self) -> Mapping[str, SlurmNode] | None:
        return None  # older than the Syncer trusts: its passes failed meanwhile

    async def read_now(self) -> Mapping[str, SlurmNode] | None:
        self.reads += 1
        return self.now

    async def forget(self, node: str) -> None:
        raise AssertionError("no Pod is created here")

    async def partition_jobs(self, partition: str) -> list[int]:
        raise AssertionError("the NodeSet is not deleted")


def _updated() -> FakeKube:
    """Two ready slurmd Pods, then a new slurmd image: both are outdated, one may go at a time
    (maxUnavailable 1)."""
    kube = FakeKube()
    kube.put(op.slurm_cluster())  # the Syncer is on: removals wait on Slurm
    for node in op.TWO_NODES:
        kube.put(node)
    kube.put(op.nodeset())
    op.reconcile(kube, "NodeSet", "cpu")
    op.pods_ready(kube)
    op.reconcile(kube, "NodeSet", "cpu")
    op.bump(
        kube,
        "NodeSet",
        "cpu",
        lambda spec: spec["template"]["spec"]["containers"][0].update(image="slurmd:2"),
    )
    return kube


def _reconcile(kube: FakeKube, link: Link) -> list[float]:
    rechecks: list[float] = []
    body = kube.read("NodeSet", "cpu", op.NS)
    asyncio.run(
        reconcile_nodeset(kube, body, link_for=lambda _ns, _c: link, recheck=rechecks.append)
    )
    return rechecks


def _marked(kube: FakeKube) -> list[str]:
    return sorted(
        p["metadata"]["name"]
        for p in kube.of_kind("Pod")
        if names.ANN_REMOVAL in (p["metadata"].get("annotations") or {})
    )


def test_no_pod_is_chosen_while_slurm_does_not_answer_then_the_idle_one_is():
    kube = _updated()
    assert sorted(p["metadata"]["name"] for p in kube.of_kind("Pod")) == [BUSY, IDLE]

    silent = Link(None)
    rechecks = _reconcile(kube, silent)
    assert silent.reads == 1, "the reconcile asked slurmrestd before choosing"
    assert _marked(kube) == [], "a Pod was chosen without Slurm state"
    assert BLIND_RECHECK_SECONDS in rechecks, rechecks

    answering = Link(
        {
            BUSY: SlurmNode(BUSY, frozenset({"ALLOCATED"}), ""),
            IDLE: SlurmNode(IDLE, frozenset({"IDLE"}), ""),
        }
    )
    _reconcile(kube, answering)
    assert _marked(kube) == [IDLE], "the idle node goes first; the busy one keeps its job"
    # the mark, once made, holds without Slurm state: the chosen Pod stays chosen
    _reconcile(kube, Link(None))
    assert _marked(kube) == [IDLE]


def test_a_long_outage_chooses_without_slurm_state_so_the_grace_period_still_bounds_it():
    """slurmrestd silent past BLIND_HOLD_SECONDS (or never heard): a Pod is marked as before,
    so removalGracePeriodSeconds can end the wait (the cluster tier shows it on kwok)."""
    kube = _updated()
    rechecks = _reconcile(kube, Link(None, silent=BLIND_HOLD_SECONDS + 1))
    assert len(_marked(kube)) == 1, _marked(kube)
    assert BLIND_RECHECK_SECONDS not in rechecks, rechecks


def test_a_choice_that_needs_no_slurm_state_is_unchanged() -> None:
    """With Slurm answering, the fresh read decides as before: both idle, one goes (by name,
    the newest first), and the rollout keeps to maxUnavailable."""
    kube = _updated()
    idle = {n: SlurmNode(n, frozenset({"IDLE"}), "") for n in (BUSY, IDLE)}
    _reconcile(kube, Link(idle))
    assert len(_marked(kube)) == 1, _marked(kube)
