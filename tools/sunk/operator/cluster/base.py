"""What the control plane's component builders share: the context of one SlurmCluster, labels,
selectors, owner references and metadata, the Slurm daemon container and Pod spec around it
(munge sidecar, /etc/slurm volume, default requests, security contexts), volume claims,
Services and PodDisruptionBudgets.

Apart from the components (controller, accounting, rest, login) so each of them reads as what
it builds; nothing here imports them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from sunk.models.crds import SlurmClusterSpec
from sunk.models.k8s import PersistentStorage, image_ref
from sunk.operator import names
from sunk.operator.common import (
    MUNGE_SOCKET,
    POD_SECURITY_CONTEXT,
    cluster_labels,
    cluster_owner,
    munge_sidecar,
    munge_volumes,
    non_root,
    service_account,
)
from sunk.slurmconf import Rendered

SLURM_UID = 401  # the images' fixed ids (images/common/install-slurm.sh), as SUNK's
SLURMRESTD_UID = 403
# slurmctld and slurmdbd: SlurmUser from the start (their state and key copies are theirs).
SLURM_USER_SECURITY_CONTEXT = non_root(SLURM_UID)
# Requests (never limits: see checkov-skips.yaml) of a component whose `resources` is unset.
DEFAULT_REQUESTS = {
    "slurmctld": {"cpu": "100m", "memory": "256Mi"},
    "slurmdbd": {"cpu": "50m", "memory": "128Mi"},
    "slurmrestd": {"cpu": "50m", "memory": "128Mi"},
    "sshd": {"cpu": "100m", "memory": "256Mi"},
    "mariadb": {"cpu": "100m", "memory": "256Mi"},
}


@dataclass(frozen=True)
class ClusterContext:
    name: str  # SlurmCluster metadata.name
    namespace: str
    uid: str
    spec: SlurmClusterSpec
    rendered: Rendered
    munge_secret: str
    jwt_secret: str
    db_password_secret: tuple[str, str] | None  # (Secret name, key)

    @property
    def cluster(self) -> str:
        return self.spec.clusterName


def labels(ctx: ClusterContext, component: str) -> dict[str, str]:
    return cluster_labels(ctx.cluster, component)


def selector(ctx: ClusterContext, component: str) -> dict[str, str]:
    return {names.LABEL_CLUSTER: ctx.cluster, names.LABEL_COMPONENT: component}


def owner(ctx: ClusterContext) -> list[dict[str, Any]]:
    return cluster_owner(ctx.name, ctx.uid)


def pod_account(ctx: ClusterContext, pod: dict[str, Any], component: str) -> dict[str, Any]:
    """The component's ServiceAccount, named in its Pod spec ``pod``."""
    account = service_account(ctx.namespace, ctx.cluster, component, ctx.name, ctx.uid)
    pod["serviceAccountName"] = account["metadata"]["name"]
    return account


def meta(ctx: ClusterContext, name: str, component: str, owned: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "namespace": ctx.namespace,
        "labels": labels(ctx, component),
    }
    if owned:
        out["ownerReferences"] = owner(ctx)
    return out


def _tolerations(opts: Any) -> list[dict[str, Any]]:
    tols = [t.model_dump(exclude_none=True) for t in (opts.tolerations or [])]
    if names.LOCK_TOLERATION not in tols:
        tols.append(names.LOCK_TOLERATION)
    return tols


def _pull_secrets(ctx: ClusterContext) -> list[dict[str, str]]:
    return list(ctx.spec.imagePullSecrets)


def munge_container(ctx: ClusterContext, uid: int | None = None) -> dict[str, Any]:
    """The munge sidecar of every control-plane Pod, sized by `munge.resources`, as the slurmd
    Pods' (sunk.operator.nodeset.pod); ``uid``: see ``munge_sidecar``."""
    resources = ctx.spec.munge.resources
    return munge_sidecar(
        image_ref(ctx.spec.controller.image, ctx.spec.global_.imageRegistry),
        resources.model_dump(mode="json", exclude_none=True) if resources is not None else None,
        uid,
    )


def _lua_sources(ctx: ClusterContext, files: tuple[str, ...]) -> list[dict[str, Any]]:
    """Projections of the Lua plugin scripts this Pod reads (``files``), beside slurm.conf:
    inline ones from the operator's ConfigMap, referenced ones from the user's."""
    inline: list[dict[str, str]] = []
    refs: list[dict[str, Any]] = []
    for name, script in ctx.spec.slurmConfig.lua().items():
        if name not in files:
            continue
        if script.configMap is not None:
            item = {"key": script.configMap.key or name, "path": name}
            refs.append({"configMap": {"name": script.configMap.name, "items": [item]}})
        else:
            inline.append({"key": name, "path": name})
    if inline:
        refs.insert(0, {"configMap": {"name": names.lua_map(ctx.cluster), "items": inline}})
    return refs


def config_volume(
    ctx: ClusterContext, lua: tuple[str, ...] = (), jwt_key: bool = False
) -> dict[str, Any]:
    """/etc/slurm. ``jwt_key``: only the daemons that sign and verify tokens (slurmctld,
    slurmdbd) get the key; with it anyone could mint a token for any user, and slurmrestd and
    the clients only pass tokens on."""
    sources: list[dict[str, Any]] = [{"configMap": {"name": names.config_map(ctx.cluster)}}]
    if ctx.spec.compute.generateTopology:
        sources.append({"configMap": {"name": names.topology_map(ctx.cluster)}})
    sources += _lua_sources(ctx, lua)
    if jwt_key:
        item = {"key": "jwt.key", "path": "jwt/jwt.key", "mode": 0o400}
        sources.append({"secret": {"name": ctx.jwt_secret, "items": [item]}})
    return {"name": "slurm-config", "projected": {"sources": sources, "defaultMode": 0o444}}


def pod_spec(
    ctx: ClusterContext,
    opts: Any,
    containers: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    hostname: str | None = None,
    munge_uid: int | None = None,
) -> dict[str, Any]:
    """``munge_uid``: the munge sidecar starts as that user (the Pod needs an fsGroup)."""
    spec: dict[str, Any] = {
        "containers": [*containers, munge_container(ctx, munge_uid)],
        "volumes": [*volumes, *munge_volumes(ctx.munge_secret)],
        "tolerations": _tolerations(opts),
        "enableServiceLinks": False,
        # No Slurm daemon talks to the Kubernetes API; users SSH into the login Pods.
        "automountServiceAccountToken": False,
    }
    if hostname:
        spec["hostname"] = hostname
    for key, value in (
        ("affinity", opts.affinity or ctx.spec.global_.affinity),
        ("nodeSelector", opts.nodeSelector),
        ("priorityClassName", opts.priorityClassName),
        ("securityContext", opts.podSecurityContext),
        ("terminationGracePeriodSeconds", opts.terminationGracePeriodSeconds),
        ("imagePullSecrets", _pull_secrets(ctx)),
    ):
        if value:
            spec[key] = value
    return spec


def resources(name: str, resources: Any) -> dict[str, Any]:
    if resources is not None:
        return resources.model_dump(exclude_none=True)
    return {"requests": dict(DEFAULT_REQUESTS.get(name, {}))}


def pod_security(spec: dict[str, Any], fs_group: int | None = None) -> None:
    """The Pod's securityContext when `podSecurityContext` is unset: seccomp RuntimeDefault,
    and ``fs_group`` for the daemons that run as slurm and read group-owned volumes."""
    default = copy.deepcopy(POD_SECURITY_CONTEXT)
    if fs_group is not None:
        default["fsGroup"] = fs_group
    spec.setdefault("securityContext", default)


# slurmctld, slurmdbd (SlurmUser, 401), slurmrestd (403), the reconfigure loop (401) and the
# control-plane munge sidecars (402) start as their own users with no capability. MariaDB starts
# as root, owns its data directory, then mariadbd --user drops to mysql: no setuid binary on
# the way, so no privilege escalation, and only ROOT_THEN_USER_SECURITY_CONTEXT's capabilities.
# The e2e tier runs them so on real nodes; the images tier runs the same entrypoints under
# Docker's default seccomp profile.
def daemon_container(
    ctx: ClusterContext,
    name: str,
    opts: Any,
    args: list[str],
    port: int | None,
    security: dict[str, Any],
) -> dict[str, Any]:
    """A Slurm daemon's container; ``security`` is its securityContext unless the component's
    `securityContext` replaces it."""
    container: dict[str, Any] = {
        "name": name,
        "image": image_ref(opts.image, ctx.spec.global_.imageRegistry),
        "args": args,
        "env": [
            {"name": "SUNK_CLUSTER_NAME", "value": ctx.cluster},
            {"name": "SUNK_MUNGED", "value": "external"},  # the munge sidecar runs it
            *(opts.env or []),
        ],
        "volumeMounts": [
            {"name": "slurm-config", "mountPath": "/etc/slurm", "readOnly": True},
            {"name": "munge-socket", "mountPath": MUNGE_SOCKET},
        ],
    }
    if opts.image.pullPolicy:
        container["imagePullPolicy"] = opts.image.pullPolicy
    container["resources"] = resources(name, opts.resources)
    container["securityContext"] = opts.securityContext or copy.deepcopy(security)
    if port:
        container["ports"] = [{"name": name, "containerPort": port}]
        container["readinessProbe"] = {"tcpSocket": {"port": port}, "periodSeconds": 10}
    return container


def template(
    ctx: ClusterContext,
    component: str,
    opts: Any,
    spec: dict[str, Any],
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    # Ours win: selectors and the NetworkPolicies tell the components apart by them.
    pod_labels = {**(opts.labels or {}), **labels(ctx, component)}
    pod_annotations = {**(opts.annotations or {}), **(annotations or {})}
    return {"metadata": {"labels": pod_labels, "annotations": pod_annotations}, "spec": spec}


def deployment(
    ctx: ClusterContext,
    name: str,
    component: str,
    opts: Any,
    pod: dict[str, Any],
    replicas: int,
    strategy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A component's Deployment (slurmdbd, slurmrestd): its Pods restart when the rendered
    configuration changes (the config-hash annotation)."""
    spec: dict[str, Any] = {"replicas": replicas}
    if strategy is not None:
        spec["strategy"] = strategy
    spec["selector"] = {"matchLabels": selector(ctx, component)}
    spec["template"] = template(
        ctx, component, opts, pod, {names.ANN_CONFIG_HASH: ctx.rendered.config_hash}
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta(ctx, name, component),
        "spec": spec,
    }


def volume_claim(
    name: str, storage: PersistentStorage, claim_labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """A StatefulSet volumeClaimTemplate from a values `{storageClassName, size}` block, and
    its `accessModes` where it has them (`controller.stateVolume`)."""
    claim: dict[str, Any] = {
        "metadata": {"name": name, **({"labels": claim_labels} if claim_labels else {})},
        "spec": {
            "accessModes": list(getattr(storage, "accessModes", ["ReadWriteOnce"])),
            "resources": {"requests": {"storage": str(storage.size)}},
        },
    }
    if storage.storageClassName:
        claim["spec"]["storageClassName"] = storage.storageClassName
    return claim


def service(
    ctx: ClusterContext,
    name: str,
    component: str,
    ports: list[tuple[str, int]],
    headless: bool = False,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": selector(ctx, component),
        "ports": [{"name": n, "port": p, "targetPort": p} for n, p in ports],
    }
    if headless:
        spec["clusterIP"] = "None"
        spec["publishNotReadyAddresses"] = True
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(ctx, name, component),
        "spec": spec,
    }


def disruption_budget(
    ctx: ClusterContext, name: str, component: str, max_unavailable: int | str
) -> dict[str, Any]:
    """A PodDisruptionBudget over one component's Pods (its workload's selector). A Pod that is
    not Ready may always be evicted: a budget keeps a working daemon, not a broken one."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": meta(ctx, name, component),
        "spec": {
            "maxUnavailable": max_unavailable,
            "selector": {"matchLabels": selector(ctx, component)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
