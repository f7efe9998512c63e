"""What the Pod Scheduler decides from Pods, placeholder jobs and slurmd hosts
(sunk.scheduler.plan): one case per rule of its docstring."""

from __future__ import annotations

import dataclasses
from typing import Any

from sunk.scheduler.plan import QUIET_WAIT, Job, plan
from sunk.scheduler.podjob import ANN_JOB, STARTED, PodRef, Settings

SETTINGS = Settings()
HOSTS = {"cpu-000-001": "node-a"}


def pod(uid: str = "u1", *, job: int | None = None, node: str = "", **extra: Any) -> dict:
    meta: dict[str, Any] = {"namespace": "ns", "name": f"p-{uid}", "uid": uid}
    if job is not None:
        meta["annotations"] = {ANN_JOB: str(job)}
    meta.update(extra.pop("meta", {}))
    spec = {
        "terminationGracePeriodSeconds": 5,
        "containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
    }
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": extra.pop("phase", "Pending")}}


def job(job_id: int, uid: str = "u1", *states: str, started: bool = False, reason: str = "") -> Job:
    return Job(
        id=job_id,
        pod=PodRef("ns", f"p-{uid}", uid),
        states=frozenset(states or ("PENDING",)),
        extra=STARTED if started else "sunk.coreweave.com/lock=strict",
        nodes="cpu-000-001" if "PENDING" not in states else "",
        reason=reason,
    )


def test_a_new_pod_gets_a_placeholder():
    actions = plan([pod()], [], HOSTS, SETTINGS)
    assert [(p["metadata"]["uid"], ph.cpus) for p, ph in actions.submit] == [("u1", 1)]
    assert not (actions.bind or actions.wait or actions.reject)


def test_a_pod_slurm_cannot_take_is_rejected_not_submitted():
    bad = pod()
    bad["spec"]["terminationGracePeriodSeconds"] = 60
    actions = plan([bad], [], HOSTS, SETTINGS)
    assert actions.submit == []
    ((_, rejected),) = actions.reject
    assert rejected.field == "spec.terminationGracePeriodSeconds"


def test_a_pending_job_makes_the_pod_wait_with_slurms_reason():
    actions = plan([pod(job=7)], [job(7, reason="Resources")], HOSTS, SETTINGS)
    assert [why for _, why in actions.wait] == ["placeholder job 7 is pending in Slurm: Resources"]
    assert not (actions.submit or actions.bind or actions.adopt)


def test_a_placeholder_that_waited_only_a_moment_writes_nothing():
    """In a burst each placeholder pends or starts for a moment: a condition and an Event for
    each would delay the binds of those that already run. After QUIET_WAIT the Pod says why."""
    fresh = dataclasses.replace(job(7, reason="Priority"), submitted=1000.0)
    quiet = plan([pod(job=7)], [fresh], HOSTS, SETTINGS, now=1000.0 + QUIET_WAIT - 0.1)
    assert not (quiet.wait or quiet.submit or quiet.bind or quiet.adopt)
    told = plan([pod(job=7)], [fresh], HOSTS, SETTINGS, now=1000.0 + QUIET_WAIT)
    assert [why for _, why in told.wait] == ["placeholder job 7 is pending in Slurm: Priority"]
    restd = {
        "job_id": 7,
        "comment": fresh.pod.comment(),
        "submit_time": {"set": True, "number": 1000},
    }
    assert Job.from_restd(restd).submitted == 1000.0


def test_a_job_in_its_prolog_is_not_bound_yet():
    actions = plan([pod(job=7)], [job(7, "u1", "RUNNING")], HOSTS, SETTINGS)
    assert actions.bind == [] and "starting on cpu-000-001" in actions.wait[0][1]


def test_a_started_job_binds_the_pod_to_the_node_of_its_slurmd_pod():
    running = job(7, "u1", "RUNNING", started=True)
    actions = plan([pod(job=7)], [running], HOSTS, SETTINGS)
    assert [(p["metadata"]["uid"], j.id, n) for p, j, n in actions.bind] == [("u1", 7, "node-a")]


def test_a_started_job_on_an_unknown_slurm_node_waits():
    running = job(7, "u1", "RUNNING", started=True)
    actions = plan([pod(job=7)], [running], {}, SETTINGS)
    assert actions.bind == [] and "no slurmd Pod" in actions.wait[0][1]


def test_a_restart_adopts_a_job_the_pod_does_not_name_yet():
    actions = plan([pod()], [job(7)], HOSTS, SETTINGS)
    assert [(p["metadata"]["uid"], j) for p, j in actions.adopt] == [("u1", 7)]
    assert actions.submit == []


def test_a_second_job_for_one_pod_is_ended():
    actions = plan([pod(job=8)], [job(7), job(8)], HOSTS, SETTINGS)
    assert actions.cancel == [7] and actions.adopt == []


def test_a_bound_pod_is_never_bound_again():
    running = job(7, "u1", "RUNNING", started=True)
    actions = plan([pod(job=7, node="node-a", phase="Running")], [running], HOSTS, SETTINGS)
    assert not (actions.bind or actions.submit or actions.delete_pod or actions.kill)


def test_slurm_ending_the_job_deletes_the_bound_pod_and_kills_once_it_is_gone():
    ended = job(7, "u1", "PREEMPTED", "COMPLETING", reason="None")
    bound = pod(job=7, node="node-a", phase="Running")
    actions = plan([bound], [ended], HOSTS, SETTINGS)
    ((_, why),) = actions.delete_pod
    assert why == "placeholder job 7 ended in Slurm: COMPLETING/PREEMPTED"
    assert actions.kill == []  # the Pod may still be running: Slurm keeps the node meanwhile
    gone = plan([], [ended], HOSTS, SETTINGS)
    assert gone.kill == [7]


def test_a_job_forgotten_by_slurm_deletes_the_bound_pod():
    actions = plan([pod(job=7, node="node-a", phase="Running")], [], HOSTS, SETTINGS)
    assert actions.delete_pod[0][1] == "placeholder job 7 is no longer in Slurm"


def test_a_pod_bound_by_someone_else_is_left_alone():
    actions = plan([pod(node="node-a", phase="Running")], [], HOSTS, SETTINGS)
    assert not (actions.delete_pod or actions.submit or actions.bind)


def test_a_job_ended_before_the_pod_ran_deletes_the_pod():
    actions = plan([pod(job=7)], [job(7, "u1", "CANCELLED")], HOSTS, SETTINGS)
    assert actions.submit == []
    assert "ended in Slurm before it ran: CANCELLED" in actions.delete_pod[0][1]


def test_a_finished_pod_ends_its_job():
    running = job(7, "u1", "RUNNING", started=True)
    done = pod(job=7, node="node-a", phase="Succeeded")
    assert plan([done], [running], HOSTS, SETTINGS).kill == [7]


def test_a_deleted_pod_keeps_its_job_until_it_is_gone():
    running = job(7, "u1", "RUNNING", started=True)
    deleting = pod(job=7, node="node-a", phase="Running", meta={"deletionTimestamp": "x"})
    assert plan([deleting], [running], HOSTS, SETTINGS).kill == []
    assert plan([], [running], HOSTS, SETTINGS).kill == [7]


def test_an_unbound_pod_deleted_cancels_its_pending_job():
    deleting = pod(job=7, meta={"deletionTimestamp": "x"})
    assert plan([deleting], [job(7)], HOSTS, SETTINGS).cancel == [7]


def test_jobs_of_vanished_pods_end_and_finished_ones_are_left():
    jobs = [job(1, "a"), job(2, "b", "RUNNING", started=True), job(3, "c", "COMPLETED")]
    actions = plan([], jobs, HOSTS, SETTINGS)
    assert actions.cancel == [1] and actions.kill == [2]


def test_job_from_restd_reads_only_placeholders():
    raw = {
        "job_id": 5,
        "comment": "sunk.coreweave.com/pod=ns/p/u9",
        "job_state": ["RUNNING"],
        "extra": STARTED,
        "nodes": "cpu-000-001",
        "state_reason": "None",
    }
    parsed = Job.from_restd(raw)
    assert parsed is not None and parsed.started and parsed.pod.uid == "u9"
    assert Job.from_restd({**raw, "comment": "a user's job"}) is None
