"""The health checks' share of the Slurm files: slurm.conf's HealthCheck* keys and
``sunk-health.json``, the checks the runner (sunk.health.runner) reads in each slurmd Pod.

Sizes are written in bytes, so the runner needs no quantity parser; percentages stay ``"5%"``.
"""

from __future__ import annotations

import json
from decimal import ROUND_CEILING

from sunk.health.runner import CONFIG, PROGRAM
from sunk.models.quantity import parse_quantity
from sunk.models.values import HealthCheck

FILE = "sunk-health.json"  # the cluster ConfigMap's key; slurmd Pods read it at CONFIG
MOUNT_DIR = CONFIG.rsplit("/", 1)[0]
MOUNT_NAME = CONFIG.rsplit("/", 1)[1]
VOLUME = "sunk-health"  # the slurmd Pod's volume holding it


def slurm_settings(hc: HealthCheck) -> dict[str, object]:
    """HealthCheckProgram and its schedule, when slurmd runs the checks periodically; with the
    checks in the prolog, a job whose prolog failed goes back to the queue for another node
    (Slurm would hold it: ``nohold_on_prolog_fail``)."""
    settings: dict[str, object] = {}
    if hc.checks() and hc.interval:
        settings["HealthCheckProgram"] = PROGRAM
        settings["HealthCheckInterval"] = hc.interval
        settings["HealthCheckNodeState"] = list(dict.fromkeys(hc.nodeState))
    if hc.checks() and hc.prolog:
        settings["SchedulerParameters"] = ["nohold_on_prolog_fail"]
    return settings


def _bytes(value: str | int | float) -> int:
    return int(parse_quantity(value).to_integral_value(rounding=ROUND_CEILING))


def render_checks(hc: HealthCheck) -> str:
    stock: dict[str, object] = {}
    if hc.diskFree:
        stock["disk-free"] = {
            path: minimum if minimum.endswith("%") else _bytes(minimum)
            for path, minimum in sorted(hc.diskFree.items())
        }
    if hc.mounts:
        stock["mounts"] = list(hc.mounts)
    if hc.idleProcesses:
        stock["idle-processes"] = 1000  # the first uid of a user's
    if hc.idleMemory is not None:
        stock["idle-memory"] = _bytes(hc.idleMemory)
    if hc.gpuCount:
        stock["gpu-count"] = True
    active: dict[str, object] = {}
    for name, check in sorted(hc.active.items()):
        entry: dict[str, object] = {"timeLimit": check.timeLimit}
        if check.allreduce is not None:
            entry["allreduce"] = {
                "minBusBandwidth": _bytes(check.allreduce.minBusBandwidth),
                "size": _bytes(check.allreduce.size),
                "iterations": check.allreduce.iterations,
            }
        else:
            entry["script"] = check.script
        active[name] = entry
    config = {"stock": stock, "scripts": dict(sorted(hc.scripts.items())), "timeout": hc.timeout}
    if active:
        config["active"] = active
    return json.dumps(config, indent=2, sort_keys=True) + "\n"
