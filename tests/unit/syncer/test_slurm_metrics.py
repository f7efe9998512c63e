"""Slurm metrics under SUNK's names, from slurmrestd v0.0.41 JSON (tests/unit/syncer/data), read
back through prometheus-client's own text parser; and the Slurmrestd reads that feed them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client.parser import text_string_to_metric_families

from sunk.health import record
from sunk.health.record import CheckRecord
from sunk.syncer.restd import OPENAPI, Slurmrestd
from sunk.syncer.slurm_metrics import METRICS, MIB, SlurmMetrics, gres_gpus, snapshot

API = "/slurm/v0.0.41"  # the version the recorded JSON came from
DATA = json.loads((Path(__file__).parent / "data" / "restd_v0.0.41.json").read_text())
NODES = DATA["nodes"]["nodes"]
JOBS = DATA["jobs"]["jobs"]
PARTITIONS = DATA["partitions"]["partitions"]
DIAG = DATA["diag"]["statistics"]
SUNK_NAMES = [
    "slurm_nodes_total", "slurm_nodes_idle", "slurm_nodes_alloc", "slurm_nodes_drain",
    "slurm_nodes_down", "slurm_queue_running", "slurm_queue_pending", "slurm_queue_completed",
    "slurm_queue_failed", "slurm_job_state", "slurm_node_cpu_alloc", "slurm_node_gpu_alloc",
    "slurm_node_mem_alloc", "slurm_partition_cpu_total", "slurm_partition_gpu_total",
    "slurm_scheduler_cycle_last_seconds", "slurm_controller_rpc_count",
]  # fmt: skip


def parse(metrics: SlurmMetrics) -> dict[str, dict]:
    """name -> {"help", "type", "samples": {frozenset(labels): value}} from the rendered text."""
    out = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        samples = {frozenset(s.labels.items()): s.value for s in family.samples}
        out[family.name] = {"help": family.documentation, "type": family.type, "samples": samples}
    return out


def value(parsed, name, namespace="tenant-a", cluster="prod", **labels):
    key = frozenset({"namespace": namespace, "cluster": cluster, **labels}.items())
    return parsed[name]["samples"][key]


@pytest.fixture
def observed() -> dict[str, dict]:
    metrics = SlurmMetrics(clock=lambda: 1767225600.0)
    metrics.observe("tenant-a", "prod", NODES, JOBS, PARTITIONS, DIAG)
    return parse(metrics)


def test_sunk_names_are_all_exported():
    assert set(SUNK_NAMES) <= set(METRICS)


def test_every_metric_is_a_gauge_with_help_and_the_cluster_labels(observed):
    # one series per health check that drained a node or ran as a job: the recording has none
    per_check = {name for name, metric in METRICS.items() if "check" in metric.labels}
    assert set(observed) == set(METRICS) - per_check
    for name, family in observed.items():
        assert family["type"] == "gauge", name
        assert family["help"] == METRICS[name].help and len(family["help"]) > 10, name
        for labels in family["samples"]:
            keys = {k for k, _ in labels}
            assert keys == {"namespace", "cluster", *METRICS[name].labels}, name


def test_node_counts(observed):
    # gpu-0 MIXED, gpu-1 ALLOCATED, gpu-2 IDLE+DRAIN, gpu-3 DOWN+DRAIN+NOT_RESPONDING,
    # cpu-0 IDLE (dynamic), cpu-1 ALLOCATED+DRAIN (draining)
    counts = {s: value(observed, f"slurm_nodes_{s}") for s in
              ("total", "idle", "alloc", "mixed", "drain", "down")}  # fmt: skip
    assert counts == {"total": 6, "idle": 1, "alloc": 1, "mixed": 1, "drain": 2, "down": 1}


def test_queue_and_job_state(observed):
    assert value(observed, "slurm_queue_pending") == 2  # an array's pending tasks: one record
    assert value(observed, "slurm_queue_running") == 2
    assert value(observed, "slurm_queue_completed") == 2  # one of them still COMPLETING
    assert value(observed, "slurm_queue_failed") == 3  # FAILED, OUT_OF_MEMORY, NODE_FAIL
    by_state = {
        (dict(k)["partition"], dict(k)["state"]): v
        for k, v in observed["slurm_job_state"]["samples"].items()
    }
    assert by_state == {
        ("gpu", "RUNNING"): 1, ("gpu", "PENDING"): 2, ("gpu", "OUT_OF_MEMORY"): 1,
        ("gpu", "NODE_FAIL"): 1, ("gpu", "TIMEOUT"): 1, ("cpu", "RUNNING"): 1,
        ("cpu", "COMPLETED"): 2, ("cpu", "FAILED"): 1, ("cpu", "CANCELLED"): 1,
    }  # fmt: skip


def test_per_node_resources(observed):
    assert value(observed, "slurm_node_cpu_total", node="gpu-0") == 128
    assert value(observed, "slurm_node_cpu_alloc", node="gpu-0") == 64
    assert value(observed, "slurm_node_gpu_total", node="gpu-0") == 8
    assert value(observed, "slurm_node_gpu_alloc", node="gpu-0") == 5  # gpu:h100:5(IDX:0,2-5)
    assert value(observed, "slurm_node_gpu_alloc", node="gpu-1") == 8
    assert value(observed, "slurm_node_gpu_alloc", node="gpu-2") == 0  # gpu:h100:0(IDX:N/A)
    assert value(observed, "slurm_node_gpu_total", node="cpu-0") == 0  # no GRES
    assert value(observed, "slurm_node_mem_alloc", node="gpu-0") == 512000 * MIB
    assert value(observed, "slurm_node_mem_total", node="cpu-1") == 257000 * MIB
    assert len(observed["slurm_node_cpu_alloc"]["samples"]) == len(NODES)


def test_partitions(observed):
    def part(name, partition):
        return value(observed, name, partition=partition)

    assert [part("slurm_partition_cpu_total", p) for p in ("gpu", "cpu", "all", "empty")] == [
        512, 128, 640, 0,
    ]  # fmt: skip
    assert part("slurm_partition_nodes_total", "all") == 6
    # GPUs come from the nodes listing the partition (partition TRES lack gres/gpu unless
    # AccountingStorageTRES tracks it)
    assert part("slurm_partition_gpu_total", "gpu") == 32
    assert part("slurm_partition_gpu_total", "all") == 32
    assert part("slurm_partition_gpu_total", "cpu") == 0
    assert part("slurm_partition_gpu_alloc", "gpu") == 13
    assert part("slurm_partition_cpu_alloc", "gpu") == 192
    assert part("slurm_partition_cpu_alloc", "all") == 256
    assert part("slurm_partition_gpu_total", "empty") == 0


def test_controller(observed):
    assert value(observed, "slurm_scheduler_cycle_last_seconds") == pytest.approx(0.00185)
    assert value(observed, "slurm_scheduler_backfill_cycle_last_seconds") == pytest.approx(0.25)
    assert value(observed, "slurm_controller_server_threads") == 3
    rpc = {"message_type": "REQUEST_NODE_INFO"}
    assert value(observed, "slurm_controller_rpc_count", **rpc) == 1500
    assert value(observed, "slurm_controller_rpc_time_seconds", **rpc) == pytest.approx(3.0)
    assert len(observed["slurm_controller_rpc_count"]["samples"]) == 2


def test_up_and_last_success(observed):
    assert value(observed, "slurm_metrics_up") == 1
    assert value(observed, "slurm_metrics_last_success_timestamp_seconds") == 1767225600.0


def test_clusters_are_apart_and_a_forgotten_one_disappears():
    metrics = SlurmMetrics()
    metrics.observe("tenant-a", "prod", NODES, JOBS, PARTITIONS, DIAG)
    metrics.observe("tenant-b", "dev", NODES[:1], [], PARTITIONS[:1], None)
    parsed = parse(metrics)
    assert value(parsed, "slurm_nodes_total") == 6
    assert value(parsed, "slurm_nodes_total", namespace="tenant-b", cluster="dev") == 1
    metrics.forget("tenant-a", "prod")
    text = metrics.render().decode()
    assert 'namespace="tenant-a"' not in text and 'namespace="tenant-b"' in text
    # no /diag for tenant-b: its controller families have no samples and are left out
    assert "slurm_controller_rpc_count" not in text
    metrics.forget("tenant-b", "dev")
    metrics.forget("tenant-b", "dev")  # forgetting twice is harmless
    assert metrics.render() == b""


def test_a_failed_read_drops_the_slurm_series_and_keeps_the_last_success():
    clock = iter([100.0, 200.0])
    metrics = SlurmMetrics(clock=lambda: next(clock))
    metrics.failed("ns", "never")  # never read: up 0 and no timestamp
    metrics.observe("ns", "c", NODES, JOBS, PARTITIONS, DIAG)
    metrics.failed("ns", "c")
    parsed = parse(metrics)
    assert set(parsed) == {"slurm_metrics_up", "slurm_metrics_last_success_timestamp_seconds"}
    assert value(parsed, "slurm_metrics_up", namespace="ns", cluster="c") == 0
    assert value(parsed, "slurm_metrics_up", namespace="ns", cluster="never") == 0
    assert value(parsed, "slurm_metrics_last_success_timestamp_seconds", "ns", "c") == 100.0
    assert len(parsed["slurm_metrics_last_success_timestamp_seconds"]["samples"]) == 1
    metrics.observe("ns", "c", NODES, JOBS, PARTITIONS, DIAG)
    parsed = parse(metrics)
    assert value(parsed, "slurm_metrics_up", namespace="ns", cluster="c") == 1
    assert value(parsed, "slurm_metrics_last_success_timestamp_seconds", "ns", "c") == 200.0


def test_label_values_are_escaped():
    metrics = SlurmMetrics()
    metrics.observe('n"s', "c\\1", [{"name": 'a"b\nc', "state": ["IDLE"]}], [], [], None)
    parsed = parse(metrics)
    assert value(parsed, "slurm_node_cpu_total", 'n"s', "c\\1", node='a"b\nc') == 0


def test_missing_and_unset_fields_count_as_zero():
    samples = snapshot(
        [{"name": "n", "state": "IDLE", "cpus": {"set": False, "infinite": False, "number": 9}}],
        [{"job_state": []}],
        [{"name": "p"}],
        {"schedule_cycle_last": {"set": True, "infinite": True, "number": 0}},
    )
    assert samples["slurm_node_cpu_total"] == [(("n",), 0.0)]
    assert samples["slurm_nodes_idle"] == [((), 1.0)]
    assert samples["slurm_job_state"] == [(("", "UNKNOWN"), 1.0)]
    assert samples["slurm_partition_cpu_total"] == [(("p",), 0.0)]
    assert samples["slurm_scheduler_cycle_last_seconds"] == [((), 0.0)]


@pytest.mark.parametrize(
    ("gres", "gpus"),
    [
        ("gpu:h100:8(S:0-1)", 8),
        ("gpu:fake1:1(S:0),gpu:fake2:1(S:0)", 2),  # slurmrestd(8)'s example
        ("gpu:h100:3(IDX:0,2-3),gpu:a100:0(IDX:N/A)", 3),
        ("gpu:4", 4),
        ("gpu", 1),
        ("gpu:h100:2(S:0),shard:h100:16(S:0),nic:1", 2),
        ("gpu:1K", 1024),
        ("", 0),
        ("(null)", 0),
        (None, 0),
    ],
)
def test_gres_gpus(gres, gpus):
    assert gres_gpus(gres) == gpus


# --------------------------------------------------------------------------- Slurmrestd reads


def test_restd_reads_jobs_partitions_and_diag():
    seen = []

    async def answer(request: web.Request) -> web.Response:
        seen.append((request.method, request.path, request.headers.get("X-SLURM-USER-NAME")))
        key = request.path.removeprefix(API + "/").rstrip("/")
        return web.json_response(DATA[key])

    async def openapi(_: web.Request) -> web.Response:
        return web.json_response({"paths": {API + "/ping": {}}})

    async def run():
        app = web.Application()
        app.router.add_get(OPENAPI, openapi)
        app.router.add_get(API + "/{what}", answer)
        async with TestServer(app) as server:
            restd = Slurmrestd(str(server.make_url("")), b"k" * 32)
            try:
                return await restd.jobs(), await restd.partitions(), await restd.diag()
            finally:
                await restd.close()

    jobs, partitions, diag = asyncio.run(run())
    assert jobs == JOBS and partitions == PARTITIONS and diag == DIAG
    assert seen == [  # after the OpenAPI listing, which names only v0.0.41
        ("GET", f"{API}/jobs", "slurm"),
        ("GET", f"{API}/partitions", "slurm"),
        ("GET", f"{API}/diag", "slurm"),
    ]


def test_health_check_drains_are_counted_per_check_and_per_partition():
    def node(name: str, reason: str, *states: str) -> dict:
        return {"name": name, "state": list(states), "reason": reason, "partitions": ["gpu"]}

    samples = snapshot(
        [
            node("a", "health: gpu-count: 7 GPUs, GRES says 8", "IDLE", "DRAIN"),
            node("b", "k8s: Node n2 cordoned | health: gpu-count: 6 GPUs", "IDLE", "DRAIN"),
            node("c", "health: disk-free: /scratch has 1% free", "DOWN", "DRAIN"),
            node("d", "bad DIMM", "IDLE", "DRAIN"),  # an admin's: not a check's
            node("e", "health: mounts: stale", "IDLE"),  # a reason left on a node in service
        ],
        [],
        [{"name": "gpu", "nodes": {"total": 5}}, {"name": "cpu", "nodes": {"total": 2}}],
        None,
    )
    assert samples["slurm_nodes_health_drained"] == [(("disk-free",), 1.0), (("gpu-count",), 2.0)]
    assert samples["slurm_partition_nodes_health_drained"] == [(("gpu",), 3.0), (("cpu",), 0.0)]


def test_health_check_passive_results_from_the_nodes_extra():
    def node(name: str, extra: str) -> dict:
        return {"name": name, "state": ["IDLE"], "extra": extra}

    ran = record.merged("", 1000, {"disk-free": CheckRecord(True, 0.02)})
    failed = record.merged(
        '{"rack":"r1"}',
        900,
        {"disk-free": CheckRecord(False, 0.5), "gpu-count": CheckRecord(True, 1.25)},
    )
    assert ran and failed and json.loads(failed)["rack"] == "r1"  # the site's key stays
    samples = snapshot(
        [
            node("a", ran),
            node("b", failed),
            node("c", "site text"),  # not ours: no record
            node("d", '{"sunk.coreweave.com/health": {"checks": "x"}}'),  # malformed: none
        ],
        [],
        [],
        None,
    )
    assert samples["slurm_health_check_passive_nodes"] == [
        (("disk-free", "passed"), 1.0),
        (("disk-free", "failed"), 1.0),
        (("gpu-count", "passed"), 1.0),
        (("gpu-count", "failed"), 0.0),
    ]
    assert samples["slurm_health_check_passive_duration_seconds"] == [
        (("disk-free",), 0.5),
        (("gpu-count",), 1.25),
    ]
    assert samples["slurm_health_check_passive_oldest_run_timestamp_seconds"] == [
        (("disk-free",), 900.0),
        (("gpu-count",), 900.0),
    ]
