"""Every status-condition reason the operator writes, with what it means for health.

The one place a reason is declared. The operator builds its conditions from these objects
(``sunk.operator.conditions.condition`` refuses anything else), and the Argo CD health checks
(``sunk.argocd.healthchecks``) are generated from this table, so a reason cannot reach a
SlurmCluster or NodeSet status without a health meaning.

Health meanings:
  Degraded     a human must act: invalid spec, impossible sizing, missing key or database,
               a conflict, a write the API server refused.
  Progressing  it resolves by itself: waiting for a cluster, Pods starting, a rollout.
  Healthy      the condition is in its good state (its status alone says nothing is wrong).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Health(StrEnum):
    HEALTHY = "Healthy"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"


NODESET = "NodeSet"
SLURMCLUSTER = "SlurmCluster"


@dataclass(frozen=True)
class Reason:
    """A condition reason. A ``family`` reason is a suffix: the operator writes
    ``<prefix><name>`` (``StatefulSetApplyFailed``), and health matches on the suffix."""

    name: str
    health: Health
    kinds: tuple[str, ...]
    meaning: str
    family: bool = False

    def text(self, prefix: str = "") -> str:
        """The reason as written into a condition."""
        if prefix and not self.family:
            raise ValueError(f"reason {self.name} is not a family; it takes no prefix")
        if self.family and not prefix:
            raise ValueError(f"reason family {self.name} needs a prefix")
        return prefix + self.name


_BOTH = (NODESET, SLURMCLUSTER)

# Spec and configuration
INVALID_SPEC = Reason(
    "InvalidSpec", Health.DEGRADED, _BOTH, "the spec does not validate against the typed model"
)
CONFIG_INVALID = Reason(
    "ConfigInvalid",
    Health.DEGRADED,
    _BOTH,
    "the Slurm configuration cannot be rendered, e.g. impossible NodeSet sizing",
)
OPERATOR_TOO_OLD = Reason(
    "OperatorTooOld",
    Health.DEGRADED,
    _BOTH,
    "the object comes from a slurm chart that needs a newer operator (its "
    "sunk.coreweave.com/requires-operator annotation): upgrade the sunk chart first; until then "
    "the operator changes nothing",
)
# NodeSet
CLUSTER_NOT_FOUND = Reason(
    "ClusterNotFound",
    Health.PROGRESSING,
    (NODESET,),
    "no SlurmCluster with the NodeSet's clusterName yet (Argo CD may apply it later)",
)
CLUSTER_INVALID = Reason(
    "ClusterInvalid",
    Health.DEGRADED,
    (NODESET,),
    "the NodeSet's SlurmCluster has an invalid spec; the NodeSet waits, its Pods untouched",
)
VERSION_SKEW = Reason(
    "SlurmVersionSkew",
    Health.DEGRADED,
    (NODESET,),
    "the slurmd image's Slurm release is newer than the controller's, or more than three "
    "releases behind it; Slurm would refuse it, so the NodeSet waits, its Pods untouched "
    "(upgrade the controller first)",
)
SLURM_UPGRADE_WAITING = Reason(
    "SlurmUpgradeWaiting",
    Health.PROGRESSING,
    _BOTH,
    "a newer Slurm release waits for the daemon Slurm upgrades before it (slurmdbd, then "
    "slurmctld, then slurmrestd, login and the slurmds) to run it, rolled out and ready; "
    "until then the component keeps the release it runs",
)
PODS_PROGRESSING = Reason(
    "Progressing",
    Health.PROGRESSING,
    _BOTH,
    "Pods or workloads are starting or being replaced",
)
ALL_PODS_READY = Reason(
    "AllPodsReady", Health.HEALTHY, (NODESET,), "every Pod on a feasible Node is ready"
)
NODE_CONFLICT = Reason(
    "NodeConflict",
    Health.DEGRADED,
    (NODESET,),
    "two Nodes this NodeSet selects map to one Pod name (same last two address octets)",
)
NODE_CLAIMED = Reason(
    "NodeClaimedElsewhere",
    Health.HEALTHY,
    (NODESET,),
    "Nodes this NodeSet could use run another NodeSet's slurmd Pod (it claimed them first): "
    "SUNK's one-NodeSet-per-Node rule for overlapping groups, not an error",
)
NO_CONFLICT = Reason("NoConflict", Health.HEALTHY, (NODESET,), "no Node conflicts")
TEMPLATE_CHANGED = Reason(
    "TemplateChanged",
    Health.PROGRESSING,
    (NODESET,),
    "a rolling update replaces Pods that run an older template",
)
UPDATE_BLOCKED = Reason(
    "UpdateBlocked",
    Health.DEGRADED,
    (NODESET,),
    "the new template does not fit a Node whose Pod runs the older one; that Pod stays, so "
    "the NodeSet keeps its capacity (lower the requests, or replace the Pod by hand)",
)
WAITING_FOR_JOBS = Reason(
    "WaitingForJobs",
    Health.PROGRESSING,
    (NODESET,),
    "Pods being removed are drained in Slurm and wait for their jobs to end",
)
PARTITION_IN_USE = Reason(
    "PartitionInUse",
    Health.PROGRESSING,
    (NODESET,),
    "the NodeSet is deleted and its Pods are gone, but jobs that have not ended still name its "
    "partition: slurmctld would end them if the partition left its configuration, so the "
    "NodeSet (and its partition line) stays until they end or move (`scontrol update "
    "jobid=… partition=…`, or `scancel`), or removalGracePeriodSeconds runs out",
)
NO_REMOVAL = Reason("NoRemoval", Health.HEALTHY, (NODESET,), "no Pod is waiting to be removed")
# SlurmCluster
COMPONENT_READY = Reason(
    "Ready", Health.HEALTHY, (SLURMCLUSTER,), "a component's workloads are ready"
)
ALL_COMPONENTS_READY = Reason(
    "AllComponentsReady", Health.HEALTHY, (SLURMCLUSTER,), "every component is ready"
)
DATABASE_UNAVAILABLE = Reason(
    "DatabaseUnavailable",
    Health.DEGRADED,
    (SLURMCLUSTER,),
    "the accounting database password Secret or key is missing, or MOCO is not installed",
)
KEY_MISSING = Reason(
    "KeyMissing",
    Health.DEGRADED,
    (SLURMCLUSTER,),
    "a key Secret the operator created and recorded in status.keys is gone; it is not "
    "regenerated unless the sunk.coreweave.com/regenerate-keys annotation asks for it",
)
APPLY_FAILED = Reason(
    "ApplyFailed",
    Health.DEGRADED,
    (SLURMCLUSTER,),
    "the API server refused an object the operator applies (<Kind>ApplyFailed)",
    family=True,
)
# Both kinds
RECONCILE_FAILED = Reason(
    "ReconcileFailed",
    Health.DEGRADED,
    _BOTH,
    "a reconcile raised an unexpected error; the operator retries with backoff and the "
    "message says what failed",
)

REASONS: tuple[Reason, ...] = (
    INVALID_SPEC,
    CONFIG_INVALID,
    OPERATOR_TOO_OLD,
    CLUSTER_NOT_FOUND,
    CLUSTER_INVALID,
    VERSION_SKEW,
    SLURM_UPGRADE_WAITING,
    PODS_PROGRESSING,
    ALL_PODS_READY,
    NODE_CONFLICT,
    NODE_CLAIMED,
    NO_CONFLICT,
    TEMPLATE_CHANGED,
    UPDATE_BLOCKED,
    WAITING_FOR_JOBS,
    PARTITION_IN_USE,
    NO_REMOVAL,
    COMPONENT_READY,
    ALL_COMPONENTS_READY,
    DATABASE_UNAVAILABLE,
    KEY_MISSING,
    APPLY_FAILED,
    RECONCILE_FAILED,
)


def reasons_for(kind: str) -> tuple[Reason, ...]:
    return tuple(r for r in REASONS if kind in r.kinds)


def health_of(kind: str, reason: str) -> Health | None:
    """The declared health of a reason as written on a ``kind``; None when undeclared."""
    for declared in reasons_for(kind):
        if declared.family and reason.endswith(declared.name) and reason != declared.name:
            return declared.health
        if not declared.family and reason == declared.name:
            return declared.health
    return None
