"""Reconcile one NodeSet: claim Nodes, create/delete pinned slurmd pods, write status."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from pydantic import ValidationError

from sunk.models import conditions as reasons
from sunk.models.crds import API_VERSION, NodeSetSpec, SlurmClusterSpec
from sunk.operator import conditions, names
from sunk.operator.cluster.objects import image_ref
from sunk.operator.events import emit, emit_on_change
from sunk.operator.kube import ApiError, Kube, path_for
from sunk.operator.nodeset.plan import Plan, plan
from sunk.operator.nodeset.pod import PodContext
from sunk.slurmconf import Endpoints, NodeSetInput
from sunk.slurmconf.guard import UnsafeConfigError
from sunk.slurmconf.memory import SizingError

log = logging.getLogger("sunk.operator.nodeset")
PARALLEL_WRITES = 16
ROLLING_NOTE = (
    "pods are replaced within maxUnavailable; draining busy Slurm nodes first "
    "arrives with the syncer"
)


async def _bounded(tasks: list, limit: int = PARALLEL_WRITES) -> list:
    gate = asyncio.Semaphore(limit)

    async def run(coro):
        async with gate:
            return await coro

    return await asyncio.gather(*(run(t) for t in tasks))


async def _claim(kube: Kube, node: dict[str, Any], nodeset: str, ns: str, cluster: str) -> bool:
    """Label the Node as ours, guarded by its resourceVersion: of two NodeSets racing for a
    Node, exactly one wins; the other gets 409 and sees the label on its next pass."""
    meta = node["metadata"]
    patch = {
        "metadata": {
            "resourceVersion": meta["resourceVersion"],
            "labels": {
                names.LABEL_NODESET: nodeset,
                names.LABEL_NAMESPACE: ns,
                names.LABEL_CLUSTER: cluster,
            },
        }
    }
    try:
        await kube.merge_patch(path_for("v1", "nodes", None, meta["name"]), patch)
    except ApiError as exc:
        if exc.status == 409:
            return False
        raise
    return True


async def _release(kube: Kube, node: dict[str, Any]) -> None:
    patch = {
        "metadata": {
            "resourceVersion": node["metadata"]["resourceVersion"],
            "labels": {
                names.LABEL_NODESET: None,
                names.LABEL_NAMESPACE: None,
                names.LABEL_CLUSTER: None,
            },
        }
    }
    try:
        await kube.merge_patch(path_for("v1", "nodes", None, node["metadata"]["name"]), patch)
    except ApiError as exc:
        if exc.status not in (404, 409):
            raise


async def _create_pod(kube: Kube, pod: dict[str, Any]) -> None:
    try:
        await kube.create(pod)
    except ApiError as exc:
        if exc.status != 409:
            raise


async def reconcile_nodeset(kube: Kube, body: dict[str, Any]) -> dict[str, Any]:
    meta = body["metadata"]
    ns, name = meta["namespace"], meta["name"]
    try:
        spec = NodeSetSpec.model_validate(body["spec"])
    except ValidationError as exc:
        return await _write_status(
            kube,
            body,
            {},
            [conditions.condition("Ready", False, reasons.INVALID_SPEC, str(exc).splitlines()[0])],
        )
    nodeset = NodeSetInput(name, spec)
    cluster_obj = await _find_cluster(kube, ns, spec.clusterName)
    if cluster_obj is None:
        return await _write_status(
            kube,
            body,
            {},
            [
                conditions.condition(
                    "Ready",
                    False,
                    reasons.CLUSTER_NOT_FOUND,
                    f"no SlurmCluster with clusterName {spec.clusterName!r} in {ns}",
                )
            ],
        )
    cluster = SlurmClusterSpec.model_validate(cluster_obj["spec"])
    ctx = PodContext(
        namespace=ns,
        cluster=cluster.clusterName,
        controller_addr=Endpoints.for_cluster(cluster, ns).controller_addr,
        reserved_memory=spec.reservedMemory
        if spec.reservedMemory is not None
        else cluster.compute.reservedMemory,
        munge_secret=names.munge_secret_of(cluster),
        controller_image=image_ref(cluster.controller.image, cluster.global_.imageRegistry),
        config_map=names.config_map(cluster.clusterName),
        prolog_config_map=cluster.scripts.prolog,
        epilog_config_map=cluster.scripts.epilog,
    )
    nodes = await kube.list(path_for("v1", "nodes"))
    pods = await kube.list(path_for("v1", "pods", ns), f"{names.LABEL_NODESET}={name}")
    pods = [
        p
        for p in pods
        if any(o.get("uid") == meta["uid"] for o in p["metadata"].get("ownerReferences") or [])
    ]
    live = {
        (i["metadata"]["namespace"], i["metadata"]["name"])
        for i in await kube.list(path_for(API_VERSION, "nodesets"))
    }
    try:
        result = plan(nodeset, body, ctx, nodes, pods, live)
    except (SizingError, UnsafeConfigError) as exc:  # a registration Slurm cannot take
        await emit_on_change(kube, body, reasons.CONFIG_INVALID.name, str(exc))
        return await _write_status(
            kube,
            body,
            body.get("status") or {},
            [conditions.condition("Ready", False, reasons.CONFIG_INVALID, str(exc))],
        )
    by_name = {n["metadata"]["name"]: n for n in nodes}

    lost = [
        n
        for n, won in zip(
            result.claim,
            await _bounded(
                [_claim(kube, by_name[n], name, ns, cluster.clusterName) for n in result.claim]
            ),
            strict=True,
        )
        if not won
    ]
    creatable = [p for p in result.create if _pinned_node(p) not in lost]
    for node_name in lost:
        result.conflicts[node_name] = "claimed concurrently by another NodeSet"
    await _bounded([_release(kube, by_name[n]) for n in result.release])
    await _bounded([_create_pod(kube, p) for p in creatable])
    await _bounded(
        [kube.delete(path_for("v1", "pods", ns, pod_name)) for pod_name, _ in result.delete]
    )
    return await _write_status(kube, body, result.status, _conditions(result))


def _pinned_node(pod: dict[str, Any]) -> str:
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    return terms[0]["matchFields"][0]["values"][0]


def _conditions(result: Plan) -> list[dict[str, Any]]:
    status = result.status
    ready = status["numberReady"] >= min(status["desiredNumberScheduled"], status["numberFeasible"])
    conds = [
        conditions.condition(
            "Ready",
            ready,
            reasons.ALL_PODS_READY if ready else reasons.PODS_PROGRESSING,
            f"{status['numberReady']}/{status['desiredNumberScheduled']} ready, "
            f"{status['numberFeasible']} feasible Nodes",
        )
    ]
    if result.conflicts:
        detail = "; ".join(f"{n}: {why}" for n, why in sorted(result.conflicts.items()))
        conds.append(conditions.condition("NodeConflict", True, reasons.NODE_CONFLICT, detail))
    else:
        conds.append(conditions.condition("NodeConflict", False, reasons.NO_CONFLICT))
    if result.rolling:
        conds.append(
            conditions.condition("RollingUpdate", True, reasons.TEMPLATE_CHANGED, ROLLING_NOTE)
        )
    return conds


async def _find_cluster(kube: Kube, ns: str, cluster: str) -> dict[str, Any] | None:
    for item in await kube.list(path_for(API_VERSION, "slurmclusters", ns)):
        if (item.get("spec") or {}).get("clusterName") == cluster:
            return item
    return None


async def _write_status(
    kube: Kube,
    body: dict[str, Any],
    counters: dict[str, Any],
    conds: list[dict[str, Any]],
) -> dict[str, Any]:
    status, written = await conditions.write_status(kube, body, "nodesets", counters, conds)
    if not written:
        return status
    old = (body.get("status") or {}).get("conditions") or []
    old_conflict = next((c for c in old if c["type"] == "NodeConflict"), {})
    new_conflict = next((c for c in status["conditions"] if c["type"] == "NodeConflict"), {})
    if new_conflict.get("status") == "True" and new_conflict.get("message") != old_conflict.get(
        "message"
    ):
        await emit(kube, body, reasons.NODE_CONFLICT.name, new_conflict["message"])
    return status
