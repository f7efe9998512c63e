"""Status conditions: set one, keeping lastTransitionTime when the status did not change.

Reasons come from ``sunk.models.conditions``, where each carries its health meaning."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from sunk.models.conditions import Reason
from sunk.models.crds import API_VERSION
from sunk.models.words import spec_problems
from sunk.operator.client import Kube, path_for


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(
    ctype: str, ok: bool, reason: Reason, message: str = "", *, prefix: str = ""
) -> dict[str, Any]:
    """A condition with a declared reason; ``prefix`` names the member of a family
    (``<Kind>ApplyFailed``). No message is empty: without one, the reason's meaning."""
    if not isinstance(reason, Reason):
        raise TypeError(
            f"undeclared condition reason {reason!r}: declare it in sunk.models.conditions"
        )
    return {
        "type": ctype,
        "status": "True" if ok else "False",
        "reason": reason.text(prefix),
        "message": message or reason.meaning,
    }


def invalid_spec_message(exc: ValidationError) -> str:
    """What an InvalidSpec condition (and its one Event) says: each refused field path and
    reason on a line of its own, in `sunkctl validate`'s words."""
    problems = spec_problems(exc)
    head = f"the spec is invalid ({len(problems)} problem{'s' if len(problems) != 1 else ''}); "
    return head + "fix it and the operator reconciles again:\n" + "\n".join(problems)


def degraded(status: dict[str, Any]) -> list[str]:
    """The messages of the status's true ``Degraded`` conditions: what a pass could not apply
    (a refused write, say), which a later pass may."""
    return [
        f"{c.get('reason')}: {c.get('message')}"
        for c in status.get("conditions") or []
        if c.get("type") == "Degraded" and c.get("status") == "True"
    ]


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


async def write_status(
    kube: Kube,
    body: dict[str, Any],
    plural: str,
    fields: dict[str, Any],
    conds: list[dict[str, Any]],
) -> tuple[dict[str, Any], bool]:
    """Patch the status subresource unless nothing but transition times would change.
    Returns (status, whether it was written)."""
    old = body.get("status") or {}
    generation = body["metadata"].get("generation")
    status = {
        **fields,
        "observedGeneration": generation,
        "conditions": merge(old.get("conditions") or [], conds, generation),
    }
    if same(old, status):
        return status, False
    meta = body["metadata"]
    await kube.merge_patch(
        path_for(API_VERSION, plural, meta["namespace"], meta["name"], "status"), {"status": status}
    )
    return status, True
