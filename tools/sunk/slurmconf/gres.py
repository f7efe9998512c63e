"""gres.conf: GPU devices per NodeSet, matched by the NodeSet's pod-name range."""

from __future__ import annotations

from sunk.slurmconf.format import BANNER, line
from sunk.slurmconf.inputs import NodeSetInput


def parse_gres(gres: str) -> tuple[str | None, int]:
    """`h100:8` → ("h100", 8); `8` → (None, 8)."""
    kind, _, count = gres.rpartition(":")
    return (kind or None), int(count)


def gres_types(nodesets: tuple[NodeSetInput, ...]) -> list[str]:
    return ["gpu"] if any(ns.spec.gresGpu for ns in nodesets) else []


def gres_string(nodeset: NodeSetInput) -> str | None:
    if not nodeset.spec.gresGpu:
        return None
    kind, count = parse_gres(nodeset.spec.gresGpu)
    return f"gpu:{kind}:{count}" if kind else f"gpu:{count}"


def node_range(nodeset: NodeSetInput) -> str:
    """Every pod name the NodeSet can produce: `<prefix>-OOO-OOO` (last two IPv4 octets)."""
    return f"{nodeset.prefix}-[000-255]-[000-255]"


def render_gres_conf(nodesets: tuple[NodeSetInput, ...]) -> str:
    out = [BANNER.rstrip("\n"), "AutoDetect=off"]
    for ns in nodesets:
        if not ns.spec.gresGpu:
            continue
        kind, count = parse_gres(ns.spec.gresGpu)
        files = "/dev/nvidia0" if count == 1 else f"/dev/nvidia[0-{count - 1}]"
        pairs = {"NodeName": node_range(ns), "Name": "gpu", "Type": kind, "File": files}
        out.append(line(pairs, "gres.conf", f"NodeSet {ns.name}", words=True))
    return "\n".join(out) + "\n"
