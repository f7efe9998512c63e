"""What a NodeSet reconcile must do, from the spec and what the API server shows.

Pure: the handler fetches Nodes and the NodeSet's pods, calls `plan`, then carries out the
claims, creations and removals it returns and writes the status. With the Syncer running,
``slurm`` is its view of the Slurm nodes: it orders scale-down (not ready, idle, draining,
running; newest first within a class) and fills the per-state counts.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from sunk.operator import names
from sunk.operator.common import munge_resources, pod_node
from sunk.operator.nodeset.feasibility import evaluate, internal_ip, pod_requests, short_of
from sunk.operator.nodeset.naming import pod_name
from sunk.operator.nodeset.pod import (
    NODE_TOLERATIONS,
    PodContext,
    build_pod,
    template_hash,
)
from sunk.operator.pod_health import is_ready
from sunk.operator.shared_volumes import VolumeConfigError
from sunk.slurmconf.inputs import NodeSetInput
from sunk.syncer.plan import SlurmNode

ACTIVITY_RANK = {"not-ready": 0, "idle": 1, "draining": 2, "running": 3}


@dataclass
class Plan:
    claim: list[str] = field(default_factory=list)  # Nodes to label as ours
    release: list[str] = field(default_factory=list)  # Nodes whose claim we drop
    create: list[dict[str, Any]] = field(default_factory=list)
    delete: list[tuple[str, str]] = field(default_factory=list)  # (pod name, reason) to remove
    conflicts: dict[str, str] = field(default_factory=dict)  # node → why it cannot be used
    # Nodes another NodeSet claimed first: SUNK's one-NodeSet-per-Node rule, not an error.
    claimed_elsewhere: dict[str, str] = field(default_factory=dict)  # node → other NodeSet
    infeasible: dict[str, str] = field(default_factory=dict)  # node → reason
    # Nodes whose Pod runs an older template the new one would not fit: the Pod stays.
    update_blocked: dict[str, str] = field(default_factory=dict)  # node → what is short
    status: dict[str, Any] = field(default_factory=dict)
    rolling: bool = False  # some Pods run an older template
    on_delete: bool = False  # …and only a deletion replaces them
    # Volumes that do not merge into a Pod (sunk.operator.shared_volumes): no Pod is created
    # or replaced, but scale-downs and removals go on, and the running Pods are left alone.
    invalid: str | None = None


def budget(max_unavailable: int | str, desired: int) -> int:
    """Pods that may be unavailable at once during a rolling update (at least one)."""
    if isinstance(max_unavailable, str) and max_unavailable.endswith("%"):
        value = math.floor(desired * int(max_unavailable[:-1]) / 100)
    else:
        value = int(max_unavailable)
    return max(1, value)


def _marked(pod: dict[str, Any]) -> bool:
    return names.ANN_REMOVAL in (pod["metadata"].get("annotations") or {})


def scale_down_order(
    pods: list[dict[str, Any]], slurm: Mapping[str, SlurmNode] | None = None
) -> list[dict[str, Any]]:
    """SUNK's removal order: not ready, then idle, then draining, then running (from live
    Slurm state when the Syncer runs; a Pod Slurm does not know counts as idle), the newest
    first within a class."""

    def rank(pod: dict[str, Any]) -> int:
        if not is_ready(pod):
            return 0
        node = (slurm or {}).get(pod["metadata"]["name"])
        return ACTIVITY_RANK[node.activity] if node is not None else 1

    # Three stable sorts, least significant key first: name, then newest first, then class.
    ordered = sorted(pods, key=lambda p: p["metadata"]["name"])
    ordered.sort(key=lambda p: p["metadata"].get("creationTimestamp", ""), reverse=True)
    ordered.sort(key=rank)
    return ordered


def plan(
    nodeset: NodeSetInput,
    owner: dict[str, Any],
    ctx: PodContext,
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    live_nodesets: set[tuple[str, str]] | None = None,
    slurm: Mapping[str, SlurmNode] | None = None,
    seen_namespaces: Collection[str] | None = None,
    holders: Mapping[str, tuple[str, str]] | None = None,
) -> Plan:
    """``live_nodesets`` (namespace, name): a Node claim by a NodeSet not in it is stale and
    the Node free again; None counts every claim. ``seen_namespaces``: the namespaces
    ``live_nodesets`` was read from (None: all); a claim from any other namespace counts, as
    the operator cannot tell whether its NodeSet lives. ``slurm``: the Syncer's view of the
    Slurm nodes by name, None without a Syncer. ``holders``: Node → (namespace, NodeSet) of
    the slurmd Pods on it, those being created included (``sunk.operator.nodeset.claims``);
    another NodeSet's Pod takes a Node as its label does."""
    result = Plan()
    pod_spec = nodeset.spec.template.spec
    # Feasibility is judged on the pod as it will run: with the tolerations every slurmd Pod
    # gets (a cordoned or not-ready Node keeps its Pod, and the Syncer drains it in Slurm) and
    # the munge sidecar's requests.
    tolerations = [*(pod_spec.get("tolerations") or []), names.LOCK_TOLERATION, *NODE_TOLERATIONS]
    check_spec = {
        **pod_spec,
        "tolerations": tolerations,
        "containers": [
            *(pod_spec.get("containers") or []),
            {"name": "munge", "resources": munge_resources(ctx.munge_resources)},
        ],
    }
    requests = pod_requests(check_spec)  # once, not per Node
    by_node = {pod_node(p): p for p in pods}

    feasible: list[dict[str, Any]] = []
    taken_names: dict[str, str] = {}
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        node_name = node["metadata"]["name"]
        owner_label = (node["metadata"].get("labels") or {}).get(names.LABEL_NODESET)
        owner_ns = (node["metadata"].get("labels") or {}).get(names.LABEL_NAMESPACE)
        verdict = evaluate(check_spec, node, requests, running=node_name in by_node)
        if not verdict.feasible:
            result.infeasible[node_name] = verdict.reason
            if owner_label == nodeset.name and owner_ns == ctx.namespace:
                result.release.append(node_name)
            continue
        stale = (
            live_nodesets is not None
            and (seen_namespaces is None or owner_ns in seen_namespaces)
            and (owner_ns, owner_label) not in live_nodesets
        )
        if owner_label and not stale and (owner_label, owner_ns) != (nodeset.name, ctx.namespace):
            result.claimed_elsewhere[node_name] = f"used by NodeSet {owner_ns}/{owner_label}"
            continue
        holder = (holders or {}).get(node_name)
        if holder is not None and holder != (ctx.namespace, nodeset.name):
            # its Pod is there, or on its way, before its label
            result.claimed_elsewhere[node_name] = f"used by NodeSet {holder[0]}/{holder[1]}"
            continue
        name = pod_name(nodeset.prefix, internal_ip(node) or "")
        if name in taken_names:
            result.conflicts[node_name] = (
                f"pod name {name} already taken by Node "
                f"{taken_names[name]} (same last two IP octets)"
            )
            continue
        taken_names[name] = node_name
        feasible.append(node)

    desired = len(feasible) if nodeset.spec.replicas is None else nodeset.spec.replicas
    try:
        current_hash: str | None = template_hash(nodeset, ctx)
    except VolumeConfigError as exc:
        current_hash, result.invalid = None, str(exc)
    feasible_names = {n["metadata"]["name"] for n in feasible}

    # Keep Nodes already hosting our pods first, the Pods last in removal order first; then
    # the free Nodes by name: stable placement, and a scale-down takes the cheapest Pods.
    by_name = {n["metadata"]["name"]: n for n in feasible}
    keep_first = dict.fromkeys(pod_node(p) for p in reversed(scale_down_order(pods, slurm)))
    ordered = [by_name[n] for n in keep_first if n in by_name] + [
        n for n in feasible if n["metadata"]["name"] not in by_node
    ]
    chosen = ordered[:desired]
    chosen_names = {n["metadata"]["name"] for n in chosen}

    misscheduled = [p for p in pods if pod_node(p) not in feasible_names]
    surplus = [p for p in pods if pod_node(p) in feasible_names and pod_node(p) not in chosen_names]
    for pod in misscheduled:
        result.delete.append((pod["metadata"]["name"], "Node no longer feasible"))
    for pod in scale_down_order(surplus, slurm):
        result.delete.append((pod["metadata"]["name"], "scaled down"))

    for node in chosen:
        node_name = node["metadata"]["name"]
        labels = node["metadata"].get("labels") or {}
        if node_name not in by_node and result.invalid is not None:
            continue  # no Pod to build: leave the Node unclaimed
        if labels.get(names.LABEL_NODESET) != nodeset.name:
            result.claim.append(node_name)
        if node_name not in by_node:
            name = pod_name(nodeset.prefix, internal_ip(node) or "")
            result.create.append(build_pod(nodeset, owner, ctx, node_name, name, labels))
    # A Node's claim goes with its last Pod: while a Pod drains, no other NodeSet may take it.
    for node in ordered[desired:]:
        labels = node["metadata"].get("labels") or {}
        if (
            labels.get(names.LABEL_NODESET) == nodeset.name
            and node["metadata"]["name"] not in by_node
        ):
            result.release.append(node["metadata"]["name"])

    # Rolling update: replace outdated pods, at most `maxUnavailable` out of service at once;
    # a Pod draining for its removal counts, and stays chosen until it is gone.
    kept = [p for p in pods if pod_node(p) in chosen_names]
    nodes_by_name = {n["metadata"]["name"]: n for n in nodes}
    outdated = [
        p
        for p in kept
        if current_hash is not None  # without a template to replace them with: kept as they are
        and (p["metadata"].get("annotations") or {}).get(names.ANN_TEMPLATE_HASH) != current_hash
    ]
    if nodeset.spec.updateStrategy.type == "RollingUpdate":
        unavailable = sum(1 for p in kept if not is_ready(p) or _marked(p)) + len(result.create)
        room = budget(nodeset.spec.maxUnavailable, max(desired, 1)) - unavailable
        in_order = sorted(scale_down_order(outdated, slurm), key=lambda p: not _marked(p))
        for pod in in_order:
            if pod["metadata"].get("deletionTimestamp"):
                continue
            # Replacing it must not lose the Node: the new template has to fit there (as a
            # new placement is judged, on the Node's allocatable resources).
            node = nodes_by_name[pod_node(pod)]
            short = None if _marked(pod) else short_of(check_spec, node, requests)
            if short is not None:
                result.update_blocked[pod_node(pod)] = short
                continue
            if not _marked(pod) and is_ready(pod):
                if room <= 0:
                    continue
                room -= 1
            result.delete.append((pod["metadata"]["name"], "template changed"))
    result.rolling = bool(outdated)
    result.on_delete = nodeset.spec.updateStrategy.type == "OnDelete"

    ready = sum(1 for p in kept if is_ready(p))
    states = [slurm[n] for n in (p["metadata"]["name"] for p in pods) if n in (slurm or {})]
    result.status = {
        "desiredNumberScheduled": desired,
        "numberFeasible": len(feasible),
        "currentNumberScheduled": len([p for p in pods if pod_node(p) in feasible_names]),
        "numberReady": ready,
        "numberDrain": sum(1 for n in states if n.drained),
        "numberIdle": sum(1 for n in states if n.activity == "idle" and not n.drained),
        "numberAllocated": sum(1 for n in states if n.busy),
        "numberDown": sum(1 for n in states if n.activity == "not-ready"),
        "numberRemoving": sum(1 for p in pods if _marked(p)),
        "numberOutdated": len(outdated),
        "numberMisscheduled": len(misscheduled),
        "numberUnavailable": max(0, desired - ready),
        "selector": f"{names.LABEL_NODESET}={nodeset.name}",
    }
    return result
