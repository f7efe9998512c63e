"""What rules see: the coalesced values, node groups resolved as the chart resolves them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sunk.models.merge import deep_merge
from sunk.validate.coalesce import Coalesced


def get(data: Any, *keys: Any, default: Any = None) -> Any:
    """A nested value, or `default` where any step is missing or of the wrong kind."""
    for key in keys:
        if isinstance(data, dict) and isinstance(key, str):
            data = data.get(key)
        elif isinstance(data, list) and isinstance(key, int) and 0 <= key < len(data):
            data = data[key]
        else:
            return default
        if data is None:
            return default
    return data


# The key paths most rules start from.
NODES = ("compute", "nodes")
PARTS = ("compute", "partitions")


def as_map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass
class RuleContext:
    values: dict[str, Any]
    chart: str = "slurm"
    coalesced: Coalesced | None = None
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)  # enabled, resolved
    disabled: set[str] = field(default_factory=set)
    unknown_definitions: list[tuple[str, int, str]] = field(default_factory=list)

    @classmethod
    def build(
        cls, values: dict[str, Any], chart: str = "slurm", coalesced: Coalesced | None = None
    ) -> RuleContext:
        ctx = cls(values, chart, coalesced)
        if chart != "slurm":
            return ctx
        compute = as_map(values.get("compute"))
        definitions = as_map(compute.get("definitions"))
        defaults = as_map(compute.get("nodeDefaults"))
        for name in sorted(as_map(compute.get("nodes"))):
            raw = as_map(compute["nodes"][name])
            # sunk.models.merge.resolve_group, tolerant of unknown definitions (SUNK004).
            merged = dict(defaults)
            for index, def_name in enumerate(as_list(raw.get("definitions"))):
                if not isinstance(def_name, str) or def_name not in definitions:
                    ctx.unknown_definitions.append((name, index, str(def_name)))
                    continue
                merged = deep_merge(merged, as_map(definitions[def_name]))
            merged = deep_merge(merged, raw)
            merged.pop("definitions", None)
            if merged.get("enabled", True) is False:
                ctx.disabled.add(name)
            else:
                ctx.groups[str(name)] = merged
        return ctx

    def set_by_user(self, path: tuple[Any, ...]) -> bool:
        """Whether a user layer (not the chart's values.yaml) set exactly this key."""
        if self.coalesced is None:
            return True
        index = self.coalesced.origins.get(tuple(path))
        return index is not None and index > 0

    def user_path(self, *candidates: tuple[Any, ...]) -> tuple[Any, ...]:
        """The first candidate key a user layer set (a place the user will recognise)."""
        for path in candidates:
            if self.set_by_user(path):
                return path
        return candidates[-1]


__all__ = ["NODES", "PARTS", "RuleContext", "as_list", "as_map", "get"]
