"""Pod Scheduler and Syncer rules: the Pods the scheduler would take, and the services
(slurmrestd, JWT, Syncer) each needs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from sunk.models.values import Scheduler, duration_seconds
from sunk.scheduler.podjob import Rejected, Settings, placeholder_for
from sunk.validate.rules.context import RuleContext, as_list, as_map, get
from sunk.validate.rules.registry import Hit, rule


@rule(
    "SUNK018",
    "scheduler-pods",
    "error",
    "Pods for the Pod Scheduler must be ones Slurm can take: CPU and memory requests, and a "
    "terminationGracePeriodSeconds below killWait − terminationOffset.",
    "fix the Pod, or raise scheduler.killWait / lower scheduler.config.scheduler.terminationOffset",
)
def scheduler_pods(ctx: RuleContext) -> Iterator[Hit]:
    """The Pod Scheduler places a Pod only as a Slurm job it can size and stop in time
    (`sunk.scheduler.podjob`): the Pod needs CPU and memory requests, and its
    terminationGracePeriodSeconds must be below `scheduler.killWait` minus
    `scheduler.config.scheduler.terminationOffset`; an offset that leaves no time at all rejects
    every Pod. Validate sees only the Pods and Pod templates in `extraObjects` whose
    `schedulerName` is the scheduler's (any but `default-scheduler` when `scheduler.name` is
    unset), and reports the field the scheduler would name.

    Fails:
        scheduler:
          enabled: true
          name: slurm
          killWait: 20
        extraObjects:
          - apiVersion: v1
            kind: Pod
            metadata: {name: web}
            spec:
              schedulerName: slurm
              terminationGracePeriodSeconds: 15
              containers:
                - name: web
                  image: nginx:1.27
                  resources: {requests: {cpu: 100m, memory: 64Mi}}

    Passes:
        scheduler:
          enabled: true
          name: slurm
          killWait: 20
        extraObjects:
          - apiVersion: v1
            kind: Pod
            metadata: {name: web}
            spec:
              schedulerName: slurm
              terminationGracePeriodSeconds: 10
              containers:
                - name: web
                  image: nginx:1.27
                  resources: {requests: {cpu: 100m, memory: 64Mi}}
    """
    try:
        sched = Scheduler.model_validate(ctx.values.get("scheduler") or {})
    except ValidationError:
        return  # the schema step reports it
    if not sched.enabled:
        return
    offset = duration_seconds(sched.config.scheduler.terminationOffset)
    if sched.killWait - offset <= 0:
        yield Hit(
            ("scheduler", "config", "scheduler", "terminationOffset"),
            f"terminationOffset {offset:g} s leaves no grace period under killWait "
            f"{sched.killWait} s: every Pod would be rejected",
        )
        return
    settings = Settings(sched.killWait, offset, dict(sched.config.scheduler.gpuTypes))
    for path, pod in _scheduled_pods(ctx, sched.name):
        try:
            placeholder_for(pod, settings)
        except Rejected as exc:
            yield Hit(_at(path, exc.field), f"the Pod Scheduler would reject this Pod: {exc}")


def _at(spec_path: tuple[Any, ...], field_path: str) -> tuple[Any, ...]:
    """The values path of a Pod field the scheduler named, where it is a plain key of the
    spec or an annotation (else the spec itself)."""
    key = field_path.removeprefix("spec.")
    if key != field_path and re.fullmatch(r"[A-Za-z]+", key):
        return (*spec_path, key)
    found = re.fullmatch(r"metadata\.annotations\[(.+)\]", field_path)
    if found and spec_path[-1] == "spec":  # a Pod: its metadata is beside its spec
        return (*spec_path[:-1], "metadata", "annotations", found.group(1))
    return spec_path


def _scheduled_pods(
    ctx: RuleContext, name: str | None
) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """(path, Pod) for each Pod or Pod template in extraObjects with ``schedulerName: name``
    (with no name set, any schedulerName but the default one)."""
    for index, obj in enumerate(as_list(ctx.values.get("extraObjects"))):
        if not isinstance(obj, dict):
            continue
        spec, path = as_map(obj.get("spec")), ("extraObjects", index, "spec")
        meta = as_map(obj.get("metadata"))
        if obj.get("kind") != "Pod":  # a workload: its Pod template (a CronJob's, nested)
            if "jobTemplate" in spec:
                spec, path = as_map(as_map(spec["jobTemplate"]).get("spec")), (
                    *path, "jobTemplate", "spec",
                )  # fmt: skip
            template = as_map(spec.get("template"))
            spec, meta = as_map(template.get("spec")), as_map(template.get("metadata"))
            path = (*path, "template", "spec")
        wanted = spec.get("schedulerName")
        if not wanted or (wanted != name if name else wanted == "default-scheduler"):
            continue
        pod = {"metadata": {"name": "x", "namespace": "x", "uid": "x", **meta}, "spec": spec}
        yield path, pod


@rule(
    "SUNK033",
    "scheduler-needs-syncer",
    "error",
    "The Pod Scheduler runs beside the Syncer: its placeholder jobs take strict node locks "
    "through the Syncer's hook, and it talks to slurmrestd with a JWT.",
    "set syncer.enabled, rest.enabled and jwt.enabled, or scheduler.enabled: false",
)
def scheduler_needs_syncer(ctx: RuleContext) -> Iterator[Hit]:
    """The Pod Scheduler's placeholder jobs take strict node locks through the Syncer's hook, and
    the scheduler talks to slurmrestd with a JWT, so `scheduler.enabled: true` needs the Syncer,
    slurmrestd and JWT authentication on; each one turned off is a finding at its `enabled` key.

    Fails:
        scheduler: {enabled: true}
        syncer: {enabled: false}

    Passes:
        scheduler: {enabled: true}
        syncer: {enabled: true}
    """
    if as_map(ctx.values.get("scheduler")).get("enabled") is not True:
        return
    for key in ("syncer", "rest", "jwt"):
        if as_map(ctx.values.get(key)).get("enabled") is False:
            yield Hit((key, "enabled"), f"scheduler.enabled needs {key}.enabled")


@rule(
    "SUNK026",
    "syncer-without-rest-or-jwt",
    "warning",
    "syncer.enabled is set but rest.enabled or jwt.enabled is off: the Syncer talks to "
    "slurmrestd with a JWT, so it does not run, and slurmd Pods are removed at once, under "
    "running jobs.",
    "set rest.enabled and jwt.enabled (or syncer.enabled: false to say so)",
)
def syncer_without_rest(ctx: RuleContext) -> Iterator[Hit]:
    """The Syncer keeps Slurm's node state in step with the slurmd Pods and removes Pods safely,
    talking to slurmrestd with a JWT; with `rest.enabled` or `jwt.enabled` off (and the Syncer
    not turned off itself) it does not run, so scale-downs and updates delete slurmd Pods at
    once, under running jobs. Turning the Syncer off (`syncer.enabled: false`) says that is
    intended.

    Fails:
        rest: {enabled: false}

    Passes:
        rest: {enabled: false}
        syncer: {enabled: false}
    """
    if get(ctx.values, "syncer", "enabled") is False:
        return
    off = [k for k in ("rest", "jwt") if get(ctx.values, k, "enabled") is False]
    if off:
        yield Hit(
            (off[0], "enabled"),
            "the Syncer (syncer.enabled) needs "
            + " and ".join(f"{k}.enabled" for k in off)
            + ": it will not run, and scale-downs and updates delete slurmd Pods at once",
        )
