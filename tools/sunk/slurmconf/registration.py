"""The slurmd registration of a dynamic node: `slurmd -Z --conf "<this>"`."""

from __future__ import annotations

from sunk.slurmconf.format import line
from sunk.slurmconf.gres import gres_string
from sunk.slurmconf.inputs import NodeSetInput
from sunk.slurmconf.memory import cpus, real_memory_mib


def features(nodeset: NodeSetInput, node_labels: dict[str, str] | None = None) -> list[str]:
    """The group feature (partition membership), static features, then dynamic ones."""
    found = [nodeset.name, *nodeset.spec.features.staticFeatures]
    for label, options in sorted(nodeset.spec.features.dynamicFeatures.items()):
        value = (node_labels or {}).get(label)
        if value:
            found.append(f"{(options or {}).get('prefix', '')}{value}")
    return list(dict.fromkeys(found))


def registration(
    nodeset: NodeSetInput,
    reserved_default: str | int | float,
    node_labels: dict[str, str] | None = None,
) -> str:
    # The slurmd entrypoint splits this string into words: a space is refused, not quoted.
    return line(
        {
            "Features": ",".join(features(nodeset, node_labels)),
            "Gres": gres_string(nodeset),
            "CPUs": cpus(nodeset),
            "RealMemory": real_memory_mib(nodeset, reserved_default),
        },
        "slurmd --conf",
        f"NodeSet {nodeset.name}: spec.features",
        words=True,
    )
