"""Volume rules: the user's volumes and mounts as they merge into the login and slurmd Pods."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sunk.operator import shared_volumes
from sunk.validate.rules.context import NODES, RuleContext, as_list, as_map, get
from sunk.validate.rules.registry import Hit, rule


def _group_list_path(ctx: RuleContext, name: str, key: str) -> tuple[Any, ...]:
    """Where the resolved group's ``key`` list came from (lists replace: the last layer that
    sets it): the group itself, one of its definitions, or compute.nodeDefaults."""
    compute = as_map(ctx.values.get("compute"))
    raw = as_map(as_map(compute.get("nodes")).get(name))
    definitions = as_map(compute.get("definitions"))
    origin: tuple[Any, ...] = (*NODES, name, key)
    if key in as_map(compute.get("nodeDefaults")):
        origin = ("compute", "nodeDefaults", key)
    for def_name in as_list(raw.get("definitions")):
        if isinstance(def_name, str) and key in as_map(definitions.get(def_name)):
            origin = ("compute", "definitions", def_name, key)
    if key in raw:
        origin = (*NODES, name, key)
    return origin


def _volume_problems(ctx: RuleContext) -> Iterator[shared_volumes.Problem]:
    v = ctx.values
    glob = shared_volumes.global_layer(
        as_list(get(v, "global", "volumes")), as_list(get(v, "global", "volumeMounts"))
    )
    if get(v, "login", "enabled") is not False:
        login = shared_volumes.Layer(
            as_list(get(v, "login", "volumes")),
            as_list(get(v, "login", "volumeMounts")),
            ("login", "volumes"),
            ("login", "volumeMounts"),
        )
        yield from shared_volumes.merge(
            [glob, login], shared_volumes.LOGIN, "the login Pod"
        ).problems
    mounts = shared_volumes.compute_mounts_layer(as_list(get(v, "compute", "mounts")))
    for name, group in ctx.groups.items():
        own = shared_volumes.Layer(
            as_list(group.get("volumes")),
            as_list(group.get("volumeMounts")),
            _group_list_path(ctx, name, "volumes"),
            _group_list_path(ctx, name, "volumeMounts"),
        )
        pod = f"the slurmd Pods of group `{name}`"
        yield from shared_volumes.merge([glob, mounts, own], shared_volumes.SLURMD, pod).problems


@rule(
    "SUNK028",
    "volume-conflict",
    "error",
    "Volumes or mounts that cannot go into the login or slurmd Pods: a name or mountPath "
    "repeated in one list or used by the operator itself, an entry without one, or a mount "
    "naming a volume the Pod does not have.",
    "rename the entry, or declare the volume in global.volumes (login and slurmd Pods), "
    "login.volumes or the group's volumes; a login or group entry with the same volume name or "
    "mountPath as a global one replaces it",
)
def volume_conflict(ctx: RuleContext) -> Iterator[Hit]:
    """The login Pod gets `global.volumes` and `login.volumes`; each group's slurmd Pods get
    `global.volumes`, `compute.mounts` and the group's own `volumes` (from the group, a
    definition or `compute.nodeDefaults`); mounts likewise. A login or group entry with the same
    volume name or mountPath as a global one replaces it. What is left must be a valid Pod: no
    name or mountPath twice in one list, none the operator uses for its own volumes, every entry
    named, and every mount naming a volume the Pod has. One finding per key and problem names
    every Pod that has it.

    Fails:
        global:
          volumeMounts:
            - {name: home, mountPath: /home}
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}

    Passes:
        global:
          volumes:
            - {name: home, persistentVolumeClaim: {claimName: home}}
          volumeMounts:
            - {name: home, mountPath: /home}
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
    """
    # One finding per key path and problem, naming every Pod that has it (a bad global mount
    # would otherwise repeat for the login Pod and each group).
    pods: dict[tuple[tuple[Any, ...], str], list[str]] = {}
    for problem in _volume_problems(ctx):
        where = pods.setdefault((problem.path, problem.message), [])
        if problem.pod and problem.pod not in where:
            where.append(problem.pod)
    for (path, message), where in pods.items():
        yield Hit(path, f"{message} in {_and(where)}" if where else message)


def _and(items: list[str], most: int = 3) -> str:
    shown = items if len(items) <= most else [*items[: most - 1], f"{len(items) - most + 1} more"]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"
