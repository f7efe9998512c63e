"""What the builders of every component share (the control plane's in the component modules of
``sunk.operator.cluster``, which share more in ``sunk.operator.cluster.base``; the slurmd Pods'
in ``sunk.operator.nodeset.pod``): labels, owner references, the per-component ServiceAccount,
the security contexts and the munge sidecar. Builders return whole objects; nothing here
patches one afterwards."""

from __future__ import annotations

import copy
from typing import Any

from sunk.models.crds import API_VERSION
from sunk.operator import names

MUNGE_SOCKET = "/run/munge"
MUNGE_UID = 402  # the images' fixed munge id (images/common/install-slurm.sh)
MUNGE_RESOURCES = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}}
# What an entrypoint that starts as root, owns its directories and keys, then drops to its own
# user (setpriv, munged's or mariadbd's --user) needs, and nothing more: chown its directories
# and key copies (CHOWN), write and chmod them once they belong to that user (DAC_OVERRIDE,
# FOWNER), switch user and groups (SETUID, SETGID). The munge sidecar and the control-plane
# daemons (sunk.operator.cluster.base) run with it.
ROOT_THEN_USER_SECURITY_CONTEXT = {
    "allowPrivilegeEscalation": False,
    "capabilities": {
        "drop": ["ALL"],
        "add": ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"],
    },
}


def non_root(uid: int) -> dict[str, Any]:
    """A container that starts as ``uid`` (its group the same id) and stays so: no
    capability, no privilege escalation, and the runtime refuses to start it as root."""
    return {
        "runAsUser": uid,
        "runAsGroup": uid,
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }


# Every Pod the operator builds runs under the runtime's default seccomp profile unless its
# podSecurityContext (a slurmd template's spec.securityContext) says otherwise. That profile
# allows what needs a capability the container holds (slurmd's SYS_ADMIN: mount, unshare and
# user namespaces for job containers; SYS_NICE: the NUMA calls of bound tasks), so jobs keep
# them; it refuses what no job needs (kernel modules, kexec, keyrings, clock changes).
POD_SECURITY_CONTEXT = {"seccompProfile": {"type": "RuntimeDefault"}}


def cluster_labels(cluster: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "slurm",
        "app.kubernetes.io/instance": cluster,
        names.LABEL_COMPONENT: component,
        names.LABEL_MANAGED_BY: names.MANAGER,
        "app.kubernetes.io/part-of": "sunk",
        names.LABEL_CLUSTER: cluster,
    }


def owner_reference(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """A controller reference to our ``kind`` (SlurmCluster, NodeSet) ``obj``: its objects go
    with it (garbage collection), and only one controller may own each."""
    meta = obj["metadata"]
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def cluster_owner(name: str, uid: str) -> list[dict[str, Any]]:
    """The owner references of an object a SlurmCluster owns."""
    return [owner_reference("SlurmCluster", {"metadata": {"name": name, "uid": uid}})]


def service_account(
    namespace: str, cluster: str, component: str, owner_name: str, owner_uid: str
) -> dict[str, Any]:
    """A component's own ServiceAccount, owned by the SlurmCluster (``owner_name``): no Slurm
    daemon calls the API, so it mounts no token and is bound to no Role."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": names.service_account(cluster, component),
            "namespace": namespace,
            "labels": cluster_labels(cluster, component),
            "ownerReferences": cluster_owner(owner_name, owner_uid),
        },
        "automountServiceAccountToken": False,
    }


def munge_sidecar(
    image: str, resources: dict[str, Any] | None, uid: int | None = None
) -> dict[str, Any]:
    """The munge sidecar of every Slurm Pod (slurmd and control plane): `munge.resources`
    when set, else ours. ``uid`` (MUNGE_UID): munged starts as that user and copies its key
    from the Secret, which the Pod's fsGroup makes readable to it (Kubernetes adds the group's
    read bit to the files of a Secret volume); None: it starts as root, copies the key, gives
    the copy to munge and drops to it (Pods without fsGroup: the slurmd and login Pods, where
    an fsGroup would change the group of the users' volumes)."""
    security = non_root(uid) if uid is not None else ROOT_THEN_USER_SECURITY_CONTEXT
    return {
        "name": "munge",
        "image": image,
        "args": ["munged"],
        "volumeMounts": [
            {"name": "munge-socket", "mountPath": MUNGE_SOCKET},
            {"name": "munge-key", "mountPath": "/etc/munge-secret", "readOnly": True},
        ],
        "resources": munge_resources(resources),
        "securityContext": copy.deepcopy(security),
    }


def munge_volumes(secret: str) -> list[dict[str, Any]]:
    return [
        {"name": "munge-socket", "emptyDir": {"medium": "Memory"}},
        {"name": "munge-key", "secret": {"secretName": secret, "defaultMode": 0o400}},
    ]


def munge_resources(resources: dict[str, Any] | None) -> dict[str, Any]:
    """The munge sidecar's resources: `munge.resources` when set, else ours."""
    return copy.deepcopy(resources if resources is not None else MUNGE_RESOURCES)


def pod_node(pod: dict[str, Any]) -> str | None:
    """The Node a slurmd Pod runs on, or is pinned to (required affinity on metadata.name)
    before the scheduler binds it."""
    spec = pod.get("spec", {})
    if spec.get("nodeName"):
        return spec["nodeName"]
    terms = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    for term in terms:
        for expr in term.get("matchFields") or []:
            if expr.get("key") == "metadata.name" and expr.get("values"):
                return expr["values"][0]
    return None
