"""The custom resources: SlurmCluster and NodeSet (`sunk.coreweave.com/v1alpha1`).

The specs reuse the values models: the `slurm` chart places values into these specs and
the operator reads them back. CRD schemas are generated from these classes (sunk.schema).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from sunk.models.base import (
    DNS_LABEL,
    INT32_MAX,
    SLURM_CPUS_MAX,
    ConfKey,
    ConfText,
    Feature,
    FeaturePrefix,
    IntOrPercent,
    Quantity,
    Strict,
    open_object,
)
from sunk.models.k8s import Image
from sunk.models.values import (
    DIRECTORY_DESCRIPTION,
    HEALTH_DESCRIPTION,
    NETWORK_POLICY_DESCRIPTION,
    NSSCACHE_DESCRIPTION,
    SCHEDULER_DESCRIPTION,
    Accounting,
    ClusterCompute,
    ClusterNetworkPolicy,
    Controller,
    DirectoryService,
    Global,
    HealthCheck,
    Jwt,
    Login,
    Mount,
    Munge,
    Nsscache,
    Partition,
    Rest,
    S6Name,
    S6Service,
    Scheduler,
    SlurmConfig,
    Syncer,
    Topology,
    UpdateStrategy,
    s6_services,
)
from sunk.models.values import image as opensunk_image

GROUP = "sunk.coreweave.com"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"


class Condition(Strict):
    type: str = Field(description="Condition type, e.g. Ready.")
    status: str = Field(description="True, False or Unknown.")
    reason: str | None = Field(default=None, description="CamelCase reason.")
    message: str | None = Field(default=None, description="Human-readable detail.")
    observedGeneration: int | None = Field(default=None, description="Generation observed.")
    lastTransitionTime: str | None = Field(default=None, description="RFC 3339 time.")


# --------------------------------------------------------------------------- SlurmCluster


INFORMATIONAL = (
    "Informational: the slurm chart writes it into each NodeSet's spec; the operator does not "
    "read it here."
)


class ClusterGlobal(Global):
    """`spec.global`: the operator reads `imageRegistry`, `affinity`, `volumes` and
    `volumeMounts`."""

    imagePullSecrets: list[dict[str, str]] = Field(
        default_factory=list,
        description="Not acted on: the operator uses spec.imagePullSecrets (the slurm chart "
        "puts both values lists there).",
    )


class SlurmClusterCompute(ClusterCompute):
    image: Image = Field(
        default_factory=lambda: opensunk_image("slurmd"),
        description=f"Default slurmd image. {INFORMATIONAL}",
    )
    maxUnavailable: IntOrPercent = Field(
        default="10%",
        description=f"Pods unavailable at once during rolling updates. {INFORMATIONAL}",
    )
    mounts: list[Mount] = Field(
        default_factory=list,
        description="PVC mounts on every group's slurmd Pods (the operator merges them in; a "
        "group's own mount at the same path wins).",
    )
    partitions: list[Partition] = Field(
        default_factory=list,
        description="Declared partitions; one partition per NodeSet is always added.",
        json_schema_extra={
            "x-list-map-keys": ["name"],
            "x-cel": [
                {
                    "rule": "self.filter(p, has(p.default) && p.default).size() <= 1",
                    "message": "at most one partition may be the default",
                }
            ],
        },
    )
    rawPartitions: str = Field(
        default="",
        description="Raw slurm.conf partition lines: free text written as is (`sunkctl "
        "validate` flags keys the operator owns in it).",
    )


class Scripts(Strict):
    prolog: str | None = Field(default=None, description="ConfigMap with prolog.d scripts.")
    epilog: str | None = Field(default=None, description="ConfigMap with epilog.d scripts.")


class SlurmClusterSpec(Strict):
    clusterName: str = Field(
        description="Slurm ClusterName.",
        pattern=DNS_LABEL,
        max_length=40,
        json_schema_extra={"x-immutable": True},
    )
    imagePullSecrets: list[dict[str, str]] = Field(
        default_factory=list, description="Pull secrets for every pod."
    )
    global_: ClusterGlobal = Field(
        default_factory=ClusterGlobal,
        alias="global",
        description="Volumes and mounts added to the login and slurmd Pods.",
    )
    controller: Controller = Field(default_factory=Controller, description="slurmctld.")
    accounting: Accounting = Field(default_factory=Accounting, description="slurmdbd.")
    rest: Rest = Field(default_factory=Rest, description="slurmrestd.")
    login: Login = Field(default_factory=Login, description="Login nodes.")
    compute: SlurmClusterCompute = Field(
        default_factory=SlurmClusterCompute, description="Cluster-wide compute settings."
    )
    slurmConfig: SlurmConfig = Field(default_factory=SlurmConfig, description="slurm.conf keys.")
    topology: Topology = Field(default_factory=Topology, description="Topology generation.")
    munge: Munge = Field(default_factory=Munge, description="munge key.")
    jwt: Jwt = Field(default_factory=Jwt, description="JWT key and auth/jwt.")
    syncer: Syncer = Field(default_factory=Syncer, description="Syncer.")
    scheduler: Scheduler = Field(default_factory=Scheduler, description=SCHEDULER_DESCRIPTION)
    nsscache: Nsscache = Field(default_factory=Nsscache, description=NSSCACHE_DESCRIPTION)
    directoryService: DirectoryService = Field(
        default_factory=DirectoryService, description=DIRECTORY_DESCRIPTION
    )
    networkPolicy: ClusterNetworkPolicy = Field(
        default_factory=ClusterNetworkPolicy, description=NETWORK_POLICY_DESCRIPTION
    )
    scripts: Scripts = Field(default_factory=Scripts, description="Prolog/epilog ConfigMaps.")
    healthCheck: HealthCheck = Field(default_factory=HealthCheck, description=HEALTH_DESCRIPTION)

    def syncs(self) -> bool:
        """The Syncer runs: it talks to slurmrestd with a JWT."""
        return self.syncer.enabled and self.rest.enabled and self.jwt.enabled

    def schedules(self) -> bool:
        """The Pod Scheduler runs: beside the Syncer, whose hook takes its strict locks."""
        return self.scheduler.enabled and self.syncs()

    def scheduler_name(self, namespace: str) -> str:
        """The ``schedulerName`` Pods set (the chart fills in ``<namespace>-<release>``; a
        SlurmCluster written by hand without one gets ``<namespace>-<clusterName>``)."""
        return self.scheduler.name or f"{namespace}-{self.clusterName}"

    def scheduler_namespaces(self, namespace: str) -> tuple[str, ...] | None:
        """Where its Pods may be: None for every namespace."""
        scope = self.scheduler.scope
        if scope.type == "cluster":
            return None
        return tuple(scope.namespaces) or (namespace,)

    def locks_nodes(self) -> bool:
        """Jobs lock their Nodes through the prolog hook (the Syncer releases stale locks)."""
        return self.syncs() and self.syncer.nodeLocking

    def health_in(self, kind: str) -> bool:
        """The health checks run in the ``prolog`` or ``epilog``."""
        hc = self.healthCheck
        return bool(hc.checks()) and bool(hc.prolog if kind == "prolog" else hc.epilog)

    def runs_dispatcher(self, kind: str) -> bool:
        """slurm.conf names the ``prolog`` (or ``epilog``) dispatcher: there are scripts, jobs
        lock their Nodes, or the health checks run there."""
        scripts = self.scripts.prolog if kind == "prolog" else self.scripts.epilog
        return bool(scripts) or self.locks_nodes() or self.health_in(kind)


class KeyRecord(Strict):
    secretName: str = Field(description="The Secret the operator created for the key.")
    fingerprint: str = Field(
        pattern=r"^[0-9a-f]{16}$",
        description="First 16 hex digits of sha256 over the Secret's data as compact JSON "
        "with sorted keys (`kubectl get secret NAME -o json | jq -jcS .data | sha256sum`).",
    )


class ClusterKeys(Strict):
    munge: KeyRecord | None = Field(default=None, description="The munge key.")
    jwt: KeyRecord | None = Field(default=None, description="The JWT signing key.")
    sshHostKeys: KeyRecord | None = Field(default=None, description="The login SSH host keys.")
    databasePassword: KeyRecord | None = Field(
        default=None, description="The MariaDB password of slurmdbd."
    )
    databaseRootPassword: KeyRecord | None = Field(
        default=None, description="The MariaDB root password (the database is created with it)."
    )


class SlurmClusterStatus(Strict):
    observedGeneration: int | None = Field(default=None, description="Last reconciled generation.")
    configHash: str | None = Field(default=None, description="Hash of the rendered Slurm files.")
    slurmctldRelease: str | None = Field(
        default=None,
        description="The Slurm release slurmctld runs (its image tag's series), once rolled out "
        "and ready; NodeSets' slurmd images wait until it is not older than theirs.",
        pattern=r"^[0-9]{2}\.[0-9]{2}$",
    )
    keys: ClusterKeys = Field(
        default_factory=ClusterKeys,
        description="The key Secrets the operator created, with fingerprints. A recorded key "
        "whose Secret is gone is reported (KeyMissing), not regenerated, unless the "
        'annotation sunk.coreweave.com/regenerate-keys: "true" asks for it.',
    )
    conditions: list[Condition] = Field(
        default_factory=list, description="Ready and per-component."
    )


# --------------------------------------------------------------------------- NodeSet


class NodeSetFeatures(Strict):
    staticFeatures: list[Feature] = Field(default_factory=list, description="Features always set.")
    dynamicFeatures: dict[str, dict[str, FeaturePrefix]] = Field(
        default_factory=dict, description="Node label → `{prefix}`; the value becomes a feature."
    )


class PodTemplate(Strict):
    metadata: dict[str, Any] = open_object(
        "Labels and annotations of the pods.", default_factory=dict
    )
    spec: dict[str, Any] = open_object(
        "Pod spec (slurmd container `slurmd`); the operator adds node pinning, munge, the "
        "lock toleration and the SlurmCluster's `global.volumes`/`volumeMounts` and "
        "`compute.mounts` (an entry here with the same volume name or mountPath wins).",
        default_factory=dict,
    )


class NodeSetSpec(Strict):
    clusterName: str = Field(
        description="The SlurmCluster this NodeSet belongs to.",
        pattern=DNS_LABEL,
        json_schema_extra={"x-immutable": True},
    )
    replicas: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description="Desired pods; unset means every feasible Node.",
    )
    podNamePrefix: str | None = Field(
        default=None,
        pattern=DNS_LABEL,
        max_length=40,
        description="Pod and Slurm node name prefix.",
    )
    maxUnavailable: IntOrPercent = Field(
        default="10%", description="Rolling update budget (draining Pods count)."
    )
    updateStrategy: UpdateStrategy = Field(
        default_factory=UpdateStrategy, description="How outdated Pods are replaced."
    )
    gresGpu: str | None = Field(
        default=None, pattern=r"^([a-zA-Z0-9_]+:)?[0-9]+$", description="GPU GRES `type:count`."
    )
    skuCpu: int | None = Field(
        default=None, ge=1, le=SLURM_CPUS_MAX, description="CPUs Slurm schedules."
    )
    reservedMemory: Quantity | None = Field(
        default=None, description="Memory kept from Slurm (cluster default)."
    )
    features: NodeSetFeatures = Field(default_factory=NodeSetFeatures, description="Features.")
    partitionConfig: dict[ConfKey, ConfText | int] = Field(
        default_factory=dict, max_length=256, description="Keys of the group's partition."
    )
    s6: dict[S6Name, S6Service] = s6_services(dict)
    image: Image | None = Field(default=None, description="Informational: the slurmd image.")
    template: PodTemplate = Field(default_factory=PodTemplate, description="Pod template.")


class NodeSetStatus(Strict):
    observedGeneration: int | None = Field(default=None, description="Last reconciled generation.")
    desiredNumberScheduled: int = Field(default=0, description="spec.replicas or numberFeasible.")
    numberFeasible: int = Field(default=0, description="Nodes the NodeSet may use.")
    currentNumberScheduled: int = Field(default=0, description="Pods that exist.")
    numberReady: int = Field(default=0, description="Pods ready.")
    numberDrain: int = Field(default=0, description="Slurm nodes drained (Syncer).")
    numberIdle: int = Field(default=0, description="Slurm nodes idle (Syncer).")
    numberAllocated: int = Field(default=0, description="Slurm nodes running jobs (Syncer).")
    numberDown: int = Field(default=0, description="Slurm nodes down or not responding (Syncer).")
    numberRemoving: int = Field(
        default=0, description="Pods being removed safely: drained, waiting for their jobs."
    )
    numberOutdated: int = Field(default=0, description="Pods whose template is outdated.")
    numberMisscheduled: int = Field(default=0, description="Pods on Nodes no longer feasible.")
    numberUnavailable: int = Field(default=0, description="Desired pods not ready.")
    selector: str | None = Field(default=None, description="Label selector (scale subresource).")
    conditions: list[Condition] = Field(default_factory=list, description="Conditions.")
