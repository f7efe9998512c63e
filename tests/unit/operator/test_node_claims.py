"""Pod first, Node label after (``sunk.operator.nodeset.claims``): of two NodeSets one
operator reconciles at once, exactly one takes a free Node, though neither's Pod nor label
has reached the watch yet; the labels follow as separate work."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sunk.models.crds import NodeSetSpec, SlurmClusterSpec
from sunk.operator import cache, names
from sunk.operator.client import ApiError
from sunk.operator.common import pod_node
from sunk.operator.nodeset.claims import label_nodes
from sunk.operator.nodeset.plan import plan
from sunk.operator.nodeset.reconcile import pod_context, reconcile_nodeset
from sunk.slurmconf import NodeSetInput
from tests.argocd.operator_status import NS, node, nodeset, slurm_cluster
from tests.fakes.kube import FakeKube


class SlowKube(FakeKube):
    """Every write suspends, as a real request does, so concurrent reconciles interleave."""

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return await super().create(obj)

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return await super().merge_patch(path, patch)

    async def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return await super().apply(obj)


class Live:
    def __init__(self, items) -> None:
        self.items = items

    def objects(self) -> list[dict]:
        return self.items()


def watched(kube: FakeKube, pods_seen: bool) -> cache.Watched:
    """The watch-fed reader over ``kube``; ``pods_seen=False``: a Pod watch that has shown
    none of the Pods created (it lags)."""
    return cache.Watched(
        {
            cache.INDEX_NODESETS: {NS: kube.of_kind("NodeSet")},
            cache.INDEX_CLUSTERS: {NS: kube.of_kind("SlurmCluster")},
        },
        Live(lambda: kube.of_kind("Node")),
        [Live(lambda: kube.of_kind("Pod") if pods_seen else [])],
    )


def two_nodesets_one_node() -> FakeKube:
    kube = SlowKube()
    kube.put(slurm_cluster({"syncer": {"enabled": False}}))
    kube.put(node("n1", "10.0.1.1"))
    for name in ("left", "right"):
        kube.put(nodeset(name=name))
    return kube


def test_two_nodesets_reconciled_at_once_take_a_free_node_once() -> None:
    kube = two_nodesets_one_node()
    reader = watched(kube, pods_seen=False)
    labels_asked: list[str] = []

    async def both() -> None:
        await asyncio.gather(
            *(
                reconcile_nodeset(
                    kube,
                    kube.read("NodeSet", name, NS),
                    reader=reader,
                    label_later=lambda name=name: labels_asked.append(name),
                )
                for name in ("left", "right")
            )
        )

    asyncio.run(both())
    pods = kube.of_kind("Pod")
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    winner = pods[0]["metadata"]["labels"][names.LABEL_NODESET]
    loser = ({"left", "right"} - {winner}).pop()
    assert labels_asked == [winner]  # the label is separate work, asked of the winner only
    assert names.LABEL_NODESET not in (
        kube.read("Node", "n1", None)["metadata"].get("labels") or {}
    )
    conflict = next(
        c
        for c in kube.read("NodeSet", loser, NS)["status"]["conditions"]
        if c["type"] == "NodeConflict"
    )
    assert conflict["status"] == "True"
    assert f"used by NodeSet {NS}/{winner}" in conflict["message"]


def test_without_a_separate_labeller_the_reconcile_labels_the_node_after_the_pod() -> None:
    kube = two_nodesets_one_node()
    asyncio.run(reconcile_nodeset(kube, kube.read("NodeSet", "left", NS)))
    labels = kube.read("Node", "n1", None)["metadata"]["labels"]
    assert labels[names.LABEL_NODESET] == "left" and labels[names.LABEL_NAMESPACE] == NS
    assert [pod_node(p) for p in kube.of_kind("Pod")] == ["n1"]


def test_a_node_another_nodesets_pod_holds_is_claimed_elsewhere_before_its_label() -> None:
    body = nodeset(name="right")
    spec = NodeSetSpec.model_validate(body["spec"])
    cluster = SlurmClusterSpec.model_validate(slurm_cluster()["spec"])
    ctx = pod_context(NS, "slurm", cluster, spec)
    nodes = [node("n1", "10.0.1.1"), node("n2", "10.0.1.2")]
    body["metadata"]["uid"] = "u-right"
    result = plan(NodeSetInput("right", spec), body, ctx, nodes, [], holders={"n1": (NS, "left")})
    assert result.claimed_elsewhere == {"n1": f"used by NodeSet {NS}/left"}
    assert [pod_node(p) for p in result.create] == ["n2"]
    mine = plan(NodeSetInput("right", spec), body, ctx, nodes, [], holders={"n1": (NS, "right")})
    assert sorted(pod_node(p) for p in mine.create) == ["n1", "n2"]
    assert mine.claimed_elsewhere == {}


def test_a_lost_label_race_is_reported() -> None:
    """Another operator (one that cannot see this NodeSet) labelled the Node between this
    operator's plan and its label write: the Pod's NodeSet learns it lost."""
    kube = two_nodesets_one_node()
    reader = watched(kube, pods_seen=True)
    asyncio.run(
        reconcile_nodeset(kube, kube.read("NodeSet", "left", NS), reader=reader, label_later=list)
    )
    theirs = {names.LABEL_NODESET: "gpu", names.LABEL_NAMESPACE: "elsewhere"}
    n1 = kube.read("Node", "n1", None)
    stale = {**n1, "metadata": {**n1["metadata"]}}  # the label writer's view, before theirs
    n1["metadata"]["labels"] = theirs
    kube.put(n1)
    lost = asyncio.run(label_nodes(kube, kube.of_kind("Pod"), {"n1": stale}, "left", NS, "slurm"))
    assert lost == ["n1"]
    assert kube.read("Node", "n1", None)["metadata"]["labels"] == theirs


def test_pods_planned_but_not_created_are_not_read_as_existing() -> None:
    """A write before the creates failed (the slurmd ServiceAccount, say): the Pods the plan
    announced are not read as on their way, so the retry creates them."""
    kube = two_nodesets_one_node()
    kube.refuse.add("ServiceAccount")
    reader = watched(kube, pods_seen=False)
    body = kube.read("NodeSet", "left", NS)
    with pytest.raises(ApiError):
        asyncio.run(reconcile_nodeset(kube, body, reader=reader, label_later=list))
    assert asyncio.run(reader.nodeset_pods(NS, "left")) == []
    assert asyncio.run(reader.node_holders()) == {}
    kube.refuse.clear()
    asyncio.run(reconcile_nodeset(kube, body, reader=reader, label_later=list))
    assert [pod_node(p) for p in kube.of_kind("Pod")] == ["n1"]
