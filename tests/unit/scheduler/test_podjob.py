"""The checks a Pod must pass and the placeholder job it becomes (sunk.scheduler.podjob)."""

from __future__ import annotations

from typing import Any

import pytest

from sunk.scheduler.podjob import (
    ANN_ACCOUNT,
    ANN_EXCLUSIVE,
    ANN_PARTITION,
    ANN_QOS,
    ANN_TIME_LIMIT,
    STARTED,
    PodRef,
    Rejected,
    Settings,
    effective_requests,
    placeholder_for,
    pod_of_comment,
)

SETTINGS = Settings(kill_wait=30, termination_offset=5, gpu_types={"H100_80GB": "h100"})


def pod(
    requests: dict[str, Any] | None = None,
    *,
    grace: int | None = 10,
    annotations: dict[str, str] | None = None,
    qos: str = "Burstable",
    **spec: Any,
) -> dict[str, Any]:
    requests = {"cpu": "500m", "memory": "1Gi"} if requests is None else requests
    body: dict[str, Any] = {
        "containers": [{"name": "a", "resources": {"requests": requests}}],
        **spec,
    }
    if grace is not None:
        body["terminationGracePeriodSeconds"] = grace
    return {
        "metadata": {
            "namespace": "ns",
            "name": "p",
            "uid": "u-1",
            "annotations": annotations or {},
        },
        "spec": body,
        "status": {"qosClass": qos},
    }


def rejected(obj: dict[str, Any], settings: Settings = SETTINGS) -> Rejected:
    with pytest.raises(Rejected) as caught:
        placeholder_for(obj, settings)
    return caught.value


def test_resources_round_up_to_what_slurm_allocates():
    job = placeholder_for(pod({"cpu": "1500m", "memory": "1000Mi"}), SETTINGS).job()
    assert job["cpus_per_task"] == 2 and job["tasks"] == 1 and job["nodes"] == "1"
    assert job["memory_per_node"] == {"set": True, "number": 1000}
    assert placeholder_for(pod({"cpu": "100m", "memory": "1"}), SETTINGS).memory_mib == 1


def test_requests_count_as_the_kube_scheduler_counts_them():
    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
            {"resources": {"requests": {"cpu": "500m"}}},
        ],
        "initContainers": [
            {"resources": {"requests": {"cpu": "4"}}},  # runs alone, before the others
            {"restartPolicy": "Always", "resources": {"requests": {"memory": "1Gi"}}},  # sidecar
        ],
        "overhead": {"memory": "512Mi"},
    }
    found = effective_requests(spec)
    assert found["cpu"] == 4
    assert found["memory"] == (2 * 1024 + 512) * 2**20


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        (pod({"memory": "1Gi"}), "spec.containers[*].resources.requests.cpu"),
        (pod({"cpu": "0", "memory": "1Gi"}), "spec.containers[*].resources.requests.cpu"),
        (pod({"cpu": "1"}), "spec.containers[*].resources.requests.memory"),
        (pod(qos="Guaranteed"), "spec.containers[*].resources"),
        (pod(grace=None), "spec.terminationGracePeriodSeconds"),  # the API server's 30 s
        (pod(grace=25), "spec.terminationGracePeriodSeconds"),
        (pod(annotations={ANN_EXCLUSIVE: "yes"}), f"metadata.annotations[{ANN_EXCLUSIVE}]"),
        (pod(annotations={ANN_PARTITION: "a b"}), f"metadata.annotations[{ANN_PARTITION}]"),
        (pod(annotations={ANN_ACCOUNT: "a\nb"}), f"metadata.annotations[{ANN_ACCOUNT}]"),
        (pod(annotations={ANN_QOS: "x" * 65}), f"metadata.annotations[{ANN_QOS}]"),
        (pod(annotations={ANN_TIME_LIMIT: "1h"}), f"metadata.annotations[{ANN_TIME_LIMIT}]"),
        (pod(annotations={ANN_TIME_LIMIT: "0"}), f"metadata.annotations[{ANN_TIME_LIMIT}]"),
    ],
)
def test_rejections_name_the_field(obj, field):
    assert rejected(obj).field == field


def test_grace_limit_follows_kill_wait_and_offset():
    assert placeholder_for(pod(grace=24), SETTINGS)
    assert rejected(pod(grace=24), Settings(kill_wait=29, termination_offset=5)).message.startswith(
        "24 s must be below killWait 29 s"
    )
    assert placeholder_for(pod(grace=50), Settings(kill_wait=60, termination_offset=5))


@pytest.mark.parametrize(
    ("text", "minutes"),
    [("90", 90), ("1:30", 2), ("1:30:00", 90), ("2-00", 2880), ("1-01:01", 1501),
     ("0-00:00:30", 1), ("INFINITE", None), ("unlimited", None)],
)  # fmt: skip
def test_time_limits_in_slurm_formats(text, minutes):
    got = placeholder_for(pod(annotations={ANN_TIME_LIMIT: text}), SETTINGS)
    assert got.time_limit == minutes
    assert ("time_limit" in got.job()) is (minutes is not None)


def test_gpus_become_gres_through_gpu_types():
    gpu = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "4"}
    typed = placeholder_for(pod(gpu, nodeSelector={"gpu.nvidia.com/class": "H100_80GB"}), SETTINGS)
    assert typed.job()["tres_per_node"] == "gres/gpu:h100:4"
    untyped = placeholder_for(pod(gpu), SETTINGS)
    assert untyped.job()["tres_per_node"] == "gres/gpu:4"
    unknown = rejected(pod(gpu, nodeSelector={"nvidia.com/gpu.product": "A100"}))
    assert unknown.field == "spec.nodeSelector[nvidia.com/gpu.product]"
    assert "H100_80GB" in unknown.message
    assert "tres_per_node" not in placeholder_for(pod(), SETTINGS).job()


def test_exclusive_modes_and_defaults():
    gpu = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}
    assert placeholder_for(pod(), SETTINGS).job().get("shared") is None  # ok: share
    assert placeholder_for(pod(gpu), SETTINGS).job()["shared"] == ["none"]  # GPUs: whole node
    user = placeholder_for(pod(gpu, annotations={ANN_EXCLUSIVE: "user"}), SETTINGS)
    assert user.job()["shared"] == ["user"]
    none = placeholder_for(pod(annotations={ANN_EXCLUSIVE: "none"}), SETTINGS)
    assert none.job()["shared"] == ["none"]
    assert "not allowed" in rejected(pod(gpu, annotations={ANN_EXCLUSIVE: "ok"})).message


def test_the_job_names_its_pod_and_carries_the_strict_lock():
    placeholder = placeholder_for(
        pod(annotations={ANN_PARTITION: "gpu", ANN_ACCOUNT: "ml", ANN_QOS: "high"}), SETTINGS
    )
    job = placeholder.job()
    assert job["comment"] == "sunk.coreweave.com/pod=ns/p/u-1"
    assert pod_of_comment(job["comment"]) == PodRef("ns", "p", "u-1")
    assert job["extra"] == "sunk.coreweave.com/lock=strict"
    assert (job["partition"], job["account"], job["qos"]) == ("gpu", "ml", "high")
    assert job["requeue"] is False
    script = placeholder.script()
    assert script.startswith("#!/bin/sh\n") and "trap '' TERM" in script
    assert f'extra="{STARTED}"' in script


@pytest.mark.parametrize(
    "comment", [None, "", "user text", "sunk.coreweave.com/pod=ns/p", "sunk.coreweave.com/pod=//"]
)
def test_other_comments_are_not_placeholders(comment):
    assert pod_of_comment(comment) is None
