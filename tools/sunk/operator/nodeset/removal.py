"""Safe removal of slurmd Pods: what to do with each Pod the plan wants gone.

Every removal takes the same path, whatever its cause (scale-down, rolling update, a Node no
longer feasible, a deleted NodeSet):

1. mark the Pod (annotation ``sunk.coreweave.com/removal``: why; ``…/removal-since``: when);
   the Syncer drains its Slurm node with a ``k8s:`` reason;
2. once Slurm shows the node out of service and running no job, delete the Pod;
3. the Syncer then deletes the dynamic node record, so no DOWN ghost remains.

The mark is the decision's memory: an operator restart in the middle carries on from it, and a
Pod the plan keeps again (scaled back up, template rolled back) is unmarked and resumed.

``removalGracePeriodSeconds`` bounds the wait: when it runs out the Pod is deleted with its
jobs (they end as NODE_FAIL and are requeued if they allow it). 0 waits however long they run.
Without a Syncer there is no Slurm state to wait on, and Pods are deleted at once.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sunk.operator import names
from sunk.operator.pod_health import is_ready
from sunk.syncer.plan import SlurmNode


@dataclass
class Steps:
    mark: dict[str, str] = field(default_factory=dict)  # Pod → why it goes
    unmark: list[str] = field(default_factory=list)  # the plan keeps it after all
    delete: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)  # deleted with jobs: grace ran out
    waiting: list[str] = field(default_factory=list)  # drained (or draining), jobs running
    recheck_in: float | None = None  # seconds until the first grace period runs out


STAMP = "%Y-%m-%dT%H:%M:%SZ"  # the API server's timestamps, and ours in the annotation


def parse_stamp(text: str) -> float | None:
    """A timestamp in :data:`STAMP` as Unix time, or None when it does not read as one."""
    try:
        return float(calendar.timegm(time.strptime(text, STAMP)))
    except ValueError:
        return None


def _since(annotations: dict[str, str]) -> float | None:
    return parse_stamp(annotations.get(names.ANN_REMOVAL_SINCE, ""))


def stamp(now: float) -> str:
    return time.strftime(STAMP, time.gmtime(now))


def decide(
    pods: list[dict[str, Any]],
    wanted: Mapping[str, str],
    view: Mapping[str, SlurmNode] | None,
    safe: bool,
    grace_seconds: int,
    now: float,
) -> Steps:
    """``wanted``: Pod → reason, from the plan. ``view``: the Syncer's Slurm nodes, None when
    it has none fresh enough. ``safe``: a Syncer is meant to run for this cluster."""
    steps = Steps()
    for pod in pods:
        meta = pod["metadata"]
        name = meta["name"]
        annotations = meta.get("annotations") or {}
        marked = names.ANN_REMOVAL in annotations
        if meta.get("deletionTimestamp"):
            continue  # already going
        if name not in wanted:
            if marked:
                steps.unmark.append(name)
            continue
        if not safe:
            steps.delete.append(name)
            continue
        node = view.get(name) if view is not None else None
        unknown_to_slurm = view is not None and node is None and not is_ready(pod)
        if not marked:
            if unknown_to_slurm:  # never registered: no job can be on it
                steps.delete.append(name)
            else:
                steps.mark[name] = wanted[name]
            continue
        since = _since(annotations)
        if since is None:  # the time was edited away: stamp it again, the wait restarts
            steps.mark[name] = annotations[names.ANN_REMOVAL]
        expired = grace_seconds > 0 and since is not None and now - since >= grace_seconds
        if unknown_to_slurm or (node is not None and node.removable):
            steps.delete.append(name)
        elif expired:
            steps.delete.append(name)
            steps.expired.append(name)
        else:
            steps.waiting.append(name)
            if grace_seconds > 0:
                left = grace_seconds - (now - since) if since is not None else grace_seconds
                steps.recheck_in = min(left, steps.recheck_in or left)
    return steps
