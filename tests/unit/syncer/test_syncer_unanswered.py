"""How long slurmrestd has been silent, as NodeSet removals ask it: never heard is forever; a
read of the nodes that answers (the Syncer's pass or a read for a removal) resets it."""

from __future__ import annotations

import asyncio
import math
from typing import Any

from sunk.syncer.loop import Syncer
from sunk.syncer.restd import SlurmApiError


class Restd:
    def __init__(self) -> None:
        self.answer: list[dict[str, Any]] | Exception = SlurmApiError("connection refused")

    async def nodes(self) -> list[dict[str, Any]]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_silence_is_counted_from_the_last_answer() -> None:
    kube: Any = None
    syncer = Syncer(kube, "ns", "c", "http://restd", "c-jwt")
    restd = Restd()

    async def client() -> Restd:
        return restd

    syncer._client = client  # type: ignore[method-assign]
    assert syncer.unanswered_for() == math.inf
    assert asyncio.run(syncer.read_now()) is None
    assert syncer.unanswered_for() == math.inf, "a refused read is no answer"
    restd.answer = [{"name": "cpu-001-001", "state": ["IDLE"], "reason": ""}]
    nodes = asyncio.run(syncer.read_now())
    assert nodes is not None and list(nodes) == ["cpu-001-001"]
    assert 0 <= syncer.unanswered_for() < 5
