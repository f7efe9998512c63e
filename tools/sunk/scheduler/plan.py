"""What the Pod Scheduler does next, decided from what it sees (pure, unit-tested on dicts).

Inputs: the Pods that name the scheduler, Slurm's placeholder jobs (each names its Pod in its
comment), and where each slurmd Pod of the cluster runs. Level-triggered: a restart rebuilds
everything from those, so no job is orphaned and no Pod is bound twice (a bound Pod has a
``nodeName`` and is never bound again).

- An unbound Pod without a job is checked, then gets a placeholder job.
- Its job running past the prolog (the script marked it started): bind the Pod to the
  Kubernetes Node of the slurmd Pod Slurm allocated.
- The job still pending or starting: the Pod waits, with Slurm's reason.
- The Pod finished: end its job. The Pod deleted: end its job once the Pod is gone.
- Slurm ended the job (scancel, preemption, time limit): delete the Pod.
- A job whose Pod is gone: end it (it held resources for nothing)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sunk.scheduler.podjob import (
    ANN_JOB,
    STARTED,
    Placeholder,
    PodRef,
    Rejected,
    Settings,
    placeholder_for,
    pod_of_comment,
)
from sunk.syncer.restd import number

# Base states in which a job still holds (or waits for) its resources.
ALIVE = {"PENDING", "RUNNING", "SUSPENDED"}
# Seconds a placeholder may pend or start before its Pod's condition and an Event say why: a
# burst's placeholders wait a moment each, and writing each state would delay every bind.
QUIET_WAIT = 5.0
FINISHED_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Job:
    """A placeholder job as slurmrestd lists it."""

    id: int
    pod: PodRef
    states: frozenset[str]
    extra: str = ""
    nodes: str = ""
    reason: str = ""
    submitted: float = 0.0  # Unix time

    @classmethod
    def from_restd(cls, job: Mapping[str, Any]) -> Job | None:
        pod = pod_of_comment(job.get("comment"))
        if pod is None:
            return None
        return cls(
            id=int(job["job_id"]),
            pod=pod,
            states=frozenset(job.get("job_state") or ()),
            extra=job.get("extra") or "",
            nodes=job.get("nodes") or "",
            reason=job.get("state_reason") or "",
            submitted=number(job.get("submit_time")),
        )

    @property
    def alive(self) -> bool:
        """Pending or running, not being torn down."""
        return bool(self.states & ALIVE) and "COMPLETING" not in self.states

    @property
    def pending(self) -> bool:
        return "PENDING" in self.states

    @property
    def started(self) -> bool:
        """Past the prolog (the Node is locked) with the placeholder script running."""
        return self.alive and "RUNNING" in self.states and self.extra == STARTED

    @property
    def holds_node(self) -> bool:
        """Running, or ending with the placeholder still there (it ignores SIGTERM)."""
        return bool(self.states & {"RUNNING", "SUSPENDED", "COMPLETING"})

    def describe(self) -> str:
        state = "/".join(sorted(self.states)) or "unknown"
        return f"{state} ({self.reason})" if self.reason and self.reason != "None" else state


@dataclass
class Actions:
    submit: list[tuple[dict[str, Any], Placeholder]] = field(default_factory=list)
    reject: list[tuple[dict[str, Any], Rejected]] = field(default_factory=list)
    # The Pod's job id is not on the Pod yet (a restart between submit and annotate).
    adopt: list[tuple[dict[str, Any], int]] = field(default_factory=list)
    bind: list[tuple[dict[str, Any], Job, str]] = field(default_factory=list)  # k8s Node
    wait: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # why
    delete_pod: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # why
    cancel: list[int] = field(default_factory=list)  # pending jobs: plain cancel
    kill: list[int] = field(default_factory=list)  # jobs holding a node: SIGKILL now

    def end(self, job: Job) -> None:
        (self.kill if job.holds_node else self.cancel).append(job.id)


def plan(
    pods: list[dict[str, Any]],
    jobs: list[Job],
    hosts: Mapping[str, str],
    settings: Settings,
    now: float | None = None,
) -> Actions:
    """``hosts``: Slurm node name (the slurmd Pod's name) → the Kubernetes Node it runs on.
    ``now``: Unix time (a Pod says why it waits once its placeholder waited ``QUIET_WAIT``)."""
    now = time.time() if now is None else now
    actions = Actions()
    by_pod: dict[str, list[Job]] = {}
    for job in sorted(jobs, key=lambda j: j.id):
        by_pod.setdefault(job.pod.uid, []).append(job)
    for pod in pods:
        _plan_pod(pod, by_pod.pop(pod["metadata"]["uid"], []), hosts, settings, actions, now)
    for orphans in by_pod.values():  # their Pods are gone
        for job in orphans:
            if job.alive or job.holds_node:
                actions.end(job)
    return actions


def _plan_pod(
    pod: dict[str, Any],
    jobs: list[Job],
    hosts: Mapping[str, str],
    settings: Settings,
    actions: Actions,
    now: float,
) -> None:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    phase = (pod.get("status") or {}).get("phase")
    live = [j for j in jobs if j.alive]
    # One job per Pod: a second one (a submit whose answer was lost) is ended.
    job, extra = (live[-1], live[:-1]) if live else (None, [])
    for duplicate in extra:
        actions.end(duplicate)
    bound = bool(spec.get("nodeName"))
    recorded = (meta.get("annotations") or {}).get(ANN_JOB)

    if phase in FINISHED_PHASES or (meta.get("deletionTimestamp") and not bound):
        for j in jobs:
            if j.alive or j.holds_node:
                actions.end(j)
        return
    if meta.get("deletionTimestamp"):
        return  # its containers may still run: the job ends once the Pod is gone

    if job is not None and recorded != str(job.id):
        actions.adopt.append((pod, job.id))

    if bound:
        if job is not None:
            return
        if recorded is None:
            return  # bound by someone else: not ours
        ended = next((j for j in reversed(jobs) if str(j.id) == recorded), None)
        why = (
            f"placeholder job {recorded} ended in Slurm: {ended.describe()}"
            if ended is not None
            else f"placeholder job {recorded} is no longer in Slurm"
        )
        actions.delete_pod.append((pod, why))  # its job ends once the Pod is gone
        return

    if job is None:
        if jobs:  # every job it had has ended: Slurm ended it before the Pod could run
            ended = jobs[-1]
            actions.delete_pod.append(
                (pod, f"placeholder job {ended.id} ended in Slurm before it ran: "
                      f"{ended.describe()}")
            )  # fmt: skip
            return
        try:
            actions.submit.append((pod, placeholder_for(pod, settings)))
        except Rejected as exc:
            actions.reject.append((pod, exc))
        return

    if not job.started:
        if now < job.submitted + QUIET_WAIT:
            return  # a moment's wait, the norm in a burst: no condition, no Event
        if job.pending:
            actions.wait.append((pod, f"placeholder job {job.id} is pending in Slurm: "
                                      f"{job.reason or 'None'}"))  # fmt: skip
        else:
            actions.wait.append((pod, f"placeholder job {job.id} is starting on {job.nodes} "
                                      "(prolog: locking the node)"))  # fmt: skip
        return
    node = hosts.get(job.nodes)
    if node is None:
        actions.wait.append(
            (pod, f"placeholder job {job.id} runs on Slurm node {job.nodes!r}, which has no "
                  "slurmd Pod of this cluster")
        )  # fmt: skip
        return
    actions.bind.append((pod, job, node))
