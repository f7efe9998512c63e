"""Memory and CPU arithmetic for dynamic nodes: RealMemory and DefMemPerCPU.

DefMemPerCPU = (memory limit − reservedMemory) ÷ CPUs, as SUNK documents; a group whose
reservation swallows its memory cannot run jobs, so that is an error, not a negative number.
"""

from __future__ import annotations

import math
from decimal import Decimal

from sunk.models.base import SLURM_CPUS_MAX
from sunk.models.quantity import QuantityError, parse_quantity, to_mebibytes
from sunk.slurmconf.inputs import NodeSetInput, slurmd_container


class SizingError(ValueError):
    """A NodeSet whose resources leave Slurm nothing to schedule; the message names the key."""


def resources(nodeset: NodeSetInput) -> tuple[dict, dict]:
    res = slurmd_container(nodeset.spec).get("resources") or {}
    return res.get("limits") or {}, res.get("requests") or {}


def _amount(nodeset: NodeSetInput, what: str, raw: str | int | float) -> Decimal:
    try:
        return parse_quantity(raw)
    except QuantityError as exc:
        raise SizingError(f"NodeSet {nodeset.name}: slurmd container {what}: {exc}") from exc


def cpus(nodeset: NodeSetInput) -> int | None:
    """CPUs Slurm schedules: skuCpu, else the CPU limit, else the CPU request (rounded down)."""
    if nodeset.spec.skuCpu:
        return nodeset.spec.skuCpu
    limits, requests = resources(nodeset)
    raw = limits.get("cpu", requests.get("cpu"))
    if raw is None:
        return None
    count = max(1, math.floor(_amount(nodeset, "cpu", raw)))
    if count > SLURM_CPUS_MAX:
        raise SizingError(
            f"NodeSet {nodeset.name}: {count} CPUs exceed Slurm's limit of {SLURM_CPUS_MAX} "
            "per node; lower the slurmd container's CPU limit"
        )
    return count


def real_memory_mib(nodeset: NodeSetInput, reserved_default: str | int | float) -> int | None:
    """Memory Slurm may hand out on one node of the group, in MiB."""
    limits, requests = resources(nodeset)
    raw = limits.get("memory", requests.get("memory"))
    if raw is None:
        return None
    reserved = nodeset.spec.reservedMemory
    reserved_mib = to_mebibytes(reserved if reserved is not None else reserved_default)
    available = int(_amount(nodeset, "memory", raw) / 2**20) - reserved_mib
    if available <= 0:
        raise SizingError(
            f"NodeSet {nodeset.name}: memory {raw} minus reservedMemory "
            f"{reserved if reserved is not None else reserved_default} leaves no memory for "
            "Slurm (DefMemPerCPU would be negative); raise the memory limit or lower "
            "compute.reservedMemory"
        )
    return available


def def_mem_per_cpu(nodeset: NodeSetInput, reserved_default: str | int | float) -> int | None:
    memory = real_memory_mib(nodeset, reserved_default)
    count = cpus(nodeset)
    if memory is None or count is None:
        return None
    return max(1, memory // count)
