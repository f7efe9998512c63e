"""Idempotent writes: apply only what differs from the last applied desired state."""

from __future__ import annotations

import copy
from typing import Any

from sunk.operator import names
from sunk.operator.client import ApiError, Kube, object_path
from sunk.operator.hashing import stable_hash


def with_hash(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    annotations = out["metadata"].setdefault("annotations", {})
    annotations.pop(names.ANN_SPEC_HASH, None)
    annotations[names.ANN_SPEC_HASH] = stable_hash(out)
    return out


async def ensure(kube: Kube, obj: dict[str, Any]) -> bool:
    """Server-side apply `obj` unless the live object was applied from the same content.
    Returns whether a write happened."""
    desired = with_hash(obj)
    live = await kube.get(object_path(desired))
    wanted = desired["metadata"]["annotations"][names.ANN_SPEC_HASH]
    if live and (live["metadata"].get("annotations") or {}).get(names.ANN_SPEC_HASH) == wanted:
        return False
    await kube.apply(desired)
    return True


async def create_once(kube: Kube, obj: dict[str, Any]) -> bool:
    """Create `obj` if it does not exist; never touch an existing one (key material)."""
    if await kube.get(object_path(obj)) is not None:
        return False
    try:
        await kube.create(obj)
    except ApiError as exc:
        if exc.status != 409:
            raise
        return False
    return True
