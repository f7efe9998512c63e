"""The stock library of node definitions for common CPU and GPU SKUs (plain data).

Users name them in `compute.nodes.<name>.definitions` and override any key; the numbers are
typical whole-node shapes (CPUs Slurm schedules, memory limit, GPUs) and leave headroom in
the requests for node daemons.
"""

from __future__ import annotations

from typing import Any

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _gpu(gres_type: str, gpus: int, cpus: int, memory_gi: int) -> dict[str, Any]:
    return {
        "gresGpu": f"{gres_type}:{gpus}",
        "skuCpu": cpus,
        "features": {"static": ["gpu", gres_type]},
        "resources": {
            "requests": {
                "cpu": str(cpus - 4),
                "memory": f"{memory_gi - 64}Gi",
                "nvidia.com/gpu": gpus,
            },
            "limits": {"memory": f"{memory_gi}Gi", "nvidia.com/gpu": gpus},
        },
        "tolerations": [GPU_TOLERATION],
    }


STOCK_DEFINITIONS: dict[str, dict[str, Any]] = {
    "cpu-epyc": {
        "skuCpu": 96,
        "features": {"static": ["cpu", "epyc"]},
        "resources": {"requests": {"cpu": "92", "memory": "320Gi"}, "limits": {"memory": "384Gi"}},
    },
    "a100": _gpu("a100", 8, 96, 960),
    "h100": _gpu("h100", 8, 128, 1900),
    "h200": _gpu("h200", 8, 128, 1900),
    "b200": _gpu("b200", 8, 128, 1900),
    "gb200": _gpu("gb200", 4, 144, 850),
    "l40s": _gpu("l40s", 8, 64, 960),
}
