"""Slurm's upgrade order across the control plane, as data: which component must run a release
before which, and the container whose image names the release each one runs. Pure, so the
operator's staging (:mod:`sunk.operator.cluster.upgrade`) and `sunkctl upgrade-check` read the
same order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sunk.slurmconf.releases import MAJOR_RELEASES, release_of_image

# component (its workloads' label) → the component that must run a release before it does
GATES = {"controller": "accounting", "rest": "controller", "login": "controller"}
# the components in the order they upgrade; the NodeSets' slurmds come after the controller
ORDER = ("accounting", "controller", "rest", "login")
TITLES = {"accounting": "Accounting", "controller": "Controller", "rest": "Rest", "login": "Login"}
# The container whose image names the release a component runs (the munge sidecar and the
# helpers use the controller's image in every Pod, whatever the daemon's).
DAEMONS = {"accounting": "slurmdbd", "controller": "slurmctld", "rest": "slurmrestd",
           "login": "sshd"}  # fmt: skip
WORKLOAD_KINDS = ("StatefulSet", "Deployment")


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """A workload's Pod template containers, init containers first."""
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]


def known(releases: Iterable[str | None]) -> list[str]:
    """The Slurm releases among ``releases`` we know, oldest first."""
    return sorted((r for r in releases if r in MAJOR_RELEASES), key=MAJOR_RELEASES.index)


def daemon_release(obj: dict[str, Any], component: str) -> str | None:
    """The release the component's daemon container runs in this workload."""
    images = [c.get("image") for c in containers(obj) if c.get("name") == DAEMONS[component]]
    found = known(release_of_image(image) for image in images)
    return found[-1] if found else None
