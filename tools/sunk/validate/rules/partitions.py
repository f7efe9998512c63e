"""Partition rules: `compute.partitions` (declared or raw slurm.conf lines) against the
node groups, and the one default partition."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from typing import Any

from sunk.validate.rules.context import NODES, PARTS, RuleContext, as_list, as_map, get
from sunk.validate.rules.registry import Hit, rule

# PartitionName=DEFAULT sets defaults for the lines after it.
RESERVED_PARTITIONS = {"default"}


def declared_partitions(ctx: RuleContext) -> list[tuple[int, dict[str, Any]]]:
    parts = get(ctx.values, *PARTS)
    return [(i, p) for i, p in enumerate(as_list(parts)) if isinstance(p, dict)]


_RAW_LINE = re.compile(r"^\s*PartitionName\s*=\s*(\S+)(.*)$", re.IGNORECASE)


def raw_partitions(ctx: RuleContext) -> list[tuple[str, dict[str, str]]]:
    """`compute.partitions` given as raw slurm.conf lines: (name, {key: value})."""
    raw = get(ctx.values, *PARTS)
    if not isinstance(raw, str):
        return []
    out = []
    for line in raw.splitlines():
        match = _RAW_LINE.match(line.split("#", 1)[0])
        if not match:
            continue
        pairs = dict(
            (k.lower(), v) for k, _, v in (t.partition("=") for t in match.group(2).split())
        )
        out.append((match.group(1), pairs))
    return out


def _all_group_names(ctx: RuleContext) -> set[str]:
    return set(ctx.groups) | ctx.disabled


@rule(
    "SUNK001",
    "partition-unknown-group",
    "error",
    "A partition names a node group that does not exist or is disabled.",
    "list groups from compute.nodes (or ALL); enable the group or fix the name",
)
def partition_unknown_group(ctx: RuleContext) -> Iterator[Hit]:
    """Every name in a partition's `nodeSets` must be an enabled group of `compute.nodes`, or `ALL`
    (every group); so must every `Nodes=` entry of raw `PartitionName=` lines. The operator
    writes the names into the partition's `Nodes=` as given, so a misspelled group names a node
    set Slurm does not have, and a disabled group names one the operator no longer creates. A
    name close to an existing group gets a did-you-mean.

    Fails:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
          partitions:
            - name: main
              nodeSets: [cpu, cpus]

    Passes:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
          partitions:
            - name: main
              nodeSets: [cpu]
    """
    known = sorted(ctx.groups)
    for index, part in declared_partitions(ctx):
        for pos, name in enumerate(as_list(part.get("nodeSets"))):
            if name == "ALL" or name in ctx.groups:
                continue
            path = (*PARTS, index, "nodeSets", pos)
            if name in ctx.disabled:
                yield Hit(path, f"partition `{part.get('name')}` names disabled group `{name}`")
                continue
            close = difflib.get_close_matches(str(name), known, n=1)
            extra = f" (did you mean `{close[0]}`?)" if close else ""
            yield Hit(path, f"partition `{part.get('name')}` names unknown group `{name}`{extra}")
    for name, pairs in raw_partitions(ctx):
        for node in (pairs.get("nodes") or "").split(","):
            if node and node.upper() != "ALL" and node not in ctx.groups:
                yield Hit(PARTS, f"raw partition `{name}` names unknown group `{node}`")


@rule(
    "SUNK002",
    "partition-without-groups",
    "error",
    "A partition has no node groups (none listed, or all of them disabled).",
    "list at least one enabled group in nodeSets, or remove the partition",
)
def partition_without_groups(ctx: RuleContext) -> Iterator[Hit]:
    """A declared partition must keep at least one enabled node group: one whose `nodeSets` are all
    disabled groups would reach Slurm with no nodes at all. (An empty `nodeSets` list is already a
    schema error; this rule reports it too.) Each disabled name is also a SUNK001 finding, which
    is why the failing example fires both.

    Fails (also SUNK001):
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc], enabled: false}
          partitions:
            - name: main
              nodeSets: [cpu]

    Passes:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
          partitions:
            - name: main
              nodeSets: [cpu]
    """
    for index, part in declared_partitions(ctx):
        names = as_list(part.get("nodeSets"))
        if not names:
            yield Hit((*PARTS, index), f"partition `{part.get('name')}` has no node groups")
        elif all(n in ctx.disabled for n in names):
            yield Hit(
                (*PARTS, index, "nodeSets"),
                f"every group of partition `{part.get('name')}` is disabled",
            )


def _is_yes(value: Any) -> bool:
    return value is True or str(value).strip().upper() in ("YES", "TRUE")


@rule(
    "SUNK003",
    "multiple-default-partitions",
    "error",
    "More than one partition is the default.",
    "keep `default: true` on exactly one partition",
)
def multiple_default_partitions(ctx: RuleContext) -> Iterator[Hit]:
    """Slurm has one default partition, the one jobs go to without `--partition`. The rule counts
    every way the values can make one: a declared partition's `default: true` or `Default=YES` in
    its `config`, `Default=YES` on a raw partition line, and `Default=YES` in a group's
    `partitionConfig`; from the second one on, each is a finding that names the first.

    Fails:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
          partitions:
            - {name: batch, nodeSets: [cpu], default: true}
            - {name: debug, nodeSets: [cpu], default: true}

    Passes:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
          partitions:
            - {name: batch, nodeSets: [cpu], default: true}
            - {name: debug, nodeSets: [cpu]}
    """
    defaults: list[tuple[tuple[Any, ...], str]] = []
    for index, part in declared_partitions(ctx):
        config = as_map(part.get("config"))
        in_config = any(k.lower() == "default" and _is_yes(v) for k, v in config.items())
        if part.get("default") is True:
            defaults.append(((*PARTS, index, "default"), str(part.get("name"))))
        elif in_config:
            defaults.append(((*PARTS, index, "config"), str(part.get("name"))))
    for name, pairs in raw_partitions(ctx):
        if _is_yes(pairs.get("default", "")):
            defaults.append((PARTS, name))
    for name, group in ctx.groups.items():
        config = as_map(group.get("partitionConfig"))
        if any(k.lower() == "default" and _is_yes(v) for k, v in config.items()):
            defaults.append(((*NODES, name, "partitionConfig"), name))
    if len(defaults) > 1:
        first = defaults[0][1]
        for path, name in defaults[1:]:
            yield Hit(path, f"partition `{name}` is a second default (`{first}` already is)")


@rule(
    "SUNK020",
    "partition-default-in-config",
    "warning",
    "A partition sets `Default` in its config map instead of `default: true`.",
    "use the partition's `default: true` so validate and the CRD can check it",
)
def partition_default_in_config(ctx: RuleContext) -> Iterator[Hit]:
    """`Default` (in any case) in a declared partition's `config` map does reach slurm.conf,
    but the operator looks for the default partition only in `default: true` (and in raw
    partition lines): without it, it also writes `Default=YES` on the first group's own
    partition, and the CRD cannot check the choice. `default: true` says the same thing where
    both look.

    Fails:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
          partitions:
            - name: batch
              nodeSets: [cpu]
              config: {Default: "YES"}

    Passes:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
          partitions:
            - name: batch
              nodeSets: [cpu]
              default: true
    """
    for index, part in declared_partitions(ctx):
        for key in as_map(part.get("config")):
            if key.lower() == "default":
                yield Hit(
                    (*PARTS, index, "config", key),
                    f"partition `{part.get('name')}` sets `{key}` in config",
                )


@rule(
    "SUNK010",
    "invalid-partition-name",
    "error",
    "A partition name Slurm reserves, repeats, or that collides with a group's own partition.",
    "rename the partition (each group already gets a partition named after it)",
)
def invalid_partition_name(ctx: RuleContext) -> Iterator[Hit]:
    """Each node group already gets a partition of its own name, so a declared partition may not
    reuse a group's name (enabled or not); it may not be `DEFAULT` in any case (in slurm.conf,
    `PartitionName=DEFAULT` sets defaults for the lines after it); and two declared partitions
    may not share a name.

    Fails:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
          partitions:
            - name: cpu
              nodeSets: [cpu]

    Passes:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
          partitions:
            - name: batch
              nodeSets: [cpu]
    """
    seen: set[str] = set()
    groups = _all_group_names(ctx)
    for index, part in declared_partitions(ctx):
        name = part.get("name")
        if not isinstance(name, str):
            continue
        path = (*PARTS, index, "name")
        if name.lower() in RESERVED_PARTITIONS:
            yield Hit(path, f"partition name `{name}` is reserved by Slurm (PartitionName=DEFAULT)")
        elif name in groups:
            yield Hit(
                path, f"partition `{name}` collides with the partition of node group `{name}`"
            )
        elif name in seen:
            yield Hit(path, f"partition `{name}` is declared twice")
        seen.add(name)


@rule(
    "SUNK022",
    "partition-owned-key",
    "error",
    "A partition config sets PartitionName or Nodes, which the operator writes.",
    "remove the key: name the partition with `name` and its groups with `nodeSets`",
)
def partition_owned_key(ctx: RuleContext) -> Iterator[Hit]:
    """The operator writes `PartitionName` and `Nodes` on every partition line from the
    partition's `name` and `nodeSets` (a group's own partition: from the group's name). Either
    key, in any case, in a declared partition's `config` or a group's `partitionConfig` is
    ignored by the renderer, with only a render warning to say so.

    Fails:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
          partitions:
            - name: batch
              nodeSets: [cpu]
              config: {Nodes: ALL}

    Passes:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
          partitions:
            - name: batch
              nodeSets: [ALL]
    """
    owned = {"partitionname", "nodes"}
    for index, part in declared_partitions(ctx):
        for key in as_map(part.get("config")):
            if key.lower() in owned:
                yield Hit((*PARTS, index, "config", key), f"`{key}` is set by the operator")
    for name, group in ctx.groups.items():
        for key in as_map(group.get("partitionConfig")):
            if key.lower() in owned:
                yield Hit(
                    (*NODES, name, "partitionConfig", key),
                    f"group `{name}`: `{key}` is set by the operator",
                )
