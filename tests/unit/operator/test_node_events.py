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


def test_the_kopf_event_handlers_run_on_the_event_loop() -> None:
    """kopf runs a plain-function handler in a worker thread, where touching the work queue
    and the `synced` Event (neither thread-safe) may leave a worker asleep: the handlers are
    coroutines, and an event reaches a waiting worker at once."""
    import asyncio

    import kopf

    from sunk.operator.queue import WorkQueue
    from sunk.operator.runtime import memo_for, on_cluster, on_nodeset, on_workload

    assert all(asyncio.iscoroutinefunction(h) for h in (on_cluster, on_nodeset, on_workload))
    seen: list = []

    async def scenario() -> None:
        rt = Runtime(FakeKube())  # type: ignore[arg-type]

        async def handler(key) -> None:
            seen.append(key)

        rt.queue = WorkQueue(handler, workers=1)
        rt.queue.start()
        body = kopf.Body({"metadata": {"name": "c1", "namespace": "slurm"}, "spec": {}})
        await on_cluster(event={"type": "ADDED"}, body=body, memo=memo_for(rt))
        await asyncio.sleep(0.05)
        assert rt.synced.is_set()
        await rt.queue.stop()

    asyncio.run(scenario())
    assert seen == [("SlurmCluster", "slurm", "c1")]
