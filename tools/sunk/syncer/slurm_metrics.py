"""Slurm cluster metrics under the names CoreWeave SUNK uses (``slurm_nodes_*``,
``slurm_queue_*``, ``slurm_partition_*``, …), made from what slurmrestd (data_parser v0.0.41 to
v0.0.45, Slurm 24.11 and 26.05) returns for ``GET /nodes``, ``/jobs``, ``/partitions`` and
``/diag``.

One operator serves many Slurm clusters, so every series carries ``namespace`` and ``cluster``.
``SlurmMetrics`` keeps the latest snapshot per cluster; a custom collector yields exactly those
snapshots, so the series of a forgotten cluster disappear. Turning slurmrestd's JSON into
samples (``snapshot``) is pure and unit-tested on plain dicts; ``render`` gives the Prometheus
text format (0.0.4) to append to the operator's ``/metrics``.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from sunk.health import active, reasons, record
from sunk.health.runner import gres_gpus
from sunk.syncer.restd import number

MIB = 1024 * 1024
CLUSTER_LABELS = ("namespace", "cluster")

# Node base states (slurmrestd lists the base state and the flags in one `state` list).
NODE_BASE_STATES = {"DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE", "UNKNOWN"}
# Job base states (`job_state` lists the base state and the flags).
JOB_BASE_STATES = {
    "PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT",
    "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY",
}  # fmt: skip
# The job states slurm_queue_failed counts: the job ended because something failed.
JOB_FAILED_STATES = {"FAILED", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY"}


@dataclass(frozen=True)
class Metric:
    help: str
    labels: tuple[str, ...] = ()


# Every metric this module exports, in output order: name -> HELP text and its own labels
# (beside `namespace` and `cluster`). All are gauges: Slurm's own counters (RPCs) reset when
# slurmctld restarts or `sdiag --reset` runs, and keep SUNK's names (no `_total`).
METRICS: dict[str, Metric] = {
    "slurm_nodes_total": Metric("Slurm nodes slurmctld knows, in every state."),
    "slurm_nodes_idle": Metric("Slurm nodes whose base state is IDLE, neither drained nor down."),
    "slurm_nodes_alloc": Metric(
        "Slurm nodes whose base state is ALLOCATED (all CPUs in use), neither drained nor down."
    ),
    "slurm_nodes_mixed": Metric(
        "Slurm nodes whose base state is MIXED (some CPUs in use), neither drained nor down."
    ),
    "slurm_nodes_drain": Metric(
        "Slurm nodes with the DRAIN flag (draining or drained) whose base state is not DOWN."
    ),
    "slurm_nodes_down": Metric("Slurm nodes whose base state is DOWN (drained or not)."),
    "slurm_queue_pending": Metric("Jobs in state PENDING."),
    "slurm_queue_running": Metric("Jobs in state RUNNING."),
    "slurm_queue_completed": Metric(
        "Jobs in state COMPLETED that slurmctld still holds (it keeps finished jobs MinJobAge)."
    ),
    "slurm_queue_failed": Metric(
        "Jobs in state FAILED, NODE_FAIL, BOOT_FAIL or OUT_OF_MEMORY that slurmctld still holds."
    ),
    "slurm_job_state": Metric(
        "Jobs per partition and base state (PENDING, RUNNING, COMPLETED, CANCELLED, FAILED, "
        "TIMEOUT, ...), as slurmctld lists them (a pending job array's tasks are one record).",
        ("partition", "state"),
    ),
    "slurm_node_cpu_total": Metric("CPUs of the Slurm node.", ("node",)),
    "slurm_node_cpu_alloc": Metric("CPUs of the Slurm node allocated to jobs.", ("node",)),
    "slurm_node_gpu_total": Metric("GPUs (GRES gpu) of the Slurm node.", ("node",)),
    "slurm_node_gpu_alloc": Metric("GPUs (GRES gpu) of the Slurm node in use by jobs.", ("node",)),
    "slurm_node_mem_total": Metric("Memory of the Slurm node (RealMemory), in bytes.", ("node",)),
    "slurm_node_mem_alloc": Metric(
        "Memory of the Slurm node allocated to jobs, in bytes.", ("node",)
    ),
    "slurm_nodes_health_drained": Metric(
        "Slurm nodes drained by a failing health check (reason `health: <check>: …`, alone or "
        "behind a `k8s:` cause), per check.",
        ("check",),
    ),
    "slurm_health_check_passive_nodes": Metric(
        "Slurm nodes whose last periodic run of a passive health check passed or failed "
        "(`result` passed or failed), as the runner records it in the node's Extra.",
        ("check", "result"),
    ),
    "slurm_health_check_passive_duration_seconds": Metric(
        "The longest of the nodes' last periodic runs of a passive health check, in seconds.",
        ("check",),
    ),
    "slurm_health_check_passive_oldest_run_timestamp_seconds": Metric(
        "Unix time of the oldest of the nodes' last periodic health check runs that recorded "
        "the check (a node whose checks stopped running holds it back).",
        ("check",),
    ),
    "slurm_partition_nodes_total": Metric("Nodes in the partition.", ("partition",)),
    "slurm_partition_nodes_health_drained": Metric(
        "Nodes in the partition drained by a failing health check.", ("partition",)
    ),
    "slurm_partition_cpu_total": Metric("CPUs in the partition.", ("partition",)),
    "slurm_partition_cpu_alloc": Metric(
        "CPUs allocated to jobs on the partition's nodes (by any partition).", ("partition",)
    ),
    "slurm_partition_gpu_total": Metric(
        "GPUs (GRES gpu) of the nodes in the partition.", ("partition",)
    ),
    "slurm_partition_gpu_alloc": Metric(
        "GPUs (GRES gpu) in use on the partition's nodes (by any partition).", ("partition",)
    ),
    "slurm_health_check_last_result": Metric(
        "Outcome of the last run of an active health check: 1 passed, 0 failed, -1 could not "
        "judge (kept after slurmctld forgets the job).",
        ("check",),
    ),
    "slurm_health_check_node_result": Metric(
        "Outcome of the last run of an active health check on each of its nodes: 1 passed, "
        "0 failed (the node was drained), -1 could not judge.",
        ("check", "node"),
    ),
    "slurm_health_check_value": Metric(
        "What the last run of an active health check measured (allreduce: bus bandwidth in "
        "bytes per second).",
        ("check",),
    ),
    "slurm_health_check_last_run_timestamp_seconds": Metric(
        "Unix time the last run of an active health check ended.", ("check",)
    ),
    "slurm_health_check_duration_seconds": Metric(
        "How long the last run of an active health check took, in seconds.", ("check",)
    ),
    "slurm_scheduler_cycle_last_seconds": Metric(
        "Duration of slurmctld's last main scheduling cycle, in seconds."
    ),
    "slurm_scheduler_backfill_cycle_last_seconds": Metric(
        "Duration of slurmctld's last backfill scheduling cycle, in seconds."
    ),
    "slurm_controller_server_threads": Metric("slurmctld server threads active."),
    "slurm_controller_rpc_count": Metric(
        "RPCs slurmctld received, per message type, since it started or `sdiag --reset`.",
        ("message_type",),
    ),
    "slurm_controller_rpc_time_seconds": Metric(
        "Time slurmctld spent processing RPCs, per message type, since it started or "
        "`sdiag --reset`, in seconds.",
        ("message_type",),
    ),
    "slurm_metrics_up": Metric(
        "1 when the operator's last read of the cluster from slurmrestd succeeded, else 0."
    ),
    "slurm_metrics_last_success_timestamp_seconds": Metric(
        "Unix time of the operator's last successful read of the cluster from slurmrestd."
    ),
}

Samples = dict[str, list[tuple[tuple[str, ...], float]]]


# --------------------------------------------------------------------------- JSON helpers


def _states(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value.upper()}
    if isinstance(value, Iterable):
        return {str(v).upper() for v in value}
    return set()


def _base(states: set[str], known: set[str]) -> str:
    found = sorted(states & known)
    return found[0] if found else "UNKNOWN"


def _partitions_of(node: Mapping[str, Any]) -> list[str]:
    value = node.get("partitions") or []
    if isinstance(value, str):
        value = value.split(",")
    return [str(p) for p in value if p]


# --------------------------------------------------------------------------- the snapshot


def snapshot(
    nodes: Iterable[Mapping[str, Any]],
    jobs: Iterable[Mapping[str, Any]],
    partitions: Iterable[Mapping[str, Any]],
    diag: Mapping[str, Any] | None,
) -> Samples:
    """Samples (labels beside namespace and cluster, value) per metric name, from slurmrestd's
    ``nodes``, ``jobs`` and ``partitions`` lists and the ``statistics`` object of ``/diag``."""
    samples: Samples = defaultdict(list)

    # nodes
    node_states: Counter[str] = Counter()
    health_drained: Counter[str] = Counter()  # check -> nodes
    passive: dict[str, list[tuple[bool, float, float]]] = defaultdict(list)  # ok, seconds, at
    per_partition: dict[str, Counter[str]] = defaultdict(Counter)
    total_nodes = 0
    for node in nodes:
        total_nodes += 1
        name = str(node.get("name") or "")
        states = _states(node.get("state"))
        base = _base(states, NODE_BASE_STATES)
        if base == "DOWN":
            node_states["down"] += 1
        elif "DRAIN" in states:
            node_states["drain"] += 1
        elif base in ("IDLE", "ALLOCATED", "MIXED"):
            node_states[{"IDLE": "idle", "ALLOCATED": "alloc", "MIXED": "mixed"}[base]] += 1
        cpus, cpu_alloc = number(node.get("cpus")), number(node.get("alloc_cpus"))
        gpus, gpu_alloc = gres_gpus(node.get("gres")), gres_gpus(node.get("gres_used"))
        samples["slurm_node_cpu_total"].append(((name,), cpus))
        samples["slurm_node_cpu_alloc"].append(((name,), cpu_alloc))
        samples["slurm_node_gpu_total"].append(((name,), float(gpus)))
        samples["slurm_node_gpu_alloc"].append(((name,), float(gpu_alloc)))
        samples["slurm_node_mem_total"].append(((name,), number(node.get("real_memory")) * MIB))
        samples["slurm_node_mem_alloc"].append(((name,), number(node.get("alloc_memory")) * MIB))
        check = reasons.parse(str(node.get("reason") or "")).check if "DRAIN" in states else None
        if check:
            health_drained[check] += 1
        kept = record.parse(node.get("extra"))
        for name, rec in kept.checks.items() if kept else ():
            passive[name].append((rec.ok, rec.seconds, kept.at))
        for partition in _partitions_of(node):
            per_partition[partition].update(
                {"cpu_alloc": int(cpu_alloc), "gpu_total": gpus, "gpu_alloc": gpu_alloc,
                 "health_drained": 1 if check else 0}
            )  # fmt: skip
    samples["slurm_nodes_total"].append(((), float(total_nodes)))
    for state in ("idle", "alloc", "mixed", "drain", "down"):
        samples[f"slurm_nodes_{state}"].append(((), float(node_states[state])))
    for check, count in sorted(health_drained.items()):
        samples["slurm_nodes_health_drained"].append(((check,), float(count)))
    for check, runs in sorted(passive.items()):
        passed = sum(1 for ok, _, _ in runs if ok)
        samples["slurm_health_check_passive_nodes"] += [
            ((check, "passed"), float(passed)),
            ((check, "failed"), float(len(runs) - passed)),
        ]
        samples["slurm_health_check_passive_duration_seconds"].append(
            ((check,), max(seconds for _, seconds, _ in runs))
        )
        samples["slurm_health_check_passive_oldest_run_timestamp_seconds"].append(
            ((check,), min(at for _, _, at in runs))
        )

    # jobs
    job_states: Counter[str] = Counter()
    by_partition: Counter[tuple[str, str]] = Counter()
    for job in jobs:
        state = _base(_states(job.get("job_state")), JOB_BASE_STATES)
        job_states[state] += 1
        by_partition[(str(job.get("partition") or ""), state)] += 1
    samples["slurm_queue_pending"].append(((), float(job_states["PENDING"])))
    samples["slurm_queue_running"].append(((), float(job_states["RUNNING"])))
    samples["slurm_queue_completed"].append(((), float(job_states["COMPLETED"])))
    failed = sum(job_states[s] for s in JOB_FAILED_STATES)
    samples["slurm_queue_failed"].append(((), float(failed)))
    for (partition, state), count in sorted(by_partition.items()):
        samples["slurm_job_state"].append(((partition, state), float(count)))

    # partitions
    for partition in partitions:
        name = str(partition.get("name") or "")
        mine = per_partition.get(name, Counter())
        cpus = partition.get("cpus") or {}
        nodes_of = partition.get("nodes") or {}
        samples["slurm_partition_nodes_total"].append(((name,), number(nodes_of.get("total"))))
        samples["slurm_partition_nodes_health_drained"].append(
            ((name,), float(mine["health_drained"]))
        )
        samples["slurm_partition_cpu_total"].append(((name,), number(cpus.get("total"))))
        samples["slurm_partition_cpu_alloc"].append(((name,), float(mine["cpu_alloc"])))
        samples["slurm_partition_gpu_total"].append(((name,), float(mine["gpu_total"])))
        samples["slurm_partition_gpu_alloc"].append(((name,), float(mine["gpu_alloc"])))

    # the controller (/diag `statistics`)
    if diag:
        stats = diag.get("statistics", diag)
        samples["slurm_scheduler_cycle_last_seconds"].append(
            ((), number(stats.get("schedule_cycle_last")) / 1e6)
        )
        samples["slurm_scheduler_backfill_cycle_last_seconds"].append(
            ((), number(stats.get("bf_cycle_last")) / 1e6)
        )
        samples["slurm_controller_server_threads"].append(
            ((), number(stats.get("server_thread_count")))
        )
        for rpc in stats.get("rpcs_by_message_type") or []:
            kind = str(rpc.get("message_type") or rpc.get("type_id") or "")
            samples["slurm_controller_rpc_count"].append(((kind,), number(rpc.get("count"))))
            # slurmctld adds each RPC's duration in microseconds (sdiag prints it so).
            samples["slurm_controller_rpc_time_seconds"].append(
                ((kind,), number(rpc.get("total_time")) / 1e6)
            )
    return dict(samples)


@dataclass(frozen=True)
class CheckRun:
    """The outcome of one active health check job (its comment, sunk.health.active)."""

    check: str
    result: float  # 1 passed, 0 failed, -1 could not judge
    nodes: tuple[str, ...]
    value: float | None
    started: float
    ended: float


RESULTS = {"pass": 1.0, "fail": 0.0, "error": -1.0}


def check_runs(
    jobs: Iterable[Mapping[str, Any]], known: dict[str, CheckRun] | None = None
) -> dict[str, CheckRun]:
    """The latest ended run of each active check among the jobs slurmctld still holds, and
    in ``known`` (updated in place: runs whose jobs slurmctld has forgotten)."""
    runs = {} if known is None else known
    for job in jobs:
        fields = active.parse_result(str(job.get("comment") or ""))
        if fields is None or not str(job.get("name") or "").startswith(active.JOB_PREFIX):
            continue
        ended = number(job.get("end_time"))
        value = fields.get("value")
        run = CheckRun(
            check=fields["check"],
            result=RESULTS.get(fields["result"], -1.0),
            nodes=tuple(n for n in fields.get("nodes", "").split(",") if n),
            value=float(value) if value and re.fullmatch(r"[0-9.]+", value) else None,
            started=number(job.get("start_time")),
            ended=ended,
        )
        if run.check not in runs or ended >= runs[run.check].ended:
            runs[run.check] = run
    return runs


def check_samples(runs: Mapping[str, CheckRun]) -> Samples:
    samples: Samples = defaultdict(list)
    for name, run in sorted(runs.items()):
        samples["slurm_health_check_last_result"].append(((name,), run.result))
        for node in run.nodes:
            samples["slurm_health_check_node_result"].append(((name, node), run.result))
        if run.value is not None:
            samples["slurm_health_check_value"].append(((name,), run.value))
        samples["slurm_health_check_last_run_timestamp_seconds"].append(((name,), run.ended))
        duration = max(run.ended - run.started, 0.0)
        samples["slurm_health_check_duration_seconds"].append(((name,), duration))
    return dict(samples)


# --------------------------------------------------------------------------- the collector


@dataclass
class _Cluster:
    samples: Samples
    up: bool
    last_success: float | None


class SlurmMetrics(Collector):
    """The latest snapshot of each Slurm cluster, rendered for Prometheus.

    ``observe`` after a successful read of a cluster, ``failed`` when a read fails (its Slurm
    series go, ``slurm_metrics_up`` turns 0 and the last success time stays), ``forget`` when
    the cluster's Syncer stops. ``render`` is safe to call from any thread.
    """

    def __init__(self, clock: Any = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._clusters: dict[tuple[str, str], _Cluster] = {}
        # the last run of each active check: kept after slurmctld forgets its job (MinJobAge)
        self._runs: dict[tuple[str, str], dict[str, CheckRun]] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def observe(
        self,
        namespace: str,
        cluster: str,
        nodes: Iterable[Mapping[str, Any]],
        jobs: Iterable[Mapping[str, Any]],
        partitions: Iterable[Mapping[str, Any]],
        diag: Mapping[str, Any] | None,
    ) -> None:
        jobs = list(jobs)
        samples = snapshot(nodes, jobs, partitions, diag)
        with self._lock:
            runs = check_runs(jobs, self._runs.setdefault((namespace, cluster), {}))
            samples.update(check_samples(runs))
            self._clusters[(namespace, cluster)] = _Cluster(samples, True, self._clock())

    def failed(self, namespace: str, cluster: str) -> None:
        with self._lock:
            last = self._clusters.get((namespace, cluster))
            self._clusters[(namespace, cluster)] = _Cluster(
                {}, False, last.last_success if last else None
            )

    def forget(self, namespace: str, cluster: str) -> None:
        with self._lock:
            self._clusters.pop((namespace, cluster), None)
            self._runs.pop((namespace, cluster), None)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        for name, metric in METRICS.items():
            yield GaugeMetricFamily(name, metric.help, labels=[*CLUSTER_LABELS, *metric.labels])

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            clusters = sorted(self._clusters.items())
        for name, metric in METRICS.items():
            family = GaugeMetricFamily(name, metric.help, labels=[*CLUSTER_LABELS, *metric.labels])
            for (namespace, cluster), state in clusters:
                if name == "slurm_metrics_up":
                    family.add_metric([namespace, cluster], 1.0 if state.up else 0.0)
                elif name == "slurm_metrics_last_success_timestamp_seconds":
                    if state.last_success is not None:
                        family.add_metric([namespace, cluster], state.last_success)
                else:
                    for labels, value in state.samples.get(name, ()):
                        family.add_metric([namespace, cluster, *labels], value)
            if family.samples:
                yield family

    def render(self) -> bytes:
        """The Prometheus text format (0.0.4): ``# HELP``, ``# TYPE`` and samples."""
        return generate_latest(self.registry)
