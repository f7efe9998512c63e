"""Benchmark: seconds until the operator has 1,000 NodeSet pods and a complete status, next to
a bare API client creating 1,000 pods on the same API server, and their ratio.

    python tools/bench/operator_bench.py [--nodes 1000]

Starts its own control plane (etcd, kube-apiserver, scheduler, controller-manager, kwok) on
loopback; kwok Nodes get 127.88.x.y addresses (data only: nothing connects to them).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.cluster.operator_process import OperatorProcess  # noqa: E402

from sunk.chartio.helm import helm_binary  # noqa: E402
from sunk.devenv.controlplane import ControlPlane  # noqa: E402
from sunk.devenv.paths import tool_path  # noqa: E402
from sunk.operator.kube import Kube, KubeConfig, path_for  # noqa: E402

API = "/apis/sunk.coreweave.com/v1alpha1"
POD_SPEC = {
    "containers": [
        {
            "name": "slurmd",
            "image": "opensunk/slurmd:bench",
            "resources": {
                "requests": {"cpu": "100m", "memory": "128Mi"},
                "limits": {"memory": "8Gi"},
            },
        }
    ]
}


def make_nodes(cp: ControlPlane, count: int) -> None:
    for i in range(count):
        cp.create_node(
            f"bench-{i:04d}",
            labels={"pool": "bench"},
            capacity={"cpu": 8, "memory": "32Gi", "pods": 20},
            address=f"127.88.{i // 250}.{i % 250 + 1}",
        )


def nodes_schedulable(cp: ControlPlane, count: int) -> bool:
    """kwok reports Ready and the controller-manager has lifted the not-ready taint: both runs
    then start from Nodes a pod can use (neither measurement includes Node start-up)."""
    nodes = cp.client.list("/api/v1/nodes", label_selector="pool=bench")
    usable = [
        n
        for n in nodes
        if not any(
            t["key"].startswith("node.kubernetes.io/")
            for t in n.get("spec", {}).get("taints") or []
        )
    ]
    return len(usable) == count


def wait(predicate, timeout: float, what: str) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise TimeoutError(what)
        time.sleep(0.25)
    return time.monotonic() - start


def operator_run(cp: ControlPlane, count: int, logs: Path) -> float:
    kube = cp.client
    kube.create("/api/v1/namespaces", {"metadata": {"name": "bench-op"}})
    op = OperatorProcess(cp.kubeconfig, ["bench-op"], logs, "bench-op").start()
    try:
        op.wait_leader()
        kube.create(
            f"{API}/namespaces/bench-op/slurmclusters",
            {
                "apiVersion": "sunk.coreweave.com/v1alpha1",
                "kind": "SlurmCluster",
                "metadata": {"name": "bench"},
                "spec": {"clusterName": "bench"},
            },
        )
        start = time.monotonic()
        kube.create(
            f"{API}/namespaces/bench-op/nodesets",
            {
                "apiVersion": "sunk.coreweave.com/v1alpha1",
                "kind": "NodeSet",
                "metadata": {"name": "b"},
                "spec": {"clusterName": "bench", "template": {"spec": POD_SPEC}},
            },
        )

        def complete() -> bool:
            status = kube.get(f"{API}/namespaces/bench-op/nodesets/b").get("status") or {}
            return (
                status.get("currentNumberScheduled") == count
                and status.get("desiredNumberScheduled") == count
            )

        wait(complete, 900, "operator pods")
        return time.monotonic() - start
    finally:
        op.kill(signal.SIGTERM)


async def bare_run(cp: ControlPlane, count: int) -> float:
    """The same pods (pinned, same concurrency) written by a plain client loop."""
    cp.client.create("/api/v1/namespaces", {"metadata": {"name": "bench-bare"}})
    async with Kube(KubeConfig.from_kubeconfig(cp.kubeconfig)) as kube:
        gate = asyncio.Semaphore(16)

        async def one(i: int) -> None:
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"bare-{i:04d}", "namespace": "bench-bare"},
                "spec": {
                    **POD_SPEC,
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchFields": [
                                            {
                                                "key": "metadata.name",
                                                "operator": "In",
                                                "values": [f"bench-{i:04d}"],
                                            }
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                },
            }
            async with gate:
                await kube.create(pod)

        start = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(count)))
        items = await kube.list(path_for("v1", "pods", "bench-bare"))
        assert len(items) == count
        return time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args()
    pinned = tool_path("helm")
    helm = helm_binary(str(pinned) if pinned else None)
    parser_logs = Path(tempfile.mkdtemp(prefix="sunk-bench-"))
    print(f"operator logs: {parser_logs}", flush=True)
    with ControlPlane() as cp:
        t0 = time.monotonic()
        make_nodes(cp, args.nodes)
        print(f"created {args.nodes} kwok Nodes in {time.monotonic() - t0:.1f}s", flush=True)
        ready = wait(lambda: nodes_schedulable(cp, args.nodes), 1200, "Nodes schedulable")
        print(f"all Nodes Ready and untainted {ready:.1f}s later", flush=True)
        subprocess.run(
            [
                helm,
                "--kubeconfig",
                str(cp.kubeconfig),
                "install",
                "sunk",
                str(REPO / "charts/sunk"),
                "-n",
                "sunk",
                "--create-namespace",
            ],
            check=True,
            capture_output=True,
        )
        operator_seconds = operator_run(cp, args.nodes, parser_logs)
        bare_seconds = asyncio.run(bare_run(cp, args.nodes))
    print(f"operator: {args.nodes} pods + complete NodeSet status in {operator_seconds:.1f}s")
    print(f"bare client loop: {args.nodes} pods created in {bare_seconds:.1f}s")
    print(f"ratio operator/bare: {operator_seconds / bare_seconds:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
