"""A wake-up (the operator's Pod informer calls ``Syncer.wake`` on every slurmd Pod event) starts
a pass at once, not at the next tick: with a 60 s tick, the pass after a wake-up comes long
before the tick would (the test waits at most 10 s for it)."""

from __future__ import annotations

import asyncio
from typing import Any

from sunk.syncer.loop import Syncer


def test_a_wake_up_starts_a_pass_well_before_a_60_s_tick() -> None:
    kube: Any = None
    syncer = Syncer(kube, "ns", "c", "http://restd", "c-jwt", interval=60)
    passes: list[int] = []

    async def one_pass() -> None:
        passes.append(len(passes))

    syncer.sync_once = one_pass  # type: ignore[method-assign, assignment]

    async def until(count: int) -> None:
        while len(passes) < count:
            await asyncio.sleep(0.01)

    async def run() -> None:
        task = asyncio.get_running_loop().create_task(syncer.run())
        try:
            await asyncio.wait_for(until(1), 10)  # the first pass runs at start
            await asyncio.sleep(0.5)
            assert len(passes) == 1, "a second pass came without a wake-up"
            syncer.wake()
            await asyncio.wait_for(until(2), 10)  # raises TimeoutError if only the tick woke it
            syncer.wake()
            await asyncio.wait_for(until(3), 10)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(run())
    assert passes == [0, 1, 2]
