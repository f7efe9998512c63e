"""Node locking, the pure part: which jobs hold a Node, what the Node and Pod say about it,
and which Pods must leave before a job starts. Unit-tested on plain dicts; the hook
(``sunk.syncer.hook``) and the Syncer apply what these functions decide.

SUNK's contract: a job's prolog locks its Kubernetes Node. The Node gets the taint
``sunk.coreweave.com/lock=true:NoExecute`` and the annotation ``sunk.coreweave.com/lock``
with the state, copied to the slurmd Pod: ``false`` (unlocked), ``pending`` (locked, Pods that
do not tolerate the taint are still leaving), ``locked`` or ``locked_strict`` (a strict lock
starts the job only once every such Pod is gone; the Pod Scheduler's jobs use it).
The epilog unlocks. Several jobs may share a Node: the lock holds until the last one ends."""

from __future__ import annotations

import calendar
import time
from dataclasses import dataclass
from typing import Any

from sunk.operator import names

ANN_STATE = names.ANN_LOCK  # false | pending | locked | locked_strict (Node and Pod)
ANN_JOBS = f"{names.GROUP}/lock-jobs"  # "12,15:strict": the jobs holding the lock
ANN_SINCE = f"{names.GROUP}/lock-since"  # when the lock was last taken (RFC 3339)
TAINT = {"key": names.LOCK_TAINT, "value": "true", "effect": "NoExecute"}
UNLOCKED, PENDING, LOCKED, LOCKED_STRICT = "false", "pending", "locked", "locked_strict"
STATES = (UNLOCKED, PENDING, LOCKED, LOCKED_STRICT)
STRICT_SUFFIX = ":strict"
STALE_AFTER = 30.0  # seconds a lock may wait for its job to show as running in Slurm


@dataclass(frozen=True)
class Holders:
    """The jobs holding a Node's lock: job id → strict."""

    jobs: tuple[tuple[str, bool], ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> Holders:
        jobs: dict[str, bool] = {}
        for item in (text or "").split(","):
            item = item.strip()
            if not item:
                continue
            job, _, mode = item.partition(":")
            if job.isdigit():  # anything else was not written by us: ignore it
                jobs[job] = mode == "strict"
        return cls(tuple(sorted(jobs.items(), key=lambda kv: int(kv[0]))))

    def __str__(self) -> str:
        return ",".join(job + (STRICT_SUFFIX if strict else "") for job, strict in self.jobs)

    def __bool__(self) -> bool:
        return bool(self.jobs)

    @property
    def strict(self) -> bool:
        return any(strict for _, strict in self.jobs)

    def add(self, job: str, strict: bool) -> Holders:
        jobs = dict(self.jobs)
        jobs[job] = jobs.get(job, False) or strict
        return Holders(tuple(sorted(jobs.items(), key=lambda kv: int(kv[0]))))

    def remove(self, job: str) -> Holders:
        return Holders(tuple((j, s) for j, s in self.jobs if j != job))


def holders_of(node: dict[str, Any]) -> Holders:
    return Holders.parse((node["metadata"].get("annotations") or {}).get(ANN_JOBS))


def state_of(obj: dict[str, Any]) -> str:
    return (obj["metadata"].get("annotations") or {}).get(ANN_STATE) or UNLOCKED


def locked_state(holders: Holders, victims_left: bool) -> str:
    """The state a Node with these holders shows."""
    if not holders:
        return UNLOCKED
    if victims_left:
        return PENDING
    return LOCKED_STRICT if holders.strict else LOCKED


def has_taint(node: dict[str, Any]) -> bool:
    return any(_is_lock_taint(t) for t in (node.get("spec") or {}).get("taints") or [])


def _is_lock_taint(taint: dict[str, Any]) -> bool:
    return taint.get("key") == TAINT["key"] and taint.get("effect") == TAINT["effect"]


def node_patch(node: dict[str, Any], holders: Holders, state: str, now: str) -> dict[str, Any]:
    """A merge patch giving the Node these holders (and the taint while there are any),
    guarded by the resourceVersion it was read at: a concurrent change fails with 409."""
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if not _is_lock_taint(t)]
    if holders:
        taints.append(dict(TAINT))
    locked = bool(holders)
    return {
        "metadata": {
            "resourceVersion": node["metadata"]["resourceVersion"],
            "annotations": {
                ANN_STATE: state,
                ANN_JOBS: str(holders) if locked else None,
                ANN_SINCE: now if locked else None,
            },
        },
        "spec": {"taints": taints},
    }


def tolerates(pod: dict[str, Any]) -> bool:
    """Whether the Pod tolerates the lock taint (as the taint manager would judge it)."""
    for t in (pod.get("spec") or {}).get("tolerations") or []:
        if t.get("effect") not in (None, "", TAINT["effect"]):
            continue
        key, op = t.get("key"), t.get("operator") or "Equal"
        if op == "Exists" and key in (None, "", TAINT["key"]):
            return True
        if op == "Equal" and key == TAINT["key"] and (t.get("value") or "") == TAINT["value"]:
            return True
    return False


def victims(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Pods on a locked Node that must leave: running (not finished) and not tolerating
    the taint. Pods already being deleted still count: the job waits until they are gone."""
    return [
        p
        for p in pods
        if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not tolerates(p)
    ]


def stale(holders: Holders, since: str | None, now_epoch: float, busy: bool | None) -> bool:
    """A lock whose epilog never came: held, the Slurm node runs no job, and it was taken
    more than STALE_AFTER seconds ago (a prolog's job may not show as running yet)."""
    if not holders or busy is None or busy:
        return False
    taken = _epoch(since)
    return taken is None or now_epoch - taken > STALE_AFTER


def _epoch(stamp: str | None) -> float | None:
    try:
        return float(calendar.timegm(time.strptime(stamp or "", "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None
