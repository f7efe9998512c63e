"""Why a Pod is not Ready, in the kubelet's and the scheduler's own words, and whether it
ever will be without a new template.

Conditions on a SlurmCluster or NodeSet name the Pod and quote its container state
(``minimal-mariadb-0: ImagePullBackOff: Back-off pulling image "mariadb:bad"``) or the
scheduler's verdict, so a user reads the cause where Argo CD shows the health. The same
reading decides which Pods a rollout may replace without waiting for them (``stuck``): a Pod
whose image cannot be pulled, whose container keeps crashing or that no Node can take will
never become Ready on its own."""

from __future__ import annotations

from typing import Any

# Container waiting reasons that do not resolve without a new template (or a new image).
STUCK_WAITING = frozenset(
    {
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CrashLoopBackOff",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)
MAX_TEXT = 240  # a condition shows a few Pods; a pull error can run to kilobytes


def is_ready(pod: dict[str, Any]) -> bool:
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _statuses(pod: dict[str, Any]) -> list[dict[str, Any]]:
    status = pod.get("status") or {}
    return (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])


def unschedulable(pod: dict[str, Any]) -> str:
    """The scheduler's message when no Node can take the Pod ("" otherwise)."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if (cond.get("type"), cond.get("status"), cond.get("reason")) == (
            "PodScheduled",
            "False",
            "Unschedulable",
        ):
            return cond.get("message") or "Unschedulable"
    return ""


def stuck(pod: dict[str, Any]) -> bool:
    """Not Ready, and will not be with the template it has: a waiting reason of
    ``STUCK_WAITING`` or no Node to run on."""
    if is_ready(pod) or pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    if unschedulable(pod):
        return True
    return any(
        ((s.get("state") or {}).get("waiting") or {}).get("reason") in STUCK_WAITING
        for s in _statuses(pod)
    )


def why_not_ready(pod: dict[str, Any]) -> str:
    """``<pod>: <cause>`` (``not_ready_cause``)."""
    return _short(f"{pod.get('metadata', {}).get('name', '?')}: {not_ready_cause(pod)}")


def not_ready_cause(pod: dict[str, Any]) -> str:
    """``<container>: <reason>: <message>`` from the first container that is waiting or has
    terminated, else the scheduler's verdict, else the Pod's phase."""
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return "being deleted"
    not_ready = ""  # a running container whose readiness probe fails
    for status in _statuses(pod):
        state = status.get("state") or {}
        waiting = state.get("waiting")
        if waiting:
            last = ((status.get("lastState") or {}).get("terminated")) or {}
            message = waiting.get("message") or ""
            if waiting.get("reason") == "CrashLoopBackOff" and last:
                message = f"exit code {last.get('exitCode')}" + (
                    f" ({last.get('reason')})" if last.get("reason") else ""
                )
            text = f"{status.get('name')}: {waiting.get('reason') or 'Waiting'}"
            return _short(text + (f": {message}" if message else ""))
        terminated = state.get("terminated")
        if terminated and terminated.get("exitCode") not in (0, None):
            return _short(
                f"{status.get('name')}: exited {terminated.get('exitCode')}"
                + (f" ({terminated.get('reason')})" if terminated.get("reason") else "")
            )
        if state.get("running") and not status.get("ready") and not not_ready:
            not_ready = status.get("name") or "?"
    verdict = unschedulable(pod)
    if verdict:
        return _short(f"Unschedulable: {verdict}")
    if not_ready:
        return f"{not_ready}: running, not ready (its readiness probe fails)"
    return (pod.get("status") or {}).get("phase") or "Pending"
