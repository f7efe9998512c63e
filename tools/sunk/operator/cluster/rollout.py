"""The control plane's workloads: are they ready, and if not, which Pod and why; and the
"forced rollback" Kubernetes leaves to the operator.

A StatefulSet whose Pod never became Ready (an image that cannot be pulled, a crash loop, no
Node to run on) does not replace that Pod when its template is fixed: with the default
OrderedReady policy the controller waits for the broken Pod forever (Kubernetes documents it
under "Forced rollback"). So when a Pod of ours runs an older revision than the StatefulSet's
``updateRevision`` and is stuck (``pod_health.stuck``), the operator deletes it and the
StatefulSet controller creates it again from the fixed template. A Pod of the current revision
is never deleted (a new one would fail the same way), nor a Pod that is Ready or merely
starting. Deployments need none of this: a new ReplicaSet replaces a broken one by itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sunk.operator.client import Kube, path_for
from sunk.operator.pod_health import is_ready, not_ready_cause, stuck, why_not_ready

REVISION_LABEL = "controller-revision-hash"
MAX_PODS_SHOWN = 3


@dataclass(frozen=True)
class WorkloadHealth:
    ready: bool
    message: str
    replaced: list[str] = field(default_factory=list)  # "pod (why)" for each one deleted


def _plural(kind: str) -> str:
    return "statefulsets" if kind == "StatefulSet" else "deployments"


def _selector(obj: dict[str, Any]) -> str:
    labels = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


async def workload_health(kube: Kube, obj: dict[str, Any]) -> WorkloadHealth:
    """``obj``: the workload as the operator applies it. Ready when the live one has as many
    ready replicas as wanted; else the message names the Pods that are not, and why."""
    meta = obj["metadata"]
    ns, name, kind = meta["namespace"], meta["name"], obj["kind"]
    live = await kube.get(path_for("apps/v1", _plural(kind), ns, name))
    if not live:
        return WorkloadHealth(False, f"{kind} {name}: not created yet")
    want = obj["spec"].get("replicas", 1)
    ready = (live.get("status") or {}).get("readyReplicas", 0)
    counted = f"{kind} {name}: {ready}/{want} ready"
    if ready >= want:
        return WorkloadHealth(True, counted)
    pods = await kube.list(path_for("v1", "pods", ns), _selector(obj))
    replaced = await force_rollback(kube, live, pods) if kind == "StatefulSet" else []
    waiting = [why_not_ready(p) for p in pods if not is_ready(p)]
    if not pods:
        waiting = ["no Pod yet (the StatefulSet's or ReplicaSet's Events say why)"]
    shown = waiting[:MAX_PODS_SHOWN] + (
        [f"{len(waiting) - MAX_PODS_SHOWN} more"] if len(waiting) > MAX_PODS_SHOWN else []
    )
    message = f"{counted}; " + "; ".join(shown)
    if replaced:
        message += f"; replaced with the current template: {', '.join(replaced)}"
    return WorkloadHealth(False, message, replaced)


def outdated_and_stuck(statefulset: dict[str, Any], pods: list[dict[str, Any]]) -> list[dict]:
    """The Pods the StatefulSet controller will not replace by itself: an older revision than
    the one it rolls out (which it has computed for the current generation), and stuck."""
    status = statefulset.get("status") or {}
    generation = statefulset["metadata"].get("generation") or 0
    update = status.get("updateRevision")
    if not update or (status.get("observedGeneration") or 0) < generation:
        return []  # the controller has not read the new template yet: nothing to compare
    return [
        pod
        for pod in pods
        if (pod["metadata"].get("labels") or {}).get(REVISION_LABEL) not in (None, update)
        and stuck(pod)
    ]


async def force_rollback(
    kube: Kube, statefulset: dict[str, Any], pods: list[dict[str, Any]]
) -> list[str]:
    """Delete the Pods of ``outdated_and_stuck``; returns "pod (why)" for each one deleted."""
    out = []
    for pod in outdated_and_stuck(statefulset, pods):
        meta = pod["metadata"]
        why = not_ready_cause(pod)
        await kube.delete(path_for("v1", "pods", meta["namespace"], meta["name"]))
        out.append(f"{meta['name']} ({why})")
    return out
