"""The slurmd pod for one Node: the NodeSet's template, pinned to the Node, with munge."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sunk.models.crds import NodeSetSpec, SlurmClusterSpec
from sunk.models.k8s import image_ref
from sunk.models.values import Pyxis, S6Service
from sunk.operator import directory, names, s6, shared_volumes
from sunk.operator.common import (
    MUNGE_SOCKET,
    POD_SECURITY_CONTEXT,
    munge_sidecar,
    munge_volumes,
    owner_reference,
)
from sunk.operator.directory import DirectoryPod, attach
from sunk.operator.hashing import stable_hash
from sunk.slurmconf import Endpoints, health
from sunk.slurmconf.inputs import NodeSetInput
from sunk.slurmconf.plugstack import runtime_path
from sunk.slurmconf.registration import registration
from sunk.slurmconf.scripts import HOOK_DIR, LOCK_PATH

# slurmd unprivileged, with what it and the jobs it starts as their users need: remount its
# read-only cgroup mounts writable (the entrypoint) and constrain devices (ConstrainDevices:
# the v1 devices controller, or an eBPF program on v2) (SYS_ADMIN); own and reach job files
# and spool directories (CHOWN, DAC_OVERRIDE, FOWNER); start job steps as their users
# (SETUID, SETGID); signal them (KILL); set their CPU affinity and priority (SYS_NICE);
# enter `--container-image` containers (mount namespaces: SYS_ADMIN; chroot, as the default
# seccomp profile refuses pivot_root: SYS_CHROOT). No host device, /proc and /sys stay
# masked and read-only. Privilege escalation stays allowed: jobs may run setuid programs
# (sudo, Apptainer's starter). A group's `securityContext` replaces it ({privileged: true}:
# as in SUNK, and then the runtime applies no seccomp profile either).
SLURMD_SECURITY_CONTEXT = {
    "privileged": False,
    "capabilities": {
        "drop": ["ALL"],
        "add": [
            "CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID", "SYS_ADMIN",
            "SYS_CHROOT", "SYS_NICE",
        ],
    },
}  # fmt: skip
# What every slurmd Pod gets unless its template (or the cluster's shared volumes) mounts
# something at the same path (sunk.operator.shared_volumes: the weakest layer): /dev/shm in
# memory (`compute.sharedMemory`), and with the container plugin its runtime directory
# (images and container root filesystems) and the registry credentials.
SHM_VOLUME = "shm"
SHM_PATH = "/dev/shm"
CONTAINERS_VOLUME = "containers"
CREDENTIALS_VOLUME = "container-credentials"
CREDENTIALS_DIR = "/etc/sunk/containers/credentials"  # the plugin reads <dir>/credentials
# Keep slurmd pods where they are through node trouble, as a DaemonSet would.
NODE_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


@dataclass(frozen=True)
class PodContext:
    """What a slurmd pod needs from its SlurmCluster."""

    namespace: str
    cluster: str
    conf_servers: str  # every slurmctld, `host:port,...`: SUNK_CONTROLLER
    reserved_memory: str | int | float
    munge_secret: str
    controller_image: str
    config_map: str = ""  # holds the dispatchers (prolog.sh, epilog.sh)
    prolog_config_map: str | None = None
    epilog_config_map: str | None = None
    locking: bool = False  # jobs lock their Node: the Pod carries the hook's token and URL
    health: bool = False  # `healthCheck` has checks: the Pod mounts what they are
    hook_url: str = ""  # the operator's lock hook (the Pod reads it from its annotation)
    # The SlurmCluster's share of every slurmd Pod: global.volumes/volumeMounts and
    # compute.mounts (`{name: <mountPath>, pvc}`), merged under the NodeSet's own template
    # (sunk.operator.shared_volumes), and munge.resources for the munge sidecar.
    cluster_name: str = ""  # the SlurmCluster's metadata.name, for messages
    global_volumes: tuple[dict[str, Any], ...] = ()
    global_mounts: tuple[dict[str, Any], ...] = ()
    compute_mounts: tuple[dict[str, Any], ...] = ()
    munge_resources: dict[str, Any] | None = None
    directory: DirectoryPod | None = None  # `directoryService`: the sssd sidecar
    compute_s6: Mapping[str, S6Service] = field(default_factory=dict)  # `compute.s6`
    service_account: str = ""  # the cluster's slurmd ServiceAccount (a template's own wins)
    pyxis: Pyxis | None = None  # `compute.pyxis` when enabled: the container plugin
    shared_memory: str | int | float | None = None  # `compute.sharedMemory`: /dev/shm's size

    @property
    def hooked(self) -> bool:
        return self.locking and bool(self.hook_url)


def pod_context(
    ns: str, cluster_name: str, cluster: SlurmClusterSpec, spec: NodeSetSpec, hook_url: str = ""
) -> PodContext:
    """What a NodeSet's slurmd Pods take from their SlurmCluster (``cluster_name`` is its
    metadata.name)."""
    resources = cluster.munge.resources
    return PodContext(
        namespace=ns,
        cluster=cluster.clusterName,
        conf_servers=Endpoints.for_cluster(cluster, ns).conf_servers,
        reserved_memory=spec.reservedMemory
        if spec.reservedMemory is not None
        else cluster.compute.reservedMemory,
        munge_secret=names.munge_secret_of(cluster),
        controller_image=image_ref(cluster.controller.image, cluster.global_.imageRegistry),
        config_map=names.config_map(cluster.clusterName),
        prolog_config_map=cluster.scripts.prolog,
        epilog_config_map=cluster.scripts.epilog,
        locking=cluster.locks_nodes(),
        health=cluster.healthCheck.renders_file(),
        hook_url=hook_url,
        cluster_name=cluster_name,
        global_volumes=tuple(cluster.global_.volumes),
        global_mounts=tuple(cluster.global_.volumeMounts),
        compute_mounts=tuple(m.model_dump(mode="json") for m in cluster.compute.mounts),
        munge_resources=resources.model_dump(mode="json", exclude_none=True)
        if resources is not None
        else None,
        directory=directory.for_cluster(cluster),
        compute_s6=cluster.compute.s6,
        service_account=names.service_account(cluster.clusterName, "slurmd"),
        pyxis=cluster.compute.pyxis if cluster.compute.pyxis.enabled else None,
        shared_memory=cluster.compute.sharedMemory,
    )


HOOK_URL_ANNOTATION = f"{names.GROUP}/hook-url"
HOOK_AUDIENCE = f"{names.GROUP}/hook"
HOOK_TOKEN_SECONDS = 3600  # kubelet refreshes it at 80 %


def effective_template(nodeset: NodeSetInput, ctx: PodContext | None = None) -> dict[str, Any]:
    """The NodeSet's pod template with the cluster's volumes merged in (its own entries win,
    matched by volume name and mount path). Raises VolumeConfigError on what cannot merge.

    Keys the template does not have are only added when there is something to put there, so a
    template without cluster volumes comes back unchanged (and hashes as before)."""
    template = nodeset.spec.template.model_dump(mode="json")
    spec = template.setdefault("spec", {})
    containers = spec.get("containers") or []
    slurmd = next((c for c in containers if c.get("name") == "slurmd"), None)
    own_index = containers.index(slurmd) if slurmd is not None else 0
    owner = f"NodeSet {nodeset.name}"
    cluster = f"SlurmCluster {ctx.cluster_name or ctx.cluster}" if ctx else ""
    layers = []
    defaults: list[dict[str, Any]] = []
    if ctx is not None:
        defaults, default_mounts = _default_volumes(ctx)
        layers = [
            shared_volumes.defaults_layer(defaults, default_mounts, cluster),
            shared_volumes.global_layer(ctx.global_volumes, ctx.global_mounts, ("spec",), cluster),
            shared_volumes.compute_mounts_layer(ctx.compute_mounts, ("spec",), cluster),
        ]
    layers.append(
        shared_volumes.Layer(
            spec.get("volumes") or [],
            (slurmd or {}).get("volumeMounts") or [],
            ("spec", "template", "spec", "volumes"),
            ("spec", "template", "spec", "containers", own_index, "volumeMounts"),
            owner=owner,
        )
    )
    merged = shared_volumes.merge(layers, shared_volumes.SLURMD, f"the slurmd Pods of {owner}")
    if merged.problems:
        raise shared_volumes.VolumeConfigError(merged.problems)
    shared_volumes.drop_unmounted(merged, defaults)
    # (empty merged lists mean the template had no entries either: nothing to write back)
    if merged.volumes:
        spec["volumes"] = merged.volumes
    if merged.mounts and (slurmd is not None or not containers):
        if slurmd is None:  # build_pod's default container
            slurmd = {"name": "slurmd"}
            spec["containers"] = [slurmd]
        slurmd["volumeMounts"] = merged.mounts
    return template


def template_hash(nodeset: NodeSetInput, ctx: PodContext | None = None) -> str:
    """Changes when the pods must be replaced (not on scaling or a new update strategy): on
    the NodeSet's spec and on the cluster's share of the Pod (``ctx``: shared volumes and
    munge resources, node locking), which leaves the hash as it was while the cluster adds
    nothing. A new hook URL reaches running Pods through their annotation: no new hash."""
    spec = nodeset.spec.model_dump(
        mode="json", exclude={"replicas", "maxUnavailable", "updateStrategy"}
    )
    if ctx is not None:
        spec["template"] = effective_template(nodeset, ctx)
        if ctx.munge_resources is not None:
            spec["mungeResources"] = ctx.munge_resources
        if ctx.locking:  # the dispatchers are mounted; with a hook, its token and script
            spec["locking"] = "hooked" if ctx.hooked else True
        if ctx.directory is not None:
            spec["directory"] = ctx.directory.hash_input()
        if ctx.compute_s6:  # the NodeSet's own services are in its spec already
            spec["clusterS6"] = s6.hash_input(ctx.compute_s6)
        security = _pyxis_security(ctx)
        if security:
            spec["pyxisSecurity"] = security
    return stable_hash(spec, 10)


def _default_volumes(ctx: PodContext) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The operator's defaults for the slurmd Pod (see SHM_VOLUME): volumes and mounts."""
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if ctx.shared_memory not in (None, ""):
        size = str(ctx.shared_memory)
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": size}})
        mounts.append({"name": SHM_VOLUME, "mountPath": SHM_PATH})
    pyxis = ctx.pyxis
    if pyxis is not None:
        empty: dict[str, Any] = {}
        if pyxis.cacheVolumeSizeLimit not in (None, ""):
            empty["sizeLimit"] = str(pyxis.cacheVolumeSizeLimit)
        volumes.append({"name": CONTAINERS_VOLUME, "emptyDir": empty})
        mounts.append({"name": CONTAINERS_VOLUME, "mountPath": runtime_path(pyxis)})
        if pyxis.credentialsSecret:
            # root only: the plugin reads it before it drops to the job's user
            secret = {"secretName": pyxis.credentialsSecret, "defaultMode": 0o400}
            volumes.append({"name": CREDENTIALS_VOLUME, "secret": secret})
            mounts.append(
                {"name": CREDENTIALS_VOLUME, "mountPath": CREDENTIALS_DIR, "readOnly": True}
            )
    return volumes, mounts


def apparmor_profile(text: str) -> dict[str, str] | None:
    """`compute.pyxis.appArmorProfile` as a securityContext.appArmorProfile: `RuntimeDefault`,
    `Unconfined`, or a profile loaded on the Node (SUNK's `localhost/<name>` or `<name>`)."""
    if not text:
        return None
    if text in ("RuntimeDefault", "runtime/default"):
        return {"type": "RuntimeDefault"}
    if text in ("Unconfined", "unconfined"):
        return {"type": "Unconfined"}
    return {"type": "Localhost", "localhostProfile": text.removeprefix("localhost/")}


def _pyxis_security(ctx: PodContext) -> dict[str, Any]:
    """What `compute.pyxis` puts into the slurmd Pod's security contexts."""
    if ctx.pyxis is None:
        return {}
    out: dict[str, Any] = {}
    profile = apparmor_profile(ctx.pyxis.appArmorProfile)
    if profile is not None:
        out["appArmorProfile"] = profile
    if ctx.pyxis.podSecurityContext:
        out["podSecurityContext"] = ctx.pyxis.podSecurityContext
    return out


def s6_services(nodeset: NodeSetInput, ctx: PodContext) -> dict[str, S6Service]:
    return s6.merged(ctx.compute_s6, nodeset.spec.s6)


def _pin(affinity: dict[str, Any] | None, node_name: str) -> dict[str, Any]:
    pinned = copy.deepcopy(affinity or {})
    pinned["nodeAffinity"] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
            ]
        }
    }
    return pinned


def build_pod(
    nodeset: NodeSetInput,
    owner: dict[str, Any],
    ctx: PodContext,
    node_name: str,
    pod_name: str,
    node_labels: dict[str, str],
) -> dict[str, Any]:
    template = effective_template(nodeset, ctx)
    spec: dict[str, Any] = template.get("spec") or {}
    meta = template.get("metadata") or {}
    labels = {
        **(meta.get("labels") or {}),
        # Set over the template's: the NetworkPolicies tell components apart by it, so a
        # template cannot make its Pods pass for slurmdbd (which may reach MariaDB).
        names.LABEL_COMPONENT: "slurmd",
        names.LABEL_NODESET: nodeset.name,
        names.LABEL_CLUSTER: ctx.cluster,
        names.LABEL_POD: pod_name,
        names.LABEL_MANAGED_BY: names.MANAGER,
    }
    annotations = {
        **(meta.get("annotations") or {}),
        names.ANN_TEMPLATE_HASH: template_hash(nodeset, ctx),
    }
    if ctx.hooked:
        annotations[HOOK_URL_ANNOTATION] = ctx.hook_url
    conf = registration(nodeset, ctx.reserved_memory, node_labels)
    env = [
        {"name": "SUNK_NODE_NAME", "value": pod_name},
        {"name": "SUNK_CLUSTER_NAME", "value": ctx.cluster},
        {"name": "SUNK_CONTROLLER", "value": ctx.conf_servers},
        {"name": "SUNK_SLURMD_CONF", "value": conf},
        {"name": "SUNK_MUNGED", "value": "external"},  # the munge sidecar runs it
    ]
    security = _pyxis_security(ctx)
    containers = spec.get("containers") or [{"name": "slurmd"}]
    for container in containers:
        if container.get("name") != "slurmd":
            continue
        container["args"] = ["slurmd"]
        container["env"] = [*env, *(container.get("env") or [])]
        container.setdefault("securityContext", copy.deepcopy(SLURMD_SECURITY_CONTEXT))
        if "appArmorProfile" in security:  # a group's own profile wins
            container["securityContext"].setdefault(
                "appArmorProfile", copy.deepcopy(security["appArmorProfile"])
            )
        container["volumeMounts"] = [
            *(container.get("volumeMounts") or []),
            {"name": "munge-socket", "mountPath": MUNGE_SOCKET},
        ]
        container["volumeMounts"] += _script_mounts(ctx)
    spec["containers"] = [*containers, munge_sidecar(ctx.controller_image, ctx.munge_resources)]
    # a group's own podSecurityContext, else compute.pyxis.podSecurityContext, else ours
    if "podSecurityContext" in security:
        spec.setdefault("securityContext", copy.deepcopy(security["podSecurityContext"]))
    spec.setdefault("securityContext", copy.deepcopy(POD_SECURITY_CONTEXT))
    spec["volumes"] = [
        *(spec.get("volumes") or []),
        *munge_volumes(ctx.munge_secret),
        *_script_volumes(ctx),
    ]
    attach(spec, ctx.directory, {"slurmd"})
    if s6_services(nodeset, ctx):
        s6.attach(spec, "slurmd", names.nodeset_s6_map(nodeset.name), probe=True)
    spec["affinity"] = _pin(spec.get("affinity"), node_name)
    spec["tolerations"] = _merge_tolerations(spec.get("tolerations") or [])
    spec["hostname"] = pod_name
    spec["enableServiceLinks"] = False
    # Jobs run here: no API token unless the NodeSet's template asks for one (the lock hook's
    # token is a projected volume of its own audience).
    spec.setdefault("automountServiceAccountToken", False)
    if ctx.service_account:
        spec.setdefault("serviceAccountName", ctx.service_account)
    spec.pop("nodeSelector", None)  # as in SUNK, node selection is the NodeSet's job
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name,
            "namespace": ctx.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference("NodeSet", owner)],
        },
        "spec": spec,
    }


def _merge_tolerations(tolerations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged = list(tolerations)
    for extra in [names.LOCK_TOLERATION, *NODE_TOLERATIONS]:
        if extra not in merged:
            merged.append(extra)
    return merged


def _script_volumes(ctx: PodContext) -> list[dict[str, Any]]:
    out = []
    if ctx.prolog_config_map or ctx.epilog_config_map or ctx.locking or ctx.health:
        out.append(
            {"name": "dispatchers", "configMap": {"name": ctx.config_map, "defaultMode": 0o755}}
        )
    if ctx.health:  # a directory, not a subPath: changed checks reach running Pods
        items = [{"key": health.FILE, "path": health.MOUNT_NAME}]
        out.append({"name": health.VOLUME, "configMap": {"name": ctx.config_map, "items": items}})
    for kind, cm in (("prolog", ctx.prolog_config_map), ("epilog", ctx.epilog_config_map)):
        if cm:
            out.append({"name": f"{kind}-d", "configMap": {"name": cm, "defaultMode": 0o755}})
    if ctx.hooked:
        out.append(_hook_volume())
    return out


def _hook_volume() -> dict[str, Any]:
    """The lock hook's credentials: a token only the hook accepts (its own audience, bound to
    this Pod, short-lived) and the URL, which follows the annotation without a restart."""
    return {
        "name": "sunk-hook",
        "projected": {
            "defaultMode": 0o400,
            "sources": [
                {
                    "serviceAccountToken": {
                        "audience": HOOK_AUDIENCE,
                        "expirationSeconds": HOOK_TOKEN_SECONDS,
                        "path": "token",
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "url",
                                "fieldRef": {
                                    "fieldPath": f"metadata.annotations['{HOOK_URL_ANNOTATION}']"
                                },
                            }
                        ]
                    }
                },
            ],
        },
    }


def _script_mounts(ctx: PodContext) -> list[dict[str, Any]]:
    out = []
    for kind, cm in (("prolog", ctx.prolog_config_map), ("epilog", ctx.epilog_config_map)):
        if cm:
            out.append({"name": f"{kind}-d", "mountPath": f"/etc/slurm/{kind}.d", "readOnly": True})
        if cm or ctx.locking or ctx.health:  # whenever slurm.conf may name the dispatchers
            out.append(_dispatcher_mount(f"/etc/slurm/{kind}.sh"))
    if ctx.health:
        out.append({"name": health.VOLUME, "mountPath": health.MOUNT_DIR, "readOnly": True})
    if ctx.hooked:
        out.append(_dispatcher_mount(LOCK_PATH))
        out.append({"name": "sunk-hook", "mountPath": HOOK_DIR, "readOnly": True})
    return out


def _dispatcher_mount(path: str) -> dict[str, Any]:
    name = path.rsplit("/", 1)[1]
    return {"name": "dispatchers", "mountPath": path, "subPath": name, "readOnly": True}
