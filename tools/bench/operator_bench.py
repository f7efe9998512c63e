"""Benchmark: seconds until the operator has 1,000 NodeSet pods and a complete status, next to
a bare API client creating copies of those 1,000 Pods (same spec, pinned to the same Nodes, at
the operator's concurrency) on the same API server, and their ratio; then the
operator's API requests per reconcile, its steady state (writes and requests per minute with
nothing changing) and its peak RSS.

    python tools/bench/operator_bench.py [--nodes 1000] [--steady 60] [--runs 3]

Starts its own control plane (etcd, kube-apiserver, scheduler, controller-manager, kwok) on
loopback; kwok Nodes get 127.88.x.y addresses (data only: nothing connects to them).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402
from tests.cluster.operator_process import OperatorProcess  # noqa: E402

from sunk.chartio.helm import helm_binary  # noqa: E402
from sunk.devenv.controlplane import ControlPlane  # noqa: E402
from sunk.devenv.paths import tool_path  # noqa: E402
from sunk.operator import names  # noqa: E402
from sunk.operator.client import Kube, path_for  # noqa: E402
from sunk.operator.nodeset.claims import PARALLEL_WRITES  # noqa: E402

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


def _total(op: OperatorProcess, name: str) -> float:
    """The sum of a metric's samples (all label values)."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(op.metrics())
        for sample in family.samples
        if sample.name == name
    )


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def operator_run(
    cp: ControlPlane, count: int, logs: Path, steady: float, extra: list[str]
) -> tuple[float, dict]:
    kube = cp.client
    kube.create("/api/v1/namespaces", {"metadata": {"name": "bench-op"}})
    op = OperatorProcess(cp.kubeconfig, ["bench-op"], logs, "bench-op", extra).start()
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
        took = time.monotonic() - start

        print(f"operator: {count} pods + complete NodeSet status in {took:.1f}s", flush=True)

        def labelled() -> bool:  # SUNK's Node labels follow the Pods (nodeset/claims.py)
            # One Node without the label is enough to wait on: a LIST of every Node, polled,
            # would load the API server the operator is measured on (and time out at 5,000).
            query = {"labelSelector": f"!{names.LABEL_NODESET}", "limit": "1"}
            return not kube.request("GET", "/api/v1/nodes", query=query)["items"]

        wait(labelled, 900, "Node labels")
        labels_took = time.monotonic() - start
        requests = _total(op, "sunk_operator_api_requests_total")
        reconciles = _total(op, "sunk_operator_reconciles_total")
        print(
            f"operator: every Node labelled {labels_took:.1f}s after the NodeSet; "
            f"{requests:.0f} API requests in {reconciles:.0f} reconciles; peak RSS so far "
            f"{_peak_rss_mib(op.proc.pid) if op.proc else float('nan'):.0f} MiB",
            flush=True,
        )
        peak = _peak_rss_mib(op.proc.pid) if op.proc else float("nan")
        figures = {"labels_seconds": labels_took, "requests": requests, "reconciles": reconciles}
        if not steady:
            return took, {**figures, "peak_rss_mib": peak}
        # Steady state: nothing changes once every Pod is Ready (kwok marks them a few seconds
        # after they are created) and the last status is written; resyncs still come.
        wait(
            lambda: (
                (kube.get(f"{API}/namespaces/bench-op/nodesets/b").get("status") or {}).get(
                    "numberReady"
                )
                == count
            ),
            900,
            "Pods Ready (kwok marks them; with thousands on 2 cores that takes minutes)",
        )
        time.sleep(10)
        writes0 = _total(op, "sunk_operator_api_writes_total")
        requests0 = _total(op, "sunk_operator_api_requests_total")
        time.sleep(steady)
        figures = {
            **figures,
            "steady_writes": _total(op, "sunk_operator_api_writes_total") - writes0,
            "steady_requests_per_minute": (
                _total(op, "sunk_operator_api_requests_total") - requests0
            )
            * 60
            / steady,
            "peak_rss_mib": _peak_rss_mib(op.proc.pid) if op.proc else float("nan"),
        }
        return took, figures
    finally:
        stopping = time.monotonic()
        try:
            op.kill(signal.SIGTERM)
            print(f"operator stopped {time.monotonic() - stopping:.1f}s after SIGTERM")
        except subprocess.TimeoutExpired:
            # a finding, not a crash of the benchmark: a Pod would be SIGKILLed at 30 s
            print("operator still running 30 s after SIGTERM: killed", flush=True)
            op.kill(signal.SIGKILL)


def _bare_copy(pod: dict, index: int) -> dict:
    """One of the operator's Pods as a plain client would write it: same spec (pinned to the
    same Node, not yet bound), a new name, no owner, no NodeSet labels but bench=bare."""
    meta = pod["metadata"]
    spec = {k: v for k, v in pod["spec"].items() if k != "nodeName"}
    labels = {
        k: v for k, v in (meta.get("labels") or {}).items() if not k.startswith("sunk.coreweave")
    } | {"bench": "bare"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"bare-{index:04d}",
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": meta.get("annotations") or {},
        },
        "spec": spec,
    }


async def bare_run(cp: ControlPlane, count: int) -> float:
    """The operator's Pods again, copied, written by a plain client loop at the operator's
    concurrency: what the API server alone needs for the same objects."""
    async with await Kube.connect(str(cp.kubeconfig)) as kube:
        made = await kube.list(path_for("v1", "pods", "bench-op"), names.LABEL_NODESET)
        copies = [_bare_copy(p, i) for i, p in enumerate(made)]
        assert len(copies) == count, f"{len(copies)} operator Pods, expected {count}"
        gate = asyncio.Semaphore(PARALLEL_WRITES)

        async def one(pod: dict) -> None:
            async with gate:
                await kube.create(pod)

        start = time.monotonic()
        await asyncio.gather(*(one(p) for p in copies))
        items = await kube.list(path_for("v1", "pods", "bench-op"), "bench=bare")
        assert len(items) == count
        return time.monotonic() - start


def one_run(args: argparse.Namespace, helm: str) -> tuple[float, float, dict]:
    """One measurement on a fresh control plane: (operator seconds, bare seconds, figures)."""
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
        operator_seconds, figures = operator_run(
            cp, args.nodes, parser_logs, args.steady, args.operator_arg
        )
        bare_seconds = asyncio.run(bare_run(cp, args.nodes))
    return operator_seconds, bare_seconds, figures


def report(args: argparse.Namespace, operator_seconds: float, bare_seconds: float, figures: dict):
    print(f"operator: {args.nodes} pods + complete NodeSet status in {operator_seconds:.1f}s")
    print(f"bare client loop: copies of its {args.nodes} pods created in {bare_seconds:.1f}s")
    print(f"ratio operator/bare: {operator_seconds / bare_seconds:.2f} (goal <= 1.2)")
    print(
        f"operator: every Node labelled after {figures['labels_seconds']:.1f}s "
        f"({figures['labels_seconds'] / bare_seconds:.2f} of the bare loop's time)"
    )
    print(
        f"API requests until every Node was labelled: {figures['requests']:.0f} in "
        f"{figures['reconciles']:.0f} reconciles "
        f"({figures['requests'] / max(figures['reconciles'], 1):.1f} per reconcile)"
    )
    if args.steady:
        print(
            f"steady state over {args.steady:.0f}s (1 NodeSet): {figures['steady_writes']:.0f} "
            f"writes, {figures['steady_requests_per_minute']:.1f} API requests per minute"
        )
    print(f"operator peak RSS: {figures['peak_rss_mib']:.0f} MiB", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument(
        "--operator-arg",
        action="append",
        default=[],
        help="one more sunk-operator argument (repeatable), e.g. --operator-arg=--kube-api-qps=0",
    )
    parser.add_argument(
        "--steady",
        type=float,
        default=60,
        help="seconds of steady state to measure (0: none, nor the wait for every Pod Ready, "
        "which kwok needs more than 15 minutes for at 5,000 Pods on 2 cores)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="measure this many times, each on a fresh control plane, and print the spread",
    )
    args = parser.parse_args()
    pinned = tool_path("helm")
    helm = helm_binary(str(pinned) if pinned else None)
    ratios = []
    for run in range(1, args.runs + 1):
        if args.runs > 1:
            print(f"--- run {run} of {args.runs}", flush=True)
        operator_seconds, bare_seconds, figures = one_run(args, helm)
        report(args, operator_seconds, bare_seconds, figures)
        ratios.append(operator_seconds / bare_seconds)
    if args.runs > 1:
        shown = ", ".join(f"{r:.2f}" for r in ratios)
        print(
            f"ratio operator/bare over {args.runs} runs: {shown} (min {min(ratios):.2f}, "
            f"median {statistics.median(ratios):.2f}, max {max(ratios):.2f}; goal <= 1.2 in each)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
