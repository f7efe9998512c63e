"""A SlurmCluster pass whose writes the API server refused is retried with backoff.

``reconcile_cluster`` records a refused apply as a ``Degraded`` condition and returns; the
runtime then asks the queue to retry the key, as it would after a raised error. Without
that, a pass during the API server's warm-up (429s) left the control plane unapplied until
the 60-s resync."""

from __future__ import annotations

import asyncio

import pytest

from sunk.operator.queue import RetryLater, WorkQueue
from sunk.operator.runtime import Runtime
from tests.argocd.operator_status import NS, slurm_cluster
from tests.fakes.kube import FakeKube

KEY = ("SlurmCluster", NS, "slurm")
# No Syncer: it would try to reach slurmrestd, which a unit test has not.
CLUSTER = slurm_cluster({"syncer": {"enabled": False}})


def _runtime(kube: FakeKube) -> Runtime:
    rt = Runtime(kube)  # type: ignore[arg-type]
    rt.synced.set()
    return rt


def test_a_refused_apply_raises_retry_later_and_a_clean_pass_does_not() -> None:
    kube = FakeKube()
    kube.put(CLUSTER)
    kube.refuse.add("StatefulSet")
    rt = _runtime(kube)
    with pytest.raises(RetryLater, match="StatefulSetApplyFailed"):
        asyncio.run(rt.reconcile(KEY))
    status = kube.read("SlurmCluster", "slurm", NS)["status"]
    assert any(c["type"] == "Degraded" and c["status"] == "True" for c in status["conditions"])

    kube.refuse.clear()
    asyncio.run(rt.reconcile(KEY))
    assert kube.of_kind("StatefulSet"), "the retried pass applied the controller"
    status = kube.read("SlurmCluster", "slurm", NS)["status"]
    assert not any(c["type"] == "Degraded" for c in status["conditions"])


def test_the_queue_retries_a_degraded_cluster_until_its_writes_are_accepted() -> None:
    kube = FakeKube()
    kube.put(CLUSTER)
    kube.refuse.add("StatefulSet")
    rt = _runtime(kube)

    async def scenario() -> int:
        queue = WorkQueue(rt.reconcile, workers=1, retry_seconds=0.05, jitter=0)
        queue.start()
        queue.add(KEY)
        await asyncio.sleep(0.02)
        failures = queue.failures(KEY)
        kube.refuse.clear()  # the API server has warmed up; no new event arrives
        for _ in range(100):
            if kube.of_kind("StatefulSet") and queue.failures(KEY) == 0:
                break
            await asyncio.sleep(0.02)
        await queue.stop()
        return failures

    assert asyncio.run(scenario()) == 1
    assert kube.of_kind("StatefulSet")


def test_retry_later_is_logged_in_one_line_without_a_traceback(caplog) -> None:
    async def handler(key):
        raise RetryLater("StatefulSetApplyFailed: 429")

    async def scenario() -> None:
        queue = WorkQueue(handler, workers=1, retry_seconds=10, jitter=0)
        queue.start()
        queue.add("k")
        await asyncio.sleep(0.05)
        assert queue.failures("k") == 1
        await queue.stop()

    asyncio.run(scenario())
    records = [r for r in caplog.records if r.name == "sunk.operator.queue"]
    assert [r.levelname for r in records] == ["WARNING"]
    assert "StatefulSetApplyFailed: 429" in records[0].getMessage()
    assert records[0].exc_info is None
