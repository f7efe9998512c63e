"""The work queue: coalescing, and per-key exponential backoff for failing keys."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from sunk.models.crds import NodeSetSpec
from sunk.operator.queue import WorkQueue, backoff


def test_backoff_doubles_up_to_the_cap_with_bounded_jitter() -> None:
    assert [backoff(n, 1.0, 300.0, 0.0) for n in (1, 2, 3, 9, 10, 30)] == [
        1.0, 2.0, 4.0, 256.0, 300.0, 300.0,
    ]  # fmt: skip
    spread = {round(backoff(4, 1.0, 300.0, 0.2), 6) for _ in range(200)}
    assert len(spread) > 1
    assert all(6.4 <= d <= 8.0 for d in spread)


def test_a_failing_key_backs_off_and_recovers_while_others_run() -> None:
    calls: dict[str, int] = {"bad": 0, "good": 0}

    async def handler(key):
        calls[key] += 1
        if key == "bad" and calls["bad"] < 4:
            raise RuntimeError("boom")

    async def scenario() -> WorkQueue:
        queue = WorkQueue(handler, workers=2, retry_seconds=0.05, max_retry_seconds=0.2, jitter=0)
        queue.start()
        queue.add("bad")
        queue.add("good")
        await asyncio.sleep(0.02)
        assert calls["good"] == 1 and queue.failures("bad") == 1
        # retries at +0.05, +0.1, +0.2: three more calls, the last one succeeds
        await asyncio.sleep(0.6)
        await queue.stop()
        return queue

    queue = asyncio.run(scenario())
    assert calls["bad"] == 4
    assert queue.failures("bad") == 0


@pytest.mark.parametrize("value", ["abc", "10", "-1%", "101%", -1])
def test_max_unavailable_must_be_pods_or_a_percentage(value) -> None:
    with pytest.raises(ValidationError, match="maxUnavailable"):
        NodeSetSpec.model_validate({"clusterName": "c", "maxUnavailable": value})


@pytest.mark.parametrize("value", [0, 3, "0%", "25%", "100%"])
def test_max_unavailable_accepts_pods_and_percentages(value) -> None:
    assert NodeSetSpec.model_validate({"clusterName": "c", "maxUnavailable": value})
