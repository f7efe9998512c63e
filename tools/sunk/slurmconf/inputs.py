"""What the renderer needs to know, and nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sunk.models.crds import NodeSetSpec, SlurmClusterSpec

# Paths inside our images (see images/); tests running Debian's daemons use the same ones.
ETC = "/etc/slurm"
JWT_KEY = "/etc/slurm/jwt/jwt.key"
STATE_DIR = "/var/spool/slurmctld"
SLURMD_SPOOL = "/var/spool/slurmd/%n"


# The cluster's DNS domain is Kubernetes' default; Services are <name>.<namespace>.svc.<domain>.
CLUSTER_DOMAIN = "cluster.local"


def service_domain(namespace: str) -> str:
    return f"{namespace}.svc.{CLUSTER_DOMAIN}"


@dataclass(frozen=True)
class Endpoints:
    """Where the daemons are reachable. The operator derives them from Service names; tests
    pass the addresses of the hosts they created."""

    controller_host: str
    controller_addr: str
    dbd_host: str
    dbd_addr: str
    dbd_port: int = 6819
    storage_host: str = "localhost"
    storage_port: int = 3306
    # HA: (host, address) of each standby slurmctld, in takeover order
    backups: tuple[tuple[str, str], ...] = ()

    @property
    def controllers(self) -> tuple[tuple[str, str], ...]:
        """(host, address) of every slurmctld, the primary first: `SlurmctldHost` lines."""
        return ((self.controller_host, self.controller_addr), *self.backups)

    @property
    def conf_servers(self) -> str:
        """`--conf-server` of configless slurmd and sackd: every controller, in order."""
        return ",".join(f"{addr}:6817" for _, addr in self.controllers)

    @classmethod
    def for_cluster(cls, spec: SlurmClusterSpec, namespace: str) -> Endpoints:
        """The Service names the operator creates for a SlurmCluster in ``namespace``."""
        name = spec.clusterName
        svc = service_domain(namespace)
        acct = spec.accounting
        if acct.database_kind() == "external":
            storage_host, storage_port = acct.external.host or "", acct.external.port
        elif acct.database.type == "moco":
            storage_host, storage_port = f"moco-{name}-accounting-primary.{svc}", 3306
        else:
            storage_host, storage_port = f"{name}-mariadb.{svc}", 3306
        controller = f"{name}-controller"
        # HA: each controller by its own Pod's name in the headless Service (which publishes
        # Pods that are not ready, so a starting standby resolves); one controller: the
        # Service's name, as before.
        hosts = [f"{controller}-{i}" for i in range(spec.controller.controllers())]
        addrs = (
            [f"{host}.{controller}.{svc}" for host in hosts]
            if spec.controller.ha.enabled
            else [f"{controller}.{svc}"]
        )
        return cls(
            controller_host=hosts[0],
            controller_addr=addrs[0],
            backups=tuple(zip(hosts[1:], addrs[1:], strict=True)),
            dbd_host=f"{name}-accounting",
            dbd_addr=f"{name}-accounting.{svc}",
            storage_host=storage_host,
            storage_port=storage_port,
        )


@dataclass(frozen=True)
class NodeSetInput:
    name: str
    spec: NodeSetSpec

    @property
    def prefix(self) -> str:
        return self.spec.podNamePrefix or self.name


def slurmd_container(spec: NodeSetSpec) -> dict[str, Any]:
    """The pod template's `slurmd` container ({} when it has none)."""
    for container in spec.template.spec.get("containers") or []:
        if isinstance(container, dict) and container.get("name") == "slurmd":
            return container
    return {}


@dataclass(frozen=True)
class Placement:
    """A Slurm node (pod) and the labels of the Kubernetes Node hosting it (for topology)."""

    slurm_node: str
    labels: dict[str, str]


@dataclass(frozen=True)
class ClusterInputs:
    cluster: SlurmClusterSpec
    nodesets: tuple[NodeSetInput, ...]
    endpoints: Endpoints
    placements: tuple[Placement, ...] = field(default_factory=tuple)
    db_password: str | None = None  # slurmdbd.conf StoragePass; only the operator knows it
    # Set by render_all: the topology plugin to configure (None while the layout is empty,
    # because topology/tree with an empty layout fails every job on dynamic nodes).
    topology_plugin: str | None = None
