"""Volumes shared by the login and slurmd Pods: `global.volumes` / `global.volumeMounts`.

One merge, used by the login builder (sunk.operator.cluster.login), the slurmd builder and
its template hash (sunk.operator.nodeset.pod) and `sunkctl validate` (SUNK028). Layers, the
weakest first:

- login Pod, `sshd` container:     global ← login
- slurmd Pod, `slurmd` container:  the operator's defaults ← global ← compute.mounts ← the
  NodeSet's own template (the chart renders the resolved group there: nodeDefaults ←
  definitions ← compute.nodes.<name>, where a `volumes` list, like every list, replaces the
  one below it). The defaults (/dev/shm, the container plugin's directories:
  sunk.operator.nodeset.pod) give way to any entry at their mountPath or with their name; a
  default volume no mount uses any more is dropped (`drop_unmounted`).

Volumes are matched by ``name`` and mounts by ``mountPath``: an entry of a stronger layer
replaces the weaker layer's entry with the same key, and the result keeps the weaker layers'
remaining entries first, in their order, then the stronger layer's. (An old-style NodeSet that
already carries the global entries therefore merges to itself.)

What cannot be merged is a `Problem` at a key path: an entry without a name or mountPath, a
name or mountPath repeated inside one list, a name or mountPath the operator uses itself in
that Pod, and a mount naming a volume the Pod does not have.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sunk.operator import directory, s6
from sunk.slurmconf import health

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class Owned:
    """What the operator itself puts into a Pod kind: user volumes and mounts may not take
    these names and paths."""

    pod: str  # "login" or "slurmd"
    volumes: frozenset[str]
    paths: frozenset[str]


# The sssd sidecar's names and paths (directory.VOLUMES, CLIENT_PATHS) are in every Pod kind
# when `directoryService` is on, the s6 services' (s6.VOLUME, MOUNT) when there are services.
LOGIN = Owned(
    "login",
    frozenset({"slurm-config", "host-keys", "ssh-keys", "munge-socket", "munge-key"})
    | directory.VOLUMES
    | {s6.VOLUME},
    frozenset({"/etc/slurm", "/etc/ssh/host-keys-secret", "/etc/ssh/user-keys", "/run/munge"})
    | directory.CLIENT_PATHS
    | {s6.MOUNT},
)
SLURMD = Owned(
    "slurmd",
    frozenset(
        {
            "munge-socket",
            "munge-key",
            "dispatchers",
            "prolog-d",
            "epilog-d",
            "sunk-hook",
            health.VOLUME,
        }
    )
    | directory.VOLUMES
    | {s6.VOLUME},
    frozenset(
        {
            "/run/munge",
            "/etc/slurm/prolog.d",
            "/etc/slurm/epilog.d",
            "/etc/slurm/prolog.sh",
            "/etc/slurm/epilog.sh",
            "/etc/slurm/sunk-lock.sh",
            "/var/run/sunk/hook",
            health.MOUNT_DIR,
        }
    )
    | directory.CLIENT_PATHS
    | {s6.MOUNT},
)


@dataclass(frozen=True)
class Layer:
    """One source of volumes and mounts, with the key paths of its two lists."""

    volumes: Sequence[Any]
    mounts: Sequence[Any]
    volumes_at: Path
    mounts_at: Path
    # compute.mounts spells the mount path `name`: report problems at the key the user wrote
    path_key: str = "mountPath"
    owner: str = ""  # the object holding the lists, for the operator's messages


@dataclass(frozen=True)
class Problem:
    path: Path
    message: str  # without the Pod
    pod: str = ""  # the Pod that has the problem; empty when it is in the list itself
    owner: str = ""

    def __str__(self) -> str:
        owner = f"{self.owner} " if self.owner else ""
        where = f" in {self.pod}" if self.pod else ""
        return f"{owner}{dotted(self.path)}: {self.message}{where}"


@dataclass
class Merged:
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


class VolumeConfigError(ValueError):
    """Volumes or mounts the operator cannot put into a Pod (see `Problem`)."""

    def __init__(self, problems: Sequence[Problem], prefix: str = ""):
        self.problems = list(problems)
        lead = f"{prefix}: " if prefix else ""
        super().__init__(lead + "; ".join(str(p) for p in self.problems))


def dotted(path: Iterable[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _norm(path: str) -> str:
    return path.rstrip("/") or "/"


def _entries(
    layers: Sequence[Layer], what: str, problems: list[Problem], owned: Owned, pod: str
) -> list[tuple[int, int, str, dict[str, Any]]]:
    """(layer, index, key, entry) of every well-formed entry; problems for the others."""
    out = []
    for li, layer in enumerate(layers):
        items = layer.volumes if what == "volume" else layer.mounts
        at = layer.volumes_at if what == "volume" else layer.mounts_at
        key_field = "name" if what == "volume" else "mountPath"
        shown = "name" if what == "volume" else layer.path_key
        reserved = owned.volumes if what == "volume" else owned.paths
        label = "volume name" if what == "volume" else "mount path"
        seen: dict[str, int] = {}
        for index, entry in enumerate(items or []):
            raw = entry.get(key_field) if isinstance(entry, dict) else None
            if not isinstance(raw, str) or not raw:
                problems.append(Problem((*at, index), f"a {what} needs a {shown}", "", layer.owner))
                continue
            key = raw if what == "volume" else _norm(raw)
            if key in seen:
                problems.append(
                    Problem(
                        (*at, index, shown),
                        f"{label} `{raw}` repeats {dotted((*at, seen[key]))} "
                        "(one list may not repeat it)",
                        "",
                        layer.owner,
                    )
                )
                continue
            seen[key] = index
            if key in reserved:
                problems.append(
                    Problem(
                        (*at, index, shown),
                        f"{label} `{raw}` is the operator's own",
                        pod,
                        layer.owner,
                    )
                )
                continue
            out.append((li, index, key, entry))
    return out


def _winners(
    entries: list[tuple[int, int, str, dict[str, Any]]],
) -> list[tuple[int, int, str, dict[str, Any]]]:
    """The strongest layer's entry per key, in weakest-layer-first order."""
    strongest: dict[str, int] = {}
    for li, _, key, _ in entries:
        strongest[key] = max(li, strongest.get(key, -1))
    return [e for e in entries if strongest[e[2]] == e[0]]


def merge(layers: Sequence[Layer], owned: Owned, pod: str = "") -> Merged:
    """Merge ``layers`` (weakest first) for one Pod; ``pod`` names it in problems."""
    result = Merged()
    volumes = _winners(_entries(layers, "volume", result.problems, owned, pod))
    mounts = _winners(_entries(layers, "mount", result.problems, owned, pod))
    known = {key for _, _, key, _ in volumes} | owned.volumes
    for li, index, _, entry in mounts:
        name = entry.get("name")
        layer = layers[li]
        if not isinstance(name, str) or not name:
            result.problems.append(
                Problem((*layer.mounts_at, index), "a mount needs a name", "", layer.owner)
            )
        elif name not in known:
            result.problems.append(
                Problem(
                    (*layer.mounts_at, index, "name"),
                    f"mounts volume `{name}`, which is not declared",
                    pod,
                    layer.owner,
                )
            )
    result.volumes = [dict(e) for _, _, _, e in volumes]
    result.mounts = [dict(e) for _, _, _, e in mounts]
    return result


# --------------------------------------------------------------------------- the layers


def defaults_layer(volumes: Sequence[Any], mounts: Sequence[Any], owner: str = "") -> Layer:
    """The operator's own defaults, under every user layer (the slurmd Pod's /dev/shm and the
    container plugin's volumes); problems with them are the cluster's compute settings'."""
    at = ("spec", "compute")
    return Layer(volumes, mounts, at, at, owner=owner)


def drop_unmounted(merged: Merged, defaults: Sequence[dict[str, Any]]) -> None:
    """Drop the default volumes that no mount names any more (a user's mount took the path)."""
    used = {m.get("name") for m in merged.mounts}
    merged.volumes = [v for v in merged.volumes if v not in defaults or v.get("name") in used]


def global_layer(
    volumes: Sequence[Any], mounts: Sequence[Any], prefix: Path = (), owner: str = ""
) -> Layer:
    """`global.volumes` / `global.volumeMounts`."""
    return Layer(
        volumes or [],
        mounts or [],
        (*prefix, "global", "volumes"),
        (*prefix, "global", "volumeMounts"),
        owner=owner,
    )


def compute_mounts_layer(mounts: Sequence[Any], prefix: Path = (), owner: str = "") -> Layer:
    """`compute.mounts` (`{name: <mountPath>, pvc: <claim>}`) as PVC volumes `mount-<i>`."""
    volumes, pod_mounts = [], []
    for index, mount in enumerate(mounts or []):
        m = mount if isinstance(mount, dict) else {}
        volumes.append(
            {"name": f"mount-{index}", "persistentVolumeClaim": {"claimName": m.get("pvc")}}
        )
        pod_mounts.append({"name": f"mount-{index}", "mountPath": m.get("name")})
    at = (*prefix, "compute", "mounts")
    return Layer(volumes, pod_mounts, at, at, path_key="name", owner=owner)


def merge_login(spec: Any, cluster: str) -> Merged:
    """The login Pod's user volumes and `sshd` mounts from SlurmCluster ``cluster``'s spec."""
    owner = f"SlurmCluster {cluster}"
    layers = [
        global_layer(spec.global_.volumes, spec.global_.volumeMounts, ("spec",), owner),
        Layer(
            spec.login.volumes or [],
            spec.login.volumeMounts or [],
            ("spec", "login", "volumes"),
            ("spec", "login", "volumeMounts"),
            owner=owner,
        ),
    ]
    return merge(layers, LOGIN, "the login Pod")
