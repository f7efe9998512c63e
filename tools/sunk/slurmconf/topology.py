"""topology.conf from the labels of the Nodes hosting Slurm nodes.

Tree: the configured label levels (fabric → superpod → leafgroup) become switches; a Slurm
node hangs off the switch of its deepest level. Block: one block per NVLink domain. A
cluster may have both; each section is written only when some node carries its labels.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict

from sunk.slurmconf.format import BANNER, line
from sunk.slurmconf.hostlist import compress
from sunk.slurmconf.inputs import Placement

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
FILE = "topology.conf"
# The other layout is written as comments for the reader, up to this size: past it, it would
# double a file that grows with the cluster toward the 1 MiB a ConfigMap holds.
OTHER_LAYOUT_BUDGET = 64 * 1024


def _name(*parts: str) -> str:
    return "-".join(_UNSAFE.sub("_", p) for p in parts)


def tree_lines(placements: tuple[Placement, ...], levels: list[str]) -> list[str]:
    if not levels:
        return []
    children: dict[str, set[str]] = defaultdict(set)  # switch → child switches
    nodes: dict[str, list[str]] = defaultdict(list)  # leaf switch → Slurm nodes
    for placement in placements:
        path = [placement.labels.get(label) for label in levels]
        if not all(path):
            continue  # a node without the full label path has no place in the tree
        names = [_name(*path[: i + 1]) for i in range(len(path))]
        for parent, child in itertools.pairwise(names):
            children[parent].add(child)
        nodes[names[-1]].append(placement.slurm_node)
    out = [
        line({"SwitchName": leaf, "Nodes": compress(members)}, FILE, "Node labels", words=True)
        for leaf, members in sorted(nodes.items())
    ]
    out += [
        line(
            {"SwitchName": parent, "Switches": compress(sorted(kids))},
            FILE,
            "Node labels",
            words=True,
        )
        for parent, kids in sorted(children.items())
    ]
    return out


def block_lines(placements: tuple[Placement, ...], label: str) -> list[str]:
    blocks: dict[str, list[str]] = defaultdict(list)
    for placement in placements:
        domain = placement.labels.get(label)
        if domain:
            blocks[_name(domain)].append(placement.slurm_node)
    return [
        line({"BlockName": name, "Nodes": compress(members)}, FILE, "Node labels", words=True)
        for name, members in sorted(blocks.items())
    ]


def layout(
    placements: tuple[Placement, ...], levels: list[str], block_label: str, plugin: str
) -> tuple[list[str], list[str]]:
    """(lines of the active plugin's layout, lines of the other layout)."""
    tree = tree_lines(placements, levels)
    block = block_lines(placements, block_label)
    return (block, tree) if plugin == "topology/block" else (tree, block)


def render_topology_conf(active: list[str], other: list[str], plugin: str) -> str:
    """Only the active plugin's lines: Slurm 24.11 rejects the other plugin's keys."""
    out = [BANNER.rstrip("\n"), f"# TopologyPlugin={plugin}"]
    out += active or ["# no Node carries the topology labels yet (TopologyPlugin left unset)"]
    if other:
        out.append("# --- the other topology layout (not read by the active plugin)")
        comments = [f"# {entry}" for entry in other]
        size = sum(len(c) + 1 for c in comments)
        if size <= OTHER_LAYOUT_BUDGET:
            out += comments
        else:
            out.append(
                f"# ({len(other)} lines, {size // 1024} KiB: left out past "
                f"{OTHER_LAYOUT_BUDGET // 1024} KiB, so the file stays small as the cluster grows)"
            )
    return "\n".join(out) + "\n"
