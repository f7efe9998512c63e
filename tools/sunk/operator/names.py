"""Label, annotation and object names shared by the operator's builders (SUNK's contract)."""

from __future__ import annotations

from typing import Any

GROUP = "sunk.coreweave.com"
LABEL_NODESET = f"{GROUP}/nodeset"
LABEL_NAMESPACE = f"{GROUP}/namespace"
LABEL_CLUSTER = f"{GROUP}/cluster"
LABEL_POD = f"{GROUP}/pod"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "sunk-operator"
ANN_CONFIG_HASH = f"{GROUP}/config-hash"
ANN_S6_HASH = f"{GROUP}/s6-hash"  # the login Pods roll when their s6 services change
ANN_TEMPLATE_HASH = f"{GROUP}/template-hash"
ANN_SPEC_HASH = f"{GROUP}/spec-hash"
ANN_LOCK = f"{GROUP}/lock"
# Safe removal: the operator's decision to remove a slurmd Pod (value: why) and when it was
# taken (RFC 3339). The Syncer drains the Slurm node; the Pod goes once it runs no job.
ANN_REMOVAL = f"{GROUP}/removal"
ANN_REMOVAL_SINCE = f"{GROUP}/removal-since"
# Held on a NodeSet while its Pods are removed safely after the NodeSet was deleted.
FINALIZER_SAFE_REMOVAL = f"{GROUP}/safe-removal"
# Set to "true" on a SlurmCluster by a user: make the key Secrets that were recorded in
# status.keys and have disappeared again. The operator removes it once it has acted.
ANN_REGENERATE_KEYS = f"{GROUP}/regenerate-keys"
LOCK_TAINT = f"{GROUP}/lock"
LOCK_TOLERATION = {"key": LOCK_TAINT, "operator": "Exists", "effect": "NoExecute"}


def controller(cluster: str) -> str:
    return f"{cluster}-controller"


def controller_state(cluster: str) -> str:
    """The state claim every controller mounts with `controller.ha`."""
    return f"{cluster}-controller-state"


def accounting(cluster: str) -> str:
    return f"{cluster}-accounting"


def mariadb(cluster: str) -> str:
    return f"{cluster}-mariadb"


def rest(cluster: str) -> str:
    return f"{cluster}-rest"


def login(cluster: str) -> str:
    return f"{cluster}-login"


def service_account(cluster: str, component: str) -> str:
    """Each component's own ServiceAccount (controller, accounting, rest, login, database,
    slurmd): no Slurm Pod runs as the namespace's `default`."""
    return f"{cluster}-{component}"


def login_pods(cluster: str) -> str:
    """The login StatefulSet's headless Service: its Pods' DNS subdomain."""
    return f"{login(cluster)}-pods"


def config_map(cluster: str) -> str:
    return f"{cluster}-slurm-config"


def topology_map(cluster: str) -> str:
    return f"{cluster}-topology"


def sssd_map(cluster: str) -> str:
    """sssd.conf of `directoryService` (no secret in it)."""
    return f"{cluster}-sssd"


def login_s6_map(cluster: str) -> str:
    """`login.s6`: the login Pods' s6 services."""
    return f"{login(cluster)}-s6"


def nodeset_s6_map(nodeset: str) -> str:
    """A NodeSet's s6 services (the cluster's `compute.s6` merged under its own); owned by the
    NodeSet. The suffix keeps it apart from every per-cluster name above."""
    return f"{nodeset}-nodeset-s6"


def lua_map(cluster: str) -> str:
    """The inline Lua plugin scripts (job_submit.lua, cli_filter.lua)."""
    return f"{cluster}-lua"


def munge_secret(cluster: str) -> str:
    return f"{cluster}-munge"


def jwt_secret(cluster: str) -> str:
    return f"{cluster}-jwt"


def munge_secret_of(spec: Any) -> str:
    """The munge key Secret a SlurmCluster spec uses: the user's, else the operator's."""
    return spec.munge.existingSecret or munge_secret(spec.clusterName)


def jwt_secret_of(spec: Any) -> str:
    """The JWT key Secret a SlurmCluster spec uses: the user's, else the operator's."""
    return spec.jwt.existingSecret or jwt_secret(spec.clusterName)


def db_secret(cluster: str) -> str:
    return f"{cluster}-db"


def db_root_secret(cluster: str) -> str:
    return f"{cluster}-db-root"


def dbd_secret(cluster: str) -> str:
    return f"{cluster}-slurmdbd-conf"


def hostkeys_secret(cluster: str) -> str:
    return f"{cluster}-login-hostkeys"
