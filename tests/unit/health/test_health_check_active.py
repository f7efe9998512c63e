"""Active health checks: the values, the file the runner reads, the Syncer's schedule and job,
the batch step's decisions and result, and the metrics made from it
(`pytest -k "health_check or verify_undrain"`)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import ValidationError

from sunk.health import active
from sunk.health.allreduce import bus_bandwidth
from sunk.health.reasons import Decision, Result, decide
from sunk.health.runner import Config, RunnerError
from sunk.models.values import HealthCheck
from sunk.slurmconf import health
from sunk.syncer.active_checks import LOWEST_PRIORITY, CheckJob, Schedule, in_flight
from sunk.syncer.loop import Syncer
from sunk.syncer.slurm_metrics import SlurmMetrics, check_runs
from tests.unit.syncer.test_slurm_metrics import parse, value

ALLREDUCE = {"every": 3600, "nodes": 2, "allreduce": {"minBusBandwidth": "1Gi"}}


def test_health_check_active_values_need_one_kind_and_a_name_of_their_own():
    hc = HealthCheck.model_validate({"active": {"allreduce": ALLREDUCE}})
    assert hc.renders_file() and not hc.checks()
    for bad, said in [
        ({"active": {"a": {"every": 3600}}}, "set either allreduce or script"),
        ({"active": {"a": {**ALLREDUCE, "script": "exit 0"}}}, "set either allreduce or script"),
        ({"active": {"a": {**ALLREDUCE, "every": 5}}}, "greater than or equal to 60"),
        ({"active": {"mounts": ALLREDUCE}}, "stock check"),
        ({"scripts": {"a": "exit 0"}, "active": {"a": ALLREDUCE}}, "shares its name"),
    ]:
        with pytest.raises(ValidationError, match=said):
            HealthCheck.model_validate(bad)


def test_health_check_active_reaches_the_checks_file_in_bytes():
    hc = HealthCheck.model_validate(
        {"active": {"ar": {**ALLREDUCE, "timeLimit": 5}, "site": {"every": 600, "script": "x"}}}
    )
    data = json.loads(health.render_checks(hc))
    assert data["active"] == {
        "ar": {"timeLimit": 5, "allreduce": {"minBusBandwidth": 2**30, "size": 16 * 2**20,
                                             "iterations": 20}},
        "site": {"timeLimit": 10, "script": "x"},
    }  # fmt: skip
    # no periodic program for active checks alone: they run as jobs
    assert health.slurm_settings(hc) == {}


def test_health_check_active_schedule_waits_an_interval_and_for_the_last_job():
    check = CheckJob("ar", every=600)
    schedule = Schedule((check,))
    assert schedule.due(1000.0, []) == []  # first seen: one interval from now
    assert schedule.due(1599.0, []) == []
    assert schedule.due(1600.0, []) == [check]
    schedule.submitted(check, 1600.0)
    assert schedule.due(1700.0, []) == []
    # due again, but its job still pends or runs (or completes): skipped until it ends
    for state in (["PENDING"], ["RUNNING"], ["COMPLETED", "COMPLETING"]):
        jobs = [{"name": "sunk-health-ar", "job_state": state}]
        assert schedule.due(2300.0, jobs) == [], state
    ended = [{"name": "sunk-health-ar", "job_state": ["COMPLETED"]}]
    assert in_flight(ended) == set() and schedule.due(2300.0, ended) == [check]


def test_health_check_active_job_takes_whole_nodes_at_the_lowest_priority():
    job = CheckJob("ar", 600, nodes=4, partition="gpu", qos="scavenger", time_limit=5).job()
    assert job["name"] == "sunk-health-ar" and job["nodes"] == "4" and job["tasks"] == 4
    assert job["shared"] == ["none"] and job["nice"] == LOWEST_PRIORITY
    assert (job["partition"], job["qos"]) == ("gpu", "scavenger")
    assert job["time_limit"] == {"set": True, "number": 5} and job["requeue"] is False
    assert "exec /usr/local/bin/sunk-health --active ar" in CheckJob("ar", 600).script()
    assert "partition" not in CheckJob("ar", 600).job()


class JobsRestd:
    def __init__(self, jobs: list[dict[str, Any]]) -> None:
        self._jobs, self.submitted = jobs, []

    async def jobs(self):
        return self._jobs

    async def submit(self, script, job):
        self.submitted.append((script, job))
        return 42


def test_health_check_active_jobs_are_submitted_by_the_syncer_without_metrics():
    kube: Any = None
    syncer = Syncer(kube, "ns", "c", "http://r", "jwt", metrics_interval=0.0,
                    active_checks=(CheckJob("ar", 60),))  # fmt: skip
    restd = JobsRestd([])
    syncer.schedule.next_run["ar"] = 0.0  # due
    asyncio.run(syncer._observe(restd, []))  # type: ignore[arg-type]
    assert [job["name"] for _, job in restd.submitted] == ["sunk-health-ar"]
    asyncio.run(syncer._observe(restd, []))  # type: ignore[arg-type]
    assert len(restd.submitted) == 1  # the next run is an interval away


def test_health_check_active_failure_drains_and_no_periodic_run_lifts_it():
    configured = {"mounts", "allreduce"}
    bad = Result(False, "bus bandwidth 0.1 GB/s below 1.1 GB/s")
    drained = "health: allreduce: bus bandwidth 0.1 GB/s below 1.1 GB/s"
    assert decide(False, "", {"allreduce": bad}, configured) == Decision("drain", drained)
    # a periodic run never runs the active check: passing or failing, the drain stays
    assert decide(True, drained, {"mounts": Result(True)}, configured) == Decision()
    assert decide(True, drained, {"mounts": Result(False, "gone")}, configured) == Decision()
    # once the active check is removed from the values, a passing periodic run lifts it
    assert decide(True, drained, {"mounts": Result(True)}, {"mounts"}) == Decision("resume")


def test_health_check_active_config_waits_for_a_check_the_volume_lacks(tmp_path):
    path = tmp_path / "checks.json"
    path.write_text(json.dumps({"active": {"ar": {"script": "exit 0"}}}))
    config, spec = active.load(path, "ar", wait=0)
    assert spec == {"script": "exit 0"} and "ar" in config.names
    with pytest.raises(RunnerError, match="no active check 'other'"):
        active.load(path, "other", wait=0)
    assert Config.load(path).active == {"ar": {"script": "exit 0"}}


def test_health_check_active_allreduce_is_judged_by_bus_bandwidth(monkeypatch):
    assert bus_bandwidth(1000, 2, 1.0) == 1000.0 and bus_bandwidth(1000, 4, 1.0) == 1500.0
    assert bus_bandwidth(1000, 1, 1.0) == 0.0

    def answer(stdout: str, code: int = 0):
        class Proc:
            returncode, stderr = code, "" if code == 0 else "mlx5_0: link down\n"

        Proc.stdout = stdout

        def run(*args, **kwargs):
            seen.update(kwargs["env"])
            return Proc()

        monkeypatch.setattr(active.subprocess, "run", run)

    seen: dict[str, str] = {}
    monkeypatch.delenv("HOME", raising=False)  # as in a job submitted through slurmrestd

    spec = {"minBusBandwidth": 2_000_000_000, "size": 1 << 24}
    answer("sunk-allreduce ranks=2 size=16777216 seconds=0.001 busbw=3000000000\n")
    assert active.run_allreduce(spec, ["a", "b"], 60) == (Result(True), 3e9)
    assert seen["HOME"] == "/tmp"  # Open MPI does not start without one
    answer("sunk-allreduce ranks=2 size=16777216 seconds=0.1 busbw=150000000\n")
    result, measured = active.run_allreduce(spec, ["a", "b"], 60)
    assert not result.ok and measured == 1.5e8
    assert result.detail == "bus bandwidth 150.0 MB/s below 2.0 GB/s"
    # MPI did not complete (a fabric, or an MPI that cannot start): nothing measured, nothing
    # drained, MPI's words in the error
    answer("", code=1)
    with pytest.raises(RunnerError, match="allreduce did not complete: mlx5_0: link down"):
        active.run_allreduce(spec, ["a", "b"], 60)
    # no PMI: every rank alone, nothing measured between the nodes
    answer("sunk-allreduce ranks=1 size=16777216 seconds=0.1 busbw=0\n")
    with pytest.raises(RunnerError, match="1 rank"):
        active.run_allreduce(spec, ["a", "b"], 60)


def job(comment: str, end: int, state: str = "COMPLETED", name: str = "sunk-health-ar") -> dict:
    return {"name": name, "comment": comment, "job_state": [state],
            "start_time": {"set": True, "number": end - 7},
            "end_time": {"set": True, "number": end}}  # fmt: skip


def test_health_check_active_results_become_metrics_and_outlive_the_job():
    older = job("sunk-health check=ar result=pass value=3000000000 nodes=a,b", 100)
    newer = job("sunk-health check=ar result=fail value=150000000 nodes=a,c", 200)
    other = job("sunk-health check=ar result=pass nodes=x", 300, name="train")  # not ours
    assert active.parse_result("hello") is None
    runs = check_runs([newer, older, other])
    assert runs["ar"].nodes == ("a", "c") and runs["ar"].result == 0.0

    metrics = SlurmMetrics(clock=lambda: 1.0)
    metrics.observe("tenant-a", "prod", [], [older, newer], [], None)
    metrics.observe("tenant-a", "prod", [], [], [], None)  # slurmctld forgot the jobs
    parsed = parse(metrics)
    assert value(parsed, "slurm_health_check_last_result", check="ar") == 0.0
    assert value(parsed, "slurm_health_check_node_result", check="ar", node="c") == 0.0
    assert value(parsed, "slurm_health_check_value", check="ar") == 1.5e8
    assert value(parsed, "slurm_health_check_last_run_timestamp_seconds", check="ar") == 200
    assert value(parsed, "slurm_health_check_duration_seconds", check="ar") == 7
    assert ("check", "ar") in {kv for k in parsed["slurm_health_check_node_result"]["samples"]
                               for kv in k}  # fmt: skip
    metrics.forget("tenant-a", "prod")
    assert "slurm_health_check_last_result" not in parse(metrics)
