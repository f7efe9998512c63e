"""Leader election on a coordination.k8s.io Lease: only the holder reconciles.

A replica that cannot renew within the lease duration exits, so two replicas never act at
once (the next one takes over when the lease expires).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sunk.operator.kube import ApiError, Kube, path_for

log = logging.getLogger("sunk.operator.leader")
LEASE_SECONDS = 15
RENEW_SECONDS = 5


def identity() -> str:
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(stamp: str | None) -> datetime | None:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None


class LeaderElector:
    def __init__(
        self, kube: Kube, namespace: str, name: str = "sunk-operator", holder: str | None = None
    ):
        self.kube, self.namespace, self.name = kube, namespace, name
        self.holder = holder or identity()
        self.path = path_for("coordination.k8s.io/v1", "leases", namespace, name)

    def _spec(self, now: datetime, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": LEASE_SECONDS,
            "acquireTime": _stamp(now),
            "renewTime": _stamp(now),
            "leaseTransitions": transitions,
        }

    async def try_acquire(self) -> bool:
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
            return True
        spec = lease.get("spec") or {}
        renewed = _parse(spec.get("renewTime"))
        duration = spec.get("leaseDurationSeconds") or LEASE_SECONDS
        mine = spec.get("holderIdentity") == self.holder
        expired = renewed is None or now - renewed > timedelta(seconds=duration)
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
            if exc.status == 409:
                return False
            raise
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
        """Renew forever; exit the process when the lease cannot be kept."""
        last_ok = datetime.now(UTC)
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            try:
                if await self.try_acquire():
                    last_ok = datetime.now(UTC)
                    continue
                log.error("leader election: lease taken by another replica; exiting")
            except (ApiError, OSError) as exc:
                log.warning("leader election: renew failed: %s", exc)
                if datetime.now(UTC) - last_ok < timedelta(seconds=LEASE_SECONDS - RENEW_SECONDS):
                    continue
                log.error("leader election: could not renew in time; exiting")
            os._exit(1)
