"""Node group rules: group names, definitions, where groups' Pods may land, and their
requests and rollout budget."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from sunk.models.quantity import QuantityError, parse_quantity
from sunk.models.stock import STOCK_DEFINITIONS
from sunk.slurmconf import size
from sunk.validate.rules.context import NODES, RuleContext, as_list, as_map, get
from sunk.validate.rules.registry import Hit, rule

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


# Each group gets a partition named after it: `default` is PartitionName=DEFAULT, and `all`
# would write `Nodes=all` on that partition's line, which reads as every node.
RESERVED_GROUPS = {"default", "all"}
MAX_GROUP_NAME = 40


@rule(
    "SUNK004",
    "unknown-definition",
    "error",
    "A node group names a definition that compute.definitions does not have.",
    "use a stock definition (cpu-epyc, a100, h100, h200, b200, gb200, l40s) or declare it "
    "under compute.definitions",
)
def unknown_definition(ctx: RuleContext) -> Iterator[Hit]:
    """A group's `definitions` list names shared settings in `compute.definitions` (the chart ships
    `cpu-epyc`, `a100`, `h100`, `h200`, `b200`, `gb200` and `l40s`), merged in order under the
    group's own keys. A name that is not there would leave the group without the resources,
    tolerations and features it was meant to get; a name close to a known one gets a
    did-you-mean.

    Fails:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc, nvme]}

    Passes:
        compute:
          definitions:
            nvme: {features: {static: [cpu, epyc, nvme]}}
          nodes:
            cpu: {definitions: [cpu-epyc, nvme]}
    """
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
    """A group's name becomes a Kubernetes object name (the NodeSet and its Pods), a Slurm node
    set and a partition, so it must be a DNS label (lowercase letters, digits and `-`, starting
    and ending with a letter or digit) of at most 40 characters, and neither `default` nor
    `all`: `PartitionName=default` sets defaults for the partitions after it, and `Nodes=all`
    reads as every node.

    Fails:
        compute:
          nodes:
            GPU: {definitions: [h100]}

    Passes:
        compute:
          nodes:
            gpu: {definitions: [h100]}
    """
    for name in sorted(as_map(get(ctx.values, *NODES))):
        path = (*NODES, name)
        if not DNS_LABEL.match(name):
            yield Hit(path, f"group name `{name}` is not a DNS label (Kubernetes object name)")
        elif len(name) > MAX_GROUP_NAME:
            yield Hit(path, f"group name `{name}` is longer than {MAX_GROUP_NAME} characters")
        elif name in RESERVED_GROUPS:
            yield Hit(path, f"group name `{name}` is reserved by Slurm (it names a partition)")


@rule(
    "SUNK007",
    "group-node-selector",
    "warning",
    "A node group sets nodeSelector, which does not bind its pods to Nodes.",
    "use affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution instead",
)
def group_node_selector(ctx: RuleContext) -> Iterator[Hit]:
    """A group's `nodeSelector` is accepted, as SUNK accepts it, but the operator does not put it
    on the slurmd Pods, so it decides nothing about where they run. A required node affinity
    does: `affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`.

    Fails:
        compute:
          nodes:
            cpu:
              definitions: [cpu-epyc]
              nodeSelector: {pool: cpu}

    Passes:
        compute:
          nodes:
            cpu:
              definitions: [cpu-epyc]
              affinity:
                nodeAffinity:
                  requiredDuringSchedulingIgnoredDuringExecution:
                    nodeSelectorTerms:
                      - matchExpressions:
                          - {key: pool, operator: In, values: [cpu]}
    """
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
    """Two enabled groups with replicas can meet on one Node when either has no required node
    affinity, or when some term of each can be satisfied by the same labels (a key they both
    constrain, with an `In`, `NotIn`, `Exists` or `DoesNotExist` requirement one label value
    can meet). That is allowed, as in SUNK: each Node runs the slurmd Pod of one NodeSet only,
    whichever claims it first, and the other NodeSet lists it in its NodeConflict condition. But
    which group gets which of those Nodes is then left to chance, hence a warning; a required
    node affinity on a distinct label value per group decides it.

    Fails:
        compute:
          nodes:
            cpu: {definitions: [cpu-epyc]}
            big: {definitions: [cpu-epyc]}

    Passes:
        compute:
          nodes:
            cpu:
              definitions: [cpu-epyc]
              affinity:
                nodeAffinity:
                  requiredDuringSchedulingIgnoredDuringExecution:
                    nodeSelectorTerms:
                      - matchExpressions:
                          - {key: pool, operator: In, values: [cpu]}
            big:
              definitions: [cpu-epyc]
              affinity:
                nodeAffinity:
                  requiredDuringSchedulingIgnoredDuringExecution:
                    nodeSelectorTerms:
                      - matchExpressions:
                          - {key: pool, operator: In, values: [big]}
    """
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
    "SUNK017",
    "group-without-requests",
    "warning",
    "A compute group's pods request no CPU or memory.",
    "set resources.requests.cpu and .memory (or use a stock definition)",
)
def group_requests(ctx: RuleContext) -> Iterator[Hit]:
    """A group whose slurmd Pods request no CPU or no memory (after its definitions and
    `compute.nodeDefaults` are merged in) is placed by Kubernetes as if it needed none: the
    scheduler counts requests, so the Pods can land on Nodes other workloads already fill. The
    stock definitions set both.

    Fails:
        compute:
          nodes:
            cpu: {replicas: 2}

    Passes:
        compute:
          nodes:
            cpu: {replicas: 2, definitions: [cpu-epyc]}
    """
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
    """`compute.maxUnavailable` as a number of Pods is the rollout budget of every group; a group
    with fewer replicas than that (but at least one) can have all its Pods down at once during an
    update. A percentage scales with each group and is never reported.

    Fails:
        compute:
          maxUnavailable: 4
          nodes:
            cpu: {definitions: [cpu-epyc], replicas: 2}

    Passes:
        compute:
          maxUnavailable: 2
          nodes:
            cpu: {definitions: [cpu-epyc], replicas: 2}
    """
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


def _quantity(value: Any) -> Decimal | None:
    try:
        return parse_quantity(value)
    except (QuantityError, TypeError, ValueError, ArithmeticError):
        return None


def stock_node_shape(definition: dict[str, Any]) -> dict[str, tuple[Decimal, str]]:
    """The Node a stock definition describes, resource → (amount, as written): its CPUs
    (`skuCpu`), its memory and GPUs (the definition's limits, which are the whole node)."""
    limits = as_map(get(definition, "resources", "limits"))
    written = {
        "cpu": definition.get("skuCpu"),
        "memory": limits.get("memory"),
        "nvidia.com/gpu": limits.get("nvidia.com/gpu"),
    }
    shape = {}
    for resource, text in written.items():
        amount = _quantity(text)
        if amount is not None:
            shape[resource] = (amount, str(text))
    return shape


@rule(
    "SUNK041",
    "requests-exceed-stock-node",
    "warning",
    "A group's requests exceed the Node its stock definition describes.",
    "lower the requests below the definition's skuCpu and memory limit, or describe the "
    "Nodes you run with a definition of your own",
)
def requests_exceed_stock_node(ctx: RuleContext) -> Iterator[Hit]:
    """A group built on a stock definition (`cpu-epyc`, `h100`, ...) runs on Nodes of that
    shape: its CPUs (`skuCpu`) and its whole memory and GPUs (the definition's limits).
    Requests above that fit no such Node: the Pods stay Pending, and a rolling update that
    raises them is blocked (the operator keeps the old Pods and says `UpdateBlocked`) rather
    than lose the Nodes. The shape is read from `compute.definitions` as the values have it.

    Fails:
        compute:
          nodes:
            gpu:
              definitions: [h100]
              resources: {requests: {cpu: "200"}}

    Passes:
        compute:
          nodes:
            gpu: {definitions: [h100]}
    """
    definitions = as_map(get(ctx.values, "compute", "definitions"))
    for name, group in ctx.groups.items():
        requests = as_map(get(group, "resources", "requests"))
        raw = as_map(get(ctx.values, *NODES, name))
        for def_name in as_list(raw.get("definitions")):
            if def_name not in STOCK_DEFINITIONS or def_name not in definitions:
                continue
            for resource, (have, text) in stock_node_shape(as_map(definitions[def_name])).items():
                wanted = _quantity(requests.get(resource))
                if wanted is not None and wanted > have:
                    yield Hit(
                        (*NODES, name, "resources", "requests", resource),
                        f"group `{name}` requests {resource} {requests[resource]}, more than "
                        f"the `{def_name}` Node has ({text})",
                    )


@rule(
    "SUNK049",
    "topology-outgrows-configmap",
    "warning",
    "The groups' replicas could grow topology.conf past half of the 1 MiB a ConfigMap holds.",
    "split the groups over several clusters, or set compute.generateTopology: false (Slurm then "
    "places jobs without the topology)",
)
def topology_outgrows_configmap(ctx: RuleContext) -> Iterator[Hit]:
    """The operator writes topology.conf, one line per switch or NVLink block listing its
    Slurm nodes, into a ConfigMap, and the API server refuses a ConfigMap past 1 MiB: the
    cluster's configuration could then not change at all. Names whose Nodes' IPs run in
    sequence share a hostlist range (`h100-012-[001-032]`); scattered ones are listed one by
    one, about the name's length plus 9 bytes each. Past half the limit at the groups'
    `replicas`, this warns at the largest group.

    Fails:
        compute:
          nodes:
            h100-superpod-a: {replicas: 30000, definitions: [h100]}

    Passes:
        compute:
          nodes:
            h100-superpod-a: {replicas: 2000, definitions: [h100]}
    """
    if get(ctx.values, "compute", "generateTopology") is False:
        return
    groups = {
        name: (str(group.get("podNamePrefix") or name), group.get("replicas"))
        for name, group in ctx.groups.items()
        if isinstance(group.get("replicas"), int) and not isinstance(group.get("replicas"), bool)
    }
    warning = size.topology_warning(*size.projected_topology(groups.values()))
    if warning:
        largest = max(groups, key=lambda name: (groups[name][1], name))
        yield Hit((*NODES, largest, "replicas"), warning)
