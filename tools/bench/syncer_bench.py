"""Benchmark: the Syncer's Slurm RPCs per minute at steady state (at two sizes, and their ratio),
and the latency from a Pod turning NotReady to its Slurm node drained (and back), p50 and p95.

    sudo .venv/bin/python tools/bench/syncer_bench.py [--nodes 200] [--small 20] [--steady 60]
                                                      [--flips 20] [--interval 5] [--metrics 30]

Everything is real except the slurmd processes:

* Slurm: slurmctld and slurmrestd 24.11 (``sunk.devenv.slurm_runtime``, the ``slurm`` test
  tier's network namespaces; needs root) booted from the project's renderer. The Syncer talks to
  slurmrestd over its unix socket with JWTs signed by the runtime's key.
* Slurm node records: ``scontrol create NodeName=<Pod name> State=CLOUD <the NodeSet's
  registration>``: dynamic records (``DYNAMIC_NORM``, which the Syncer deletes once their Pod is
  gone) powered down, so slurmctld pings no slurmd and none needs to run.
* Kubernetes: a real kube-apiserver with kwok Nodes (``sunk.devenv.controlplane``), one per
  slurmd Pod, labelled as the operator labels them; the Pods carry the operator's labels and
  names (``<nodeset>-OOO-OOO``) and kwok runs them (Ready). The Syncer reads the JWT key from
  the cluster's Secret, as deployed.
* The Syncer (``sunk.syncer.loop.Syncer``) runs in this process with its 5 s tick and Slurm
  metrics on, read every 30 s (``--interval`` and ``--metrics`` change both: the test tier's
  smoke run shortens them to finish sooner). The operator wakes it on every event of a slurmd
  Pod; here a real watch on the API server does the same (the benchmark starts no operator),
  so the latencies include the watch delivery, the 0.2 s coalescing pause, a whole Syncer pass
  and the read that sees it.

Steady state: nothing changes, first with ``--small`` Pods, then with ``--nodes``; over
``--steady`` seconds (whole metrics periods, at least one) the Syncer's Slurm requests,
Kubernetes writes, passes, median pass time and this process's CPU time are counted per
minute, and their ratios between the two sizes printed. Latency: ``--flips`` Pods, one at a
time and each at a random point of the Syncer's cycle, get Ready=False (a status patch, as
the kubelet writes it), then Ready=True; each is timed from the patch until slurmrestd shows the
node drained with a ``k8s:`` reason (resp. the drain gone), polled every ``--poll`` seconds
through a separate client (not counted as the Syncer's).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sunk.devenv.controlplane import ControlPlane
from sunk.devenv.slurm_runtime import SlurmRuntime
from sunk.models.crds import NodeSetSpec, SlurmClusterSpec
from sunk.operator import names
from sunk.operator.client import Kube, path_for
from sunk.operator.informer import Informer
from sunk.operator.nodeset.naming import pod_name
from sunk.slurmconf import ClusterInputs, NodeSetInput, Rendered, render_all
from sunk.syncer.loop import INTERVAL_SECONDS, METRICS_SECONDS, Syncer
from sunk.syncer.plan import K8S_PREFIX, SlurmNode
from sunk.syncer.restd import Slurmrestd
from sunk.syncer.slurm_metrics import SlurmMetrics

CLUSTER, NODESET, NAMESPACE = "bench", "b", "bench"


@dataclass(frozen=True)
class Pass:
    """One Syncer pass: when it ended, how long it took, the Syncer's counters after it."""

    ended: float
    seconds: float
    rpcs: int
    writes: int
    cpu: float  # this process's CPU time (the Syncer; the watch idles in a steady state)


LIMITS = {"cpu": "8", "memory": "32Gi"}
# A Node the NodeSet has claimed, as the operator labels it (the Syncer lists these).
NODE_LABELS = {
    names.LABEL_CLUSTER: CLUSTER,
    names.LABEL_NAMESPACE: NAMESPACE,
    names.LABEL_NODESET: NODESET,
}


def render(rt: SlurmRuntime, nodes: int) -> Rendered:
    """slurm.conf etc. as the operator renders them for one NodeSet (no accounting: the
    Syncer does not use it)."""
    cluster = SlurmClusterSpec.model_validate(
        {"clusterName": CLUSTER, "accounting": {"enabled": False}}
    )
    nodeset = NodeSetSpec.model_validate(
        {
            "clusterName": CLUSTER,
            "replicas": nodes,
            "template": {
                "spec": {"containers": [{"name": "slurmd", "resources": {"limits": LIMITS}}]}
            },
        }
    )
    return render_all(ClusterInputs(cluster, (NodeSetInput(NODESET, nodeset),), rt.endpoints()))


def node_address(i: int) -> str:
    return f"10.201.{i // 250}.{i % 250 + 1}"  # data only: nothing connects to it


class Bench:
    def __init__(self, cp: ControlPlane, rt: SlurmRuntime, rendered: Rendered, url: str) -> None:
        self.cp, self.rt, self.url = cp, rt, url
        self.registration = rendered.registrations[NODESET]
        self.kube: Kube  # the Syncer's: its writes are counted (connected in `measure`)
        self.bench_kube: Kube  # the benchmark's own (the kubelet's) writes
        self.probe = Slurmrestd(url, rt.jwt_key)  # the benchmark's own reads
        self.pods: list[str] = []
        self.passes: list[Pass] = []
        self.syncer: Syncer | None = None
        self.wakes = 0  # Pod events that woke the Syncer

    # --- setup ----------------------------------------------------------------------------

    def prepare(self) -> None:
        self.cp.create_namespace(
            NAMESPACE, {names.jwt_secret(CLUSTER): {"jwt.key": self.rt.jwt_key}}
        )

    def grow(self, count: int) -> float:
        """Nodes and Pods up to ``count``, all Ready, then their Slurm records; seconds taken."""
        start = time.monotonic()
        client = self.cp.client
        new = []
        for i in range(len(self.pods), count):
            node, address = f"bench-{i:04d}", node_address(i)
            name = pod_name(NODESET, address)
            self.cp.create_node(node, labels=NODE_LABELS, capacity=LIMITS, address=address)
            client.create(
                f"/api/v1/namespaces/{NAMESPACE}/pods",
                {
                    "metadata": {
                        "name": name,
                        "labels": {
                            names.LABEL_CLUSTER: CLUSTER,
                            names.LABEL_NODESET: NODESET,
                            names.LABEL_POD: name,
                            names.LABEL_MANAGED_BY: names.MANAGER,
                        },
                    },
                    "spec": {
                        "nodeName": node,
                        "containers": [{"name": "slurmd", "image": "opensunk/slurmd:bench"}],
                    },
                },
            )
            new.append(name)
        self.cp.wait_for(lambda: self._all_ready(count), 600, f"{count} Pods Ready")
        # Records only for Pods that exist (the Syncer deletes a dynamic record without a Pod)
        # and are Ready (or it drains them first).
        script = "".join(
            f"scontrol create NodeName={n} State=CLOUD {self.registration} || exit 1\n" for n in new
        )
        self.rt.run("sh", "-e", input=script, check=True, timeout=600)
        self.pods += new
        return time.monotonic() - start

    def _all_ready(self, count: int) -> bool:
        pods = self.cp.client.list(
            f"/api/v1/namespaces/{NAMESPACE}/pods", label_selector=names.LABEL_NODESET
        )
        return len(pods) == count and all(_ready(p) for p in pods)

    # --- the Syncer and its wake-ups --------------------------------------------------------

    def start_syncer(self, interval: float, metrics_interval: float) -> asyncio.Task:
        syncer = Syncer(
            self.kube,
            NAMESPACE,
            CLUSTER,
            self.url,
            names.jwt_secret(CLUSTER),
            log_level="warning",
            interval=interval,
            metrics=SlurmMetrics(),
            metrics_interval=metrics_interval,
        )
        once = syncer.sync_once

        async def timed_pass():  # the loop calls self.sync_once: log every pass
            started = time.monotonic()
            try:
                return await once()
            finally:
                ended = time.monotonic()
                rpcs = syncer.restd.requests if syncer.restd is not None else 0
                self.passes.append(
                    Pass(ended, ended - started, rpcs, self.kube.writes, time.process_time())
                )

        syncer.sync_once = timed_pass  # type: ignore[method-assign]
        self.syncer = syncer
        return asyncio.get_running_loop().create_task(syncer.run())

    async def watch_pods(self) -> None:
        """The operator's wake path, as far as the Syncer sees it: its informer of the slurmd
        Pods (``sunk.operator.informer``), every event of which wakes the Syncer
        (``runtime.on_pod`` → ``Runtime.wake_syncer``)."""

        def wake(_kind: str, _pod: dict[str, Any]) -> None:
            assert self.syncer is not None
            self.syncer.wake()
            self.wakes += 1

        informer = Informer(
            self.kube,
            path_for("v1", "pods", NAMESPACE),
            label_selector=f"{names.LABEL_CLUSTER}={CLUSTER},{names.LABEL_NODESET}",
            on_event=wake,
        )
        await informer.run()

    # --- measurements -----------------------------------------------------------------------

    async def slurm_nodes(self) -> dict[str, SlurmNode]:
        return {n.name: n for n in map(SlurmNode.from_restd, await self.probe.nodes())}

    async def settled(self, count: int, timeout: float = 300) -> None:
        """Every record present, none drained, and a Syncer pass since."""
        deadline = time.monotonic() + timeout
        while True:
            nodes = await self.slurm_nodes()
            ours = [nodes[p] for p in self.pods if p in nodes]
            if len(ours) == count and not any(n.drained for n in ours):
                break
            if time.monotonic() > deadline:
                drained = [n.name for n in ours if n.drained]
                raise TimeoutError(f"{len(ours)}/{count} records, drained: {drained[:5]}")
            await asyncio.sleep(0.5)
        assert self.syncer is not None
        passes = self.syncer.passes
        while self.syncer.passes < passes + 2:
            await asyncio.sleep(0.2)

    async def next_pass(self, after: int) -> int:
        """Index of the first pass logged after index ``after``."""
        while len(self.passes) <= after + 1:
            await asyncio.sleep(0.05)
        return after + 1

    async def steady(self, seconds: float) -> dict[str, float]:
        """Whole passes from the end of one that also read the Slurm metrics (more than one
        request) to the end of the one that reads them for the n-th time after it, n =
        ``seconds`` in metrics periods (at least one): every window then holds whole ticks
        and whole metrics periods, whatever the node count and the pass time."""
        assert self.syncer is not None
        cycles = max(1, round(seconds / self.syncer.metrics_interval))
        index = len(self.passes) - 1
        marks: list[int] = []
        while len(marks) <= cycles:
            index = await self.next_pass(index)
            if index > 0 and self.passes[index].rpcs - self.passes[index - 1].rpcs > 1:
                marks.append(index)
        first, last = self.passes[marks[0]], self.passes[index]
        window = self.passes[marks[0] + 1 : index + 1]
        elapsed = last.ended - first.ended
        per_min = 60.0 / elapsed
        return {
            "nodes": len(self.pods),
            "seconds": elapsed,
            "rpcs": (last.rpcs - first.rpcs) * per_min,
            "writes": (last.writes - first.writes) * per_min,
            "passes": len(window) * per_min,
            "pass_ms": statistics.median(p.seconds for p in window) * 1000,
            "cpu": (last.cpu - first.cpu) * per_min,
        }

    async def flip(self, pod: str, ready: bool) -> None:
        status = "True" if ready else "False"
        condition = {
            "type": "Ready",
            "status": status,
            "reason": "" if ready else "BenchNotReady",
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        await self.bench_kube.strategic_patch(
            path_for("v1", "pods", NAMESPACE, pod, "status"),
            {"status": {"conditions": [condition]}},
        )

    async def until(self, pod: str, check: Callable[[SlurmNode], bool], poll: float) -> None:
        deadline = time.monotonic() + 60
        while True:
            raw = await self.probe.node(pod)
            found = SlurmNode.from_restd(raw) if raw else None
            if found is not None and check(found):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{pod}: {found}")
            await asyncio.sleep(poll)

    async def latencies(self, flips: int, poll: float) -> dict[str, Any]:
        assert self.syncer is not None and self.syncer.restd is not None
        restd = self.syncer.restd
        await self._between_passes()
        rpcs, writes, passes = restd.requests, self.kube.writes, self.syncer.passes
        wakes = self.wakes
        start = time.monotonic()
        drain: list[float] = []
        resume: list[float] = []
        rng = random.Random(14)
        for pod in rng.sample(self.pods, min(flips, len(self.pods))):
            # Each change at a random point of the Syncer's cycle: sometimes a tick's pass is
            # running when it lands, and the change waits for that pass to end.
            await asyncio.sleep(rng.uniform(0.0, self.syncer.interval))
            drain.append(await self._timed(pod, False, _drained_by_syncer, poll))
            await asyncio.sleep(rng.uniform(0.0, self.syncer.interval))
            resume.append(await self._timed(pod, True, _in_service, poll))
        # The last change shows in Slurm before its pass ends and counts itself.
        await self._between_passes()
        elapsed = time.monotonic() - start
        return {
            "drain": drain,
            "resume": resume,
            "seconds": elapsed,
            "rpcs": restd.requests - rpcs,
            "writes": self.kube.writes - writes,
            "passes": self.syncer.passes - passes,
            "wakes": self.wakes - wakes,
        }

    async def _between_passes(self) -> None:
        assert self.syncer is not None
        while self.syncer.in_pass:
            await asyncio.sleep(0.01)

    async def _timed(
        self, pod: str, ready: bool, check: Callable[[SlurmNode], bool], poll: float
    ) -> float:
        started = time.monotonic()
        await self.flip(pod, ready)
        await self.until(pod, check, poll)
        return time.monotonic() - started


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _drained_by_syncer(node: SlurmNode) -> bool:
    return "DRAIN" in node.states and node.reason.startswith(K8S_PREFIX)


def _in_service(node: SlurmNode) -> bool:
    return not node.drained


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


async def measure(bench: Bench, args: argparse.Namespace) -> tuple[list[dict], dict]:
    bench.kube = await Kube.connect(str(bench.cp.kubeconfig))
    bench.bench_kube = await Kube.connect(str(bench.cp.kubeconfig))
    task = bench.start_syncer(args.interval, args.metrics)
    watch = asyncio.get_running_loop().create_task(bench.watch_pods())
    try:
        steady = []
        for size in (args.small, args.nodes):
            grew = await asyncio.to_thread(bench.grow, size)
            await bench.settled(size)
            print(f"{size} Pods Ready with their Slurm records ({grew:.0f}s); measuring the "
                  "steady state", flush=True)  # fmt: skip
            steady.append(await bench.steady(args.steady))
        print(f"flipping {args.flips} Pods NotReady and back, one at a time", flush=True)
        latency = await bench.latencies(args.flips, args.poll)
        return steady, latency
    finally:
        # A watch that died would leave only the tick: the latencies would measure nothing
        # but it (an earlier harness read an attribute it never set, and every figure was
        # the tick's). Say so rather than print them.
        failed = watch.done() and not watch.cancelled() and watch.exception()
        for t in (watch, task):
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if failed:
            raise RuntimeError(f"the Pod watch that wakes the Syncer failed: {failed!r}")
        await bench.kube.close()
        await bench.bench_kube.close()
        await bench.probe.close()


STEADY_COLUMNS = (  # (heading, key, format)
    ("nodes", "nodes", "d"),
    ("window_s", "seconds", ".1f"),
    ("slurm_rpcs/min", "rpcs", ".1f"),
    ("kube_writes/min", "writes", ".1f"),
    ("passes/min", "passes", ".1f"),
    ("pass_ms_p50", "pass_ms", ".1f"),
    ("cpu_ms/min", "cpu", ".0f"),
)


def report(steady: list[dict], latency: dict, args: argparse.Namespace) -> None:
    print()
    print(f"steady state (nothing changes; Syncer tick {args.interval:g} s, "
          f"Slurm metrics every {args.metrics:g} s)")  # fmt: skip
    print(" ".join(f"{heading:>15}" for heading, _, _ in STEADY_COLUMNS))
    for row in steady:
        values = {**row, "cpu": row["cpu"] * 1000}
        print(" ".join(f"{values[key]:>15{fmt}}" for _, key, fmt in STEADY_COLUMNS))
    small, large = steady

    def ratio(key: str) -> str:
        return f"{large[key] / small[key]:.2f}" if small[key] else "-"

    print(f"ratio {large['nodes']}/{small['nodes']} nodes: slurm_rpcs/min {ratio('rpcs')}, "
          f"kube_writes/min {ratio('writes')}, pass_ms_p50 {ratio('pass_ms')}, "
          f"cpu_ms/min {ratio('cpu')}")  # fmt: skip
    print()
    flips = len(latency["drain"])
    print(f"latency with {large['nodes']} nodes (seconds, n={flips} each)")
    print(f"{'change':<40} {'p50':>6} {'p95':>6} {'max':>6}")
    for label, key in (
        ("Pod NotReady -> Slurm DRAIN (k8s:)", "drain"),
        ("Pod Ready -> Slurm drain removed", "resume"),
    ):
        values = latency[key]
        print(f"{label:<40} {percentile(values, 0.5):>6.2f} {percentile(values, 0.95):>6.2f} "
              f"{max(values):>6.2f}")  # fmt: skip
    print(f"during the flips: {2 * flips} changes, {latency['passes']} Syncer passes, "
          f"{latency['rpcs']} Slurm RPCs, {latency['writes']} Kubernetes writes "
          f"in {latency['seconds']:.1f}s; {latency['wakes']} Pod events woke the "
          "Syncer")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--small", type=int, default=20)
    parser.add_argument(
        "--steady", type=float, default=60.0, help="seconds per size (whole metrics periods)"
    )
    parser.add_argument("--flips", type=int, default=20)
    parser.add_argument("--poll", type=float, default=0.02, help="seconds between reads")
    parser.add_argument(
        "--interval", type=float, default=INTERVAL_SECONDS, help="the Syncer's tick (seconds)"
    )
    parser.add_argument(
        "--metrics", type=float, default=METRICS_SECONDS, help="seconds between metrics reads"
    )
    args = parser.parse_args()
    if not 0 < args.small < args.nodes:
        parser.error("--small must be between 0 and --nodes")
    started = time.monotonic()
    with ControlPlane() as cp, SlurmRuntime() as rt:
        rendered = render(rt, args.nodes)
        rt.start(rendered.files)
        url = rt.start_restd()
        print(f"control plane and slurmctld + slurmrestd up in {time.monotonic() - started:.0f}s",
              flush=True)  # fmt: skip
        bench = Bench(cp, rt, rendered, url)
        bench.prepare()
        steady, latency = asyncio.run(measure(bench, args))
    report(steady, latency, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
