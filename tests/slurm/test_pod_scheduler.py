"""The Pod Scheduler against a real slurmctld + slurmrestd (with real slurmd daemons that run
the placeholder scripts) and a real kube-apiserver whose kwok Nodes stand for the Kubernetes
Nodes of the slurmd Pods. The binding logic, the job mapping and the Slurm side are real;
the Pods run on kwok (the e2e tier runs them on real nodes).

The scheduler is driven pass by pass (``schedule_once``), so each test says exactly what one
pass must do; its ``run`` loop is exercised in the operator by the e2e tier."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from tests.slurm.conftest import NODES, render_test_config

from sunk.devenv.controlplane import ControlPlane, KubeClient
from sunk.devenv.slurm_runtime import SlurmRuntime
from sunk.operator import names
from sunk.operator.client import Kube
from sunk.scheduler.loop import PodScheduler
from sunk.scheduler.podjob import (
    ANN_EXCLUSIVE,
    ANN_JOB,
    ANN_NODE,
    ANN_PARTITION,
    ANN_TIME_LIMIT,
    Settings,
)
from sunk.syncer.restd import Slurmrestd

NS, CLUSTER, SCHEDULER = "tenant", "sched", "tenant-sched"
SETTINGS = Settings(kill_wait=30, termination_offset=5, gpu_types={"H100_80GB": "h100"})
# A high-priority partition over the cpu nodes: its jobs preempt (cancel) the default one's.
PREEMPTION = """
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=/etc/slurm/jwt/jwt.key
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
PartitionName=urgent Nodes=cpu PriorityTier=10 MaxTime=INFINITE State=UP
"""
T = TypeVar("T")


@dataclass
class World:
    cp: ControlPlane
    rt: SlurmRuntime
    restd: Slurmrestd
    loop: asyncio.AbstractEventLoop
    kube: Kube
    url: str
    hosts: dict[str, str]  # Slurm node → Kubernetes Node
    started: list[PodScheduler] = field(default_factory=list)

    @property
    def client(self) -> KubeClient:
        return self.cp.client

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def scheduler(self) -> PodScheduler:
        sched = PodScheduler(
            self.kube, NS, CLUSTER, SCHEDULER, self.url, names.jwt_secret(CLUSTER), SETTINGS,
            (NS,),
        )  # fmt: skip
        self.started.append(sched)
        return sched

    def drive(
        self, sched: PodScheduler, check: Callable[[], T | None], what: str, timeout: float = 60
    ) -> T:
        """Scheduler passes until ``check`` holds."""
        deadline = time.monotonic() + timeout
        while True:
            self.run(sched.schedule_once())
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}\n{self.rt.logs(10)}")
            time.sleep(0.5)

    def pod(self, name: str) -> dict | None:
        return self.client.get(f"/api/v1/namespaces/{NS}/pods/{name}", missing_ok=True)

    def job(self, job_id: int | str) -> dict | None:
        return self.run(self.restd.job(int(job_id)))

    def placeholders(self, pod: dict) -> list[dict]:
        uid = pod["metadata"]["uid"]
        return [j for j in self.run(self.restd.jobs()) if uid in (j.get("comment") or "")]

    def events(self, name: str, reason: str) -> list[dict]:
        return [
            e
            for e in self.client.list(f"/api/v1/namespaces/{NS}/events")
            if e["involvedObject"]["name"] == name and e["reason"] == reason
        ]


@pytest.fixture(scope="module")
def world(slurm_rootfs_path: Path) -> Iterator[World]:
    with ControlPlane() as cp, SlurmRuntime(slurm_rootfs_path) as rt:
        files = render_test_config(rt)
        files["slurm.conf"] += PREEMPTION
        rt.start(files)
        url = rt.start_restd()
        for name, (conf, gpus) in NODES.items():
            rt.add_node(name, conf, gpus=gpus)
        rt.wait_nodes_idle(NODES, timeout=180)
        client = cp.client
        cp.create_namespace(NS, {names.jwt_secret(CLUSTER): {"jwt.key": rt.jwt_key}})
        hosts = {}
        for i, name in enumerate(NODES):  # one Kubernetes Node per slurmd "Pod"
            node = f"k8s-{i}"
            cp.create_node(node, capacity={"cpu": 8, "memory": "16Gi", "nvidia.com/gpu": 2})
            client.create(
                f"/api/v1/namespaces/{NS}/pods",
                {
                    "metadata": {
                        "name": name,
                        "labels": {names.LABEL_CLUSTER: CLUSTER, names.LABEL_NODESET: "n"},
                    },
                    "spec": {
                        "nodeName": node,
                        "containers": [{"name": "slurmd", "image": "opensunk/slurmd:test"}],
                    },
                },
            )
            hosts[name] = node
        loop = asyncio.new_event_loop()
        kube = loop.run_until_complete(Kube.connect(str(cp.kubeconfig)))
        restd = Slurmrestd(url, rt.jwt_key)
        world = World(cp, rt, restd, loop, kube, url, hosts)
        try:
            yield world
        finally:
            for sched in world.started:
                if sched.restd is not None:
                    loop.run_until_complete(sched.restd.close())
            loop.run_until_complete(restd.close())
            loop.run_until_complete(kube.close())
            loop.close()


def user_pod(
    world: World,
    *,
    cpu: str = "500m",
    memory: str = "256Mi",
    grace: int | None = 10,
    annotations: dict[str, str] | None = None,
    gpus: int = 0,
    node_selector: dict[str, str] | None = None,
) -> dict:
    name = f"app-{uuid.uuid4().hex[:6]}"
    requests: dict[str, str] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    resources: dict[str, Any] = {"requests": requests}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "schedulerName": SCHEDULER,
        "containers": [{"name": "app", "image": "busybox", "resources": resources}],
    }
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    if node_selector:
        spec["nodeSelector"] = node_selector
    return world.client.create(
        f"/api/v1/namespaces/{NS}/pods",
        {"metadata": {"name": name, "annotations": annotations or {}}, "spec": spec},
    )


def _bound(world: World, name: str) -> dict | None:
    pod = world.pod(name)
    return pod if pod and pod["spec"].get("nodeName") else None


def _end(world: World, pod: dict) -> None:
    """Delete the Pod and let the scheduler end its job (tests leave Slurm idle)."""
    name = pod["metadata"]["name"]
    world.client.delete(
        f"/api/v1/namespaces/{NS}/pods/{name}?gracePeriodSeconds=0", missing_ok=True
    )
    sched = world.scheduler()
    world.drive(
        sched,
        lambda: (
            world.pod(name) is None
            and all("RUNNING" not in j["job_state"] for j in world.placeholders(pod))
        ),
        f"Pod {name} gone and its job ended",
    )


def test_a_pod_runs_on_the_node_slurm_chose_and_squeue_shows_its_placeholder(world: World):
    pod = user_pod(world, annotations={ANN_PARTITION: "cpu", ANN_TIME_LIMIT: "1:30:00"})
    name, sched = pod["metadata"]["name"], world.scheduler()
    bound = world.drive(sched, lambda: _bound(world, name), "the Pod bound")
    job_id = bound["metadata"]["annotations"][ANN_JOB]
    job = world.job(job_id)
    assert job is not None and job["job_state"] == ["RUNNING"], job
    # bound to the Kubernetes Node of the slurmd Pod Slurm allocated
    assert bound["spec"]["nodeName"] == world.hosts[job["nodes"]], (bound["spec"], job["nodes"])
    # the Binding carried the Slurm node onto the Pod (no write of its own)
    assert bound["metadata"]["annotations"][ANN_NODE] == job["nodes"], bound["metadata"]
    assert job["extra"] == "sunk.coreweave.com/lock=strict: started"
    assert job["partition"] == "cpu" and job["time_limit"]["number"] == 90, job
    assert job["cpus"]["number"] == 1 and job["memory_per_node"]["number"] == 256, job
    assert job["comment"] == f"sunk.coreweave.com/pod={NS}/{name}/{pod['metadata']['uid']}"
    # the lock toleration was added, so the job's strict lock never evicts its own Pod
    assert {"key": "sunk.coreweave.com/lock", "operator": "Exists", "effect": "NoExecute"} in (
        bound["spec"]["tolerations"]
    )
    scheduled = world.events(name, "Scheduled")
    assert len(scheduled) == 1 and bound["spec"]["nodeName"] in scheduled[0]["message"]
    # more passes change nothing: no second job, no second binding
    for _ in range(3):
        world.run(sched.schedule_once())
    assert [j["job_id"] for j in world.placeholders(pod)] == [int(job_id)]
    assert len(world.events(name, "Scheduled")) == 1
    _end(world, pod)


@pytest.mark.parametrize(
    ("pod_args", "field"),
    [
        ({"cpu": ""}, "spec.containers[*].resources.requests.cpu"),
        ({"memory": ""}, "spec.containers[*].resources.requests.memory"),
        ({"grace": None}, "spec.terminationGracePeriodSeconds"),  # the default 30 s
        ({"grace": 25}, "spec.terminationGracePeriodSeconds"),
        ({"annotations": {ANN_EXCLUSIVE: "always"}}, f"metadata.annotations[{ANN_EXCLUSIVE}]"),
        ({"gpus": 1, "annotations": {ANN_EXCLUSIVE: "ok"}},
         f"metadata.annotations[{ANN_EXCLUSIVE}]"),
        ({"annotations": {ANN_TIME_LIMIT: "soon"}}, f"metadata.annotations[{ANN_TIME_LIMIT}]"),
        ({"annotations": {ANN_PARTITION: "cpu MaxTime=1"}},
         f"metadata.annotations[{ANN_PARTITION}]"),
        ({"gpus": 1, "node_selector": {"gpu.nvidia.com/class": "A100"}},
         "spec.nodeSelector[gpu.nvidia.com/class]"),
    ],
)  # fmt: skip
def test_a_pod_slurm_cannot_take_gets_one_event_naming_the_field_and_no_job(
    world: World, pod_args: dict, field: str
):
    pod = user_pod(world, **pod_args)
    name, sched = pod["metadata"]["name"], world.scheduler()
    for _ in range(3):
        world.run(sched.schedule_once())
    events = world.events(name, "SlurmRejected")
    assert len(events) == 1, events
    assert events[0]["message"].startswith(field + ":"), events[0]["message"]
    assert events[0]["type"] == "Warning"
    current = world.pod(name)
    assert not current["spec"].get("nodeName")
    condition = next(c for c in current["status"]["conditions"] if c["type"] == "PodScheduled")
    assert condition["status"] == "False" and condition["reason"] == "SlurmRejected"
    assert world.placeholders(pod) == []
    # a restarted scheduler does not repeat the Event either
    world.run(world.scheduler().schedule_once())
    assert len(world.events(name, "SlurmRejected")) == 1
    world.client.delete(f"/api/v1/namespaces/{NS}/pods/{name}?gracePeriodSeconds=0")


def _submit_blocker(world: World, **job: Any) -> int:
    """A Slurm job of a user's, through slurmrestd: sleeps until cancelled."""
    body = {
        "name": "blocker",
        "current_working_directory": "/tmp",
        "environment": ["PATH=/usr/bin:/bin"],
        "standard_output": "/dev/null",
        **job,
    }
    job_id = world.run(world.restd.submit("#!/bin/sh\nexec sleep 600\n", body))
    deadline = time.monotonic() + 60
    while world.job(job_id)["job_state"] != ["RUNNING"]:
        assert time.monotonic() < deadline, world.job(job_id)
        time.sleep(0.5)
    return job_id


def test_a_pod_waits_while_an_exclusive_job_holds_every_node_then_runs(world: World):
    blocker = _submit_blocker(
        world, partition="cpu", nodes="2", shared=["none"], tasks=2, minimum_nodes=2
    )
    try:
        pod = user_pod(world, annotations={ANN_PARTITION: "cpu"})
        name, sched = pod["metadata"]["name"], world.scheduler()

        def waiting() -> dict | None:
            found = world.events(name, "SlurmPending")
            return found[0] if found and "pending in Slurm" in found[0]["message"] else None

        event = world.drive(sched, waiting, "a SlurmPending Event")
        assert "Resources" in event["message"] or "Priority" in event["message"], event
        for _ in range(3):
            world.run(sched.schedule_once())
        assert not world.pod(name)["spec"].get("nodeName")
        assert len(world.events(name, "SlurmPending")) == 1  # not repeated per pass
    finally:
        world.run(world.restd.signal_job(blocker, "KILL"))
    bound = world.drive(sched, lambda: _bound(world, name), "the Pod bound after the job ended")
    assert bound["spec"]["nodeName"] in (world.hosts["cpu-0"], world.hosts["cpu-1"])
    _end(world, pod)


def test_scancel_of_the_placeholder_deletes_the_pod_with_an_event(world: World):
    pod = user_pod(world)
    name, sched = pod["metadata"]["name"], world.scheduler()
    bound = world.drive(sched, lambda: _bound(world, name), "the Pod bound")
    job_id = int(bound["metadata"]["annotations"][ANN_JOB])
    world.run(world.restd.signal_job(job_id))  # scancel
    world.drive(sched, lambda: world.pod(name) is None, "the Pod deleted")
    (event,) = world.events(name, "SlurmJobEnded")
    assert f"placeholder job {job_id} ended in Slurm" in event["message"], event
    assert "CANCELLED" in event["message"], event
    # once the Pod is gone, the job that ignored SIGTERM is killed rather than left for KillWait
    world.drive(sched, lambda: "COMPLETING" not in world.job(job_id)["job_state"], "job gone")


def test_deleting_the_pod_ends_its_job(world: World):
    pod = user_pod(world)
    name, sched = pod["metadata"]["name"], world.scheduler()
    bound = world.drive(sched, lambda: _bound(world, name), "the Pod bound")
    job_id = int(bound["metadata"]["annotations"][ANN_JOB])
    world.client.delete(f"/api/v1/namespaces/{NS}/pods/{name}")
    job = world.drive(
        sched,
        lambda: (
            (j := world.job(job_id)) and not ({"RUNNING", "COMPLETING"} & set(j["job_state"])) and j
        ),
        "the placeholder ended",
    )
    assert world.pod(name) is None
    assert job["job_state"][0] in ("CANCELLED", "FAILED"), job


def test_a_pending_pod_deleted_cancels_its_pending_job(world: World):
    blocker = _submit_blocker(world, partition="cpu", nodes="2", shared=["none"], tasks=2)
    try:
        pod = user_pod(world, annotations={ANN_PARTITION: "cpu"})
        name, sched = pod["metadata"]["name"], world.scheduler()
        world.drive(sched, lambda: world.placeholders(pod), "a placeholder")
        (job,) = world.placeholders(pod)
        assert job["job_state"] == ["PENDING"]
        world.client.delete(f"/api/v1/namespaces/{NS}/pods/{name}?gracePeriodSeconds=0")
        world.drive(
            sched, lambda: world.job(job["job_id"])["job_state"] == ["CANCELLED"], "cancelled"
        )
    finally:
        world.run(world.restd.signal_job(blocker, "KILL"))


def test_a_higher_priority_job_preempts_the_placeholder_and_the_pod_is_deleted(world: World):
    pods = [user_pod(world, cpu="2", annotations={ANN_PARTITION: "cpu"}) for _ in range(2)]
    sched = world.scheduler()
    world.drive(
        sched,
        lambda: all(_bound(world, p["metadata"]["name"]) for p in pods),
        "both Pods bound (each fills a cpu node)",
    )
    urgent = _submit_blocker(world, partition="urgent", nodes="1", tasks=1)
    try:
        world.drive(
            sched,
            lambda: sum(world.pod(p["metadata"]["name"]) is None for p in pods) == 1,
            "the preempted Pod deleted",
            timeout=90,
        )
        gone = next(p for p in pods if world.pod(p["metadata"]["name"]) is None)
        (event,) = world.events(gone["metadata"]["name"], "SlurmJobEnded")
        assert "PREEMPTED" in event["message"], event
    finally:
        world.run(world.restd.signal_job(urgent, "KILL"))
        for pod in pods:
            _end(world, pod)


def test_gpu_requests_become_gres_and_exclusivity_reaches_the_job(world: World):
    gpu = user_pod(
        world,
        gpus=2,
        annotations={ANN_PARTITION: "gpu"},
        node_selector={"gpu.nvidia.com/class": "H100_80GB"},
    )
    shared = user_pod(world, annotations={ANN_PARTITION: "cpu", ANN_EXCLUSIVE: "user"})
    sched = world.scheduler()
    for pod in (gpu, shared):
        world.drive(sched, lambda p=pod: _bound(world, p["metadata"]["name"]), "bound")
    (gpu_job,) = world.placeholders(gpu)
    (shared_job,) = world.placeholders(shared)
    assert gpu_job["tres_per_node"] == "gres/gpu:h100:2", gpu_job["tres_per_node"]
    assert gpu_job["gres_detail"] == ["gpu:h100:2(IDX:0-1)"], gpu_job["gres_detail"]
    assert gpu_job["nodes"] == "gpu-0"
    assert _bound(world, gpu["metadata"]["name"])["spec"]["nodeName"] == world.hosts["gpu-0"]
    assert gpu_job["shared"] == ["none"], gpu_job["shared"]  # GPU Pods get whole nodes
    assert shared_job["shared"] == ["user"], shared_job["shared"]
    for pod in (gpu, shared):
        _end(world, pod)


def test_a_restarted_scheduler_adopts_jobs_ends_orphans_and_binds_once(world: World):
    first = world.scheduler()
    kept, orphaned = user_pod(world), user_pod(world)
    world.drive(
        first,
        lambda: all(world.placeholders(p) for p in (kept, orphaned)),
        "both placeholders submitted",
    )
    # The scheduler dies here. Meanwhile one Pod is deleted and the other loses its job
    # annotation (as if the scheduler died between submitting and annotating).
    (orphan_job,) = world.placeholders(orphaned)
    world.client.delete(
        f"/api/v1/namespaces/{NS}/pods/{orphaned['metadata']['name']}?gracePeriodSeconds=0"
    )
    name = kept["metadata"]["name"]
    world.client.patch(
        f"/api/v1/namespaces/{NS}/pods/{name}", {"metadata": {"annotations": {ANN_JOB: None}}}
    )
    second = world.scheduler()
    bound = world.drive(second, lambda: _bound(world, name), "the kept Pod bound")
    (job,) = world.placeholders(kept)
    assert bound["metadata"]["annotations"][ANN_JOB] == str(job["job_id"])
    assert world.pod(orphaned["metadata"]["name"]) is None
    world.drive(
        second,
        lambda: not ({"PENDING", "RUNNING"} & set(world.job(orphan_job["job_id"])["job_state"])),
        "the orphaned job ended",
    )
    assert len(world.events(name, "Scheduled")) == 1
    _end(world, kept)
