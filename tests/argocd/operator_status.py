"""NodeSet and SlurmCluster objects carrying the status the operator writes.

Each scenario runs the operator's own reconcilers (``reconcile_nodeset``, ``reconcile_cluster``)
against ``FakeKube``, an in-memory stand-in for the API calls they make, and returns the object
as Argo CD would read it afterwards: spec, metadata and the status written through the status
subresource (JSON merge patch, as the real API server applies it). Nothing here is written from
the health scripts; only Pod readiness and workload readyReplicas are set by hand, the way the
kubelet and the StatefulSet controller would.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sunk.models.crds import API_VERSION
from sunk.operator import names
from sunk.operator.client import PLURALS, ApiError
from sunk.operator.cluster.reconcile import reconcile_cluster
from sunk.operator.nodeset.reconcile import reconcile_nodeset

NS = "slurm"
_uids = itertools.count(1)

Key = tuple[str, str, str | None, str | None]


def _parse(path: str) -> tuple[Key, str | None]:
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        api, rest = parts[1], parts[2:]
    else:
        api, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    ns = None
    if rest[0] == "namespaces" and len(rest) > 2:
        ns, rest = rest[1], rest[2:]
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    return (api, rest[0], ns, name), sub


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def _selected(obj: dict[str, Any], selector: str | None) -> bool:
    labels = obj["metadata"].get("labels") or {}
    for term in (selector or "").split(","):
        if not term:
            continue
        key, _, value = term.partition("=")
        if key not in labels or (value and labels[key] != value):
            return False
    return True


class FakeKube:
    """The calls of ``sunk.operator.client.Kube`` the reconcilers use, over a dict."""

    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        self.refuse: set[str] = set()  # kinds whose apply the "API server" rejects
        self.writes = 0

    def _key(self, obj: dict[str, Any]) -> Key:
        meta = obj["metadata"]
        return (obj["apiVersion"], PLURALS[obj["kind"]], meta.get("namespace"), meta["name"])

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        meta.setdefault("uid", f"uid-{next(_uids)}")
        meta["resourceVersion"] = str(next(_uids))
        self.objects[self._key(obj)] = obj
        return obj

    def read(self, kind: str, name: str, ns: str | None = NS) -> dict[str, Any]:
        api = API_VERSION if kind in ("NodeSet", "SlurmCluster") else "v1"
        if kind in ("StatefulSet", "Deployment"):
            api = "apps/v1"
        return copy.deepcopy(self.objects[(api, PLURALS[kind], ns, name)])

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(o) for o in self.objects.values() if o["kind"] == kind]

    async def get(self, path: str) -> dict[str, Any] | None:
        key, _ = _parse(path)
        obj = self.objects.get(key)
        return copy.deepcopy(obj) if obj else None

    async def list(self, path: str, label_selector: str | None = None) -> list[dict[str, Any]]:
        (api, plural, ns, _), _ = _parse(path)
        return [
            copy.deepcopy(o)
            for (a, p, n, _), o in self.objects.items()
            if a == api and p == plural and (ns is None or n == ns) and _selected(o, label_selector)
        ]

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        if self._key(obj) in self.objects:
            raise ApiError("POST", "", 409, "AlreadyExists")
        return self.put(obj)

    async def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        if obj["kind"] in self.refuse:
            raise ApiError("PATCH", "", 422, f"{obj['kind']} is invalid: spec: Forbidden")
        live = self.objects.get(self._key(obj))
        merged = copy.deepcopy(obj)
        if live and "status" in live:
            merged["status"] = live["status"]
        return self.put(merged)

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        key, sub = _parse(path)
        live = self.objects[key]
        if sub == "status":
            live["status"] = _merge(live.get("status"), patch["status"])
            return copy.deepcopy(live)
        version = (patch.get("metadata") or {}).get("resourceVersion")
        if version and version != live["metadata"]["resourceVersion"]:
            raise ApiError("PATCH", path, 409, "Conflict")
        patch = copy.deepcopy(patch)
        (patch.get("metadata") or {}).pop("resourceVersion", None)
        return self.put(_merge(live, patch))

    async def delete(self, path: str, grace_seconds: int | None = None) -> None:
        self.writes += 1
        key, _ = _parse(path)
        self.objects.pop(key, None)


def node(name: str, ip: str, memory: str = "32Gi", labels: dict[str, str] | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "8", "memory": memory, "pods": "110"},
            "addresses": [{"type": "InternalIP", "address": ip}],
        },
    }


def slurm_cluster(spec: dict[str, Any] | None = None, name: str = "slurm") -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "SlurmCluster",
        "metadata": {"name": name, "namespace": NS, "generation": 1},
        "spec": {"clusterName": name, **(spec or {})},
    }


def nodeset(
    name: str = "cpu",
    replicas: int | None = None,
    memory: str = "8Gi",
    image: str = "slurmd:1",
    **extra: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "clusterName": "slurm",
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "slurmd",
                        "image": image,
                        "resources": {
                            "requests": {"cpu": "2", "memory": "4Gi"},
                            "limits": {"memory": memory},
                        },
                    }
                ]
            }
        },
        **extra,
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": API_VERSION,
        "kind": "NodeSet",
        "metadata": {"name": name, "namespace": NS, "generation": 1},
        "spec": spec,
    }


def reconcile(kube: FakeKube, kind: str, name: str) -> dict[str, Any]:
    """One reconcile of the stored object, as the operator's handler runs it; returns the
    object as stored afterwards."""
    body = kube.read(kind, name)
    run = reconcile_nodeset if kind == "NodeSet" else reconcile_cluster
    asyncio.run(run(kube, body))  # type: ignore[arg-type]
    return kube.read(kind, name)


def pods_ready(kube: FakeKube) -> None:
    for pod in kube.of_kind("Pod"):
        pod["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
        kube.put(pod)


def workloads_ready(kube: FakeKube) -> None:
    for obj in kube.of_kind("StatefulSet") + kube.of_kind("Deployment"):
        obj["status"] = {"readyReplicas": obj["spec"].get("replicas", 1)}
        kube.put(obj)


def bump(kube: FakeKube, kind: str, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    """A spec change as Argo CD would apply it: new spec, generation + 1."""
    obj = kube.read(kind, name)
    change(obj["spec"])
    obj["metadata"]["generation"] += 1
    kube.put(obj)


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str
    build: Callable[[], dict[str, Any]]


def _with_cluster(*nodes: dict[str, Any], cluster: dict[str, Any] | None = None) -> FakeKube:
    kube = FakeKube()
    kube.put(cluster or slurm_cluster())
    for n in nodes:
        kube.put(n)
    return kube


TWO_NODES = (node("n1", "10.0.1.1"), node("n2", "10.0.1.2"))


def nodeset_invalid_spec() -> dict[str, Any]:
    kube = _with_cluster(*TWO_NODES)
    bad = nodeset()
    bad["spec"]["replicas"] = "many"
    kube.put(bad)
    return reconcile(kube, "NodeSet", "cpu")


def nodeset_cluster_not_found() -> dict[str, Any]:
    kube = FakeKube()
    kube.put(nodeset())
    return reconcile(kube, "NodeSet", "cpu")


def nodeset_impossible_sizing() -> dict[str, Any]:
    kube = _with_cluster(*TWO_NODES)
    kube.put(nodeset(memory="1Gi", reservedMemory="2Gi"))
    return reconcile(kube, "NodeSet", "cpu")


def nodeset_pods_starting() -> dict[str, Any]:
    kube = _with_cluster(*TWO_NODES)
    kube.put(nodeset())
    return reconcile(kube, "NodeSet", "cpu")


def _ready_nodeset(**kw: Any) -> tuple[FakeKube, dict[str, Any]]:
    kube = _with_cluster(*TWO_NODES)
    kube.put(nodeset(**kw))
    reconcile(kube, "NodeSet", "cpu")
    pods_ready(kube)
    return kube, reconcile(kube, "NodeSet", "cpu")


def nodeset_all_ready() -> dict[str, Any]:
    return _ready_nodeset()[1]


def nodeset_replicas_1000() -> dict[str, Any]:
    return _ready_nodeset(replicas=1000)[1]


def nodeset_pod_name_conflict() -> dict[str, Any]:
    """Two Nodes whose addresses end alike map to one Pod name: one of them cannot be used."""
    kube = _with_cluster(node("n1", "10.0.1.1"), node("n2", "10.1.1.1"))
    kube.put(nodeset())
    reconcile(kube, "NodeSet", "cpu")
    pods_ready(kube)
    return reconcile(kube, "NodeSet", "cpu")


def nodeset_node_claimed_elsewhere() -> dict[str, Any]:
    taken = {names.LABEL_NODESET: "gpu", names.LABEL_NAMESPACE: NS}
    kube = _with_cluster(node("n1", "10.0.1.1", labels=taken), node("n2", "10.0.1.2"))
    kube.put(nodeset(name="gpu"))
    kube.put(nodeset())
    reconcile(kube, "NodeSet", "cpu")
    pods_ready(kube)
    return reconcile(kube, "NodeSet", "cpu")


def nodeset_rolling_update() -> dict[str, Any]:
    kube, _ = _ready_nodeset()
    bump(
        kube,
        "NodeSet",
        "cpu",
        lambda spec: spec["template"]["spec"]["containers"][0].update(image="slurmd:2"),
    )
    return reconcile(kube, "NodeSet", "cpu")


def nodeset_generation_not_observed() -> dict[str, Any]:
    kube, _ = _ready_nodeset()
    bump(kube, "NodeSet", "cpu", lambda spec: spec.update(replicas=1))
    return kube.read("NodeSet", "cpu")


def nodeset_fixed_after_invalid() -> dict[str, Any]:
    """InvalidSpec, then a valid spec: the merge-patched status keeps no stale reason."""
    kube = _with_cluster(*TWO_NODES)
    bad = nodeset()
    bad["spec"]["replicas"] = "many"
    kube.put(bad)
    reconcile(kube, "NodeSet", "cpu")
    bump(kube, "NodeSet", "cpu", lambda spec: spec.update(replicas=2))
    reconcile(kube, "NodeSet", "cpu")
    pods_ready(kube)
    return reconcile(kube, "NodeSet", "cpu")


def cluster_invalid_spec() -> dict[str, Any]:
    kube = FakeKube()
    kube.put(slurm_cluster({"login": {"enabled": "sometimes"}}))
    return reconcile(kube, "SlurmCluster", "slurm")


def cluster_config_invalid() -> dict[str, Any]:
    kube = _with_cluster()
    kube.put(nodeset(memory="1Gi", reservedMemory="2Gi"))
    return reconcile(kube, "SlurmCluster", "slurm")


def cluster_starting() -> dict[str, Any]:
    kube = _with_cluster()
    return reconcile(kube, "SlurmCluster", "slurm")


def cluster_all_ready() -> dict[str, Any]:
    kube = _with_cluster()
    reconcile(kube, "SlurmCluster", "slurm")
    workloads_ready(kube)
    return reconcile(kube, "SlurmCluster", "slurm")


def cluster_database_unavailable() -> dict[str, Any]:
    kube = _with_cluster(cluster=slurm_cluster({"accounting": {"external": {"enabled": True}}}))
    reconcile(kube, "SlurmCluster", "slurm")
    workloads_ready(kube)
    return reconcile(kube, "SlurmCluster", "slurm")


def cluster_key_missing() -> dict[str, Any]:
    """A key Secret the operator recorded has been deleted."""
    kube = _with_cluster()
    reconcile(kube, "SlurmCluster", "slurm")
    workloads_ready(kube)
    reconcile(kube, "SlurmCluster", "slurm")
    del kube.objects[("v1", "secrets", NS, names.munge_secret("slurm"))]
    return reconcile(kube, "SlurmCluster", "slurm")


def cluster_apply_refused() -> dict[str, Any]:
    kube = _with_cluster()
    kube.refuse.add("Service")
    reconcile(kube, "SlurmCluster", "slurm")
    workloads_ready(kube)
    return reconcile(kube, "SlurmCluster", "slurm")


def cluster_generation_not_observed() -> dict[str, Any]:
    kube = _with_cluster()
    reconcile(kube, "SlurmCluster", "slurm")
    workloads_ready(kube)
    reconcile(kube, "SlurmCluster", "slurm")
    bump(kube, "SlurmCluster", "slurm", lambda spec: spec.update(login={"enabled": False}))
    return kube.read("SlurmCluster", "slurm")
