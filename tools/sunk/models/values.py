"""The `slurm` chart's values (SUNK-compatible keys) and the `sunk` chart's values.

Defaults declared here are the charts' defaults: `sunkctl schema` writes them into each
chart's values.yaml, values.schema.json and README table.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, create_model, model_validator
from pydantic.fields import FieldInfo

from sunk import __version__
from sunk.models.base import (
    CONF_KEY,
    CONF_VALUE,
    CONF_WORD,
    CONFIG_MAP_KEY,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    HOST,
    INT32_MAX,
    INT64_MAX,
    LUA_TEXT,
    MAX_LUA,
    PERCENT,
    QUANTITY_PATTERN,
    SLURM_CPUS_MAX,
    ConfKey,
    ConfText,
    ConfWord,
    CpuCount,
    Feature,
    FeaturePrefix,
    IntOrPercent,
    Quantity,
    ScalarOrList,
    SlurmName,
    Strict,
    open_object,
)
from sunk.models.k8s import LOCK_TOLERATION, Image, PersistentStorage, Resources, Toleration
from sunk.models.stock import STOCK_DEFINITIONS

SLURM_VERSION = "24.11"
IMAGE_TAG = f"{__version__}-slurm{SLURM_VERSION}"
IMAGE_PREFIX = "opensunk"


def image(name: str) -> Image:
    """Our own images, as built by `make images` (see images/)."""
    return Image(repository=f"{IMAGE_PREFIX}/{name}", tag=IMAGE_TAG)


# --------------------------------------------------------------------------- shared shapes


class PodOptions(Strict):
    """Scheduling and runtime options every component pod accepts."""

    resources: Resources | None = Field(default=None, description="Container resources.")
    tolerations: list[Toleration] | None = Field(
        default=None,
        description="Tolerations; the `sunk.coreweave.com/lock` toleration is always added.",
    )
    affinity: dict[str, Any] | None = open_object(
        "Pod affinity (raw Kubernetes Affinity).", default=None
    )
    nodeSelector: dict[str, str] | None = Field(default=None, description="Node selector labels.")
    priorityClassName: str | None = Field(default=None, description="PriorityClass of the pods.")
    podSecurityContext: dict[str, Any] | None = open_object(
        "Pod security context (raw Kubernetes PodSecurityContext).", default=None
    )
    securityContext: dict[str, Any] | None = open_object(
        "Container security context (raw Kubernetes SecurityContext).", default=None
    )
    terminationGracePeriodSeconds: int | None = Field(
        default=None, ge=0, le=INT64_MAX, description="Grace period before the pod is killed."
    )
    annotations: dict[str, str] | None = Field(default=None, description="Extra pod annotations.")
    labels: dict[str, str] | None = Field(default=None, description="Extra pod labels.")
    env: list[dict[str, Any]] | None = open_object(
        "Extra environment variables (raw EnvVar list).", default=None
    )


def daemon_resources(daemon: str, cpu: str, memory: str) -> Any:
    """`resources` of a control-plane daemon: unset, the operator requests ``cpu`` and
    ``memory`` and sets no limit (sunk.operator.cluster.base.DEFAULT_REQUESTS)."""
    return Field(
        default=None,
        description=f"{daemon} container resources; unset: requests of {cpu} CPU and "
        f"{memory} memory, no limits.",
    )


S6_DESCRIPTION = (
    "s6 services by name: oneshots run in name order before the daemon starts, then longruns "
    "run supervised (restarted when they die)."
)
# A service name is a file name in the image and a ConfigMap key.
S6_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
S6Name = Annotated[str, Field(pattern=S6_NAME, max_length=63)]
MAX_S6_SERVICES = 64
MAX_S6_SCRIPT = 256 * 1024


# A CRD has no propertyNames (not structural): the names' pattern as a CEL rule, affordable
# because the map is small.
S6_NAME_RULE = {
    "rule": f"self.all(k, k.matches('{S6_NAME}'))",
    "message": f"s6 service names must match {S6_NAME}",
}


def s6_services(default: Any = None) -> Any:
    extra = {"x-cel": [S6_NAME_RULE]}
    if default is None:
        return Field(
            default=None,
            max_length=MAX_S6_SERVICES,
            description=S6_DESCRIPTION,
            json_schema_extra=extra,
        )
    return Field(
        default_factory=default,
        max_length=MAX_S6_SERVICES,
        description=S6_DESCRIPTION,
        json_schema_extra=extra,
    )


class S6Service(Strict):
    type: Literal["oneshot", "longrun"] = Field(
        description="oneshot: runs once, to completion, before the daemon; longrun: runs "
        "beside it and is restarted when it exits."
    )
    script: str = Field(
        max_length=MAX_S6_SCRIPT,
        description="The script, run as root in the daemon's container: with its `#!` "
        "interpreter, else with /bin/sh.",
    )
    timeoutUp: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description="oneshot: milliseconds it may run before it is killed and counts as "
        "failed (0 or unset: no limit). longrun: not used (it is up once started).",
    )
    timeoutDown: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description="longrun: milliseconds between SIGTERM and SIGKILL when the container "
        "stops (unset: s6's default, none). oneshot: not used (SUNK's keys have no down "
        "script).",
    )


class PodDisruptionBudget(Strict):
    enabled: bool = Field(
        default=True, description="A PodDisruptionBudget when there is more than one replica."
    )
    maxUnavailable: int | str = Field(
        default=1,
        description="Replicas a voluntary disruption (a Node drain) may take at once: a count "
        "or a percentage.",
        json_schema_extra={"x-int-or-string": True},
    )


class ControllerDisruptionBudget(Strict):
    enabled: bool = Field(
        default=False,
        description="A PodDisruptionBudget on slurmctld's Pods. One controller (maxUnavailable "
        "0): `kubectl drain` of its Node then waits until an admin moves slurmctld "
        "(`kubectl delete pod <cluster>-controller-0`; a delete is not an eviction) or turns "
        "this off. With `ha` (maxUnavailable 1): a drain takes one controller at a time. Off: a "
        "drain restarts slurmctld on another Node (its state is on its PVC; running jobs go "
        "on). A Pod that is not Ready can always be evicted.",
    )


ACCESS_MODES = Literal["ReadWriteOnce", "ReadWriteOncePod", "ReadWriteMany"]


class StateVolume(PersistentStorage):
    accessModes: list[ACCESS_MODES] = Field(
        default_factory=lambda: ["ReadWriteOnce"],
        min_length=1,
        max_length=3,
        description="Access modes of the claim. `ha` needs `ReadWriteMany` (every controller "
        "mounts the one StateSaveLocation), from a StorageClass that offers it (NFS, CephFS, "
        "a cloud file store).",
    )


class ControllerHA(Strict):
    enabled: bool = Field(
        default=False,
        description="A primary slurmctld and `backups` standbys (`SlurmctldHost` lines, "
        "primary first) on one shared StateSaveLocation, on different Nodes; a standby takes "
        "over after `SlurmctldTimeout` (10 s unless slurmConfig sets it). Chosen when the "
        "cluster is created: the state moves to a shared claim, so the API server refuses a "
        "change.",
    )
    backups: int = Field(default=1, ge=1, le=3, description="Standby controllers, 1 to 3.")


HA_NEEDS_RWX = (
    "stateVolume.accessModes: ha needs ReadWriteMany (every controller mounts the one "
    "StateSaveLocation)"
)
HA_FIXED = (
    "ha.enabled: chosen when the cluster is created (the state would stay on the old claim); "
    "create a new cluster to change it"
)


# The CRD says what `Controller._shared_state` says, and refuses to switch HA on or off later
# (the StatefulSet's claims are immutable, and the state would stay behind on the old one).
_HA_ON = "has(self.ha) && has(self.ha.enabled) && self.ha.enabled"
CONTROLLER_RULES = [
    {
        "rule": f"!({_HA_ON}) || (has(self.stateVolume) && has(self.stateVolume.accessModes) "
        "&& self.stateVolume.accessModes.exists(m, m == 'ReadWriteMany'))",
        "message": HA_NEEDS_RWX,
    },
    {
        "rule": f"({_HA_ON}) == ({_HA_ON.replace('self.', 'oldSelf.')})",
        "message": HA_FIXED,
    },
]


# --------------------------------------------------------------------------- control plane


class Controller(PodOptions):
    model_config = ConfigDict(json_schema_extra={"x-cel": CONTROLLER_RULES})

    resources: Resources | None = daemon_resources("slurmctld", "100m", "256Mi")
    podDisruptionBudget: ControllerDisruptionBudget = Field(
        default_factory=ControllerDisruptionBudget, description="Voluntary disruptions."
    )
    image: Image = Field(
        default_factory=lambda: image("controller"), description="slurmctld image."
    )
    stateVolume: StateVolume = Field(
        default_factory=lambda: StateVolume(size="32Gi"),
        description="PVC holding StateSaveLocation; kept when the cluster is deleted.",
    )
    ha: ControllerHA = Field(
        default_factory=ControllerHA, description="slurmctld high availability (opt-in)."
    )
    keepStateOnDelete: bool = Field(
        default=True, description="Keep the state PVC when the SlurmCluster is deleted."
    )
    etcConfigMap: str | None = Field(
        default=None,
        description="ConfigMap of extra files for /etc/slurm. Not acted on yet: the operator "
        "does not mount it.",
    )

    @model_validator(mode="after")
    def _shared_state(self) -> Controller:
        if self.ha.enabled and "ReadWriteMany" not in self.stateVolume.accessModes:
            raise ValueError(HA_NEEDS_RWX)
        return self

    def controllers(self) -> int:
        """slurmctld Pods: the primary and its standbys."""
        return 1 + self.ha.backups if self.ha.enabled else 1


class SecretRef(Strict):
    name: str = Field(description="Secret name.", min_length=1)
    key: str = Field(default="password", description="Key inside the Secret.")


class ExternalDatabase(Strict):
    enabled: bool = Field(
        default=False, description="Use an external MySQL/MariaDB server (same as type external)."
    )
    host: str | None = Field(
        default=None, description="Database host name.", pattern=HOST, max_length=253
    )
    port: int = Field(default=3306, ge=1, le=65535, description="Database port.")
    user: str = Field(
        default="slurm", description="Database user.", pattern=CONF_WORD, max_length=80
    )
    passwordSecret: SecretRef | None = Field(
        default=None, description="Secret holding the database password."
    )


class MariaDB(Strict):
    image: Image = Field(
        default_factory=lambda: Image(repository="mariadb", tag="11.4"),
        description="Embedded MariaDB image.",
    )
    storage: PersistentStorage = Field(
        default_factory=lambda: PersistentStorage(size="16Gi"),
        description="Embedded MariaDB data volume.",
    )
    resources: Resources | None = daemon_resources("MariaDB", "100m", "256Mi")


class Moco(Strict):
    replicas: int = Field(
        default=3, ge=1, le=INT32_MAX, description="MySQLCluster instances (odd number)."
    )
    image: Image = Field(
        default_factory=lambda: Image(repository="cybozu-go/moco/mysql", tag="8.4.4"),
        description="MOCO's mysqld image; put your registry in the repository or "
        "global.imageRegistry.",
    )
    storage: PersistentStorage = Field(
        default_factory=lambda: PersistentStorage(size="16Gi"),
        description="Data volume per instance.",
    )
    resources: Resources | None = Field(default=None, description="mysqld resources.")


class Database(Strict):
    type: Literal["mariadb", "moco", "external"] = Field(
        default="mariadb",
        description="Accounting database: embedded MariaDB, a MOCO MySQLCluster, or external.",
    )
    name: str = Field(
        default="slurm_acct_db",
        description="Database name (StorageLoc).",
        pattern=CONF_WORD,
        max_length=64,
    )
    mariadb: MariaDB = Field(default_factory=MariaDB, description="Embedded MariaDB settings.")
    moco: Moco = Field(default_factory=Moco, description="MOCO MySQLCluster settings.")


ACCOUNTING_RULES = [
    {
        "rule": "!self.enabled || (self.database.type != 'external' && !self.external.enabled)"
        " || (has(self.external.host) && self.external.host != '')",
        "message": "an external accounting database needs external.host",
    },
    {
        "rule": "!(self.external.enabled && self.database.type == 'moco')",
        "message": "external.enabled conflicts with database.type moco",
    },
]


class Accounting(PodOptions):
    model_config = ConfigDict(json_schema_extra={"x-cel": ACCOUNTING_RULES})
    resources: Resources | None = daemon_resources("slurmdbd", "50m", "128Mi")

    enabled: bool = Field(default=True, description="Run slurmdbd and record accounting.")
    replicas: int = Field(default=1, ge=0, le=1, description="slurmdbd replicas (0 or 1).")
    image: Image = Field(default_factory=lambda: image("controller"), description="slurmdbd image.")
    database: Database = Field(default_factory=Database, description="The accounting database.")
    external: ExternalDatabase = Field(
        default_factory=ExternalDatabase, description="External database connection (SUNK key)."
    )
    config: dict[ConfKey, ScalarOrList] = Field(
        default_factory=dict,
        max_length=256,
        description="slurmdbd.conf keys passed through (e.g. PurgeJobAfter).",
    )

    def database_kind(self) -> Literal["mariadb", "moco", "external"]:
        """Where the database is: `external.enabled` (SUNK's key) wins over `database.type`."""
        return "external" if self.external.enabled else self.database.type


class Rest(PodOptions):
    resources: Resources | None = daemon_resources("slurmrestd", "50m", "128Mi")
    enabled: bool = Field(default=True, description="Run slurmrestd.")
    replicas: int = Field(default=1, ge=0, le=INT32_MAX, description="slurmrestd replicas.")
    image: Image = Field(
        default_factory=lambda: image("controller"), description="slurmrestd image."
    )


class LoginService(Strict):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(
        default="ClusterIP",
        description="Service type of the login endpoint. ClusterIP by default: sshd is not "
        "exposed outside the cluster until you choose to (SUNK's default is LoadBalancer).",
    )
    externalTrafficPolicy: Literal["Cluster", "Local"] | None = Field(
        default="Local",
        description="For NodePort/LoadBalancer services (`Local`, SUNK's default, keeps the "
        "client address); a ClusterIP Service gets none.",
    )
    annotations: dict[str, str] = Field(default_factory=dict, description="Service annotations.")
    loadBalancerSourceRanges: list[str] = Field(
        default_factory=list,
        description="CIDRs allowed to reach a LoadBalancer service; `sunkctl validate` warns "
        "about a LoadBalancer without them (open to every address).",
    )
    port: int = Field(default=22, ge=1, le=65535, description="SSH port of the service.")


class Login(PodOptions):
    resources: Resources | None = daemon_resources("sshd", "100m", "256Mi")
    podDisruptionBudget: PodDisruptionBudget = Field(
        default_factory=PodDisruptionBudget,
        description="Voluntary disruptions: a drain takes at most `maxUnavailable` login Pods "
        "(and their users' sessions) at once; a Pod that is not Ready can always be evicted.",
    )
    enabled: bool = Field(default=True, description="Run login pods (sshd + Slurm clients).")
    replicas: int = Field(default=1, ge=0, le=INT32_MAX, description="Login StatefulSet replicas.")
    image: Image = Field(default_factory=lambda: image("login"), description="Login image.")
    service: LoginService = Field(default_factory=LoginService, description="Login Service.")
    sshKeyVolume: PersistentStorage | None = Field(
        default=None,
        description="PVC for user SSH keys, mounted at /etc/ssh/user-keys. Not acted on yet: "
        "sshd does not read keys from there. Host keys live in an operator Secret.",
    )
    s6: dict[S6Name, S6Service] = s6_services(dict)
    volumes: list[dict[str, Any]] = open_object(
        "Extra login Pod volumes (raw); one named like a `global.volumes` entry replaces it.",
        default_factory=list,
    )
    volumeMounts: list[dict[str, Any]] = open_object(
        "Extra `sshd` mounts (raw); one at the mountPath of a `global.volumeMounts` entry "
        "replaces it.",
        default_factory=list,
    )


# --------------------------------------------------------------------------- compute


class Features(Strict):
    static: list[Feature] = Field(default_factory=list, description="Slurm features always set.")
    dynamic: dict[str, dict[str, FeaturePrefix]] = Field(
        default_factory=dict,
        description="Node label → `{prefix}`: the label's value becomes a Slurm feature.",
    )


class NodeGroup(PodOptions):
    """A compute node group (`compute.nodes.<name>`); also the shape of a named definition.

    Every field is optional here: a group is resolved by merging chart defaults, then its
    definitions in order, then its own keys (see sunk.models.merge).
    """

    enabled: bool | None = Field(default=None, description="Render this group (default true).")
    replicas: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description="Desired Slurm nodes (one pod per Kubernetes Node).",
    )
    definitions: list[str] | None = Field(
        default=None, description="Named definitions merged under this group, in order."
    )
    image: Image | None = Field(default=None, description="slurmd image for this group.")
    gresGpu: str | None = Field(
        default=None,
        description="GPU GRES as `type:count` (e.g. `h100:8`) or a count; null for none.",
        pattern=r"^([a-zA-Z0-9_]+:)?[0-9]+$",
    )
    # SUNK's values files quote it (`skuCpu: "4"`); the chart writes a number either way.
    skuCpu: Annotated[int, Field(ge=1, le=SLURM_CPUS_MAX)] | CpuCount | None = Field(
        default=None,
        description='CPUs Slurm schedules (a number, or SUNK\'s quoted `"4"`); default: the '
        "pod's CPU limit.",
    )
    features: Features | None = Field(default=None, description="Slurm node features.")
    staticFeatures: list[Feature] | None = Field(
        default=None, description="SUNK 7.x spelling of `features.static`."
    )
    nodeSelector: dict[str, str] | None = Field(
        default=None,
        description="Discouraged: does not bind the pods; use required node affinity.",
    )
    partitionConfig: dict[ConfKey, ConfText | int] | None = Field(
        default=None, max_length=256, description="Extra keys for this group's own partition line."
    )
    s6: dict[S6Name, S6Service] | None = s6_services()
    volumes: list[dict[str, Any]] | None = open_object(
        "Extra slurmd Pod volumes (raw); one named like a `global.volumes` or `compute.mounts` "
        "entry replaces it.",
        default=None,
    )
    volumeMounts: list[dict[str, Any]] | None = open_object(
        "Extra `slurmd` mounts (raw); one at the mountPath of a `global.volumeMounts` or "
        "`compute.mounts` entry replaces it.",
        default=None,
    )
    podNamePrefix: str | None = Field(
        default=None,
        description="Pod (and Slurm node) name prefix; default the group name.",
        pattern=DNS_LABEL,
        max_length=40,
    )


class UpdateStrategy(Strict):
    type: Literal["RollingUpdate", "OnDelete"] = Field(
        default="RollingUpdate",
        description="RollingUpdate: drain and replace outdated Pods within maxUnavailable, "
        "never under a running job; OnDelete: replace a Pod only when someone deletes it.",
    )


class Partition(Strict):
    name: str = Field(description="Partition name.", pattern=r"^[A-Za-z0-9_.-]+$")
    nodeSets: list[SlurmName] = Field(
        min_length=1, description="Node groups in the partition (or `ALL`)."
    )
    default: bool = Field(default=False, description="The default partition (at most one).")
    config: dict[ConfKey, ConfText | int] = Field(
        default_factory=dict,
        max_length=256,
        description="Extra partition keys, e.g. `{MaxTime: INFINITE}`.",
    )


# The container plugin's sizes ("20G") and registries ("registry.local:5000").
CACHE_SIZE = r"^[0-9]{1,12}[KMGT]?$"
REGISTRY = r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?$"
APPARMOR_PROFILE = r"^[A-Za-z0-9._/:-]*$"
# compute.mpi.env: variable names of the MPI stacks (Open MPI, its PMIx and PRRTE, UCX,
# libfabric, MPICH, Intel MPI), and values that are one plugstack.conf word (`env=NAME=VALUE`
# on the container plugin's line, which SPANK splits on whitespace without quotes): what the
# guard refuses in a word (sunk.slurmconf.guard, CONF_WORD) is refused here, empty allowed.
MPI_ENV_NAME = r"^(OMPI|OPAL|PMIX|PRTE|UCX|FI|MPICH|I_MPI)_[A-Za-z0-9_]+$"
MPI_ENV_VALUE = r'^[^\x00-\x20\x7f#"\\]*$'
MPI_ENV_RULE = {
    "rule": f"self.all(k, k.matches('{MPI_ENV_NAME}'))",
    "message": f"compute.mpi.env names must match {MPI_ENV_NAME}",
}
# Open MPI over TCP and shared memory (the Pod network has no RDMA). `vader` is the shared
# memory BTL of Open MPI 1.8 to 4.1 and an alias of `sm` in 5.x: one name for both.
MPI_ENV_DEFAULTS = {
    "OMPI_MCA_pml": "ob1",
    "OMPI_MCA_btl": "self,vader,tcp",
    "OMPI_MCA_btl_tcp_if_include": "eth0",
    "OMPI_MCA_oob_tcp_if_include": "eth0",
}
# The options the container plugin accepts (Pyxis's names; it refuses any other), and the
# enroot.conf keys that have a meaning for it (sunk.slurmconf.plugstack renders both).
PYXIS_OPTIONS = (
    "runtime_path",
    "cache_path",
    "image_cache_size",
    "mount_home",
    "remap_root",
    "writable",
    "container_scope",
    "execute_entrypoint",
    "sbatch_support",
    "insecure_registries",
    "credentials",
    "env",
)
ENROOT_OPTIONS = {
    "ENROOT_DATA_PATH": "runtime_path",
    "ENROOT_CACHE_PATH": "cache_path",
    "ENROOT_ROOTFS_WRITABLE": "writable",
    "ENROOT_MOUNT_HOME": "mount_home",
    "ENROOT_REMAP_ROOT": "remap_root",
}


class Pyxis(Strict):
    enabled: bool = Field(
        default=True,
        description="Containers in jobs (`srun --container-image`, Pyxis's options): "
        "plugstack.conf loads /usr/local/lib/slurm/spank_sunk_container.so as a required "
        "plugin (the opensunk slurmd and login images carry it; it also exports "
        "compute.mpi.env to every job task), and the slurmd Pods get an emptyDir for images "
        "and container root filesystems.",
    )
    mountHome: bool = Field(
        default=True,
        description="Mount the user's home into containers (`mount_home=1|0`).",
    )
    remapRoot: bool = Field(
        default=False,
        description="Run containers as root in a user namespace mapped to the user "
        "(`remap_root=1|0`; users choose per step with `--[no-]container-remap-root`). Off "
        "by default, as in Enroot: PMIx hangs in MPI_Init inside a user namespace, so "
        "`srun --mpi=pmix` programs need it off.",
    )
    imageCacheSize: str = Field(
        default="20G",
        pattern=CACHE_SIZE,
        description="Most space the node's image cache may take before the least recently "
        "used images go (`image_cache_size=`; K, M, G or T).",
    )
    insecureRegistries: list[Annotated[str, Field(pattern=REGISTRY, max_length=261)]] = Field(
        default_factory=list,
        max_length=64,
        description="Registries (`HOST` or `HOST:PORT`) pulled from over plain HTTP "
        "(`insecure_registries=`); empty: HTTPS only.",
    )
    credentialsSecret: str | None = Field(
        default=None,
        pattern=DNS_SUBDOMAIN,
        max_length=253,
        description="Secret in the cluster's namespace whose key `credentials` holds registry "
        "credentials in netrc form (`machine HOST login USER password PASS`), mounted "
        "read-only at /etc/sunk/containers/credentials in the slurmd container.",
    )
    cacheVolumeSizeLimit: Quantity | None = Field(
        default=None,
        description="sizeLimit of the slurmd Pods' `containers` emptyDir (images and container "
        "root filesystems, at the plugin's runtime_path); unset: no limit.",
    )
    plugstackOptions: list[ConfWord] = Field(
        default_factory=lambda: ["container_scope=job"],
        description="Plugin options (`key=value`), written last on the plugstack.conf line "
        f"(a later word wins). The plugin knows {', '.join(PYXIS_OPTIONS)}; `sunkctl "
        "validate` warns about others.",
    )
    enrootConfig: dict[str, str] = Field(
        default_factory=dict,
        description="enroot.conf keys, as SUNK takes them: ENROOT_DATA_PATH (runtime_path), "
        "ENROOT_CACHE_PATH (cache_path), ENROOT_ROOTFS_WRITABLE (writable), ENROOT_MOUNT_HOME "
        "and ENROOT_REMAP_ROOT (over mountHome and remapRoot) become plugin options; other "
        "keys are not acted on (no enroot runs, and no enroot.conf is rendered).",
    )
    appArmorProfile: str = Field(
        default="",
        pattern=APPARMOR_PROFILE,
        max_length=253,
        description="AppArmor profile of the slurmd container: a profile loaded on the Nodes "
        "(`enroot` or SUNK's `localhost/enroot`: Localhost), `RuntimeDefault` or "
        "`Unconfined`; empty: none set. A group's own securityContext.appArmorProfile wins.",
    )
    podSecurityContext: dict[str, Any] | None = open_object(
        "Pod security context of the slurmd Pods (raw Kubernetes PodSecurityContext, e.g. a "
        "Localhost seccomp profile for containers), where a group sets none of its own; "
        "unset: the default (seccomp RuntimeDefault).",
        default=None,
    )


class Mpi(Strict):
    env: dict[
        Annotated[str, Field(pattern=MPI_ENV_NAME, max_length=128)],
        Annotated[str, Field(pattern=MPI_ENV_VALUE, max_length=1024)] | None,
    ] = Field(
        default_factory=lambda: dict(MPI_ENV_DEFAULTS),
        max_length=64,
        description="Environment for job tasks (Open MPI's MCA parameters and the like), "
        "exported to every job task by the container plugin (compute.pyxis.enabled) unless "
        "the task has the variable, so a job's `export` wins; not acted on while "
        "compute.pyxis.enabled is false. Each value is one plugstack.conf word (no whitespace, "
        '`#`, `"` or `\\`); null or empty: not set. By default Open MPI over TCP and '
        "shared memory on eth0 (the Pod network has no RDMA).",
        json_schema_extra={"x-cel": [MPI_ENV_RULE]},
    )


class Mount(Strict):
    name: str = Field(description="Mount path inside compute pods.")
    pvc: str = Field(description="PersistentVolumeClaim to mount.")


class ClusterCompute(Strict):
    """Cluster-wide compute settings (shared by the values and the SlurmCluster spec)."""

    image: Image = Field(
        default_factory=lambda: image("slurmd"), description="Default slurmd image."
    )
    reservedMemory: Quantity = Field(
        default="4Gi", description="Memory kept from Slurm: DefMemPerCPU = (limit − this) ÷ CPUs."
    )
    maxUnavailable: IntOrPercent = Field(
        default="10%",
        description="Pods unavailable at once during rolling updates (draining ones count).",
    )
    generateTopology: bool = Field(
        default=True, description="Generate topology.conf from Node labels."
    )
    pyxis: Pyxis = Field(
        default_factory=Pyxis,
        description="Containers in jobs: Pyxis's `srun --container-image` options.",
    )
    s6: dict[S6Name, S6Service] = s6_services(dict)
    mounts: list[Mount] = Field(default_factory=list, description="PVC mounts on all groups.")
    sharedMemory: Quantity | None = Field(
        default="8Gi",
        description="Size of /dev/shm in the slurmd Pods: an emptyDir in memory (Kubernetes' "
        "own 64 MiB starves MPI's shared memory; what jobs write there counts as the Pod's "
        "memory), unless a group mounts something there; null: none added.",
    )
    mpi: Mpi = Field(default_factory=Mpi, description="MPI defaults for job tasks.")


class Switch(Strict):
    enabled: bool = Field(default=False, description="Turn it on.")


NOT_ACTED_ON_SUNK = "Not acted on yet: accepted so that SUNK values files validate."


class Compute(ClusterCompute):
    # SUNK's documented compute keys that nothing here reads (values only: the chart does not
    # put them into the SlurmCluster); sunk.models.not_acted_on lists them for SUNK027.
    dynamic: bool = Field(
        default=True,
        description="SUNK: dynamic Slurm nodes (true) or cloud nodes (false). Not acted on "
        "yet: every slurmd here registers as a dynamic node, whatever this says.",
    )
    securityContext: dict[str, Any] | None = open_object(
        "SUNK: the slurmd containers' securityContext (e.g. `{privileged: true}`). Not acted "
        "on yet: set it in `compute.nodeDefaults` or a group (slurmd is unprivileged with a "
        "listed capability set unless a group sets its own).",
        default=None,
    )
    ssh: Switch = Field(
        default_factory=Switch,
        description="SUNK: direct SSH into compute Pods. " + NOT_ACTED_ON_SUNK,
    )
    autoPartition: Switch = Field(
        default_factory=Switch,
        description="SUNK: partitions made from Node labels. " + NOT_ACTED_ON_SUNK,
    )
    gpusd: Switch = Field(
        default_factory=Switch,
        description="SUNK: GPU straggler detection (GPUSD) on compute Pods. " + NOT_ACTED_ON_SUNK,
    )
    cacheDropper: Switch = Field(
        default_factory=Switch,
        description="SUNK: a sidecar that drops the OS page cache now and then. "
        + NOT_ACTED_ON_SUNK,
    )
    updateStrategy: UpdateStrategy = Field(
        default_factory=UpdateStrategy,
        description="How slurmd Pods are replaced when their template changes.",
    )
    nodeDefaults: NodeGroup = Field(
        default_factory=lambda: NodeGroup(enabled=True, replicas=1),
        description="Chart defaults under every group (merged first).",
    )
    definitions: dict[str, NodeGroup] = Field(
        default_factory=lambda: {
            k: NodeGroup.model_validate(v) for k, v in STOCK_DEFINITIONS.items()
        },
        description="Named partial node specs; the stock ones cover common CPU/GPU SKUs.",
    )
    nodes: dict[str, NodeGroup] = Field(
        default_factory=dict, description="Node groups: one NodeSet (and partition) each."
    )
    partitions: list[Partition] | str = Field(
        default_factory=list,
        description="Partitions over node groups, or raw slurm.conf partition lines.",
    )


# --------------------------------------------------------------------------- Slurm settings


class LuaConfigMapRef(Strict):
    name: str = Field(
        description="ConfigMap in the cluster's namespace.",
        pattern=DNS_SUBDOMAIN,
        max_length=253,
    )
    key: str | None = Field(
        default=None,
        description="Key of the script in the ConfigMap (default: the file name, "
        "`job_submit.lua` or `cli_filter.lua`).",
        pattern=CONFIG_MAP_KEY,
        max_length=253,
    )


LUA_SCRIPT_RULES = [
    {
        "rule": "!(has(self.script) && has(self.configMap))",
        "message": "set either script or configMap, not both",
    }
]


class LuaScript(Strict):
    """A Slurm Lua plugin script: inline text, or a key of a ConfigMap."""

    model_config = ConfigDict(json_schema_extra={"x-cel": LUA_SCRIPT_RULES})

    script: str | None = Field(
        default=None,
        description="The script itself (checked by `sunkctl validate`; line feeds and tabs "
        "are the only control characters allowed).",
        min_length=1,
        max_length=MAX_LUA,
        pattern=LUA_TEXT,
    )
    configMap: LuaConfigMapRef | None = Field(
        default=None, description="Or: a ConfigMap key holding the script (mounted as is)."
    )

    @model_validator(mode="after")
    def _one_source(self) -> LuaScript:
        if self.script is not None and self.configMap is not None:
            raise ValueError("set either script or configMap, not both")
        return self

    @property
    def enabled(self) -> bool:
        return self.script is not None or self.configMap is not None


class SlurmConfig(Strict):
    """slurm.conf passthrough: any slurm.conf key (CamelCase) with a scalar or list value."""

    model_config = ConfigDict(
        extra="allow", json_schema_extra={"propertyNames": {"pattern": CONF_KEY}}
    )
    __pydantic_extra__: dict[str, ScalarOrList]

    @model_validator(mode="after")
    def _slurm_keys(self) -> SlurmConfig:
        for key in self.model_extra or {}:
            if not re.match(CONF_KEY, key):
                raise ValueError(f"slurmConfig key {key!r} is not a Slurm key")
        return self

    extraConfig: str = Field(
        default="",
        description="Free text appended to slurm.conf as is (not checked by the renderer's "
        "guard; `sunkctl validate` flags keys the operator owns in it).",
    )
    cgroupConfig: dict[ConfKey, ScalarOrList] = Field(
        default_factory=dict, max_length=256, description="cgroup.conf keys passed through."
    )
    mpiConfig: dict[ConfKey, ScalarOrList] = Field(
        default_factory=dict,
        max_length=256,
        description="mpi.conf keys passed through, over the defaults "
        "PMIxCliTmpDirBase=/var/spool/slurmd/pmix and PMIxDirectConn=true.",
    )
    jobSubmitLua: LuaScript | None = Field(
        default=None,
        description="job_submit.lua: slurmctld runs it on every job submission and "
        "modification (`JobSubmitPlugins=lua`).",
    )
    cliFilterLua: LuaScript | None = Field(
        default=None,
        description="cli_filter.lua: sbatch, srun and salloc run it on login Pods and in jobs "
        "(`CliFilterPlugins=lua`).",
    )

    def lua(self) -> dict[str, LuaScript]:
        """The Lua plugin scripts that are set: file name → script."""
        out = {}
        for name, script in (
            ("job_submit.lua", self.jobSubmitLua),
            ("cli_filter.lua", self.cliFilterLua),
        ):
            if script is not None and script.enabled:
                out[name] = script
        return out


class KeySecret(Strict):
    existingSecret: str | None = Field(
        default=None, description="Use this Secret; otherwise the operator makes one once."
    )


class Jwt(KeySecret):
    enabled: bool = Field(
        default=True,
        description="auth/jwt as alternate auth (slurmrestd tokens); needs Slurm's JWT "
        "plugin (our images carry Debian's slurm-wlm-jwt-plugin).",
    )


class Munge(KeySecret):
    resources: Resources | None = Field(
        default=None,
        description="Resources of the munge sidecar in every Slurm Pod (login, slurmd, "
        "controller, accounting, rest); default requests cpu 10m, memory 16Mi, limit 64Mi.",
    )


class Syncer(Strict):
    """The Syncer runs inside the operator's leader (one loop per cluster): it has no Pod of
    its own, so it takes no Pod options."""

    enabled: bool = Field(
        default=True,
        description="Sync Slurm node state with pods and remove slurmd Pods safely "
        "(needs `rest.enabled` and `jwt.enabled`).",
    )
    logLevel: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Syncer log level."
    )
    removalGracePeriodSeconds: int = Field(
        default=0,
        ge=0,
        le=INT32_MAX,
        description="How long a slurmd Pod being removed (scale-down, update, lost Node, "
        "deleted NodeSet) may keep running jobs after it is drained; then it is deleted and "
        "its jobs fail. 0 waits for the jobs however long they run.",
    )
    nodeLocking: bool = Field(
        default=True,
        description="A job's prolog locks its Kubernetes Node before the job starts: the taint "
        "`sunk.coreweave.com/lock=true:NoExecute`, and Pods that do not tolerate it are "
        "evicted; the epilog unlocks. Works while the Syncer runs.",
    )


class SchedulerScope(Strict):
    type: Literal["namespace", "cluster"] = Field(
        default="namespace",
        description="`namespace`: Pods in `namespaces`; `cluster`: Pods in every namespace.",
    )
    namespaces: list[Annotated[str, Field(pattern=DNS_LABEL, max_length=63)]] = Field(
        default_factory=list,
        description="Namespaces it schedules in with `type: namespace` (empty: the release "
        "namespace).",
    )


SCHEDULER_DESCRIPTION = (
    "SUNK Pod Scheduler: Pods whose `schedulerName` names it are placed through Slurm "
    "(a placeholder job each) and bound where Slurm allocated. Runs inside the operator, "
    "beside the Syncer, which it needs."
)
NSSCACHE_DESCRIPTION = (
    "User provisioning with nsscache. Not acted on yet: no CronJob is built and no "
    "nsscache.conf is mounted."
)


# Go-style durations as SUNK writes them ("10s", "1m30s", "500ms").
DURATION = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
Duration = Annotated[str, Field(pattern=DURATION, max_length=32)]
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_DURATION_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_seconds(text: str) -> float:
    """Seconds in a `Duration` (the pattern has been checked)."""
    return sum(float(n) * _DURATION_UNIT[u] for n, u in _DURATION_PART.findall(text))


class SchedulerSlurm(Strict):
    poolSize: int = Field(
        default=5,
        ge=1,
        le=1000,
        description="Connections to slurmrestd the scheduler opens at most.",
    )
    usePersistentConnection: bool = Field(
        default=True, description="Keep connections to slurmrestd open between requests."
    )
    protocolVersion: str | None = Field(
        default=None,
        max_length=32,
        description="Slurm RPC protocol version (SUNK's scheduler speaks RPC; ours uses "
        "slurmrestd: not acted on).",
    )


class SchedulerTuning(Strict):
    gpuTypes: dict[SlurmName, SlurmName] = Field(
        default_factory=dict,
        description="GPU product → GRES type, e.g. `NVIDIA_H100: h100`. The product is the "
        "value of the Pod's nodeSelector `gpu.nvidia.com/class` or `nvidia.com/gpu.product`; "
        "`nvidia.com/gpu` requests become `gres/gpu:<type>:<count>` (untyped without a product).",
    )
    pollInterval: Duration = Field(
        default="10s", description="How often Slurm's jobs are read (Pod events act at once)."
    )
    terminationOffset: Duration = Field(
        default="5s",
        description="A Pod's `terminationGracePeriodSeconds` must be below `killWait` minus this.",
    )


class SchedulerConfig(Strict):
    slurm: SchedulerSlurm = Field(default_factory=SchedulerSlurm, description="Slurm client.")
    scheduler: SchedulerTuning = Field(
        default_factory=SchedulerTuning, description="Scheduling settings."
    )


def _pod_options_not_acted_on(model_name: str, why: str) -> type[Strict]:
    """PodOptions' keys, accepted (SUNK's values files set them) and described as not acted
    on, for a component that has no Pod of its own."""
    fields: dict[str, Any] = {
        name: (
            info.annotation,
            FieldInfo.merge_field_infos(
                info, description=f"{info.description} Not acted on: {why}."
            ),
        )
        for name, info in PodOptions.model_fields.items()
    }
    return create_model(model_name, __base__=Strict, **fields)


SchedulerPodOptions = _pod_options_not_acted_on(
    "SchedulerPodOptions", "the Pod Scheduler runs inside the operator"
)


class Scheduler(SchedulerPodOptions):  # type: ignore[misc,valid-type]
    enabled: bool = Field(
        default=False,
        description="Run the Pod Scheduler (needs `syncer.enabled`, `rest.enabled` and "
        "`jwt.enabled`).",
    )
    name: str | None = Field(
        default=None,
        pattern=DNS_SUBDOMAIN,
        max_length=253,
        description="The `schedulerName` Pods set; default `<namespace>-<release>`.",
    )
    scope: SchedulerScope = Field(default_factory=SchedulerScope, description="Scheduling scope.")
    config: SchedulerConfig = Field(default_factory=SchedulerConfig, description="Settings.")
    killWait: int = Field(
        default=30,
        ge=6,
        le=65535,
        description="Seconds Slurm waits before SIGKILL (slurm.conf `KillWait`).",
    )


class Nsscache(PodOptions):
    enabled: bool = Field(
        default=False, description="Provision users with an nsscache CronJob (not built yet)."
    )
    existingSecret: str | None = Field(default=None, description="Secret with source credentials.")
    cronJobSchedule: str = Field(default="* * * * *", description="CronJob schedule.")
    sudoGroups: list[str] = Field(default_factory=list, description="Groups granted sudo.")
    nsscacheConfig: dict[str, Any] = open_object("nsscache.conf sections.", default_factory=dict)
    nsswitchConfig: dict[str, Any] = open_object("nsswitch.conf map sources.", default_factory=dict)


DIRECTORY_DESCRIPTION = (
    "Users and groups from an LDAP directory through SSSD: an `sssd` sidecar beside "
    "slurmctld, the login `sshd` and every slurmd resolves them with the same uid and gid, and "
    "the login Pods take users' SSH public keys from the directory (`sshPublicKey`)."
)
LDAP_URI = r'^ldaps?://[^\x00-\x20\x7f#"\\,]+$'


def _secret_key(default: str, what: str) -> Any:
    return Field(
        default=default,
        pattern=CONFIG_MAP_KEY,
        max_length=253,
        description=f"Key of the {what} in the Secret.",
    )


class BindPasswordRef(Strict):
    name: str = Field(
        description="Secret in the cluster's namespace.", pattern=DNS_SUBDOMAIN, max_length=253
    )
    key: str = _secret_key("password", "password")


class CaCertificateRef(BindPasswordRef):
    key: str = _secret_key("ca.crt", "PEM certificate")


_DIRECTORY_ON = "!has(self.enabled) || !self.enabled || "
# The CRD's CEL rules say what `DirectoryService._complete` says (CRs are written by hand too).
DIRECTORY_RULES = [
    {
        "rule": _DIRECTORY_ON + "(has(self.ldapUri) && size(self.ldapUri) > 0)",
        "message": "ldapUri: at least one LDAP server is needed when enabled",
    },
    {
        "rule": _DIRECTORY_ON + "(has(self.searchBase) && self.searchBase != '')",
        "message": "searchBase: the base DN is needed when enabled",
    },
    {
        "rule": "!has(self.bindDn) || self.bindDn == '' || has(self.bindPasswordSecret)",
        "message": "bindPasswordSecret: bindDn is set, but no Secret holds its password",
    },
]


class DirectoryService(Strict):
    """SSSD against LDAP. The rendered sssd.conf holds no secret: the sidecar adds the bind
    password from `bindPasswordSecret` when it starts."""

    model_config = ConfigDict(json_schema_extra={"x-cel": DIRECTORY_RULES})

    enabled: bool = Field(
        default=False,
        description="Run the SSSD sidecar beside slurmctld, the login sshd and every slurmd.",
    )
    ldapUri: list[Annotated[str, Field(pattern=LDAP_URI, max_length=512)]] = Field(
        default_factory=list,
        max_length=16,
        description="LDAP servers (`ldap://` or `ldaps://`), tried in order.",
    )
    searchBase: str = Field(
        default="",
        pattern=CONF_VALUE,
        max_length=1024,
        description="Base DN of the user and group searches, e.g. `dc=example,dc=org`.",
    )
    schema_: Literal["rfc2307", "rfc2307bis"] = Field(
        default="rfc2307",
        alias="schema",
        description="Group membership: `rfc2307` (`memberUid`) or `rfc2307bis` (`member` DNs).",
    )
    bindDn: str | None = Field(
        default=None,
        pattern=CONF_VALUE,
        max_length=1024,
        description="DN SSSD binds as; unset: anonymous searches.",
    )
    bindPasswordSecret: BindPasswordRef | None = Field(
        default=None,
        description="Secret (in the cluster's namespace) and key holding the bind password.",
    )
    startTls: bool = Field(
        default=False,
        description="StartTLS on `ldap://` URIs (always TLS on `ldaps://`).",
    )
    caSecret: CaCertificateRef | None = Field(
        default=None,
        description="Secret and key of the CA certificate (PEM) that signed the LDAP server's "
        "certificate; unset: the image's CA bundle. Without StartTLS or ldaps:// nothing is "
        "encrypted, and `sunkctl validate` warns.",
    )
    cacheTimeout: int = Field(
        default=60,
        ge=0,
        le=86400,
        description="Seconds SSSD keeps an entry before asking LDAP again: a user changed in "
        "the directory shows within this delay. A new user shows at the first lookup.",
    )
    defaultShell: str = Field(
        default="/bin/bash",
        pattern=CONF_VALUE,
        max_length=256,
        description="Shell of users whose entry has none.",
    )
    homeDirectory: str | None = Field(
        default=None,
        pattern=CONF_VALUE,
        max_length=256,
        description="Home directory template for every user (`%u` is the user name), e.g. "
        "`/home/%u`; unset: the directory's `homeDirectory`. The login Pod creates a missing "
        "home at the first login.",
    )
    allowGroups: list[SlurmName] = Field(
        default_factory=list,
        description="Only members of these groups may log in; empty: every directory user.",
    )
    image: Image = Field(
        default_factory=lambda: image("login"),
        description="Image of the sidecar (it runs `sssd`); the login image carries it.",
    )
    resources: Resources | None = Field(
        default=None,
        description="Resources of the sidecar; default requests cpu 10m, memory 32Mi, limit 128Mi.",
    )

    @model_validator(mode="after")
    def _complete(self) -> DirectoryService:
        if self.enabled:
            if not self.ldapUri:
                raise ValueError("ldapUri: at least one LDAP server is needed when enabled")
            if not self.searchBase:
                raise ValueError("searchBase: the base DN is needed when enabled")
        if self.bindDn and self.bindPasswordSecret is None:
            raise ValueError("bindPasswordSecret: bindDn is set, but no Secret holds its password")
        return self


class Topology(Strict):
    treeLabels: list[str] = Field(
        default_factory=lambda: [
            "ib.coreweave.cloud/fabric",
            "ib.coreweave.cloud/superpod",
            "ib.coreweave.cloud/leafgroup",
        ],
        description="Node labels from the top to the leaf switch level of the tree topology.",
    )
    blockLabel: str = Field(
        default="ds.coreweave.com/nvlink.domain",
        description="Node label naming the NVLink domain for block topology.",
    )


class Global(Strict):
    """Chart-wide settings. Open: parent charts may add keys here."""

    model_config = ConfigDict(extra="allow")

    imageRegistry: str | None = Field(
        default=None, description="Registry prefixed to every image repository."
    )
    imagePullSecrets: list[dict[str, str]] = Field(
        default_factory=list, description="Pull secrets for every pod."
    )
    affinity: dict[str, Any] | None = open_object("Affinity for control-plane pods.", default=None)
    volumes: list[dict[str, Any]] = open_object(
        "Volumes (raw) added to the login and slurmd Pods, e.g. a shared /home; not to "
        "slurmctld, slurmdbd or slurmrestd. A login or group volume of the same name wins.",
        default_factory=list,
    )
    volumeMounts: list[dict[str, Any]] = open_object(
        "Mounts (raw) added to the `sshd` (login) and `slurmd` containers. A login or group "
        "mount at the same mountPath wins.",
        default_factory=list,
    )


NETWORK_POLICY_DESCRIPTION = (
    "NetworkPolicies the operator makes for the cluster's Pods (ingress only; egress is left "
    "open): Slurm's ports only between the cluster's own Pods, MariaDB only from slurmdbd, "
    "slurmrestd also from the operator, and sshd on the login Pods from `sshFrom`. They take "
    "effect only where the network plugin enforces NetworkPolicies."
)


# An address range as NetworkPolicy's ipBlock takes it (the API server checks the numbers).
CIDR = r"^[0-9a-fA-F:.]{2,39}/[0-9]{1,3}$"
PEER_RULES = [
    {
        "rule": "has(self.ipBlock) || has(self.namespaceSelector) || has(self.podSelector)",
        "message": "a peer needs an ipBlock, a namespaceSelector or a podSelector",
    },
    {
        "rule": "!has(self.ipBlock) || !(has(self.namespaceSelector) || has(self.podSelector))",
        "message": "ipBlock: a peer with an ipBlock takes no selector",
    },
]


class IPBlock(Strict):
    cidr: str = Field(pattern=CIDR, max_length=43, description="Addresses, e.g. `10.0.0.0/8`.")
    except_: list[Annotated[str, Field(pattern=CIDR, max_length=43)]] | None = Field(
        default=None, alias="except", max_length=64, description="Ranges of `cidr` left out."
    )


class NetworkPeer(Strict):
    """A NetworkPolicy peer, as the API server takes it."""

    model_config = ConfigDict(json_schema_extra={"x-cel": PEER_RULES})

    ipBlock: IPBlock | None = Field(default=None, description="An address range.")
    namespaceSelector: dict[str, Any] | None = open_object(
        "Pods of the namespaces with these labels (`{}`: every namespace).", default=None
    )
    podSelector: dict[str, Any] | None = open_object(
        "Pods with these labels (in this namespace unless `namespaceSelector` is set).",
        default=None,
    )

    @model_validator(mode="after")
    def _one_kind(self) -> NetworkPeer:
        selectors = self.namespaceSelector is not None or self.podSelector is not None
        if self.ipBlock is None and not selectors:
            raise ValueError(PEER_RULES[0]["message"])
        if self.ipBlock is not None and selectors:
            raise ValueError(PEER_RULES[1]["message"])
        return self

    def manifest(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


PEERS_MAX = 64


class ClusterNetworkPolicy(Strict):
    enabled: bool = Field(default=True, description="Make the NetworkPolicies.")
    sshFrom: list[NetworkPeer] = Field(
        default_factory=list,
        max_length=PEERS_MAX,
        description="Who may reach the login sshd on port 22 (NetworkPolicy peers); empty: "
        "every address.",
    )
    restFrom: list[NetworkPeer] = Field(
        default_factory=list,
        max_length=PEERS_MAX,
        description="Who may reach slurmrestd on port 6820 beside the cluster's own Pods and "
        "the operator, e.g. a namespace whose tooling calls the REST API.",
    )
    slurmFrom: list[NetworkPeer] = Field(
        default_factory=list,
        max_length=PEERS_MAX,
        description="Who may reach every Slurm port of the cluster's Pods (not MariaDB), e.g. "
        "the Nodes' addresses when a group's Pods use `hostNetwork`.",
    )


HEALTH_DESCRIPTION = (
    "Node health checks run on every slurmd (`sunk-health`): a failing check drains the node "
    "with `health: <check>: <detail>`, and only a later passing run of that check undrains it."
)
# The stock checks' names, as they appear in drain reasons (sunk.health.runner.STOCK).
HEALTH_STOCK_CHECKS = ("disk-free", "mounts", "idle-processes", "idle-memory", "gpu-count")
ABS_PATH = r"^/[^\x00\n]*$"
AbsPath = Annotated[str, Field(pattern=ABS_PATH, max_length=4096)]
# A free-space minimum: a percentage, or a quantity (bytes), whole.
PERCENT_OR_QUANTITY = f"^(?:{PERCENT[1:-1]}|{QUANTITY_PATTERN[1:-1]})$"
MinFree = Annotated[str, Field(pattern=PERCENT_OR_QUANTITY, max_length=64)]
HEALTH_NAME_RULE = {
    "rule": f"self.all(k, k.matches('{S6_NAME}') && !(k in {list(HEALTH_STOCK_CHECKS)}))",
    "message": f"check names must match {S6_NAME} and differ from the stock checks' "
    f"({', '.join(HEALTH_STOCK_CHECKS)})",
}


def _not_stock_check(name: str) -> str:
    if name in HEALTH_STOCK_CHECKS:
        raise ValueError(f"`{name}` is a stock check's name: name the script differently")
    return name


HealthScriptName = Annotated[
    str,
    Field(pattern=S6_NAME, max_length=63, json_schema_extra={"not": {"enum": HEALTH_STOCK_CHECKS}}),
    AfterValidator(_not_stock_check),
]


# A Kubernetes condition type (NodeCondition.type): a name, optionally with a DNS prefix.
CONDITION_TYPE = f"^(?:{DNS_SUBDOMAIN[1:-1]}/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$"


class NodeConditionDrain(Strict):
    """A Node condition that takes the Node's Slurm node out of service."""

    type: str = Field(
        pattern=CONDITION_TYPE,
        max_length=316,
        description="The condition's type, as node-problem-detector or another tool sets it on "
        "the Node (e.g. `GpuXidError`).",
    )
    status: Literal["True", "False", "Unknown"] = Field(
        default="True", description="The status that drains (`True`: the problem is present)."
    )
    verify: bool = Field(
        default=False,
        description="When the condition clears, keep the node drained until its next "
        "passing health check run (`sunk:verify-undrain`); needs `interval` and a check.",
    )


class AllreduceCheck(Strict):
    """The stock active check: an MPI allreduce across the job's nodes (mpi4py on the slurmd
    image's OpenMPI, one rank per node), judged by its bus bandwidth."""

    minBusBandwidth: Quantity = Field(
        description="Bytes per second of bus bandwidth (as nccl-tests count it: "
        "2·(n−1)/n · size / time) below which the run fails, e.g. `1Gi`."
    )
    size: Quantity = Field(default="16Mi", description="Bytes each allreduce sums.")
    iterations: int = Field(default=20, ge=1, le=10000, description="Timed allreduces.")


ACTIVE_CHECK_RULES = [
    {
        "rule": "has(self.allreduce) != has(self.script)",
        "message": "set either allreduce or script",
    }
]


class ActiveCheck(Strict):
    """A check that runs as a Slurm job the operator submits every `every` seconds: on idle
    nodes (whole nodes), at the lowest priority."""

    model_config = ConfigDict(json_schema_extra={"x-cel": ACTIVE_CHECK_RULES})

    every: int = Field(
        ge=60,
        le=INT32_MAX,
        description="Seconds between runs; the first comes one interval after the operator "
        "first sees the check.",
    )
    nodes: int = Field(default=2, ge=1, le=1024, description="Nodes per run.")
    partition: SlurmName | None = Field(
        default=None, max_length=200, description="Partition of the job (default: Slurm's)."
    )
    qos: SlurmName | None = Field(
        default=None,
        max_length=200,
        description="QOS of the job, e.g. one that other jobs may preempt.",
    )
    timeLimit: int = Field(default=10, ge=1, le=1440, description="Minutes the job may run.")
    allreduce: AllreduceCheck | None = Field(
        default=None, description="The stock MPI allreduce bandwidth check."
    )
    script: Annotated[str, Field(min_length=1, max_length=MAX_S6_SCRIPT)] | None = Field(
        default=None,
        description="Or: a site script run as the job's batch step (its `#!` interpreter, "
        "else /bin/sh), e.g. `srun` of NCCL's all_reduce_perf with a threshold; non-zero "
        "fails the run, and its first line of output is the detail.",
    )

    @model_validator(mode="after")
    def _one_kind(self) -> ActiveCheck:
        if (self.allreduce is None) == (self.script is None):
            raise ValueError("set either allreduce or script")
        return self


HEALTH_ACTIVE_RULES = [
    {
        "rule": "!has(self.active) || !has(self.scripts) || "
        "self.active.all(k, !(k in self.scripts))",
        "message": "an active check cannot share a name with a check in scripts",
    }
]


class HealthCheck(Strict):
    model_config = ConfigDict(json_schema_extra={"x-cel": HEALTH_ACTIVE_RULES})

    interval: int = Field(
        default=0,
        ge=0,
        le=INT32_MAX,
        description="Seconds between the runs slurmd starts (HealthCheckInterval); 0: none.",
    )
    nodeState: list[Literal["ALLOC", "ANY", "CYCLE", "IDLE", "MIXED", "NONDRAINED_IDLE"]] = Field(
        default_factory=lambda: ["ANY"],
        max_length=6,
        description="Node states the periodic runs cover (HealthCheckNodeState); CYCLE "
        "spreads the runs over the interval.",
    )
    prolog: bool = Field(
        default=False,
        description="Run the checks before each job: a failure drains the node, and Slurm "
        "requeues the job elsewhere.",
    )
    epilog: bool = Field(default=False, description="Run the checks after each job.")
    timeout: int = Field(
        default=60, ge=1, le=3600, description="Seconds a site script may run before it fails."
    )
    diskFree: dict[AbsPath, MinFree] = Field(
        default_factory=dict,
        max_length=64,
        description="`disk-free`: the free space each path needs, a size (`10Gi`) or a "
        "percentage of its filesystem (`5%`).",
    )
    mounts: list[AbsPath] = Field(
        default_factory=list,
        max_length=64,
        description="`mounts`: paths that must be mount points (a lost network filesystem "
        "leaves an empty directory).",
    )
    idleProcesses: bool = Field(
        default=False,
        description="`idle-processes`: fail when a user's process (uid ≥ 1000) is left on a "
        "node that runs no job. Periodic runs only.",
    )
    idleMemory: Quantity | None = Field(
        default=None,
        description="`idle-memory`: fail when a node that runs no job still holds more "
        "anonymous and shared memory than this in its slurmd container (e.g. `2Gi`: leaked "
        "processes, /dev/shm files). Periodic runs only.",
    )
    gpuCount: bool = Field(
        default=False,
        description="`gpu-count`: the GPU devices the container sees (and `nvidia-smi`, where "
        "the image has it) match the node's GPU GRES.",
    )
    scripts: dict[HealthScriptName, Annotated[str, Field(max_length=MAX_S6_SCRIPT)]] = Field(
        default_factory=dict,
        max_length=MAX_S6_SERVICES,
        description="Site checks by name: a script (with its `#!` interpreter, else /bin/sh) "
        "that fails by exiting non-zero; its first line of output is the drain's detail.",
        json_schema_extra={"x-cel": [HEALTH_NAME_RULE]},
    )
    active: dict[HealthScriptName, ActiveCheck] = Field(
        default_factory=dict,
        max_length=32,
        description="Active checks by name: Slurm jobs the operator submits on a schedule; a "
        "failed run drains its nodes with `health: <name>: <detail>`.",
        json_schema_extra={"x-cel": [HEALTH_NAME_RULE]},
    )
    nodeConditions: list[NodeConditionDrain] = Field(
        default_factory=list,
        max_length=32,
        description="Node conditions that drain the slurmd on that Node through the Syncer "
        "(`k8s: <type>: <message>`), lifted when the condition clears.",
    )

    @model_validator(mode="after")
    def _distinct_names(self) -> HealthCheck:
        shared = sorted(set(self.active) & set(self.scripts))
        if shared:
            raise ValueError(
                f"active check {shared[0]!r} shares its name with a check in scripts: an "
                "active check cannot share a name with a check in scripts"
            )
        return self

    def renders_file(self) -> bool:
        """The checks file (and its volume in the slurmd Pods) exists: there are checks."""
        return bool(self.checks() or self.active)

    def checks(self) -> list[str]:
        """The names of the passive checks these settings enable."""
        stock = {
            "disk-free": bool(self.diskFree),
            "mounts": bool(self.mounts),
            "idle-processes": self.idleProcesses,
            "idle-memory": self.idleMemory is not None,
            "gpu-count": self.gpuCount,
        }
        return [n for n, on in stock.items() if on] + sorted(self.scripts)


class SlurmValues(Strict):
    """Values of the `slurm` chart: one Slurm cluster."""

    nameOverride: str | None = Field(default=None, description="Override the chart name.")
    fullnameOverride: str | None = Field(default=None, description="Override the full name.")
    clusterName: str = Field(
        default="slurm",
        description="Slurm ClusterName (also names the SlurmCluster).",
        pattern=DNS_LABEL,
        max_length=40,
    )
    global_: Global = Field(
        default_factory=Global,
        alias="global",
        description="Chart-wide; open for parent charts: other keys than these are accepted, "
        "not acted on.",
    )
    imagePullSecrets: list[dict[str, str]] = Field(
        default_factory=list, description="Pull secrets for every pod."
    )
    controller: Controller = Field(default_factory=Controller, description="slurmctld.")
    accounting: Accounting = Field(default_factory=Accounting, description="slurmdbd + database.")
    rest: Rest = Field(default_factory=Rest, description="slurmrestd.")
    login: Login = Field(default_factory=Login, description="Login nodes.")
    compute: Compute = Field(default_factory=Compute, description="Compute node groups.")
    slurmConfig: SlurmConfig = Field(default_factory=SlurmConfig, description="slurm.conf keys.")
    topology: Topology = Field(default_factory=Topology, description="Topology generation.")
    munge: Munge = Field(default_factory=Munge, description="munge key.")
    jwt: Jwt = Field(default_factory=Jwt, description="JWT signing key and auth/jwt.")
    syncer: Syncer = Field(default_factory=Syncer, description="Slurm ↔ Kubernetes syncer.")
    scheduler: Scheduler = Field(default_factory=Scheduler, description=SCHEDULER_DESCRIPTION)
    nsscache: Nsscache = Field(default_factory=Nsscache, description=NSSCACHE_DESCRIPTION)
    directoryService: DirectoryService = Field(
        default_factory=DirectoryService, description=DIRECTORY_DESCRIPTION
    )
    networkPolicy: ClusterNetworkPolicy = Field(
        default_factory=ClusterNetworkPolicy, description=NETWORK_POLICY_DESCRIPTION
    )
    healthCheck: HealthCheck = Field(default_factory=HealthCheck, description=HEALTH_DESCRIPTION)
    prologScripts: dict[str, str] = Field(
        default_factory=dict, description="Scripts run in order from prolog.d (name → script)."
    )
    epilogScripts: dict[str, str] = Field(
        default_factory=dict, description="Scripts run in order from epilog.d (name → script)."
    )
    extraObjects: list[dict[str, Any]] = open_object(
        "Extra Kubernetes objects rendered with the release.", default_factory=list
    )


# --------------------------------------------------------------------------- sunk chart


KEEPS_LOCK_TOLERATION = (
    "The node lock's (`sunk.coreweave.com/lock`, NoExecute) is added when none of these "
    "tolerates it, so a list of your own does not get the Pods evicted from locked Nodes."
)


def only_where_served(what: str, api: str) -> str:
    """The description of a switch whose object is rendered only where its API is served."""
    return (
        f"Render {what}, only where the cluster serves `{api}` (a missing CRD must not fail "
        f"the install; NOTES warn instead). `helm install`/`upgrade` ask the cluster; "
        f"`helm template` knows only what `--api-versions {api}` tells it."
    )


PODMONITOR_API = "monitoring.coreos.com/v1/PodMonitor"
VMPODSCRAPE_API = "operator.victoriametrics.com/v1beta1/VMPodScrape"
PROMETHEUSRULE_API = "monitoring.coreos.com/v1/PrometheusRule"


class PodMonitorScrape(Strict):
    enabled: bool = Field(
        default=False, description=only_where_served("a PodMonitor", PODMONITOR_API)
    )
    interval: str = Field(default="30s", description="Scrape interval.")


class VMPodScrapeValues(Strict):
    enabled: bool = Field(
        default=False, description=only_where_served("a VMPodScrape", VMPODSCRAPE_API)
    )
    interval: str = Field(default="30s", description="Scrape interval.")


class ServiceAccount(Strict):
    create: bool = Field(default=True, description="Create the operator's ServiceAccount.")
    name: str | None = Field(
        default=None,
        description="Its name (default: the operator's name); with `create: false`, an "
        "existing ServiceAccount the operator's Roles are bound to.",
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        max_length=253,
    )
    annotations: dict[str, str] = Field(
        default_factory=dict,
        description="ServiceAccount annotations (e.g. a cloud workload identity).",
    )


class TopologySpread(Strict):
    enabled: bool = Field(
        default=True, description="Spread the operator's replicas (one leads, one stands by)."
    )
    topologyKey: str = Field(
        default="kubernetes.io/hostname", min_length=1, description="Node label to spread over."
    )
    maxSkew: int = Field(default=1, ge=1, le=INT32_MAX, description="Most uneven spread allowed.")
    whenUnsatisfiable: Literal["ScheduleAnyway", "DoNotSchedule"] = Field(
        default="ScheduleAnyway",
        description="`DoNotSchedule` keeps a replica Pending rather than beside the other.",
    )


class OperatorNetworkPolicy(Strict):
    enabled: bool = Field(default=True, description="Make the NetworkPolicy.")
    metricsFrom: list[NetworkPeer] = Field(
        default_factory=lambda: [NetworkPeer(namespaceSelector={})],
        max_length=PEERS_MAX,
        description="Who may read the metrics port (NetworkPolicy peers; empty: every "
        "address); the default is every Pod of the cluster. Narrow it to your monitoring "
        "namespace, e.g. `[{namespaceSelector: {matchLabels: "
        "{kubernetes.io/metadata.name: monitoring}}}]`.",
    )


class Operator(Strict):
    image: Image = Field(default_factory=lambda: image("operator"), description="Operator image.")
    replicas: int = Field(
        default=2, ge=1, le=INT32_MAX, description="Replicas; one leads (leader election)."
    )
    logLevel: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Log level."
    )
    logFormat: Literal["text", "json"] = Field(
        default="text",
        description="Log format: text lines, or one JSON object per line (time, level, "
        "logger, message, exception).",
    )
    resources: Resources = Field(
        default_factory=lambda: Resources(
            requests={"cpu": "250m", "memory": "256Mi"}, limits={"memory": "1Gi"}
        ),
        description="Operator resources.",
    )
    tolerations: list[Toleration] = Field(
        default_factory=lambda: [LOCK_TOLERATION],
        description="Operator tolerations. " + KEEPS_LOCK_TOLERATION,
    )
    affinity: dict[str, Any] | None = open_object("Operator affinity (raw).", default=None)
    nodeSelector: dict[str, str] = Field(default_factory=dict, description="Node selector.")
    priorityClassName: str | None = Field(default=None, description="PriorityClass.")
    topologySpread: TopologySpread = Field(
        default_factory=TopologySpread,
        description="A topology spread constraint over the replicas (with `affinity` unset or "
        "set: both apply).",
    )
    podDisruptionBudget: PodDisruptionBudget = Field(
        default_factory=PodDisruptionBudget, description="Voluntary disruptions."
    )
    serviceAccount: ServiceAccount = Field(
        default_factory=ServiceAccount, description="The operator's ServiceAccount."
    )
    podAnnotations: dict[str, str] = Field(
        default_factory=dict, description="Annotations of the operator Pods."
    )
    podLabels: dict[str, str] = Field(
        default_factory=dict, description="Labels of the operator Pods (beside the chart's own)."
    )
    extraArgs: list[str] = Field(
        default_factory=list, description="Extra operator arguments (after the chart's)."
    )
    extraEnv: list[dict[str, Any]] = open_object(
        "Extra environment variables of the operator (raw EnvVar list).", default_factory=list
    )
    watchNamespaces: list[str] = Field(
        default_factory=list,
        description="Namespaces to watch (empty: all). When set, the operator's rights on "
        "namespaced objects are a Role in each of them instead of cluster-wide.",
    )
    metricsPort: int = Field(default=8080, ge=1, le=65535, description="Metrics port.")
    healthPort: int = Field(default=8081, ge=1, le=65535, description="Health probe port.")
    hookPort: int = Field(
        default=8082,
        ge=0,
        le=65535,
        description="Port of the lock hook that job prologs and epilogs call (node locking); "
        "served by every replica behind the Service `<fullname>-operator-hook` "
        "(`sunk-operator-hook` for a release named `sunk`). 0 turns the hook off: jobs then "
        "run unlocked.",
    )
    podMonitor: PodMonitorScrape = Field(
        default_factory=PodMonitorScrape, description="Prometheus Operator PodMonitor."
    )
    vmPodScrape: VMPodScrapeValues = Field(
        default_factory=VMPodScrapeValues, description="VictoriaMetrics VMPodScrape."
    )
    networkPolicy: OperatorNetworkPolicy = Field(
        default_factory=OperatorNetworkPolicy,
        description="A NetworkPolicy over the operator Pods (ingress only): the lock hook "
        "from anywhere (it checks each caller's token; slurmd Pods may be in any namespace or "
        "on the host network), metrics from `metricsFrom`. Probes from the kubelet are never "
        "blocked.",
    )


class Crds(Strict):
    enabled: bool = Field(default=True, description="Install/upgrade the CRDs (kept on uninstall).")


class DevicePlugin(Strict):
    enabled: bool = Field(default=False, description="Deploy the NVIDIA device plugin DaemonSet.")
    image: Image = Field(
        default_factory=lambda: Image(repository="nvcr.io/nvidia/k8s-device-plugin", tag="v0.17.1"),
        description="Device plugin image.",
    )
    nodeSelector: dict[str, str] = Field(
        default_factory=lambda: {"nvidia.com/gpu.present": "true"},
        description="Nodes that get the plugin.",
    )
    tolerations: list[Toleration] = Field(
        default_factory=lambda: [
            Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),
            LOCK_TOLERATION,
        ],
        description="Device plugin tolerations. " + KEEPS_LOCK_TOLERATION,
    )


class GrafanaDashboard(Strict):
    enabled: bool = Field(
        default=False,
        description="Render the Slurm dashboard as a ConfigMap for the Grafana sidecar.",
    )
    labelKey: str = Field(
        default="grafana_dashboard",
        min_length=1,
        max_length=316,
        description="Label key the Grafana sidecar selects dashboard ConfigMaps by.",
    )
    labelValue: str = Field(default="1", max_length=63, description="Value of that label.")
    namespace: str | None = Field(
        default=None,
        pattern=DNS_LABEL,
        description="Namespace of the ConfigMap (default: the release's), e.g. the one the "
        "sidecar watches.",
    )
    annotations: dict[str, str] = Field(
        default_factory=dict,
        description="ConfigMap annotations (e.g. `grafana_folder` for the sidecar's folder).",
    )


class PrometheusRuleValues(Strict):
    enabled: bool = Field(
        default=False,
        description=only_where_served("Slurm alerts as a PrometheusRule", PROMETHEUSRULE_API),
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Extra labels, e.g. the ones your Prometheus `ruleSelector` matches.",
    )
    severity: str = Field(
        default="warning", min_length=1, description="`severity` label of every alert."
    )
    nodesUnavailableRatio: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="SlurmNodesUnavailable fires above this share of a cluster's nodes down "
        "or drained.",
    )
    healthDrainedRatio: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="SlurmPartitionHealthDrained fires above this share of a partition's nodes "
        "drained by failing health checks.",
    )
    jobsPendingFor: str = Field(
        default="30m",
        pattern=r"^([0-9]+(ms|s|m|h|d|w|y))+$",
        description="SlurmJobsStuckPending fires after jobs pend this long with none running.",
    )


class SlurmMetricsSwitches(Strict):
    dashboard: GrafanaDashboard = Field(
        default_factory=GrafanaDashboard, description="Grafana dashboard of the Slurm metrics."
    )
    prometheusRule: PrometheusRuleValues = Field(
        default_factory=PrometheusRuleValues, description="Alerts on the Slurm metrics."
    )


class MocoSwitch(Strict):
    enabled: bool = Field(
        default=False, description="Let the operator manage MOCO MySQLCluster objects."
    )


class SunkValues(Strict):
    """Values of the `sunk` chart: the operator and cluster-wide pieces."""

    nameOverride: str | None = Field(default=None, description="Override the chart name.")
    fullnameOverride: str | None = Field(default=None, description="Override the full name.")
    global_: Global = Field(
        default_factory=Global,
        alias="global",
        description="Chart-wide: this chart reads `imageRegistry` and `imagePullSecrets`; "
        "other keys (the slurm chart's `affinity`, `volumes`, `volumeMounts`) are accepted, "
        "not acted on.",
    )
    imagePullSecrets: list[dict[str, str]] = Field(
        default_factory=list, description="Pull secrets."
    )
    commonLabels: dict[str, str] = Field(
        default_factory=dict, description="Labels added to every object the chart renders."
    )
    crds: Crds = Field(default_factory=Crds, description="CustomResourceDefinitions.")
    operator: Operator = Field(default_factory=Operator, description="The SUNK operator.")
    nvidia_device_plugin: DevicePlugin = Field(
        default_factory=DevicePlugin,
        alias="nvidia-device-plugin",
        description="NVIDIA device plugin (off: most providers ship one).",
    )
    moco: MocoSwitch = Field(default_factory=MocoSwitch, description="MOCO integration.")
    metrics: SlurmMetricsSwitches = Field(
        default_factory=SlurmMetricsSwitches,
        description="The Slurm metrics the operator exports (`slurm_*`): a dashboard and alerts.",
    )
