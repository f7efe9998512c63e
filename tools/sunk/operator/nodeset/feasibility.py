"""Which Kubernetes Nodes a NodeSet may use.

As SUNK documents: only the *required* part of node affinity counts; the pod must tolerate
every NoSchedule/NoExecute taint; its requests must fit the Node's allocatable resources.

A Node that already runs the Pod keeps it as a DaemonSet's would: only a required affinity
that no longer matches or an untolerated NoExecute taint ends it. A NoSchedule taint (the
controller-manager's `not-ready`/`unreachable` ones on a Node that missed its heartbeats, a
cordon, an admin's own) stops new placements only; the Syncer drains the Slurm node instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sunk.models.quantity import QuantityError, parse_quantity

PLACING = ("NoSchedule", "NoExecute")  # the taints that keep a new Pod off a Node
KEEPING = ("NoExecute",)  # the taints that end a running one
INSUFFICIENT = "insufficient resources"


@dataclass(frozen=True)
class Verdict:
    feasible: bool
    reason: str = ""


def _labels(node: dict[str, Any]) -> dict[str, str]:
    return node.get("metadata", {}).get("labels") or {}


def _expression_matches(expr: dict[str, Any], value: str | None) -> bool:
    op, values = expr.get("operator"), expr.get("values") or []
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            left, right = int(value), int(values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def _term_matches(term: dict[str, Any], node: dict[str, Any]) -> bool:
    labels = _labels(node)
    fields = {"metadata.name": node.get("metadata", {}).get("name")}
    expressions = term.get("matchExpressions") or []
    field_exprs = term.get("matchFields") or []
    if not expressions and not field_exprs:
        return False  # an empty term matches nothing (Kubernetes semantics)
    return all(_expression_matches(e, labels.get(e.get("key"))) for e in expressions) and all(
        _expression_matches(e, fields.get(e.get("key"))) for e in field_exprs
    )


def required_affinity_matches(pod_spec: dict[str, Any], node: dict[str, Any]) -> bool:
    required = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    return any(_term_matches(term, node) for term in terms)


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for tol in tolerations:
        effect_ok = not tol.get("effect") or tol.get("effect") == taint.get("effect")
        if not effect_ok:
            continue
        operator = tol.get("operator") or "Equal"
        if operator == "Exists" and (not tol.get("key") or tol.get("key") == taint.get("key")):
            return True
        if (
            operator == "Equal"
            and tol.get("key") == taint.get("key")
            and (tol.get("value") or "") == (taint.get("value") or "")
        ):
            return True
    return False


def untolerated_taint(
    pod_spec: dict[str, Any], node: dict[str, Any], effects: tuple[str, ...] = PLACING
) -> dict[str, Any] | None:
    """The first taint of one of ``effects`` the Pod does not tolerate."""
    tolerations = pod_spec.get("tolerations") or []
    for taint in node.get("spec", {}).get("taints") or []:
        if taint.get("effect") not in effects:
            continue
        if not tolerates(tolerations, taint):
            return taint
    return None


def pod_requests(pod_spec: dict[str, Any]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for container in pod_spec.get("containers") or []:
        resources = container.get("resources") or {}
        requests = dict(resources.get("limits") or {})  # limits imply requests when unset
        requests.update(resources.get("requests") or {})
        for name, raw in requests.items():
            total[name] = total.get(name, Decimal(0)) + parse_quantity(raw)
    return total


def short_of(
    pod_spec: dict[str, Any], node: dict[str, Any], requests: dict[str, Decimal] | None = None
) -> str | None:
    """``requests``: ``pod_requests(pod_spec)`` when the caller has it already."""
    allocatable = node.get("status", {}).get("allocatable") or {}
    wanted_all = pod_requests(pod_spec) if requests is None else requests
    for name, wanted in sorted(wanted_all.items()):
        try:
            have = parse_quantity(allocatable.get(name, 0))
        except QuantityError:
            have = Decimal(0)
        if wanted > have:
            return f"{name}: requests {wanted} > allocatable {have}"
    return None


def evaluate(
    pod_spec: dict[str, Any],
    node: dict[str, Any],
    requests: dict[str, Decimal] | None = None,
    running: bool = False,
) -> Verdict:
    """``running``: the Node already runs the Pod (see the module's docstring)."""
    if not required_affinity_matches(pod_spec, node):
        return Verdict(False, "required node affinity does not match")
    taint = untolerated_taint(pod_spec, node, KEEPING if running else PLACING)
    if taint is not None:
        return Verdict(
            False,
            f"untolerated taint {taint.get('key')}={taint.get('value', '')}:{taint.get('effect')}",
        )
    missing = None if running else short_of(pod_spec, node, requests)
    if missing:
        return Verdict(False, f"{INSUFFICIENT} ({missing})")
    if not internal_ip(node):
        return Verdict(False, "no InternalIP address")
    return Verdict(True)


def internal_ip(node: dict[str, Any]) -> str | None:
    for address in node.get("status", {}).get("addresses") or []:
        if address.get("type") == "InternalIP" and address.get("address", "").count(".") == 3:
            return address["address"]
    return None
