"""The watch-fed reader: kopf's indexes and the informers' stores as the reconcilers see
them, and the Pods a reconcile created that the watch has not shown yet. (kopf's Index is a
mapping of key → iterable of values, plain dicts of lists stand in for it here; a list stands
in for an informer's store.)"""

from __future__ import annotations

import asyncio

from sunk.operator import cache, names


def pod(name: str, ns: str = "slurm", nodeset: str = "cpu", cluster: str = "c1") -> dict:
    labels = {names.LABEL_NODESET: nodeset, names.LABEL_CLUSTER: cluster}
    return {"metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": {}}


class Store:
    def __init__(self, items: list[dict]) -> None:
        self.items = items

    def objects(self) -> list[dict]:
        return list(self.items)


def reader(pods: list[dict], clock: list[float]) -> cache.Watched:
    return cache.Watched(
        {
            cache.INDEX_NODESETS: {"slurm": [{"metadata": {"name": "cpu"}}], "b": []},
            cache.INDEX_CLUSTERS: {"slurm": [{"metadata": {"name": "c1"}}]},
        },
        Store([{"metadata": {"name": "n1"}}]),
        [Store(pods)],
        clock=lambda: clock[0],
    )


def names_of(items: list[dict]) -> list[str]:
    return sorted(i["metadata"]["name"] for i in items)


def test_reads_come_from_the_indexes() -> None:
    pods = [pod("cpu-1"), pod("gpu-1", nodeset="gpu"), pod("x", ns="other")]
    r = reader(pods, [0.0])
    run = asyncio.run
    assert names_of(run(r.nodes())) == ["n1"]
    assert names_of(run(r.nodeset_pods("slurm", "cpu"))) == ["cpu-1"]
    assert names_of(run(r.nodeset_pods("slurm", "none"))) == []
    assert names_of(run(r.cluster_pods("slurm", "c1"))) == ["cpu-1", "gpu-1"]
    assert names_of(run(r.nodesets())) == ["cpu"]
    assert names_of(run(r.nodesets("b"))) == []
    assert names_of(run(r.clusters("slurm"))) == ["c1"]
    assert names_of(run(r.clusters(None))) == ["c1"]


def test_created_pods_count_until_the_watch_shows_them_or_they_expire() -> None:
    pods = [pod("cpu-1")]
    clock = [0.0]
    r = reader(pods, clock)
    r.expect([pod("cpu-2"), pod("cpu-3")])
    assert names_of(asyncio.run(r.nodeset_pods("slurm", "cpu"))) == ["cpu-1", "cpu-2", "cpu-3"]
    pods.append(pod("cpu-2"))  # the watch shows one: read once, not twice
    assert names_of(asyncio.run(r.nodeset_pods("slurm", "cpu"))) == ["cpu-1", "cpu-2", "cpu-3"]
    clock[0] = cache.EXPECT_SECONDS + 1  # the other never appeared: read as absent again
    assert names_of(asyncio.run(r.nodeset_pods("slurm", "cpu"))) == ["cpu-1", "cpu-2"]
