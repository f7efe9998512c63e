"""How a node group is resolved.

Merge order (documented in the chart README and mirrored by the chart's
`slurm.deepMerge` helper — tests hold the two to the same results):

    compute.nodeDefaults  ←  each named definition, in list order  ←  the group's own keys

Maps merge deeply; lists and scalars replace; an explicit ``null`` removes the key.
"""

from __future__ import annotations

import copy
from typing import Any


class UnknownDefinitionError(KeyError):
    def __init__(self, group: str, name: str, known: list[str]):
        super().__init__(name)
        self.group, self.name, self.known = group, name, known

    def __str__(self) -> str:
        return (
            f"compute.nodes.{self.group}.definitions: unknown definition {self.name!r} "
            f"(known: {', '.join(sorted(self.known))})"
        )


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged onto a copy of ``base``."""
    result = copy.deepcopy(base)
    for key, value in over.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = deep_merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def resolve_group(
    name: str,
    group: dict[str, Any],
    definitions: dict[str, dict[str, Any]],
    defaults: dict[str, Any],
) -> dict[str, Any]:
    """The effective settings of ``compute.nodes.<name>`` (plain data, values shape)."""
    merged = copy.deepcopy(defaults)
    for def_name in group.get("definitions") or []:
        if def_name not in definitions:
            raise UnknownDefinitionError(name, def_name, list(definitions))
        merged = deep_merge(merged, definitions[def_name] or {})
    merged = deep_merge(merged, group)
    merged.pop("definitions", None)
    return merged


def resolve_groups(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every enabled group of a coalesced values document, resolved, in name order."""
    compute = values.get("compute") or {}
    definitions = compute.get("definitions") or {}
    defaults = compute.get("nodeDefaults") or {}
    resolved = {}
    for name in sorted(compute.get("nodes") or {}):
        group = resolve_group(name, compute["nodes"][name] or {}, definitions, defaults)
        if group.get("enabled", True):
            resolved[name] = group
    return resolved
