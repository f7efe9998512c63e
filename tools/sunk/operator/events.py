"""Kubernetes Events for what a human must act on (written on transitions only)."""

from __future__ import annotations

import uuid
from typing import Any

from sunk.operator.client import Kube
from sunk.operator.conditions import now


def as_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """A Pod from a list lacks apiVersion and kind, which an Event's involvedObject needs."""
    return {"apiVersion": "v1", "kind": "Pod", **pod}


async def emit(
    kube: Kube, obj: dict[str, Any], reason: str, message: str, warning: bool = True
) -> None:
    meta = obj["metadata"]
    stamp = now()
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta['name']}.{uuid.uuid4().hex[:12]}",
            "namespace": meta.get("namespace") or "default",
        },
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
        },
        "reason": reason,
        "message": message[:1000],
        "type": "Warning" if warning else "Normal",
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "source": {"component": "sunk-operator"},
    }
    await kube.create(event)


async def emit_on_change(kube: Kube, obj: dict[str, Any], reason: str, message: str) -> None:
    """An Event only when no current condition already carries this reason and message, so a
    level-triggered reconcile does not repeat it on every pass."""
    previous = {
        (c.get("reason"), c.get("message"))
        for c in (obj.get("status") or {}).get("conditions") or []
    }
    if (reason, message) not in previous:
        await emit(kube, obj, reason, message)
