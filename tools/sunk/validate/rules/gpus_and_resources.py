"""GPU and resource rules: gresGpu against nvidia.com/gpu, the GPU taint, the memory left to
Slurm, and quantities Kubernetes cannot store."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from sunk.models.crds import NodeSetSpec, PodTemplate
from sunk.models.quantity import QuantityError, parse_quantity
from sunk.slurmconf.inputs import NodeSetInput
from sunk.slurmconf.memory import SizingError, real_memory_mib
from sunk.validate.rules.context import NODES, RuleContext, as_list, as_map, get
from sunk.validate.rules.registry import Hit, rule

GPU = "nvidia.com/gpu"


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
    """Slurm schedules GPUs by the group's `gresGpu` (`type:N`), Kubernetes by the Pods'
    `nvidia.com/gpu` requests and limits; the two must agree. The rule reports a group that
    requests GPUs without a `gresGpu` (Slurm would never hand them out), a `gresGpu` without any
    GPU request or limit, and a count in `resources.requests` or `resources.limits` other than
    the `gresGpu` count.

    Fails:
        compute:
          nodes:
            gpu:
              definitions: [h100]
              resources:
                limits: {nvidia.com/gpu: 4}
                requests: {nvidia.com/gpu: 4}

    Passes:
        compute:
          nodes:
            gpu:
              definitions: [h100]
              gresGpu: h100:4
              resources:
                limits: {nvidia.com/gpu: 4}
                requests: {nvidia.com/gpu: 4}
    """
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
    """Slurm may hand out a group's memory limit (else its request) minus `compute.reservedMemory`,
    and DefMemPerCPU is that divided by the group's CPUs (`sunk.slurmconf.memory`, which the
    renderer uses too). When the reserve is at least the group's memory nothing is left for
    Slurm, and the renderer refuses the values; this rule names the group and the two amounts
    before anything renders.

    Fails:
        compute:
          reservedMemory: 8Gi
          nodes:
            small:
              resources:
                requests: {cpu: "2", memory: 4Gi}
                limits: {cpu: "2", memory: 8Gi}

    Passes:
        compute:
          reservedMemory: 2Gi
          nodes:
            small:
              resources:
                requests: {cpu: "2", memory: 4Gi}
                limits: {cpu: "2", memory: 8Gi}
    """
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
    "SUNK015",
    "gpu-group-without-toleration",
    "warning",
    "A GPU group has no toleration for the `nvidia.com/gpu` taint.",
    "add tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]",
)
def gpu_toleration(ctx: RuleContext) -> Iterator[Hit]:
    """GPU Nodes usually carry the `nvidia.com/gpu` taint, so the slurmd Pods of a GPU group (one
    with a `gresGpu` or an `nvidia.com/gpu` request or limit) need a toleration for it: one with
    that key, or one without a key that tolerates everything (`operator: Exists`). The stock GPU
    definitions have it; a group's own `tolerations` list replaces theirs.

    Fails:
        compute:
          nodes:
            gpu:
              definitions: [h100]
              tolerations: [{key: dedicated, operator: Exists}]

    Passes:
        compute:
          nodes:
            gpu:
              definitions: [h100]
              tolerations:
                - {key: dedicated, operator: Exists}
                - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
    """
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
    """Every resource amount in the values (`resources.requests` and `.limits`, `reservedMemory`,
    volume `size`) is a Kubernetes quantity, which Kubernetes stores as a 64-bit number: an amount
    above 2^63-1 (or a number too long to read) fits the quantity syntax, and so the schema, but
    names more than any Node has and more than the API server keeps.

    Fails:
        compute:
          nodes:
            cpu:
              definitions: [cpu-epyc]
              resources:
                limits: {ephemeral-storage: 9000Ei}

    Passes:
        compute:
          nodes:
            cpu:
              definitions: [cpu-epyc]
              resources:
                limits: {ephemeral-storage: 900Gi}
    """
    for path, amount in _quantities(ctx.values, ()):
        if isinstance(amount, bool) or not isinstance(amount, str | int | float):
            continue
        try:
            parse_quantity(amount)
        except QuantityError as exc:
            if "out of range" in str(exc) or "longer than" in str(exc):
                yield Hit(path, str(exc))
