"""The operator's own metrics, with prometheus-client.

Names: ``sunk_operator_*`` for the operator process. The NodeSet gauges keep SUNK's documented
names, ``kube_sunk_nodeset_*``, so dashboards and alerts written for SUNK work unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

# NodeSet status field → the gauge's short name (SUNK's `kube_sunk_nodeset_<short>`).
GAUGES = {
    "desired": "desiredNumberScheduled",
    "feasible": "numberFeasible",
    "current": "currentNumberScheduled",
    "ready": "numberReady",
    "drained": "numberDrain",
    "misscheduled": "numberMisscheduled",
    "unavailable": "numberUnavailable",
}
GAUGE_HELP = {
    "desired": "Pods the NodeSet should run (its replicas, else its feasible Nodes).",
    "feasible": "Nodes the NodeSet's Pods may run on.",
    "current": "Pods of the NodeSet that exist.",
    "ready": "Pods of the NodeSet that are Ready.",
    "drained": "Slurm nodes of the NodeSet that are drained or draining.",
    "misscheduled": "Pods of the NodeSet on Nodes it may not use.",
    "unavailable": "Pods of the NodeSet that should run but are not Ready.",
}
# Reconciles take milliseconds to a few seconds; a minute means something is stuck.
RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class _Live(Collector):
    """Values read when scraped: NodeSet status gauges, the work queue's depth, writes."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        m = self.metrics
        depth = GaugeMetricFamily(
            "sunk_operator_queue_depth", "Objects waiting in the reconcile queue."
        )
        depth.add_metric([], m.queue_depth())
        yield depth
        writes = CounterMetricFamily(
            "sunk_operator_api_writes",
            "Kubernetes API write requests (anything but GET) since the operator started.",
        )
        writes.add_metric([], m.writes())
        yield writes
        for short, field in GAUGES.items():
            family = GaugeMetricFamily(
                f"kube_sunk_nodeset_{short}", GAUGE_HELP[short], labels=["namespace", "nodeset"]
            )
            for (ns, name), status in sorted(m.nodesets.items()):
                family.add_metric([ns, name], status.get(field, 0))
            yield family


class Metrics:
    """One registry per operator process (tests run several in one interpreter)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.nodesets: dict[tuple[str, str], dict[str, Any]] = {}
        self.queue_depth: Callable[[], int] = lambda: 0
        self.writes: Callable[[], int] = lambda: 0
        r = self.registry
        self._leader = Gauge(
            "sunk_operator_leader", "1 while this replica holds the leader lease.", registry=r
        )
        self.reconciles = Counter(
            "sunk_operator_reconciles",
            "Reconciles started, by kind (SlurmCluster, NodeSet).",
            ["kind"],
            registry=r,
        )
        self.errors = Counter(
            "sunk_operator_reconcile_errors",
            "Reconciles (and resync rounds) that failed, by kind.",
            ["kind"],
            registry=r,
        )
        self.duration = Histogram(
            "sunk_operator_reconcile_duration_seconds",
            "Time one reconcile took, by kind.",
            ["kind"],
            buckets=RECONCILE_BUCKETS,
            registry=r,
        )
        self.api_requests = Counter(
            "sunk_operator_api_requests",
            "Kubernetes API requests by verb and HTTP status code (0: no answer).",
            ["verb", "code"],
            registry=r,
        )
        r.register(_Live(self))

    def lead(self) -> None:
        self._leader.set(1)

    def api_request(self, verb: str, code: int) -> None:
        self.api_requests.labels(verb=verb, code=str(code)).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
