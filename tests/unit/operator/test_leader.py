"""Leader election as client-go does it (sunk.operator.leader), on an in-memory Lease: expiry
judged by local observation, renewal bounded inside the lease, a stale leader stops."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from sunk.operator import leader
from sunk.operator.leader import LeaderElector


class FakeLeases:
    """The three calls the elector makes, on one Lease; ``delay`` slows every call."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.delay = 0.0

    async def get(self, path: str) -> dict[str, Any] | None:
        await asyncio.sleep(self.delay)
        return copy.deepcopy(self.lease)

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(self.delay)
        self.lease = copy.deepcopy(obj)
        return obj

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        await asyncio.sleep(self.delay)
        assert method == "PUT"
        self.lease = copy.deepcopy(body)
        return body


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(leader.time, "monotonic", fake)
    return fake


def elector(leases: FakeLeases, holder: str) -> LeaderElector:
    return LeaderElector(leases, "sunk", holder=holder)  # type: ignore[arg-type]


def test_a_standby_waits_a_whole_lease_of_its_own_time_even_if_renew_time_looks_old(clock):
    leases = FakeLeases()
    a, b = elector(leases, "a"), elector(leases, "b")
    assert asyncio.run(a.try_acquire())
    # a's clock is far behind: its renewTime reads as an hour old on b's wall clock
    leases.lease["spec"]["renewTime"] = "2000-01-01T00:00:00.000000Z"
    assert not asyncio.run(b.try_acquire())  # first sight of this record
    clock.now += leader.LEASE_SECONDS - 1
    assert not asyncio.run(b.try_acquire())
    clock.now += 2  # unchanged for longer than the lease, on b's own clock
    assert asyncio.run(b.try_acquire())
    assert leases.lease["spec"]["holderIdentity"] == "b"
    assert leases.lease["spec"]["leaseTransitions"] == 1


def test_a_renewal_seen_restarts_the_standbys_count(clock):
    leases = FakeLeases()
    a, b = elector(leases, "a"), elector(leases, "b")
    asyncio.run(a.try_acquire())
    assert not asyncio.run(b.try_acquire())
    clock.now += 10
    leases.lease["spec"]["renewTime"] = "2000-01-01T00:00:10.000000Z"  # a renewed
    assert not asyncio.run(b.try_acquire())
    clock.now += 10  # 20 s since first sight, 10 s since the renewal
    assert not asyncio.run(b.try_acquire())


def test_a_released_lease_is_taken_at_once(clock):
    leases = FakeLeases()
    a, b = elector(leases, "a"), elector(leases, "b")
    asyncio.run(a.try_acquire())
    asyncio.run(a.release())
    assert asyncio.run(b.try_acquire())


def test_holding_lapses_after_the_renew_deadline(clock):
    leases = FakeLeases()
    a = elector(leases, "a")
    assert not a.holding()
    asyncio.run(a.try_acquire())
    assert a.holding()
    clock.now += leader.RENEW_DEADLINE - 0.5
    assert a.holding()
    clock.now += 1
    assert not a.holding()  # a process stopped this long must not act


def test_a_renewal_that_hangs_stops_the_leader_before_the_lease_lapses(monkeypatch):
    leases = FakeLeases()
    a = elector(leases, "a")
    asyncio.run(a.try_acquire())
    leases.delay = 3600  # the API server stops answering
    exits: list[float] = []

    class Exited(Exception):
        pass

    def fake_exit(code: int) -> None:
        exits.append(leader.time.monotonic())
        raise Exited(code)

    monkeypatch.setattr(leader.os, "_exit", fake_exit)
    monkeypatch.setattr(leader, "RENEW_SECONDS", 0.05)
    monkeypatch.setattr(leader, "RENEW_DEADLINE", 0.5)
    started = leader.time.monotonic()
    a._renewed_at = started
    with pytest.raises(Exited):
        asyncio.run(asyncio.wait_for(a.keep(), 5))
    assert exits and exits[0] - started < 0.5 + 0.2  # within the deadline, not the 60 s timeout
