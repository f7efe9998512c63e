"""What the reconcilers read besides their own object: Nodes, slurmd Pods, NodeSets and
SlurmClusters, either from the operator's watches or by LISTing.

The operator reads from its watches (``Watched``): NodeSets and SlurmClusters from kopf
indexes (kopf calls no handler before every index has its initial list), Nodes and slurmd
Pods from informers (``sunk.operator.informer``), which cost far less per event than kopf's
handler machinery. Reconciles wait until all of them hold their first list, so none sees a
half-filled cache; a reconcile then costs no LIST at all, where before each NodeSet pass listed
every Node of the cluster.

A watch lags the writes a reconcile makes, so ``Watched`` also remembers the Pods this process
created until the watch shows them (``expect``): the next pass does not create them again.

``Listed`` reads the same through LISTs, for callers without watches (tests that drive a
reconcile directly against an API server or a fake).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import kopf

from sunk.models.crds import API_VERSION, GROUP, VERSION
from sunk.operator import names
from sunk.operator.client import KubeApi, path_for
from sunk.operator.common import pod_node

Body = dict[str, Any]
EXPECT_SECONDS = 60.0  # a created Pod the watch has not shown by then is read as absent


class Reader(Protocol):
    async def nodes(self) -> list[Body]: ...

    async def nodeset_pods(self, ns: str, nodeset: str) -> list[Body]: ...

    async def cluster_pods(self, ns: str, cluster: str) -> list[Body]: ...

    async def nodesets(self, ns: str | None = None, namespaces: tuple[str, ...] = ()) -> list[Body]:
        """NodeSets in ``ns``, else in every watched namespace (``namespaces``; empty: all)."""
        ...

    async def clusters(self, ns: str | None = None, namespaces: tuple[str, ...] = ()) -> list[Body]:
        """SlurmClusters in ``ns``, else in every watched namespace."""
        ...

    async def node_holders(self, namespaces: tuple[str, ...] = ()) -> dict[str, tuple[str, str]]:
        """Node name → (namespace, NodeSet) of a slurmd Pod on it, in the watched namespaces
        (empty: all), the Pods being created included (``expect``)."""
        ...

    def expect(self, pods: Iterable[Body]) -> None:
        """Pods about to be created: read them as existing until the watch shows them."""
        ...

    def unexpect(self, pod: Body) -> None:
        """A Pod ``expect`` announced that was not created after all."""
        ...


class Listed:
    """Everything read fresh, by LIST."""

    def __init__(self, kube: KubeApi) -> None:
        self.kube = kube

    async def nodes(self) -> list[Body]:
        return await self.kube.list(path_for("v1", "nodes"))

    async def nodeset_pods(self, ns: str, nodeset: str) -> list[Body]:
        return await self.kube.list(path_for("v1", "pods", ns), f"{names.LABEL_NODESET}={nodeset}")

    async def cluster_pods(self, ns: str, cluster: str) -> list[Body]:
        selector = f"{names.LABEL_CLUSTER}={cluster},{names.LABEL_NODESET}"
        return await self.kube.list(path_for("v1", "pods", ns), selector)

    async def _scoped(self, plural: str, ns: str | None, namespaces: tuple[str, ...]) -> list[Body]:
        # A namespaced operator may not list across the cluster: each watched namespace.
        scopes: tuple[str | None, ...] = (ns,) if ns is not None else namespaces or (None,)
        return [
            item
            for scope in scopes
            for item in await self.kube.list(path_for(API_VERSION, plural, scope))
        ]

    async def nodesets(self, ns: str | None = None, namespaces: tuple[str, ...] = ()) -> list[Body]:
        return await self._scoped("nodesets", ns, namespaces)

    async def clusters(self, ns: str | None = None, namespaces: tuple[str, ...] = ()) -> list[Body]:
        return await self._scoped("slurmclusters", ns, namespaces)

    async def node_holders(self, namespaces: tuple[str, ...] = ()) -> dict[str, tuple[str, str]]:
        scopes: tuple[str | None, ...] = namespaces or (None,)
        pods = [
            pod
            for scope in scopes
            for pod in await self.kube.list(path_for("v1", "pods", scope), names.LABEL_NODESET)
        ]
        return holders(pods)

    def expect(self, pods: Iterable[Body]) -> None:
        pass  # the next LIST shows them

    def unexpect(self, pod: Body) -> None:
        pass


# The kopf indexes of our own kinds (few objects): their handler ids are the names kopf
# passes the indexes under. Nodes and Pods, which come in thousands, are the informers'.
INDEX_NODESETS, INDEX_CLUSTERS = "sunk_nodesets", "sunk_clusters"


@kopf.index(GROUP, VERSION, "nodesets", id=INDEX_NODESETS)
def sunk_nodesets(body: kopf.Body, namespace: str, **_: object) -> dict[str, Body]:
    return {namespace: dict(body)}


@kopf.index(GROUP, VERSION, "slurmclusters", id=INDEX_CLUSTERS)
def sunk_clusters(body: kopf.Body, namespace: str, **_: object) -> dict[str, Body]:
    return {namespace: dict(body)}


class Store(Protocol):
    """An informer's cache (``sunk.operator.informer.Informer``)."""

    def objects(self) -> list[Body]: ...


class Watched:
    """Reads kopf's indexes (given by name, as kopf hands them to the startup handler) for
    NodeSets and SlurmClusters, and the informers' stores for Nodes and slurmd Pods (one
    store per watched namespace, or one for all)."""

    def __init__(
        self,
        indices: Mapping[str, Any],
        nodes: Store,
        pods: Iterable[Store],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._node_store = nodes
        self._pod_stores = list(pods)
        self._nodesets = indices[INDEX_NODESETS]
        self._clusters = indices[INDEX_CLUSTERS]
        self._clock = clock
        # (namespace, nodeset) → Pod name → (the Pod as created, until when to expect it)
        self._expected: dict[tuple[str, str], dict[str, tuple[Body, float]]] = {}

    @staticmethod
    def _scoped(index: Any, ns: str | None) -> list[Body]:
        # The watches cover exactly the watched namespaces already.
        scopes = [ns] if ns is not None else list(index)
        return [item for scope in scopes for item in index.get(scope, ())]

    def _pods(self, ns: str) -> list[Body]:
        return [
            pod
            for store in self._pod_stores
            for pod in store.objects()
            if pod["metadata"]["namespace"] == ns
        ]

    async def nodes(self) -> list[Body]:
        return self._node_store.objects()

    async def nodeset_pods(self, ns: str, nodeset: str) -> list[Body]:
        seen = [
            pod
            for pod in self._pods(ns)
            if (pod["metadata"].get("labels") or {}).get(names.LABEL_NODESET) == nodeset
        ]
        expected = self._expected.get((ns, nodeset))
        if not expected:
            return seen
        names_seen = {p["metadata"]["name"] for p in seen}
        now = self._clock()
        for name in [n for n, (_, until) in expected.items() if n in names_seen or until < now]:
            del expected[name]
        return seen + [pod for pod, _ in expected.values()]

    async def cluster_pods(self, ns: str, cluster: str) -> list[Body]:
        return [
            pod
            for pod in self._pods(ns)
            if (pod["metadata"].get("labels") or {}).get(names.LABEL_CLUSTER) == cluster
        ]

    async def nodesets(self, ns: str | None = None, namespaces: tuple[str, ...] = ()) -> list[Body]:
        return self._scoped(self._nodesets, ns)

    async def clusters(self, ns: str | None = None, namespaces: tuple[str, ...] = ()) -> list[Body]:
        return self._scoped(self._clusters, ns)

    async def node_holders(self, namespaces: tuple[str, ...] = ()) -> dict[str, tuple[str, str]]:
        # No suspension inside: a caller that reads this, plans and calls ``expect`` without
        # awaiting anything else in between acts on one consistent view.
        seen = [pod for store in self._pod_stores for pod in store.objects()]
        coming = [pod for pods in self._expected.values() for pod, _ in pods.values()]
        return holders(seen + coming)

    def expect(self, pods: Iterable[Body]) -> None:
        until = self._clock() + EXPECT_SECONDS
        for pod in pods:
            self._expected.setdefault(_nodeset_of(pod), {})[pod["metadata"]["name"]] = (pod, until)

    def unexpect(self, pod: Body) -> None:
        self._expected.get(_nodeset_of(pod), {}).pop(pod["metadata"]["name"], None)


def _nodeset_of(pod: Body) -> tuple[str, str]:
    """(namespace, NodeSet) of one of our slurmd Pods."""
    meta = pod["metadata"]
    return meta["namespace"], meta["labels"][names.LABEL_NODESET]


def holders(pods: Iterable[Body]) -> dict[str, tuple[str, str]]:
    """Node name → (namespace, NodeSet) of the slurmd Pods among ``pods`` (a Pod not yet
    bound counts on the Node it is pinned to)."""
    out: dict[str, tuple[str, str]] = {}
    for pod in pods:
        meta = pod["metadata"]
        nodeset = (meta.get("labels") or {}).get(names.LABEL_NODESET)
        node = pod_node(pod)
        if nodeset and node:
            out.setdefault(node, (meta["namespace"], nodeset))
    return out
