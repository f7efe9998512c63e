"""Leader election on a coordination.k8s.io Lease: only the holder reconciles.

As client-go does it:
- **Expiry by local observation.** A standby never compares the holder's ``renewTime`` with
  its own clock (clocks differ); it notes when it first saw the current record and takes the
  lease only once that record has stayed unchanged for the lease duration, on its own
  monotonic clock.
- **Renewal bounded inside the lease.** Each renewal must finish within what is left of
  ``RENEW_DEADLINE`` (10 s of the 15 s lease) since the last success, however slow the API
  server; otherwise the leader stops (the process exits), before the lease can lapse and a
  standby take it.
- **Work checks the lease.** ``holding()`` is false once ``RENEW_DEADLINE`` has passed since
  the last renewal (a process that was stopped, say), and reconciles refuse to start then.
- **Released on a clean stop**, so the standby takes over at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from sunk.operator.client import ApiError, Kube, path_for

log = logging.getLogger("sunk.operator.leader")
LEASE_SECONDS = 15
RENEW_SECONDS = 2
RENEW_DEADLINE = 10.0  # seconds since the last renewal after which the leader stops


def identity() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self, kube: Kube, namespace: str, name: str = "sunk-operator", holder: str | None = None
    ):
        self.kube, self.namespace, self.name = kube, namespace, name
        self.holder = holder or identity()
        self.path = path_for("coordination.k8s.io/v1", "leases", namespace, name)
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0  # monotonic: when that record was first seen
        self._renewed_at: float | None = None  # monotonic: our last renewal's start

    def holding(self) -> bool:
        """We hold the lease and renewed it recently enough to act on it."""
        renewed = self._renewed_at
        return renewed is not None and time.monotonic() - renewed < RENEW_DEADLINE

    def _observe(self, spec: dict[str, Any]) -> bool:
        """Note the record; True when it has not changed for its lease duration here."""
        record = (spec.get("holderIdentity") or "", spec.get("renewTime") or "")
        now = time.monotonic()
        if record != self._observed:
            self._observed, self._observed_at = record, now
        duration = spec.get("leaseDurationSeconds") or LEASE_SECONDS
        return not record[0] or now - self._observed_at > duration

    def _spec(self, now: datetime, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": LEASE_SECONDS,
            "acquireTime": _stamp(now),
            "renewTime": _stamp(now),
            "leaseTransitions": transitions,
        }

    async def try_acquire(self) -> bool:
        attempt = time.monotonic()  # a renewal counts from before its request was sent
        now = datetime.now(UTC)
        lease = await self.kube.get(self.path)
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(now, 0),
            }
            try:
                await self.kube.create(body)
            except ApiError as exc:
                if exc.status == 409:
                    return False
                raise
            self._renewed_at = attempt
            return True
        spec = lease.get("spec") or {}
        mine = spec.get("holderIdentity") == self.holder
        expired = self._observe(spec)
        if not (mine or expired):
            return False
        transitions = (spec.get("leaseTransitions") or 0) + (0 if mine else 1)
        new_spec = self._spec(now, transitions)
        if mine and spec.get("acquireTime"):
            new_spec["acquireTime"] = spec["acquireTime"]
        lease["spec"] = new_spec
        try:
            await self.kube.request("PUT", self.path, lease)
        except ApiError as exc:
            if exc.status == 409:  # someone else wrote it first
                return False
            raise
        self._renewed_at = attempt
        return True

    async def release(self) -> None:
        """Give the lease up (a clean stop): the holder is cleared and the lease lasts 1 s, so
        a standby takes it at its next try. Best effort: a failure leaves the lease to expire."""
        try:
            lease = await self.kube.get(self.path)
            spec = (lease or {}).get("spec") or {}
            if lease is None or spec.get("holderIdentity") != self.holder:
                return
            now = _stamp(datetime.now(UTC))
            lease["spec"] = {
                **spec,
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "renewTime": now,
            }
            await self.kube.request("PUT", self.path, lease)
            log.info("leader election: %s released %s/%s", self.holder, self.namespace, self.name)
        except (ApiError, OSError) as exc:
            log.warning("leader election: could not release the lease: %s", exc)

    async def acquire(self) -> None:
        while not await self.try_acquire():
            await asyncio.sleep(2)
        log.info("leader election: %s holds %s/%s", self.holder, self.namespace, self.name)

    async def keep(self) -> None:
        """Renew forever; exit the process when the lease cannot be kept, before it lapses."""
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            left = RENEW_DEADLINE - (time.monotonic() - (self._renewed_at or 0.0))
            try:
                if left > 0 and await asyncio.wait_for(self.try_acquire(), left):
                    continue
                if left > 0:
                    log.error("leader election: lease taken by another replica; exiting")
                else:
                    log.error("leader election: not renewed for %.0f s; exiting", RENEW_DEADLINE)
            except (ApiError, OSError, TimeoutError) as exc:
                log.warning("leader election: renew failed: %s", exc or type(exc).__name__)
                if self.holding():
                    continue
                log.error("leader election: could not renew in time; exiting")
            os._exit(1)
