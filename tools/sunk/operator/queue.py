"""A coalescing work queue: many triggers for one object make one reconcile.

Level-triggered: a reconcile reads the current state, so dropping duplicate triggers is safe.
Each key is processed by one worker at a time; a trigger arriving during processing makes
the key run once more afterwards.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable

log = logging.getLogger("sunk.operator.queue")


class WorkQueue:
    def __init__(
        self,
        handler: Callable[[Hashable], Awaitable[None]],
        workers: int = 4,
        retry_seconds: float = 5.0,
    ):
        self._handler = handler
        self._queue: asyncio.Queue[Hashable] = asyncio.Queue()
        self._queued: set[Hashable] = set()
        self._running: set[Hashable] = set()
        self._again: set[Hashable] = set()
        self._workers = workers
        self._retry = retry_seconds
        self._tasks: list[asyncio.Task] = []

    def add(self, key: Hashable) -> None:
        if key in self._running:
            self._again.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._work()) for _ in range(self._workers)]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def join(self) -> None:
        """Wait until nothing is queued or running (tests, benchmarks)."""
        while self._queued or self._running:
            await asyncio.sleep(0.05)

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            self._running.add(key)
            try:
                await self._handler(key)
            except Exception:
                log.exception("reconcile of %s failed; retrying in %ss", key, self._retry)
                asyncio.get_running_loop().call_later(self._retry, self.add, key)
            finally:
                self._running.discard(key)
                if key in self._again:
                    self._again.discard(key)
                    self.add(key)
