"""The built-in rules. Each is a small pure function over a RuleContext yielding Hits at
values key paths; the registry adds the ID, name, severity and default hint."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from functools import cache
from importlib import resources
from typing import Any

from pydantic import ValidationError

from sunk.models.crds import NodeSetSpec, PodTemplate
from sunk.models.quantity import QuantityError, parse_quantity
from sunk.models.values import Scheduler, duration_seconds
from sunk.operator import shared_volumes
from sunk.scheduler.podjob import Rejected, Settings, placeholder_for
from sunk.slurmconf.inputs import NodeSetInput
from sunk.slurmconf.memory import SizingError, real_memory_mib
from sunk.slurmconf.slurm_conf import NOT_SLURM_KEYS, OWNED_KEYS
from sunk.validate.rules.context import RuleContext, as_list, as_map, get
from sunk.validate.rules.registry import Hit, rule

NODES = ("compute", "nodes")
PARTS = ("compute", "partitions")
GPU = "nvidia.com/gpu"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# PartitionName=DEFAULT sets defaults for the lines after it; a group named `all` would write
# `Nodes=all` on its own partition line, which reads as every node.
RESERVED_PARTITIONS = {"default"}
RESERVED_GROUPS = {"default", "all"}
MAX_GROUP_NAME = 40


@cache
def slurm_conf_keys() -> dict[str, str]:
    """lower-case key → canonical spelling, from the packaged list for Slurm 24.11."""
    text = resources.files("sunk.validate.rules").joinpath("slurm_conf_keys.txt").read_text()
    keys = [line.strip() for line in text.splitlines()]
    return {k.lower(): k for k in keys if k and not k.startswith("#")}


def _declared_partitions(ctx: RuleContext) -> list[tuple[int, dict[str, Any]]]:
    parts = get(ctx.values, *PARTS)
    return [(i, p) for i, p in enumerate(as_list(parts)) if isinstance(p, dict)]


_RAW_LINE = re.compile(r"^\s*PartitionName\s*=\s*(\S+)(.*)$", re.IGNORECASE)


def _raw_partitions(ctx: RuleContext) -> list[tuple[str, dict[str, str]]]:
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


# --------------------------------------------------------------------------- partitions


@rule(
    "SUNK001",
    "partition-unknown-group",
    "error",
    "A partition names a node group that does not exist or is disabled.",
    "list groups from compute.nodes (or ALL); enable the group or fix the name",
)
def partition_unknown_group(ctx: RuleContext) -> Iterator[Hit]:
    known = sorted(ctx.groups)
    for index, part in _declared_partitions(ctx):
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
    for name, pairs in _raw_partitions(ctx):
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
    for index, part in _declared_partitions(ctx):
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
    defaults: list[tuple[tuple[Any, ...], str]] = []
    for index, part in _declared_partitions(ctx):
        config = as_map(part.get("config"))
        in_config = any(k.lower() == "default" and _is_yes(v) for k, v in config.items())
        if part.get("default") is True:
            defaults.append(((*PARTS, index, "default"), str(part.get("name"))))
        elif in_config:
            defaults.append(((*PARTS, index, "config"), str(part.get("name"))))
    for name, pairs in _raw_partitions(ctx):
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
    for index, part in _declared_partitions(ctx):
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
    seen: set[str] = set()
    groups = _all_group_names(ctx)
    for index, part in _declared_partitions(ctx):
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
    owned = {"partitionname", "nodes"}
    for index, part in _declared_partitions(ctx):
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


# --------------------------------------------------------------------------- node groups


@rule(
    "SUNK004",
    "unknown-definition",
    "error",
    "A node group names a definition that compute.definitions does not have.",
    "use a stock definition (cpu-epyc, a100, h100, h200, b200, gb200, l40s) or declare it "
    "under compute.definitions",
)
def unknown_definition(ctx: RuleContext) -> Iterator[Hit]:
    known = sorted(as_map(get(ctx.values, "compute", "definitions")))
    for group, index, name in ctx.unknown_definitions:
        close = difflib.get_close_matches(name, known, n=1)
        extra = f" (did you mean `{close[0]}`?)" if close else ""
        yield Hit(
            (*NODES, group, "definitions", index),
            f"group `{group}` names unknown definition `{name}`{extra}",
        )


@rule(
    "SUNK009",
    "invalid-group-name",
    "error",
    "A node group name that is not a DNS label, is too long, or is reserved by Slurm.",
    "use lowercase letters, digits and '-', at most 40 characters",
)
def invalid_group_name(ctx: RuleContext) -> Iterator[Hit]:
    for name in sorted(as_map(get(ctx.values, *NODES))):
        path = (*NODES, name)
        if not DNS_LABEL.match(name):
            yield Hit(path, f"group name `{name}` is not a DNS label (Kubernetes object name)")
        elif len(name) > MAX_GROUP_NAME:
            yield Hit(path, f"group name `{name}` is longer than {MAX_GROUP_NAME} characters")
        elif name in RESERVED_GROUPS:
            yield Hit(path, f"group name `{name}` is reserved by Slurm (it names a partition)")


def _gpu_count(value: Any) -> int | None:
    try:
        number = parse_quantity(value)
    except (QuantityError, TypeError):
        return None
    return int(number) if number == int(number) else None


def _gres_count(gres: Any) -> int | None:
    if gres is None:
        return None
    text = str(gres)
    try:
        return int(text.rsplit(":", 1)[-1])
    except ValueError:
        return None


def _is_gpu_group(group: dict[str, Any]) -> bool:
    res = as_map(group.get("resources"))
    return bool(group.get("gresGpu")) or any(
        GPU in as_map(res.get(kind)) for kind in ("requests", "limits")
    )


@rule(
    "SUNK005",
    "gres-gpu-mismatch",
    "error",
    "A group's gresGpu count differs from its nvidia.com/gpu request/limit.",
    "make gresGpu `type:N` match resources.requests/limits nvidia.com/gpu: N",
)
def gres_gpu_mismatch(ctx: RuleContext) -> Iterator[Hit]:
    for name, group in ctx.groups.items():
        res = as_map(group.get("resources"))
        gres = _gres_count(group.get("gresGpu"))
        counts = {
            kind: _gpu_count(as_map(res.get(kind)).get(GPU))
            for kind in ("requests", "limits")
            if GPU in as_map(res.get(kind))
        }
        base = (*NODES, name)
        if gres is None and not group.get("gresGpu"):
            if any(counts.values()):
                yield Hit(
                    (*base, "resources"),
                    f"group `{name}` requests {max(v or 0 for v in counts.values())} GPUs "
                    "but sets no gresGpu: Slurm will not schedule them",
                )
            continue
        if gres is None:
            continue
        if not counts:
            if gres > 0:
                yield Hit(
                    (*base, "gresGpu"),
                    f"group `{name}` has gresGpu {group.get('gresGpu')} but its pods request "
                    "no nvidia.com/gpu",
                )
            continue
        for kind, count in counts.items():
            if count is not None and count != gres:
                yield Hit(
                    (*base, "resources", kind, GPU),
                    f"group `{name}`: gresGpu {group.get('gresGpu')} says {gres} GPUs but "
                    f"resources.{kind} has nvidia.com/gpu: {count}",
                )


def _nodeset_input(name: str, group: dict[str, Any]) -> NodeSetInput | None:
    """The group as the renderer sees it (enough for sunk.slurmconf.memory)."""
    try:
        spec = NodeSetSpec(
            clusterName="validate",
            skuCpu=group.get("skuCpu"),
            template=PodTemplate(
                spec={"containers": [{"name": "slurmd", "resources": group.get("resources")}]}
            ),
        )
    except ValidationError:
        return None
    return NodeSetInput(name, spec)


@rule(
    "SUNK006",
    "reserved-memory-exceeds-limit",
    "error",
    "compute.reservedMemory is at least a group's memory limit (DefMemPerCPU would be negative).",
    "raise the group's memory limit or lower compute.reservedMemory",
)
def reserved_memory(ctx: RuleContext) -> Iterator[Hit]:
    reserved = get(ctx.values, "compute", "reservedMemory", default="4Gi")
    for name, group in ctx.groups.items():
        nodeset = _nodeset_input(name, group)
        if nodeset is None:
            continue
        try:
            real_memory_mib(nodeset, reserved)
        except SizingError:
            limit = get(group, "resources", "limits", "memory") or get(
                group, "resources", "requests", "memory"
            )
            yield Hit(
                (*NODES, name, "resources"),
                f"group `{name}`: memory {limit} minus compute.reservedMemory {reserved} leaves "
                "nothing for Slurm (DefMemPerCPU would be negative)",
            )
        except (QuantityError, ValueError, TypeError, ArithmeticError):
            continue


@rule(
    "SUNK007",
    "group-node-selector",
    "warning",
    "A node group sets nodeSelector, which does not bind its pods to Nodes.",
    "use affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution instead",
)
def group_node_selector(ctx: RuleContext) -> Iterator[Hit]:
    for name, group in ctx.groups.items():
        if group.get("nodeSelector"):
            yield Hit(
                (*NODES, name, "nodeSelector"),
                f"group `{name}`: nodeSelector does not bind the pods (it is not propagated)",
            )


# -- affinity overlap


def _terms(group: dict[str, Any]) -> list[dict[str, list[tuple[str, frozenset[str]]]]] | None:
    """Required node selector terms as {key: [(operator, values)]}; None = no requirement."""
    terms = get(
        group,
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    )
    out = []
    for term in as_list(terms):
        exprs: dict[str, list[tuple[str, frozenset[str]]]] = {}
        for expr in as_list(get(term, "matchExpressions")):
            if not isinstance(expr, dict) or not isinstance(expr.get("key"), str):
                continue
            values = frozenset(str(v) for v in as_list(expr.get("values")))
            exprs.setdefault(expr["key"], []).append((str(expr.get("operator")), values))
        out.append(exprs)
    return out or None


def _key_compatible(reqs: list[tuple[str, frozenset[str]]]) -> bool:
    """Can one label value (or its absence) satisfy every requirement on the key?"""
    ops = {op for op, _ in reqs}
    if "DoesNotExist" in ops:
        return ops <= {"DoesNotExist", "NotIn"}
    allowed: frozenset[str] | None = None
    for op, values in reqs:
        if op == "In":
            allowed = values if allowed is None else allowed & values
    if allowed is None:
        return True  # Exists / NotIn / Gt / Lt: some value fits
    excluded = frozenset().union(*(v for op, v in reqs if op == "NotIn"))
    return bool(allowed - excluded)


def _terms_overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    shared = set(a) & set(b)
    return bool(shared) and all(_key_compatible(a[k] + b[k]) for k in shared)


def _overlap(a: list[dict[str, Any]] | None, b: list[dict[str, Any]] | None) -> bool:
    if a is None or b is None:
        return True
    return any(_terms_overlap(x, y) for x in a for y in b)


# SUNK lets node groups overlap: each Node runs the Pod of one NodeSet only, the one that
# claims it first (the Node label sunk.coreweave.com/nodeset), and our operator does the same.
# So an overlap is legal but leaves the split of the Nodes to chance: a warning.
CLAIM = (
    "each Node runs the slurmd Pod of one NodeSet only, the first to claim it (Node label "
    "sunk.coreweave.com/nodeset); the other NodeSet skips it and lists it in its NodeConflict "
    "condition, so which group gets which of these Nodes is not fixed"
)


@rule(
    "SUNK008",
    "overlapping-group-affinity",
    "warning",
    "Two node groups whose required node affinities can select the same Nodes (as SUNK does, "
    "each Node is claimed by one NodeSet, whichever claims it first).",
    "to decide which group gets which Nodes, bind each group with a required node affinity on "
    "a distinct label value (e.g. compute.coreweave.com/node-pool)",
)
def overlapping_groups(ctx: RuleContext) -> Iterator[Hit]:
    active = {n: g for n, g in ctx.groups.items() if g.get("replicas") != 0}
    terms = {name: _terms(group) for name, group in active.items()}
    names = sorted(active)
    for i, name in enumerate(names):
        earlier = [o for o in names[:i] if _overlap(terms[o], terms[name])]
        if not earlier:
            continue
        why = (
            "it has no required node affinity"
            if terms[name] is None
            else "their required node affinities overlap"
            if all(terms[o] is not None for o in earlier)
            else "one of them has no required node affinity"
        )
        others = ", ".join(f"`{o}`" for o in earlier)
        path = (*NODES, name, "affinity") if terms[name] is not None else (*NODES, name)
        yield Hit(path, f"group `{name}` can land on the same Nodes as {others} ({why}): {CLAIM}")


@rule(
    "SUNK015",
    "gpu-group-without-toleration",
    "warning",
    "A GPU group has no toleration for the `nvidia.com/gpu` taint.",
    "add tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]",
)
def gpu_toleration(ctx: RuleContext) -> Iterator[Hit]:
    for name, group in ctx.groups.items():
        if not _is_gpu_group(group):
            continue
        tolerations = [t for t in as_list(group.get("tolerations")) if isinstance(t, dict)]
        ok = any(
            t.get("key") == GPU or (not t.get("key") and t.get("operator") == "Exists")
            for t in tolerations
        )
        if not ok:
            yield Hit(
                (*NODES, name, "tolerations"),
                f"GPU group `{name}` does not tolerate the nvidia.com/gpu taint",
            )


@rule(
    "SUNK017",
    "group-without-requests",
    "warning",
    "A compute group's pods request no CPU or memory.",
    "set resources.requests.cpu and .memory (or use a stock definition)",
)
def group_requests(ctx: RuleContext) -> Iterator[Hit]:
    for name, group in ctx.groups.items():
        requests = as_map(get(group, "resources", "requests"))
        missing = [r for r in ("cpu", "memory") if r not in requests]
        if missing:
            yield Hit(
                (*NODES, name),
                f"group `{name}` requests no {' or '.join(missing)}",
            )


@rule(
    "SUNK021",
    "max-unavailable-exceeds-replicas",
    "warning",
    "compute.maxUnavailable is larger than a group's replicas.",
    "lower compute.maxUnavailable (or use a percentage)",
)
def max_unavailable(ctx: RuleContext) -> Iterator[Hit]:
    budget = get(ctx.values, "compute", "maxUnavailable")
    if not isinstance(budget, int) or isinstance(budget, bool):
        return
    small = [
        n
        for n, g in ctx.groups.items()
        if isinstance(g.get("replicas"), int) and 0 < g["replicas"] < budget
    ]
    if small:
        yield Hit(
            ("compute", "maxUnavailable"),
            f"maxUnavailable {budget} exceeds the replicas of "
            + ", ".join(f"`{n}`" for n in small),
        )


@rule(
    "SUNK026",
    "syncer-without-rest-or-jwt",
    "warning",
    "syncer.enabled is set but rest.enabled or jwt.enabled is off: the Syncer talks to "
    "slurmrestd with a JWT, so it does not run, and slurmd Pods are removed at once, under "
    "running jobs.",
    "set rest.enabled and jwt.enabled (or syncer.enabled: false to say so)",
)
def syncer_without_rest(ctx: RuleContext) -> Iterator[Hit]:
    if get(ctx.values, "syncer", "enabled") is False:
        return
    off = [k for k in ("rest", "jwt") if get(ctx.values, k, "enabled") is False]
    if off:
        yield Hit(
            (off[0], "enabled"),
            "the Syncer (syncer.enabled) needs "
            + " and ".join(f"{k}.enabled" for k in off)
            + ": it will not run, and scale-downs and updates delete slurmd Pods at once",
        )


# --------------------------------------------------------------------------- Slurm settings


@rule(
    "SUNK011",
    "unknown-slurm-conf-key",
    "error",
    "A slurmConfig key that slurm.conf (Slurm 24.11) does not know; slurmctld would not start.",
    "check the spelling against slurm.conf(5), or put free text in slurmConfig.extraConfig",
)
def unknown_slurm_key(ctx: RuleContext) -> Iterator[Hit]:
    known = slurm_conf_keys()
    for key in as_map(ctx.values.get("slurmConfig")):
        if key in NOT_SLURM_KEYS or key.lower() in known:
            continue
        close = difflib.get_close_matches(key.lower(), list(known), n=1, cutoff=0.75)
        extra = f" (did you mean `{known[close[0]]}`?)" if close else ""
        yield Hit(("slurmConfig", key), f"unknown slurm.conf key `{key}`{extra}")


@rule(
    "SUNK012",
    "operator-owned-slurm-key",
    "error",
    "A slurmConfig key the operator writes itself; the value would be ignored.",
    "remove the key: the operator derives it from the cluster's shape",
)
def owned_slurm_key(ctx: RuleContext) -> Iterator[Hit]:
    owned = {k.lower(): k for k in OWNED_KEYS}
    for key in as_map(ctx.values.get("slurmConfig")):
        if key.lower() in owned:
            yield Hit(("slurmConfig", key), f"`{key}` is managed by the operator")


_HOST_PATHS = (
    ("accounting", "external", "host"),
    ("accounting", "database", "type"),
    ("accounting", "external", "enabled"),
    ("accounting", "external"),
    ("accounting",),
)
_PASSWORD_PATHS = (("accounting", "external", "passwordSecret"), *_HOST_PATHS)


def _external(ctx: RuleContext) -> bool:
    acct = as_map(ctx.values.get("accounting"))
    return get(acct, "database", "type") == "external" or get(acct, "external", "enabled") is True


@rule(
    "SUNK013",
    "accounting-external-without-host",
    "error",
    "Accounting uses an external database but accounting.external.host is empty.",
    "set accounting.external.host (or use database.type mariadb/moco)",
)
def external_without_host(ctx: RuleContext) -> Iterator[Hit]:
    acct = as_map(ctx.values.get("accounting"))
    on = acct.get("enabled", True) is not False and _external(ctx)
    if on and not get(acct, "external", "host"):
        yield Hit(ctx.user_path(*_HOST_PATHS), "external accounting database without a host")


@rule(
    "SUNK014",
    "accounting-external-without-password",
    "error",
    "Accounting uses an external database but no passwordSecret is given.",
    "set accounting.external.passwordSecret: {name: <secret>, key: password}",
)
def external_without_password(ctx: RuleContext) -> Iterator[Hit]:
    acct = as_map(ctx.values.get("accounting"))
    on = acct.get("enabled", True) is not False and _external(ctx)
    if on and not get(acct, "external", "passwordSecret", "name"):
        yield Hit(
            ctx.user_path(*_PASSWORD_PATHS), "external accounting database without passwordSecret"
        )


@rule(
    "SUNK023",
    "accounting-external-conflicts-moco",
    "error",
    "accounting.external.enabled is set while database.type is moco.",
    "choose one: database.type external (with external.*) or moco",
)
def external_vs_moco(ctx: RuleContext) -> Iterator[Hit]:
    acct = as_map(ctx.values.get("accounting"))
    if get(acct, "external", "enabled") is True and get(acct, "database", "type") == "moco":
        yield Hit(("accounting", "external", "enabled"), "external.enabled conflicts with moco")


@rule(
    "SUNK018",
    "scheduler-pods",
    "error",
    "Pods for the Pod Scheduler must be ones Slurm can take: CPU and memory requests, and a "
    "terminationGracePeriodSeconds below killWait − terminationOffset.",
    "fix the Pod, or raise scheduler.killWait / lower scheduler.config.scheduler.terminationOffset",
)
def scheduler_pods(ctx: RuleContext) -> Iterator[Hit]:
    """Checks what the scheduler checks at run time (``sunk.scheduler.podjob``), on the Pods
    and Pod templates in extraObjects that name it: validate sees no other Pods."""
    try:
        sched = Scheduler.model_validate(ctx.values.get("scheduler") or {})
    except ValidationError:
        return  # the schema step reports it
    if not sched.enabled:
        return
    offset = duration_seconds(sched.config.scheduler.terminationOffset)
    if sched.killWait - offset <= 0:
        yield Hit(
            ("scheduler", "config", "scheduler", "terminationOffset"),
            f"terminationOffset {offset:g} s leaves no grace period under killWait "
            f"{sched.killWait} s: every Pod would be rejected",
        )
        return
    settings = Settings(sched.killWait, offset, dict(sched.config.scheduler.gpuTypes))
    for path, pod in _scheduled_pods(ctx, sched.name):
        try:
            placeholder_for(pod, settings)
        except Rejected as exc:
            yield Hit(_at(path, exc.field), f"the Pod Scheduler would reject this Pod: {exc}")


def _at(spec_path: tuple[Any, ...], field_path: str) -> tuple[Any, ...]:
    """The values path of a Pod field the scheduler named, where it is a plain key of the
    spec or an annotation (else the spec itself)."""
    key = field_path.removeprefix("spec.")
    if key != field_path and re.fullmatch(r"[A-Za-z]+", key):
        return (*spec_path, key)
    found = re.fullmatch(r"metadata\.annotations\[(.+)\]", field_path)
    if found and spec_path[-1] == "spec":  # a Pod: its metadata is beside its spec
        return (*spec_path[:-1], "metadata", "annotations", found.group(1))
    return spec_path


def _scheduled_pods(
    ctx: RuleContext, name: str | None
) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    """(path, Pod) for each Pod or Pod template in extraObjects with ``schedulerName: name``
    (with no name set, any schedulerName but the default one)."""
    for index, obj in enumerate(as_list(ctx.values.get("extraObjects"))):
        if not isinstance(obj, dict):
            continue
        spec, path = as_map(obj.get("spec")), ("extraObjects", index, "spec")
        meta = as_map(obj.get("metadata"))
        if obj.get("kind") != "Pod":  # a workload: its Pod template (a CronJob's, nested)
            if "jobTemplate" in spec:
                spec, path = as_map(as_map(spec["jobTemplate"]).get("spec")), (
                    *path, "jobTemplate", "spec",
                )  # fmt: skip
            template = as_map(spec.get("template"))
            spec, meta = as_map(template.get("spec")), as_map(template.get("metadata"))
            path = (*path, "template", "spec")
        wanted = spec.get("schedulerName")
        if not wanted or (wanted != name if name else wanted == "default-scheduler"):
            continue
        pod = {"metadata": {"name": "x", "namespace": "x", "uid": "x", **meta}, "spec": spec}
        yield path, pod


@rule(
    "SUNK033",
    "scheduler-needs-syncer",
    "error",
    "The Pod Scheduler runs beside the Syncer: its placeholder jobs take strict node locks "
    "through the Syncer's hook, and it talks to slurmrestd with a JWT.",
    "set syncer.enabled, rest.enabled and jwt.enabled, or scheduler.enabled: false",
)
def scheduler_needs_syncer(ctx: RuleContext) -> Iterator[Hit]:
    if as_map(ctx.values.get("scheduler")).get("enabled") is not True:
        return
    for key in ("syncer", "rest", "jwt"):
        if as_map(ctx.values.get(key)).get("enabled") is False:
            yield Hit((key, "enabled"), f"scheduler.enabled needs {key}.enabled")


@rule(
    "SUNK019",
    "external-traffic-policy-cluster-ip",
    "warning",
    "login.service.externalTrafficPolicy is set on a ClusterIP service (an API error).",
    "set login.service.externalTrafficPolicy: null, or use LoadBalancer/NodePort",
)
def traffic_policy(ctx: RuleContext) -> Iterator[Hit]:
    svc = as_map(get(ctx.values, "login", "service"))
    etp = ("login", "service", "externalTrafficPolicy")
    # The chart's default (Local) is for when the Service is exposed; only a value the user
    # wrote beside ClusterIP is a mistake.
    if svc.get("type") == "ClusterIP" and svc.get("externalTrafficPolicy") and ctx.set_by_user(etp):
        yield Hit(
            etp,
            f"externalTrafficPolicy {svc['externalTrafficPolicy']} on a ClusterIP service",
        )


@rule(
    "SUNK034",
    "login-load-balancer-open",
    "warning",
    "A LoadBalancer login Service without loadBalancerSourceRanges lets every address reach sshd.",
    "list the CIDRs your users come from in login.service.loadBalancerSourceRanges",
)
def login_load_balancer_open(ctx: RuleContext) -> Iterator[Hit]:
    svc = as_map(get(ctx.values, "login", "service"))
    login = as_map(ctx.values.get("login"))
    if login.get("enabled") is False or svc.get("type") != "LoadBalancer":
        return
    if not svc.get("loadBalancerSourceRanges"):
        yield Hit(
            ("login", "service", "type"),
            "the login LoadBalancer is open to every address (no loadBalancerSourceRanges)",
        )


@rule(
    "SUNK035",
    "directory-unencrypted",
    "warning",
    "directoryService reads LDAP over ldap:// without StartTLS: the bind password and every "
    "user's entry cross the network in clear text.",
    "use ldaps:// URIs, or set directoryService.startTls: true (with caSecret for a private CA)",
)
def directory_unencrypted(ctx: RuleContext) -> Iterator[Hit]:
    directory = as_map(ctx.values.get("directoryService"))
    if directory.get("enabled") is not True or directory.get("startTls") is True:
        return
    uris = directory.get("ldapUri")
    for index, uri in enumerate(uris if isinstance(uris, list) else []):
        if isinstance(uri, str) and uri.startswith("ldap://"):
            yield Hit(
                ("directoryService", "ldapUri", index),
                f"{uri} without StartTLS: LDAP traffic is not encrypted",
            )


# --------------------------------------------------------------------------- images


def _images(ctx: RuleContext) -> Iterator[tuple[tuple[Any, ...], Any]]:
    v = ctx.values
    if ctx.chart == "sunk":
        yield ("operator", "image"), get(v, "operator", "image")
        if get(v, "nvidia-device-plugin", "enabled") is True:
            yield ("nvidia-device-plugin", "image"), get(v, "nvidia-device-plugin", "image")
        return
    for part in ("controller", "accounting", "rest", "login"):
        yield (part, "image"), get(v, part, "image")
    if get(v, "accounting", "database", "type") == "mariadb":
        path = ("accounting", "database", "mariadb", "image")
        yield path, get(v, *path)
    yield ("compute", "image"), get(v, "compute", "image")
    for name, group in ctx.groups.items():
        if "image" in group:
            yield (*NODES, name, "image"), group.get("image")


@rule(
    "SUNK016",
    "image-not-pinned",
    "warning",
    "An image without a tag or digest, or tagged `latest`.",
    "pin a version tag (or a digest) so every node runs the same image",
    charts=("slurm", "sunk"),
)
def image_pinned(ctx: RuleContext) -> Iterator[Hit]:
    for path, image in _images(ctx):
        if not isinstance(image, dict) or not image.get("repository"):
            continue
        tag, digest = image.get("tag"), image.get("digest")
        if digest:
            continue
        if not tag:
            yield Hit(path, f"image {image['repository']} has no tag")
        elif str(tag) == "latest":
            yield Hit((*path, "tag"), f"image {image['repository']} uses the `latest` tag")


# --------------------------------------------------------------------------- free text and bounds

_FREE_TEXT = (
    (("slurmConfig", "extraConfig"), "slurmConfig.extraConfig", frozenset()),
    # Raw partition lines name their partition; every other owned key is an override.
    (PARTS, "raw partition lines", frozenset({"partitionname", "nodes"})),
)


def owned_keys_in_text(text: str, allowed: frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """(line number in the text, key) of every operator-owned slurm.conf key, in any case,
    and every `Include` directive, read as Slurm reads the lines (comments stripped)."""
    owned = {k.lower(): k for k in OWNED_KEYS}
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        body = line.split("#", 1)[0]
        words = body.split()
        if words and words[0].lower() == "include":
            found.append((number, "Include"))
        for word in words:
            key = word.split("=", 1)[0].strip().lower()
            if "=" in word and key in owned and key not in allowed:
                found.append((number, word.split("=", 1)[0]))
    return found


@rule(
    "SUNK024",
    "owned-key-in-free-text",
    "error",
    "extraConfig or raw partition lines set a key the operator owns (Slurm reads keys in any "
    "case; the last one wins), or include another file.",
    "remove the key: the operator derives it from the cluster's shape",
)
def owned_key_in_free_text(ctx: RuleContext) -> Iterator[Hit]:
    for path, label, allowed in _FREE_TEXT:
        text = get(ctx.values, *path)
        if not isinstance(text, str):
            continue
        for number, key in owned_keys_in_text(text, allowed):
            if key == "Include":
                yield Hit(path, f"{label}, line {number}: `Include` reads a file we do not render")
            else:
                yield Hit(path, f"{label}, line {number}: `{key}` is managed by the operator")


def _quantities(value: Any, path: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """Every Kubernetes quantity in the values: resources, reservedMemory, volume sizes."""
    if isinstance(value, dict):
        for key, sub in value.items():
            here = (*path, key)
            if key in ("requests", "limits") and path and path[-1] == "resources":
                for name, amount in as_map(sub).items():
                    yield (*here, name), amount
            elif key in ("reservedMemory", "size") and isinstance(sub, str | int | float):
                yield here, sub
            else:
                yield from _quantities(sub, here)
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            yield from _quantities(sub, (*path, index))


@rule(
    "SUNK025",
    "quantity-out-of-range",
    "error",
    "A resource quantity larger than Kubernetes stores (2^63-1): no Node has it.",
    "write the real amount (e.g. 512Gi)",
    charts=("slurm", "sunk"),
)
def quantity_out_of_range(ctx: RuleContext) -> Iterator[Hit]:
    for path, amount in _quantities(ctx.values, ()):
        if isinstance(amount, bool) or not isinstance(amount, str | int | float):
            continue
        try:
            parse_quantity(amount)
        except QuantityError as exc:
            if "out of range" in str(exc) or "longer than" in str(exc):
                yield Hit(path, str(exc))


# --------------------------------------------------------------------------- shared volumes


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
