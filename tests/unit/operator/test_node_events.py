"""What a Node event wakes: a change reconciles read (a topology label, a taint) wakes every
known reconcile; a claim label written by a scale-up wakes none, so 5,000 labels do not each
start a reconcile of every NodeSet; a claim label that goes wakes the NodeSet that had it."""

from __future__ import annotations

import copy

from sunk.operator import names
from sunk.operator.runtime import Runtime, on_node
from tests.fakes.kube import FakeKube


class Recorder:
    def __init__(self) -> None:
        self.keys: list[tuple[str, str, str]] = []

    def add(self, key) -> None:
        self.keys.append(key)


def runtime() -> tuple[Runtime, Recorder]:
    rt = Runtime(FakeKube())  # type: ignore[arg-type]
    rt.queue = Recorder()  # type: ignore[assignment]
    rt.known = {("NodeSet", "slurm", "cpu"): "c1", ("SlurmCluster", "slurm", "c1"): "c1"}
    return rt, rt.queue  # type: ignore[return-value]


def node(labels: dict[str, str]) -> dict:
    return {"metadata": {"name": "n1", "labels": labels}, "spec": {}, "status": {}}


CLAIM = {names.LABEL_NODESET: "cpu", names.LABEL_NAMESPACE: "slurm", names.LABEL_CLUSTER: "c1"}


def test_claim_labels_wake_no_reconcile_and_other_changes_wake_every_one() -> None:
    rt, queue = runtime()
    on_node(rt, "ADDED", node({"pool": "a"}))
    assert sorted(queue.keys) == sorted(rt.known)
    queue.keys.clear()
    on_node(rt, "MODIFIED", node({"pool": "a", **CLAIM}))  # our label lands
    assert queue.keys == []
    on_node(rt, "MODIFIED", node({"pool": "b", **CLAIM}))  # a label topology reads
    assert sorted(queue.keys) == sorted(rt.known)


def test_a_claim_label_that_goes_wakes_its_nodeset() -> None:
    rt, queue = runtime()
    on_node(rt, "ADDED", node({"pool": "a", **CLAIM}))
    queue.keys.clear()
    on_node(rt, "MODIFIED", node({"pool": "a"}))  # removed by hand
    assert queue.keys == [("NodeSet", "slurm", "cpu")]
    queue.keys.clear()
    theirs = copy.deepcopy(CLAIM) | {names.LABEL_NODESET: "gpu"}
    on_node(rt, "MODIFIED", node({"pool": "a", **CLAIM}))
    on_node(rt, "MODIFIED", node({"pool": "a", **theirs}))  # overwritten
    assert queue.keys == [("NodeSet", "slurm", "cpu")]
