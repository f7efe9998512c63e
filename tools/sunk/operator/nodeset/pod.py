"""The slurmd pod for one Node: the NodeSet's template, pinned to the Node, with munge."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from sunk.operator import names
from sunk.operator.hashing import stable_hash
from sunk.slurmconf.inputs import NodeSetInput
from sunk.slurmconf.registration import registration
from sunk.slurmconf.scripts import HOOK_DIR, LOCK_PATH

MUNGE_SOCKET = "/run/munge"
MUNGE_RESOURCES = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}}
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
    controller_addr: str
    reserved_memory: str | int | float
    munge_secret: str
    controller_image: str
    config_map: str = ""  # holds the prolog/epilog dispatchers (prolog.sh, epilog.sh)
    prolog_config_map: str | None = None
    epilog_config_map: str | None = None
    locking: bool = False  # jobs lock their Node: the Pod carries the hook's token and URL
    hook_url: str = ""  # the operator's lock hook (the Pod reads it from its annotation)

    @property
    def hooked(self) -> bool:
        return self.locking and bool(self.hook_url)


HOOK_URL_ANNOTATION = f"{names.GROUP}/hook-url"
HOOK_AUDIENCE = f"{names.GROUP}/hook"
HOOK_TOKEN_SECONDS = 3600  # kubelet refreshes it at 80 %


def template_hash(nodeset: NodeSetInput, ctx: PodContext | None = None) -> str:
    """Changes when the pods must be replaced (not on scaling or a new update strategy, nor
    on a new hook URL, which reaches running Pods through their annotation)."""
    spec = nodeset.spec.model_dump(
        mode="json", exclude={"replicas", "maxUnavailable", "updateStrategy"}
    )
    if ctx is not None and ctx.hooked:
        spec = {"spec": spec, "locking": True}
    return stable_hash(spec, 10)


def owner_reference(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": "sunk.coreweave.com/v1alpha1",
        "kind": kind,
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


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
    template = copy.deepcopy(nodeset.spec.template.model_dump(mode="json"))
    spec: dict[str, Any] = template.get("spec") or {}
    meta = template.get("metadata") or {}
    labels = {
        **(meta.get("labels") or {}),
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
        {"name": "SUNK_CONTROLLER", "value": f"{ctx.controller_addr}:6817"},
        {"name": "SUNK_SLURMD_CONF", "value": conf},
        {"name": "SUNK_MUNGED", "value": "external"},  # the munge sidecar runs it
    ]
    containers = spec.get("containers") or [{"name": "slurmd"}]
    for container in containers:
        if container.get("name") != "slurmd":
            continue
        container["args"] = ["slurmd"]
        container["env"] = [*env, *(container.get("env") or [])]
        container.setdefault("securityContext", {"privileged": True})
        container["volumeMounts"] = [
            *(container.get("volumeMounts") or []),
            {"name": "munge-socket", "mountPath": MUNGE_SOCKET},
        ]
        container["volumeMounts"] += _script_mounts(ctx)
    munge = {
        "name": "munge",
        "image": ctx.controller_image,
        "args": ["munged"],
        "volumeMounts": [
            {"name": "munge-socket", "mountPath": MUNGE_SOCKET},
            {"name": "munge-key", "mountPath": "/etc/munge-secret", "readOnly": True},
        ],
        "resources": copy.deepcopy(MUNGE_RESOURCES),
    }
    spec["containers"] = [*containers, munge]
    spec["volumes"] = [
        *(spec.get("volumes") or []),
        {"name": "munge-socket", "emptyDir": {"medium": "Memory"}},
        {"name": "munge-key", "secret": {"secretName": ctx.munge_secret, "defaultMode": 0o400}},
        *_script_volumes(ctx),
    ]
    spec["affinity"] = _pin(spec.get("affinity"), node_name)
    spec["tolerations"] = _merge_tolerations(spec.get("tolerations") or [])
    spec["hostname"] = pod_name
    spec["enableServiceLinks"] = False
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
    if ctx.prolog_config_map or ctx.epilog_config_map or ctx.hooked:
        out.append(
            {"name": "dispatchers", "configMap": {"name": ctx.config_map, "defaultMode": 0o755}}
        )
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
        if cm or ctx.hooked:
            out.append(_dispatcher_mount(f"/etc/slurm/{kind}.sh"))
    if ctx.hooked:
        out.append(_dispatcher_mount(LOCK_PATH))
        out.append({"name": "sunk-hook", "mountPath": HOOK_DIR, "readOnly": True})
    return out


def _dispatcher_mount(path: str) -> dict[str, Any]:
    name = path.rsplit("/", 1)[1]
    return {"name": "dispatchers", "mountPath": path, "subPath": name, "readOnly": True}
