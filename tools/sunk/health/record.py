"""The passive checks' last results, kept on the Slurm node itself (its ``Extra`` field).

A periodic run of ``sunk-health`` writes, per check, whether it passed and how long it took,
under one key of the node's ``Extra`` JSON object; the operator reads every node's ``extra``
from slurmrestd with the rest of the node and turns them into metrics
(``sunk.syncer.slurm_metrics``). No new channel from each Pod to the operator is needed, and
the record goes with the node, not with its Pod.

``Extra`` belongs to the site too (jobs may select on it with ``--extra``): a JSON object keeps
the site's other keys; any other text is the site's and is never overwritten.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

KEY = "sunk.coreweave.com/health"


@dataclass(frozen=True)
class CheckRecord:
    ok: bool
    seconds: float


@dataclass(frozen=True)
class NodeRecord:
    at: float  # Unix time of the run
    checks: dict[str, CheckRecord]


def _object(extra: str) -> dict[str, Any] | None:
    """The node's Extra as a JSON object; None when it holds something else (the site's)."""
    if not extra.strip():
        return {}
    try:
        value = json.loads(extra)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def merged(extra: str, at: float, checks: Mapping[str, CheckRecord]) -> str | None:
    """The node's new Extra with this run recorded, or None to leave it alone (it is not a
    JSON object, so it is the site's)."""
    value = _object(extra)
    if value is None:
        return None
    value[KEY] = {
        "at": int(at),
        "checks": {
            name: {"ok": rec.ok, "seconds": round(rec.seconds, 3)}
            for name, rec in sorted(checks.items())
        },
    }
    # Compact and without spaces: scontrol takes it as one `Extra=` word.
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def parse(extra: Any) -> NodeRecord | None:
    """The record in a node's ``extra`` as slurmrestd returns it; None when there is none or
    it is malformed (a metric is never worth an error)."""
    value = _object(extra) if isinstance(extra, str) else None
    record = (value or {}).get(KEY)
    if not isinstance(record, dict) or not isinstance(record.get("checks"), dict):
        return None
    checks: dict[str, CheckRecord] = {}
    for name, item in record["checks"].items():
        if isinstance(item, dict) and isinstance(item.get("ok"), bool):
            seconds = item.get("seconds")
            ok_number = isinstance(seconds, int | float) and not isinstance(seconds, bool)
            checks[str(name)] = CheckRecord(item["ok"], float(seconds) if ok_number else 0.0)
    at = record.get("at")
    if not isinstance(at, int | float) or isinstance(at, bool):
        return None
    return NodeRecord(float(at), checks)
