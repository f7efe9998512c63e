"""Which NodeSet a Node serves: the Pod first, SUNK's Node labels after.

A NodeSet's plan treats a Node as taken when another NodeSet's label is on it, or when
another NodeSet's Pod runs on it or is being created there (``Reader.node_holders``: the
slurmd Pods the operator watches, plus those it is creating). Reading the holders, planning
and recording the Pods about to be created (``Reader.expect``) happen with no suspension in
between, so of two NodeSets one operator reconciles at once, exactly one takes a free Node,
and the Pod is created without waiting for a label.

The labels (``sunk.coreweave.com/{nodeset,namespace,cluster}``, as SUNK's Node controller
sets them) then follow as separate work (``label_nodes``), off the path that brings Pods up.
Each label write is guarded by the Node's resourceVersion, so operators that cannot see each
other's NodeSets (each watching its own namespaces) still agree on one owner: the loser's
next plan sees the winner's label and removes its Pod there the safe way (drained first).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

from sunk.operator import names
from sunk.operator.client import ApiError, Kube, path_for
from sunk.operator.common import pod_node
from sunk.syncer import lock

PARALLEL_WRITES = 16
T = TypeVar("T")


async def bounded(tasks: list[Awaitable[T]], limit: int = PARALLEL_WRITES) -> list[T]:
    """Run ``tasks`` at most ``limit`` at a time, results in order."""
    gate = asyncio.Semaphore(limit)

    async def run(coro: Awaitable[T]) -> T:
        async with gate:
            return await coro

    return await asyncio.gather(*(run(t) for t in tasks))


# The Node labels a claim writes (SUNK's), in node_labels' order.
CLAIM_LABELS = (names.LABEL_NODESET, names.LABEL_NAMESPACE, names.LABEL_CLUSTER)


def node_labels(nodeset: str, ns: str, cluster: str) -> dict[str, str]:
    return dict(zip(CLAIM_LABELS, (nodeset, ns, cluster), strict=True))


def labelled_for(node: dict[str, Any], wanted: dict[str, str]) -> bool:
    current = node["metadata"].get("labels") or {}
    return all(current.get(k) == v for k, v in wanted.items())


async def claim_node(kube: Kube, node: dict[str, Any], nodeset: str, ns: str, cluster: str) -> bool:
    """Label the Node as ours, guarded by its resourceVersion: of two writers racing for a
    Node, exactly one wins; the other gets 409.

    The Node read from the watch may be older than the API server's (a heartbeat): on 409 the
    Node is read again, and it is ours if our label is on it, someone else's if theirs is, and
    claimed once more if it is still free. False: another writer's label is on it (or the
    Node kept changing under five tries; the next pass tries again)."""
    path = path_for("v1", "nodes", None, node["metadata"]["name"])
    labels = node_labels(nodeset, ns, cluster)
    for _ in range(5):
        version = node["metadata"]["resourceVersion"]
        patch = {"metadata": {"resourceVersion": version, "labels": labels}}
        try:
            await kube.merge_patch(path, patch)
            return True
        except ApiError as exc:
            if exc.status != 409:
                raise
        fresh = await kube.get(path)
        if fresh is None:
            return True  # gone, and its Pod with it: nobody else's
        if (fresh["metadata"].get("labels") or {}).get(names.LABEL_NODESET):
            return labelled_for(fresh, labels)
        node = fresh
    return False


async def release_node(kube: Kube, node: dict[str, Any]) -> None:
    """Unlabel a Node no Pod of ours runs on any more, and drop its lock: no epilog will."""
    patch = lock.node_patch(node, lock.Holders(), lock.UNLOCKED, "")
    patch["metadata"]["annotations"][lock.ANN_STATE] = None
    patch["metadata"]["labels"] = dict.fromkeys(CLAIM_LABELS)
    try:
        await kube.merge_patch(path_for("v1", "nodes", None, node["metadata"]["name"]), patch)
    except ApiError as exc:
        if exc.status not in (404, 409):
            raise


async def label_nodes(
    kube: Kube,
    pods: list[dict[str, Any]],
    nodes: dict[str, dict[str, Any]],
    nodeset: str,
    ns: str,
    cluster: str,
) -> list[str]:
    """Label every Node one of ``pods`` (this NodeSet's) runs on and that does not carry its
    label yet; returns the Nodes another NodeSet's label took first. A Node gone meanwhile is
    skipped (its Pod goes with it)."""
    wanted = node_labels(nodeset, ns, cluster)
    todo = sorted(
        {
            node
            for node in map(pod_node, pods)
            if node is not None and node in nodes and not labelled_for(nodes[node], wanted)
        }
    )
    won = await bounded([claim_node(kube, nodes[n], nodeset, ns, cluster) for n in todo])
    return [n for n, ok in zip(todo, won, strict=True) if not ok]
