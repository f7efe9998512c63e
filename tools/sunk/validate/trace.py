"""Where a rendered object's field came from in the values: a K8S finding (kubeconform, the
CRDs' CEL rules) gets the file and line of the values key that set it, or of its nearest set
ancestor (a node group, an extraObjects entry), instead of no position at all.

The slurm chart copies values into its custom resources key for key: a SlurmCluster's
`spec.<path>` is the values' `<path>`, a NodeSet's `spec.<path>` comes from
`compute.nodes.<group>.<path>`, `compute.nodeDefaults.<path>` or `compute.<path>` (the group
first), and an `extraObjects` entry is rendered as written.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sunk.validate.coalesce import Coalesced
from sunk.validate.findings import Finding
from sunk.validate.paths import undotted

Path = tuple[str | int, ...]


def _has(values: Any, path: Path) -> bool:
    for part in path:
        in_map = isinstance(values, dict) and part in values
        in_list = isinstance(values, list) and isinstance(part, int) and 0 <= part < len(values)
        if not (in_map or in_list):
            return False
        values = values[part]
    return True


def candidates(resource: dict[str, str], path: Path, values: dict[str, Any]) -> list[Path]:
    kind, name = resource.get("kind"), resource.get("name")
    for index, obj in enumerate(values.get("extraObjects") or []):
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if isinstance(meta, dict) and obj.get("kind") == kind and meta.get("name") == name:
            return [("extraObjects", index, *path)]
    if path[:1] != ("spec",):
        return []
    rest = path[1:]
    if kind == "SlurmCluster":
        return [rest]
    if kind == "NodeSet" and name:
        return [("compute", "nodes", name, *rest), ("compute", "nodeDefaults", *rest),
                ("compute", *rest), ("compute", "nodes", name)]  # fmt: skip
    return []


def place(finding: Finding, coalesced: Coalesced) -> Finding:
    """The finding with the values position of its object field, when it has none. A finding
    about no object (a chart template's `fail`) names a values key itself: its line, or the
    line of its nearest set ancestor."""
    if finding.line is not None or not finding.key_path:
        return finding
    if finding.resource is None:
        file, line, column = coalesced.locate(undotted(finding.key_path))
        if line is None:
            return finding
        return dataclasses.replace(finding, file=file, line=line, column=column)
    options = candidates(finding.resource, undotted(finding.key_path), coalesced.values)
    if not options:
        return finding
    chosen = next((p for p in options if _has(coalesced.values, p)), options[0])
    file, line, column = coalesced.locate(chosen)
    if line is None:
        return finding
    return dataclasses.replace(finding, file=file, line=line, column=column)
