"""One Pod as the Pod Scheduler sees it: the checks it must pass before Slurm hears of it, and
the placeholder job that holds its place in Slurm (pure: no API calls).

A rejection names the field at fault (``spec.terminationGracePeriodSeconds``,
``metadata.annotations[sunk.coreweave.com/exclusive]``, ...): it becomes a Pod Event and the
Pod's PodScheduled condition, and the Pod is not retried until that field changes."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sunk.models.quantity import QuantityError, parse_quantity

PREFIX = "sunk.coreweave.com/"
# Read from the Pod: SUNK's documented annotation, then ours for what SUNK leaves unnamed.
ANN_EXCLUSIVE = PREFIX + "exclusive"
ANN_PARTITION = PREFIX + "partition"
ANN_ACCOUNT = PREFIX + "account"
ANN_QOS = PREFIX + "qos"
ANN_TIME_LIMIT = PREFIX + "time-limit"
# Written on the Pod by the scheduler: its placeholder job, then the Slurm node it runs on.
ANN_JOB = PREFIX + "slurm-job"
ANN_NODE = PREFIX + "slurm-node"

# The job's comment names its Pod; a restarted scheduler rebuilds the mapping from it.
COMMENT_PREFIX = PREFIX + "pod="
# The prolog's lock script takes a strict lock for a job whose Extra carries this, and the
# placeholder script appends ": started" once it runs (past the prolog).
EXTRA = PREFIX + "lock=strict"
STARTED = f"{EXTRA}: started"
GPU = "nvidia.com/gpu"
GPU_PRODUCT_LABELS = ("gpu.nvidia.com/class", "nvidia.com/gpu.product")
EXCLUSIVE_MODES = ("none", "user", "ok")
SLURM_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
DEFAULT_GRACE = 30  # what the API server sets when a Pod names none

# Slurm time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (and INFINITE/UNLIMITED).
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
MAX_MINUTES = 2**32 - 2  # Slurm's NO_VAL - 1: larger is not a time limit


class Rejected(ValueError):
    """The Pod cannot become a Slurm job; ``field`` is the part of the Pod to fix."""

    def __init__(self, field_path: str, message: str) -> None:
        super().__init__(f"{field_path}: {message}")
        self.field = field_path
        self.message = message


@dataclass(frozen=True)
class Settings:
    """What of ``scheduler.*`` a Pod's check and job depend on."""

    kill_wait: int = 30
    termination_offset: float = 5.0
    gpu_types: Mapping[str, str] = field(default_factory=dict)

    @property
    def grace_limit(self) -> float:
        """A Pod's grace period must stay below this, so it is gone before Slurm kills."""
        return self.kill_wait - self.termination_offset


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> PodRef:
        meta = pod["metadata"]
        return cls(meta["namespace"], meta["name"], meta["uid"])

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def comment(self) -> str:
        return f"{COMMENT_PREFIX}{self.namespace}/{self.name}/{self.uid}"


def pod_of_comment(comment: str | None) -> PodRef | None:
    """The Pod a placeholder job was submitted for (None: not a placeholder)."""
    if not comment or not comment.startswith(COMMENT_PREFIX):
        return None
    parts = comment[len(COMMENT_PREFIX) :].split("/")
    return PodRef(*parts) if len(parts) == 3 and all(parts) else None


@dataclass(frozen=True)
class Placeholder:
    """The job that stands for a Pod in Slurm: its resources, where and how long."""

    pod: PodRef
    cpus: int
    memory_mib: int
    gpus: int = 0
    gres_type: str | None = None
    exclusive: str = "ok"
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit: int | None = None  # minutes

    @property
    def gres(self) -> str | None:
        if not self.gpus:
            return None
        return (
            f"gres/gpu:{self.gres_type}:{self.gpus}" if self.gres_type else f"gres/gpu:{self.gpus}"
        )

    def job(self) -> dict[str, Any]:
        """The ``job`` of slurmrestd's ``POST /job/submit`` (the same fields in data_parser
        v0.0.41 to v0.0.45)."""
        job: dict[str, Any] = {
            "name": f"pod-{self.pod.namespace}-{self.pod.name}"[:200],
            "comment": self.pod.comment(),
            "extra": EXTRA,
            "nodes": "1",
            "tasks": 1,
            "cpus_per_task": self.cpus,
            "memory_per_node": {"set": True, "number": self.memory_mib},
            # Never requeued: a Pod bound to a node does not move with its job.
            "requeue": False,
            "current_working_directory": "/tmp",
            "environment": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
            "standard_output": "/dev/null",
            "standard_error": "/dev/null",
        }
        if self.gres:
            job["tres_per_node"] = self.gres
        if self.exclusive == "none":
            job["shared"] = ["none"]  # the whole node (sbatch --exclusive)
        elif self.exclusive == "user":
            job["shared"] = ["user"]  # only with this user's jobs (--exclusive=user)
        for key in ("partition", "account", "qos"):
            if getattr(self, key):
                job[key] = getattr(self, key)
        if self.time_limit is not None:
            job["time_limit"] = {"set": True, "number": self.time_limit}
        return job

    def script(self) -> str:
        """Marks the job started (it is past its prolog, so the Node is locked), then holds
        the allocation. SIGTERM is ignored: a cancelled or preempted placeholder keeps its
        node until the scheduler has removed the Pod (it then kills the job) or KillWait
        ends, so Slurm never hands out resources the Pod still uses."""
        return (
            "#!/bin/sh\n"
            f"# SUNK Pod Scheduler placeholder for Pod {self.pod.key}\n"
            "trap '' TERM\n"
            f'scontrol update jobid="$SLURM_JOB_ID" extra="{STARTED}" || exit 1\n'
            "while :; do sleep 3600; done\n"
        )


def placeholder_for(pod: Mapping[str, Any], settings: Settings) -> Placeholder:
    """The Pod's placeholder job, or :class:`Rejected` naming what Slurm cannot take."""
    spec = pod.get("spec") or {}
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    requests = effective_requests(spec)
    cpus, memory = requests.get("cpu", Decimal(0)), requests.get("memory", Decimal(0))
    where = "spec.containers[*].resources.requests"
    if cpus <= 0:
        raise Rejected(f"{where}.cpu", "a CPU request is required (Slurm allocates CPUs)")
    if memory <= 0:
        raise Rejected(f"{where}.memory", "a memory request is required (Slurm allocates memory)")
    if (pod.get("status") or {}).get("qosClass") == "Guaranteed":
        raise Rejected(
            "spec.containers[*].resources",
            "Guaranteed QoS with CPU requests: the kubelet's static CPU manager would pin CPUs "
            "that Slurm also hands out (set CPU limits above requests, or none)",
        )
    grace = spec.get("terminationGracePeriodSeconds")
    grace = DEFAULT_GRACE if grace is None else grace
    if grace >= settings.grace_limit:
        raise Rejected(
            "spec.terminationGracePeriodSeconds",
            f"{grace} s must be below killWait {settings.kill_wait} s − terminationOffset "
            f"{settings.termination_offset:g} s = {settings.grace_limit:g} s, so the Pod is "
            "gone before Slurm reuses its resources",
        )
    gpus = int(requests.get(GPU, 0))
    exclusive = _exclusive(annotations, gpus)
    return Placeholder(
        pod=PodRef.of(pod),
        cpus=max(1, math.ceil(cpus)),
        memory_mib=max(1, math.ceil(memory / 2**20)),
        gpus=gpus,
        gres_type=_gres_type(spec, settings, gpus),
        exclusive=exclusive,
        partition=_name(annotations, ANN_PARTITION),
        account=_name(annotations, ANN_ACCOUNT),
        qos=_name(annotations, ANN_QOS),
        time_limit=_time_limit(annotations),
    )


def effective_requests(spec: Mapping[str, Any]) -> dict[str, Decimal]:
    """What the Pod asks for as the kube-scheduler counts it: the sum of its containers (and
    sidecar init containers), at least any one init container, plus the runtime overhead."""
    total: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for index, container in enumerate(spec.get("containers") or []):
        _add(total, container, f"spec.containers[{index}]")
    for index, container in enumerate(spec.get("initContainers") or []):
        where = f"spec.initContainers[{index}]"
        if container.get("restartPolicy") == "Always":
            _add(total, container, where)
        else:
            one: dict[str, Decimal] = {}
            _add(one, container, where)
            for key, amount in one.items():
                init_peak[key] = max(init_peak.get(key, Decimal(0)), amount)
    for key, amount in init_peak.items():
        total[key] = max(total.get(key, Decimal(0)), amount)
    for key, amount in (spec.get("overhead") or {}).items():
        total[key] = total.get(key, Decimal(0)) + _quantity(amount, f"spec.overhead.{key}")
    return total


def _add(total: dict[str, Decimal], container: Mapping[str, Any], where: str) -> None:
    requests = (container.get("resources") or {}).get("requests") or {}
    for key, amount in requests.items():
        path = f"{where}.resources.requests.{key}"
        total[key] = total.get(key, Decimal(0)) + _quantity(amount, path)


def _quantity(amount: Any, path: str) -> Decimal:
    try:
        return parse_quantity(amount)
    except QuantityError as exc:  # the API server has checked it; be safe all the same
        raise Rejected(path, str(exc)) from exc


def _exclusive(annotations: Mapping[str, str], gpus: int) -> str:
    """SUNK's modes: ``none`` the whole node, ``user`` shared with the same Slurm user's jobs,
    ``ok`` shared with any job. Default: ``none`` for a Pod with GPUs (the device plugin picks
    its GPUs without Slurm, so they must not be shared with other jobs), ``ok`` otherwise."""
    where = f"metadata.annotations[{ANN_EXCLUSIVE}]"
    mode = annotations.get(ANN_EXCLUSIVE)
    if mode is None:
        return "none" if gpus else "ok"
    if mode not in EXCLUSIVE_MODES:
        raise Rejected(where, f"{mode!r} is not one of {', '.join(EXCLUSIVE_MODES)}")
    if mode == "ok" and gpus:
        raise Rejected(where, "`ok` is not allowed for a Pod that requests GPUs")
    return mode


def _gres_type(spec: Mapping[str, Any], settings: Settings, gpus: int) -> str | None:
    if not gpus:
        return None
    selector = spec.get("nodeSelector") or {}
    for label in GPU_PRODUCT_LABELS:
        product = selector.get(label)
        if product is None:
            continue
        if product not in settings.gpu_types:
            known = ", ".join(sorted(settings.gpu_types)) or "none"
            raise Rejected(
                f"spec.nodeSelector[{label}]",
                f"GPU product {product!r} has no GRES type in "
                f"scheduler.config.scheduler.gpuTypes (known: {known})",
            )
        return settings.gpu_types[product]
    return None


def _name(annotations: Mapping[str, str], key: str) -> str | None:
    value = annotations.get(key)
    if value is None:
        return None
    if not SLURM_NAME.match(value):
        raise Rejected(
            f"metadata.annotations[{key}]",
            f"{value!r} is not a Slurm name (letters, digits, `_`, `.`, `-`; at most 64)",
        )
    return value


def _time_limit(annotations: Mapping[str, str]) -> int | None:
    """Minutes, from Slurm's formats (``90``, ``1:30:00``, ``2-00:00:00``); rounded up."""
    value = annotations.get(ANN_TIME_LIMIT)
    if value is None or value.upper() in ("INFINITE", "UNLIMITED"):
        return None
    where = f"metadata.annotations[{ANN_TIME_LIMIT}]"
    match = _TIME.match(value.strip())
    if not match:
        raise Rejected(where, f"{value!r} is not a Slurm time (M, H:M:S, D-H:M:S, INFINITE)")
    days, first, second, third = (int(g) if g else None for g in match.groups())
    if days is not None:  # D-H, D-H:M, D-H:M:S
        seconds = days * 86400 + first * 3600 + (second or 0) * 60 + (third or 0)
    elif third is not None:  # H:M:S
        seconds = first * 3600 + second * 60 + third
    else:  # M or M:S
        seconds = first * 60 + (second or 0)
    minutes = math.ceil(seconds / 60)
    if not 0 < minutes <= MAX_MINUTES:
        raise Rejected(where, f"{value!r} is not a time limit Slurm takes (1 min and up)")
    return minutes
