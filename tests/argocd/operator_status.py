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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sunk.models.crds import API_VERSION
from sunk.operator import names
from sunk.operator.cluster.reconcile import reconcile_cluster
from sunk.operator.nodeset.reconcile import reconcile_nodeset
from tests.fakes.kube import FakeKube

NS = "slurm"


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
    body = kube.read(kind, name, NS)
    run = reconcile_nodeset if kind == "NodeSet" else reconcile_cluster
    asyncio.run(run(kube, body))  # type: ignore[arg-type]
    return kube.read(kind, name, NS)


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
    obj = kube.read(kind, name, NS)
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


def nodeset_update_blocked() -> dict[str, Any]:
    """An update whose requests no longer fit the Nodes (32Gi each): the Pods stay."""
    kube, _ = _ready_nodeset()

    def grow(spec: dict[str, Any]) -> None:
        spec["template"]["spec"]["containers"][0]["resources"] = {
            "requests": {"cpu": "2", "memory": "40Gi"},
            "limits": {"memory": "40Gi"},
        }

    bump(kube, "NodeSet", "cpu", grow)
    return reconcile(kube, "NodeSet", "cpu")


def nodeset_generation_not_observed() -> dict[str, Any]:
    kube, _ = _ready_nodeset()
    bump(kube, "NodeSet", "cpu", lambda spec: spec.update(replicas=1))
    return kube.read("NodeSet", "cpu", NS)


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


NEWER_CHART = {"sunk.coreweave.com/requires-operator": ">= 99.0.0"}


def nodeset_operator_too_old() -> dict[str, Any]:
    """A NodeSet from a slurm chart that needs a newer operator (the sunk chart not upgraded)."""
    kube = _with_cluster(*TWO_NODES)
    obj = nodeset()
    obj["metadata"]["annotations"] = dict(NEWER_CHART)
    kube.put(obj)
    return reconcile(kube, "NodeSet", "cpu")


def cluster_operator_too_old() -> dict[str, Any]:
    kube = FakeKube()
    obj = slurm_cluster()
    obj["metadata"]["annotations"] = dict(NEWER_CHART)
    kube.put(obj)
    return reconcile(kube, "SlurmCluster", "slurm")


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
    return kube.read("SlurmCluster", "slurm", NS)
