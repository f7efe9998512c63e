"""How large the rendered files may grow. Each reaches Slurm through a ConfigMap (slurmdbd.conf
through a Secret), and the API server refuses either once its data passes 1 MiB: the operator
could then write no configuration at all. A file that alone passes the limit is refused here;
one past half of it, or topology.conf as it would grow to the NodeSets' replicas, is a warning
(`sunkctl validate` shows it before a cluster grows into the limit)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sunk.slurmconf.lua import CONTROLLER_FILES
from sunk.slurmconf.sssd import FILE as SSSD_FILE
from sunk.slurmconf.topology import FILE as TOPOLOGY_FILE

LIMIT = 1024 * 1024  # bytes of data the API server takes in one ConfigMap or Secret
WARN_AT = LIMIT // 2
# What one Slurm node adds to a topology layout at worst (no hostlist range shortens it): its
# name `<prefix>-OOO-OOO` and a comma.
PER_NODE = len("-000-000,")
PROJECTED = "topology.conf projected: "  # the start of the projection's warning


# The object each rendered file travels in (the operator writes one per group; the API
# server's bound is per object): slurmdbd.conf in a Secret, the Lua scripts in the
# controller's own ConfigMap, topology.conf and sssd.conf apart, the rest together.
APART = {"slurmdbd.conf": "accounting", TOPOLOGY_FILE: "topology", SSSD_FILE: "directory"}
APART |= dict.fromkeys(CONTROLLER_FILES, "lua")
SHARED = "config"


def grouped(files: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """The files by the object that holds them (``SHARED``: the cluster's main ConfigMap)."""
    out: dict[str, dict[str, str]] = {}
    for name, text in files.items():
        out.setdefault(APART.get(name, SHARED), {})[name] = text
    return out


class ConfigSizeError(ValueError):
    """A rendered file no ConfigMap can hold."""


def kib(size: int) -> str:
    return f"{size / 1024:.0f} KiB"


def projected_topology(groups: Iterable[tuple[str, int | None]]) -> tuple[int, int]:
    """(nodes, bytes) of one topology layout for node groups as (Pod name prefix, replicas),
    each name listed on its own: an upper bound, which hostlist ranges shorten where IPs run
    in sequence. Groups without replicas (every feasible Node) count nothing: their size is
    not known."""
    nodes = size = 0
    for prefix, replicas in groups:
        nodes += replicas or 0
        size += (replicas or 0) * (len(prefix) + PER_NODE)
    return nodes, size


def topology_warning(nodes: int, size: int) -> str | None:
    """What `check` and `sunkctl validate` (SUNK049) say of a projected topology.conf."""
    if size <= WARN_AT:
        return None
    where = "more than" if size > LIMIT else "past half of"
    return (
        f"at {nodes} replicas topology.conf may reach {kib(size)}, {where} the {kib(LIMIT)} "
        "a ConfigMap holds (Nodes whose IPs do not run in sequence share no hostlist range)"
    )


def check(
    files: Mapping[str, str], groups: Iterable[tuple[str, int | None]], topology: str | None
) -> list[str]:
    """Warnings for files past half the limit (``topology``: topology.conf's name, when a
    layout is generated, for its projection at the ``groups``' replicas, see
    `projected_topology`); raises ConfigSizeError for a file past the limit."""
    warnings = []
    sizes = {name: len(text.encode()) for name, text in files.items()}
    warned = set()  # files a warning names already
    for name, size in sorted(sizes.items()):
        if size > LIMIT:
            raise ConfigSizeError(
                f"{name}: {kib(size)} rendered, more than the {kib(LIMIT)} the API server takes "
                "in one ConfigMap; the operator could write no configuration"
            )
        if size > WARN_AT:
            warned.add(name)
            warnings.append(
                f"{name}: {kib(size)} rendered, past half the {kib(LIMIT)} a ConfigMap holds"
            )
    for group, members in sorted(grouped(files).items()):
        if len(members) < 2:
            continue  # its one file was measured above
        size = sum(sizes[name] for name in members)
        together = f"{', '.join(sorted(members))}: {kib(size)} together in the cluster's {group}"
        if size > LIMIT:
            raise ConfigSizeError(
                f"{together} ConfigMap, more than the {kib(LIMIT)} the API server takes in one; "
                "the operator could write no configuration"
            )
        if size > WARN_AT and not warned & members.keys():
            warnings.append(f"{together} ConfigMap, past half the {kib(LIMIT)} it holds")
    if topology is not None:
        nodes, size = projected_topology(groups)
        projected = topology_warning(nodes, max(size, sizes.get(topology, 0)))
        if projected:
            warnings.append(f"{PROJECTED}{projected}")
    return warnings
