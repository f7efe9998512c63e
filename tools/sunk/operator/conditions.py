"""Status conditions: set one, keeping lastTransitionTime when the status did not change."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(ctype: str, ok: bool, reason: str, message: str = "") -> dict[str, Any]:
    return {
        "type": ctype,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message,
    }


def merge(
    previous: list[dict[str, Any]], wanted: list[dict[str, Any]], generation: int | None
) -> list[dict[str, Any]]:
    before = {c.get("type"): c for c in previous or []}
    out = []
    for cond in wanted:
        old = before.get(cond["type"])
        stamp = (
            old.get("lastTransitionTime") if old and old.get("status") == cond["status"] else None
        )
        out.append({**cond, "observedGeneration": generation, "lastTransitionTime": stamp or now()})
    return out


def same(previous: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Equal statuses, ignoring transition times."""

    def strip(status: dict[str, Any]) -> dict[str, Any]:
        conds = [
            {k: v for k, v in c.items() if k != "lastTransitionTime"}
            for c in status.get("conditions") or []
        ]
        return {**status, "conditions": conds}

    return strip(previous or {}) == strip(wanted)
