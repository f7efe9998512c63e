"""`directoryService`: the `sssd` sidecar that gives slurmctld, the login `sshd` and every slurmd
the same users and groups from LDAP.

SSSD runs once per Pod, in its own container (the login image carries it, started as
``sunk-entrypoint sssd``); the Slurm containers only carry the NSS module (libnss-sss), which
talks to the sidecar through its sockets in ``/var/lib/sss/pipes`` and reads its shared memory
cache in ``/var/lib/sss/mc``: two emptyDirs both containers mount. On the login Pods `sshd`
asks the same sockets for a user's SSH keys (``sss_ssh_authorizedkeys``).

sssd.conf comes from the renderer (sunk.slurmconf.sssd) in a ConfigMap; the bind password
stays in the user's Secret, mounted into the sidecar alone, which adds it when it starts.
The sidecar needs no capability: SSSD runs as root in its container and only reads LDAP and
writes its own files.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass
from typing import Any

from sunk.models.crds import SlurmClusterSpec
from sunk.models.k8s import image_ref
from sunk.operator import names
from sunk.slurmconf.sssd import CA_DIR

PIPES = "/var/lib/sss/pipes"
MEMORY_CACHE = "/var/lib/sss/mc"
CONF_DIR = "/etc/sunk/sssd"
BIND_DIR = "/etc/sunk/sssd-bind"
# Volume names and client mount paths, reserved in the Pods (sunk.operator.shared_volumes).
VOLUMES = frozenset({"sssd-pipes", "sssd-mc", "sssd-conf", "sssd-bind", "sssd-ca"})
CLIENT_PATHS = frozenset({PIPES, MEMORY_CACHE})
RESOURCES = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}}
SECURITY_CONTEXT = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}
# The environment variable that tells the login image's sshd to take keys from SSSD.
LOGIN_ENV = {"name": "SUNK_DIRECTORY", "value": "sssd"}


@dataclass(frozen=True)
class DirectoryPod:
    """What a Pod of the cluster needs for directory users."""

    image: str
    config_map: str
    bind_secret: tuple[str, str] | None = None  # (Secret name, key)
    ca_secret: tuple[str, str] | None = None
    resources: dict[str, Any] | None = None

    def hash_input(self) -> dict[str, Any]:
        return asdict(self)


def for_cluster(spec: SlurmClusterSpec) -> DirectoryPod | None:
    """The sidecar's settings, or None when `directoryService` is off."""
    directory = spec.directoryService
    if not directory.enabled:
        return None
    bind, ca = directory.bindPasswordSecret, directory.caSecret
    return DirectoryPod(
        image=image_ref(directory.image, spec.global_.imageRegistry),
        config_map=names.sssd_map(spec.clusterName),
        bind_secret=(bind.name, bind.key) if bind else None,
        ca_secret=(ca.name, ca.key) if ca else None,
        resources=directory.resources.model_dump(mode="json", exclude_none=True)
        if directory.resources is not None
        else None,
    )


def sidecar(directory: DirectoryPod) -> dict[str, Any]:
    mounts = [
        {"name": "sssd-conf", "mountPath": CONF_DIR, "readOnly": True},
        *client_mounts(),
    ]
    if directory.bind_secret:
        mounts.append({"name": "sssd-bind", "mountPath": BIND_DIR, "readOnly": True})
    if directory.ca_secret:
        mounts.append({"name": "sssd-ca", "mountPath": CA_DIR, "readOnly": True})
    return {
        "name": "sssd",
        "image": directory.image,
        "args": ["sssd"],
        "resources": copy.deepcopy(directory.resources or RESOURCES),
        "securityContext": copy.deepcopy(SECURITY_CONTEXT),
        "volumeMounts": mounts,
    }


def client_mounts() -> list[dict[str, Any]]:
    """What every container that looks users up mounts: the sidecar's sockets and cache."""
    return [
        {"name": "sssd-pipes", "mountPath": PIPES},
        {"name": "sssd-mc", "mountPath": MEMORY_CACHE},
    ]


def volumes(directory: DirectoryPod) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": "sssd-pipes", "emptyDir": {"medium": "Memory"}},
        {"name": "sssd-mc", "emptyDir": {"medium": "Memory"}},
        {"name": "sssd-conf", "configMap": {"name": directory.config_map, "defaultMode": 0o444}},
    ]
    if directory.bind_secret:
        name, key = directory.bind_secret
        item = {"key": key, "path": "password", "mode": 0o400}
        out.append({"name": "sssd-bind", "secret": {"secretName": name, "items": [item]}})
    if directory.ca_secret:
        name, key = directory.ca_secret
        item = {"key": key, "path": "ca.crt", "mode": 0o444}
        out.append({"name": "sssd-ca", "secret": {"secretName": name, "items": [item]}})
    return out


def attach(pod_spec: dict[str, Any], directory: DirectoryPod | None, clients: set[str]) -> None:
    """Add the sidecar and its volumes to ``pod_spec``, and the client mounts to the
    containers named in ``clients``."""
    if directory is None:
        return
    for container in pod_spec.get("containers") or []:
        if container.get("name") in clients:
            container["volumeMounts"] = [*(container.get("volumeMounts") or []), *client_mounts()]
    pod_spec["containers"] = [*pod_spec.get("containers", []), sidecar(directory)]
    pod_spec["volumes"] = [*pod_spec.get("volumes", []), *volumes(directory)]
