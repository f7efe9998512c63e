"""A coalescing work queue: many triggers for one object make one reconcile.

Level-triggered: a reconcile reads the current state, so dropping duplicate triggers is safe.
Each key is processed by one worker at a time; a trigger arriving during processing makes
the key run once more afterwards. A failing key is retried with per-key exponential backoff
(capped, with jitter), so a broken object neither spins nor delays the others.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Hashable

log = logging.getLogger("sunk.operator.queue")


def backoff(failures: int, base: float, cap: float, jitter: float) -> float:
    """Seconds before retry number ``failures`` (1, 2, …): doubling from ``base`` up to
    ``cap``, spread by up to ``jitter`` (a fraction) so failing keys do not retry in step."""
    delay = min(cap, base * 2 ** (failures - 1))
    return delay * (1 - jitter * random.random())


class RetryLater(Exception):
    """Raised by a handler that recorded its own failure (a ``Degraded`` condition, say):
    the key is retried with the same backoff as a raised error, logged in one line."""


class WorkQueue:
    def __init__(
        self,
        handler: Callable[[Hashable], Awaitable[None]],
        workers: int = 4,
        retry_seconds: float = 1.0,
        max_retry_seconds: float = 300.0,
        jitter: float = 0.2,
    ):
        self._handler = handler
        self._queue: asyncio.Queue[Hashable] = asyncio.Queue()
        self._queued: set[Hashable] = set()
        self._running: set[Hashable] = set()
        self._again: set[Hashable] = set()
        self._failures: dict[Hashable, int] = {}
        self._workers = workers
        self._retry = retry_seconds
        self._max_retry = max_retry_seconds
        self._jitter = jitter
        self._tasks: list[asyncio.Task] = []

    def failures(self, key: Hashable) -> int:
        """Consecutive failed reconciles of ``key`` (0 after a success)."""
        return self._failures.get(key, 0)

    def depth(self) -> int:
        """Keys waiting to be reconciled (not those being reconciled now)."""
        return len(self._queued)

    def add(self, key: Hashable) -> None:
        if key in self._running:
            self._again.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: Hashable, seconds: float) -> None:
        """Reconcile ``key`` again in ``seconds`` (a deadline it waits for)."""
        asyncio.get_running_loop().call_later(max(0.0, seconds), self.add, key)

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
                self._failures.pop(key, None)
            except RetryLater as exc:
                delay = self._fail(key)
                log.warning("reconcile of %s incomplete (%s); retrying in %.1fs", key, exc, delay)
            except Exception:
                delay = self._fail(key)
                log.exception("reconcile of %s failed (%d in a row); retrying in %.1fs",
                              key, self._failures[key], delay)  # fmt: skip
            finally:
                self._running.discard(key)
                if key in self._again:
                    self._again.discard(key)
                    self.add(key)

    def _fail(self, key: Hashable) -> float:
        """Count a failure of ``key`` and schedule its retry; returns the delay."""
        failures = self._failures[key] = self._failures.get(key, 0) + 1
        delay = backoff(failures, self._retry, self._max_retry, self._jitter)
        asyncio.get_running_loop().call_later(delay, self.add, key)
        return delay
