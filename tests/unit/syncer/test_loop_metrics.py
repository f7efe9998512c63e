"""The Syncer reads the Slurm metrics (jobs, partitions, diag: three requests) at most once per
``metrics_interval``, whatever its tick; the default is ``METRICS_SECONDS``."""

from __future__ import annotations

import asyncio
from typing import Any

from sunk.syncer.loop import METRICS_SECONDS, Syncer
from sunk.syncer.slurm_metrics import SlurmMetrics


class CountingRestd:
    """The three metrics reads of Slurmrestd, counted, answering empty."""

    def __init__(self) -> None:
        self.reads = 0

    async def jobs(self) -> list[dict[str, Any]]:
        self.reads += 1
        return []

    async def partitions(self) -> list[dict[str, Any]]:
        self.reads += 1
        return []

    async def diag(self) -> dict[str, Any]:
        self.reads += 1
        return {}


def syncer(**kwargs: Any) -> Syncer:
    """A Syncer that never reaches Kubernetes (``_observe`` reads Slurm only)."""
    kube: Any = None
    return Syncer(kube, "ns", "c", "http://restd", "c-jwt", metrics=SlurmMetrics(), **kwargs)


def reads_over_passes(passes: int, **kwargs: Any) -> int:
    under_test, restd = syncer(**kwargs), CountingRestd()

    async def run() -> None:
        for _ in range(passes):
            await under_test._observe(restd, [])  # type: ignore[arg-type]

    asyncio.run(run())
    return restd.reads


def test_the_default_period_reads_once_over_back_to_back_passes():
    assert syncer().metrics_interval == METRICS_SECONDS
    assert reads_over_passes(3) == 3


def test_a_zero_period_reads_at_every_pass():
    assert reads_over_passes(3, metrics_interval=0.0) == 9
