"""What the Syncer changes, decided from what it sees: pure, unit-tested on plain dicts.

Kubernetes → Slurm: a slurmd Pod that is not Ready, is being deleted, or sits on a cordoned
Node drains its Slurm node with a reason that starts with ``k8s:``. The drain is removed when
the cause clears, and put back if someone removes it while the cause persists. A drain whose
reason does not start with ``k8s:`` is never touched. A dynamic Slurm node whose Pod is gone
is deleted; while it still runs jobs (its Node was deleted, its Pod force-deleted) it is set
DOWN first, so Slurm requeues or ends those jobs as their ``--requeue`` says at once instead
of after ``SlurmdTimeout``.

A Node condition listed in ``healthCheck.nodeConditions`` (node-problem-detector's, say)
drains too: ``k8s: <type>: <message>``; one listed with ``verify`` keeps the node drained after it
clears until the next passing health check (sunk.health.reasons).

Slurm → Kubernetes: a drain or down that started in Slurm (its reason lacks the prefix) shows
on the Node as the annotation ``sunk.coreweave.com/drain`` with the reason and the condition
``SlurmCordon``, and on the Pod as the condition ``SlurmDrain``. Both are cleared when Slurm
clears it. Drains the Syncer made itself set neither ``SlurmCordon`` nor the annotation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sunk.health import reasons
from sunk.operator import names

K8S_PREFIX = reasons.K8S_PREFIX
DRAIN_ANNOTATION = "sunk.coreweave.com/drain"
CORDON_REASON_ANNOTATION = "node.coreweave.cloud/cordonReason"
NODE_CONDITION = "SlurmCordon"
POD_CONDITION = "SlurmDrain"
# Slurm node states (slurmrestd lists a base state and flags) that take a node out of service.
OUT_OF_SERVICE = {"DRAIN", "DOWN", "FAIL"}
BUSY = {"ALLOCATED", "MIXED", "COMPLETING"}  # a job runs or is being cleaned up
UNREACHABLE = {"DOWN", "NOT_RESPONDING", "FUTURE", "UNKNOWN"}
DYNAMIC = "DYNAMIC_NORM"  # registered by `slurmd -Z`: the record is ours to delete
# Job base states of a job that has ended (slurmrestd's `job_state` lists the base state and
# flags; a COMPLETING flag means it still holds its nodes).
JOB_ENDED = {
    "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
    "DEADLINE", "OUT_OF_MEMORY",
}  # fmt: skip


@dataclass(frozen=True)
class SlurmNode:
    name: str
    states: frozenset[str]
    reason: str

    @property
    def drained(self) -> bool:
        return bool(self.states & OUT_OF_SERVICE)

    @property
    def drained_by_us(self) -> bool:
        return self.drained and self.reason.startswith(K8S_PREFIX)

    @property
    def drained_in_slurm(self) -> bool:
        return self.drained and not self.reason.startswith(K8S_PREFIX)

    @property
    def busy(self) -> bool:
        return bool(self.states & BUSY)

    @property
    def dynamic(self) -> bool:
        return DYNAMIC in self.states

    @property
    def activity(self) -> str:
        """SUNK's scale-down classes: ``not-ready``, ``idle``, ``draining``, ``running``."""
        if self.states & UNREACHABLE:
            return "not-ready"
        if not self.busy:
            return "idle"
        return "draining" if self.drained else "running"

    @property
    def removable(self) -> bool:
        """Out of service and running no job: its Pod may go without killing work."""
        return self.drained and not self.busy

    @classmethod
    def from_restd(cls, node: dict[str, Any]) -> SlurmNode:
        state = node.get("state") or []
        states = frozenset([state] if isinstance(state, str) else state)
        return cls(node["name"], frozenset(s.upper() for s in states), node.get("reason") or "")


def jobs_naming_partition(jobs: list[dict[str, Any]], partition: str) -> list[int]:
    """Ids of the jobs (slurmrestd's ``/jobs``) that have not ended and name ``partition``,
    alone or among others (``--partition=a,b``): the jobs slurmctld ends as NODE_FAIL when the
    partition leaves its configuration (seen with 24.11, held pending jobs included)."""
    found = []
    for job in jobs:
        if job_in_flight(job) and partition in str(job.get("partition") or "").split(","):
            found.append(int(job["job_id"]))
    return sorted(found)


def job_in_flight(job: dict[str, Any]) -> bool:
    """A job (slurmrestd's ``/jobs``) that pends, runs, or still holds its nodes (COMPLETING)."""
    states = job.get("job_state") or []
    states = {states} if isinstance(states, str) else set(states)
    return not states & JOB_ENDED or "COMPLETING" in states


@dataclass(frozen=True)
class ConditionRule:
    """A Node condition that drains (values ``healthCheck.nodeConditions``)."""

    type: str
    status: str = "True"
    verify: bool = False

    @property
    def cause(self) -> str:
        """The ``k8s:`` reason it writes, before the condition's message."""
        return f"{K8S_PREFIX} {self.type}"


@dataclass
class Actions:
    drain: dict[str, str] = field(default_factory=dict)  # Slurm node -> k8s: reason
    resume: list[str] = field(default_factory=list)
    # Kubernetes Node -> Slurm reason (None: clear) of a drain that started in Slurm
    node_marks: dict[str, str | None] = field(default_factory=dict)
    # (namespace, Pod) -> Slurm reason (None: clear)
    pod_marks: dict[tuple[str, str], str | None] = field(default_factory=dict)
    forget: list[str] = field(default_factory=list)  # dynamic Slurm nodes whose Pod is gone
    # Slurm node -> `k8s:` reason: its Pod is gone while Slurm counts it busy (Node deleted,
    # Pod force-deleted). Its slurmd is gone too, so Slurm may end or requeue its jobs now
    # instead of after SlurmdTimeout; the record is forgotten once no job holds it.
    down: dict[str, str] = field(default_factory=dict)

    def empty(self) -> bool:
        return not (
            self.drain
            or self.resume
            or self.node_marks
            or self.pod_marks
            or self.forget
            or self.down
        )


def condition_cause(node: dict[str, Any], rules: tuple[ConditionRule, ...]) -> str | None:
    """``k8s: <type>: <message>`` of the first listed condition the Node shows, or None."""
    shown = {c.get("type"): c for c in (node.get("status") or {}).get("conditions") or []}
    for rule in rules:
        found = shown.get(rule.type)
        if found is not None and found.get("status") == rule.status:
            message = reasons.one_line(str(found.get("message") or ""))
            return f"{rule.cause}: {message}" if message else rule.cause
    return None


def drain_cause(
    pod: dict[str, Any], node: dict[str, Any] | None, rules: tuple[ConditionRule, ...] = ()
) -> str | None:
    """Why this slurmd Pod's Slurm node must not take jobs (``k8s:`` reason), or None."""
    meta = pod["metadata"]
    if meta.get("deletionTimestamp"):
        return f"{K8S_PREFIX} Pod {meta['name']} is being deleted"
    removal = (meta.get("annotations") or {}).get(names.ANN_REMOVAL)
    if removal is not None:
        return f"{K8S_PREFIX} Pod {meta['name']} is being removed: {removal}"
    if node is not None and (node.get("spec") or {}).get("unschedulable"):
        annotations = node["metadata"].get("annotations") or {}
        why = (annotations.get(CORDON_REASON_ANNOTATION) or "").strip()
        cordoned = f"{K8S_PREFIX} Node {node['metadata']['name']} cordoned"
        return f"{cordoned}: {why}" if why else cordoned
    if node is not None and (listed := condition_cause(node, rules)):
        return listed
    conditions = (pod.get("status") or {}).get("conditions") or []
    if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
        return f"{K8S_PREFIX} Pod {meta['name']} not ready"
    return None


def _shared(node: SlurmNode) -> bool:
    """Drained with a reason the Syncer may write to: its own, or a health check's (the
    cause goes in front of it); an admin's is never touched (sunk.health.reasons)."""
    parsed = reasons.parse(node.reason)
    return node.drained and parsed.other is None


def _pod_mark(pod: dict[str, Any]) -> str | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == POD_CONDITION and c.get("status") == "True":
            return c.get("message") or ""
    return None


def _node_mark(node: dict[str, Any]) -> str | None:
    return (node["metadata"].get("annotations") or {}).get(DRAIN_ANNOTATION)


def plan(
    pods: list[dict[str, Any]],
    nodes: dict[str, dict[str, Any]],
    slurm: dict[str, SlurmNode],
    rules: tuple[ConditionRule, ...] = (),
) -> Actions:
    """``pods``: the cluster's slurmd Pods (Slurm node name = Pod name); ``nodes``: their
    Kubernetes Nodes by name; ``slurm``: the Slurm nodes by name, read before the Pods (a
    slurmd registers only from a running Pod, so a node without a Pod here has lost it);
    ``rules``: the Node conditions that drain."""
    actions = Actions()
    verify = [rule.cause for rule in rules if rule.verify]
    pod_names = {p["metadata"]["name"] for p in pods}
    for name, node in sorted(slurm.items()):
        if not node.dynamic or name in pod_names:
            continue
        if node.busy and "DOWN" not in node.states:
            actions.down[name] = f"{K8S_PREFIX} Pod {name} is gone"
        else:
            actions.forget.append(name)
    for pod in pods:
        name = pod["metadata"]["name"]
        current = slurm.get(name)
        if current is None:
            continue  # not registered (yet): nothing to drain
        node_name = (pod.get("spec") or {}).get("nodeName")
        node = nodes.get(node_name or "")
        cause = drain_cause(pod, node, rules)
        if cause is not None and not current.drained:
            actions.drain[name] = cause
        elif _shared(current) and (cause is not None or "DOWN" not in current.states):
            # A health check's part of the reason stays when the cause changes or clears.
            decision = reasons.after_k8s(current.reason, cause, verify)
            if decision.action == "drain" and decision.reason:
                actions.drain[name] = decision.reason
            elif decision.action == "resume":
                actions.resume.append(name)
        # Slurm -> Kubernetes
        slurm_reason = current.reason if current.drained_in_slurm else None
        key = (pod["metadata"]["namespace"], name)
        if _pod_mark(pod) != slurm_reason:
            actions.pod_marks[key] = slurm_reason
        if node is not None and _node_mark(node) != slurm_reason:
            actions.node_marks[node["metadata"]["name"]] = slurm_reason
    return actions
