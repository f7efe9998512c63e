"""Slurm's upgrade order across the control plane, when one spec change moves several daemons
to a newer release at once: slurmdbd first (its first start converts the database); slurmctld
once slurmdbd runs the new release, rolled out and ready; then slurmrestd and the login Pods
once slurmctld does. The slurmds follow in their NodeSets' own reconcile, which waits on the
release slurmctld runs (``status.slurmctldRelease``, written from :attr:`Staging.running`).

A component that must wait keeps the images it runs (its other changes still apply) and says
why in its condition. Releases are read from the image tags (``0.1.0-slurm24.11``); an image
whose tag names no release is never held. Only upgrades are ordered: a component going back
to an older release, or created for the first time, is applied as it is."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from sunk.operator import names
from sunk.operator.client import Kube, path_for
from sunk.operator.cluster.release_order import (
    GATES,
    TITLES,
    WORKLOAD_KINDS,
    containers,
    daemon_release,
    known,
)
from sunk.slurmconf.releases import newer, release_of_image


@dataclass(frozen=True)
class Staging:
    objects: list[dict[str, Any]]  # what to apply, held images put back
    held: dict[str, str] = field(default_factory=dict)  # component → why it waits
    notes: dict[str, str] = field(default_factory=dict)  # component → what its rollout does
    # component → the oldest release its workloads run, rolled out and ready (None: rolling,
    # not ready, or no release named)
    running: dict[str, str | None] = field(default_factory=dict)


def settled(live: dict[str, Any]) -> bool:
    """Rolled out and ready: the controller has seen the current template, every replica runs
    it and is ready, and no old one is left (a Deployment's old ReplicaSet, terminating)."""
    meta, spec, status = live["metadata"], live.get("spec") or {}, live.get("status") or {}
    want = spec.get("replicas", 1)
    if status.get("observedGeneration", meta.get("generation", 0)) < meta.get("generation", 0):
        return False
    if status.get("updatedReplicas", want) < want or status.get("readyReplicas", 0) < want:
        return False
    if status.get("replicas", want) > want:
        return False
    current, update = status.get("currentRevision"), status.get("updateRevision")
    return not (current and update and current != update)


def _hold(obj: dict[str, Any], live: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with each container's image put back to the live one where their releases
    differ (by container name)."""
    held = copy.deepcopy(obj)
    running = {c.get("name"): c.get("image") for c in containers(live)}
    for container in containers(held):
        image = running.get(container.get("name"))
        if image and release_of_image(image) != release_of_image(container.get("image")):
            container["image"] = image
    return held


def _path(obj: dict[str, Any]) -> str:
    plural = "statefulsets" if obj["kind"] == "StatefulSet" else "deployments"
    return path_for("apps/v1", plural, obj["metadata"]["namespace"], obj["metadata"]["name"])


async def stage(kube: Kube, objects: list[dict[str, Any]]) -> Staging:
    """The objects to apply this pass, with the images of components that must wait on
    another put back to what they run."""
    workloads: dict[str, list[int]] = {}
    for index, obj in enumerate(objects):
        component = obj["metadata"].get("labels", {}).get(names.LABEL_COMPONENT)
        if obj["kind"] in WORKLOAD_KINDS and component in TITLES:
            workloads.setdefault(component, []).append(index)
    live = {i: await kube.get(_path(objects[i])) for ids in workloads.values() for i in ids}
    out = list(objects)

    def runs(component: str) -> tuple[str | None, str | None]:
        """(oldest release it runs now, the same once rolled out and ready)."""
        lives = [live[i] for i in workloads.get(component, [])]
        if not lives or any(item is None for item in lives):
            return None, None
        found = known(daemon_release(item, component) for item in lives if item is not None)
        now = found[0] if found else None
        return now, now if all(settled(item) for item in lives if item is not None) else None

    staging = Staging(out)
    for component in TITLES:  # accounting, controller, rest, login: the order
        now, ready = runs(component)
        ids = workloads.get(component, [])
        want = known(daemon_release(objects[i], component) for i in ids)
        target = want[-1] if want else None
        gate = GATES.get(component)
        upgrading = target is not None and now is not None and newer(target, now)
        gated = staging.running.get(gate) if gate in workloads else None
        if upgrading and gate in workloads and (gated is None or newer(target, gated)):
            for i in ids:
                if live[i] is not None:
                    out[i] = _hold(objects[i], live[i])
            staging.held[component] = (
                f"Slurm {target} waits for {TITLES[gate]} to run it, rolled out and ready "
                f"(Slurm's order: slurmdbd, slurmctld, then slurmrestd, login and the "
                f"slurmds); it runs {now} until then"
            )
            staging.running[component] = ready
            continue
        ctld_now = runs("controller")[0] if component == "accounting" else None
        if target and ctld_now and newer(target, ctld_now):
            staging.notes[component] = (
                f"slurmdbd {target} replaces an older release: its first start converts the "
                f"database, which can take a while; slurmctld runs {ctld_now} until it is ready"
            )
        staging.running[component] = ready if not upgrading else None
    return staging
