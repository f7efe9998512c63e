"""s6 services (`compute.s6`, `compute.nodes.<name>.s6`, `login.s6`): the ConfigMap the slurmd
and login images read when they start (images/common/sunk-lib.sh, ``sunk_s6_start``) and its
place in their Pods.

The ConfigMap holds ``services``, one line a service, ``NAME TYPE TIMEOUT_UP TIMEOUT_DOWN`` in
name order (the order the oneshots run in), and ``NAME.script`` for each. The names are
checked by the models (and the CRDs' CEL rule): they are file names in the container.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from sunk.models.values import S6Service

VOLUME = "sunk-s6"
MOUNT = "/etc/sunk/s6"
READY_PROBE = {
    "exec": {"command": ["/usr/local/bin/sunk-ready"]},
    "periodSeconds": 10,
    "failureThreshold": 1,
}


def merged(
    base: Mapping[str, S6Service] | None, over: Mapping[str, S6Service] | None
) -> dict[str, S6Service]:
    """The cluster's services with the group's on top (a group's service replaces the
    cluster's of the same name). The chart has merged them already; a hand-written NodeSet
    gets the cluster's too."""
    return {**(base or {}), **(over or {})}


def config_map_data(services: Mapping[str, S6Service]) -> dict[str, str]:
    lines = []
    data: dict[str, str] = {}
    for name in sorted(services):
        service = services[name]
        lines.append(f"{name} {service.type} {service.timeoutUp or 0} {service.timeoutDown or 0}")
        data[f"{name}.script"] = service.script
    data["services"] = "\n".join(lines) + "\n"
    return data


def hash_input(services: Mapping[str, S6Service]) -> dict[str, Any]:
    return {name: services[name].model_dump(mode="json") for name in sorted(services)}


def config_map(
    name: str,
    namespace: str,
    services: Mapping[str, S6Service],
    labels: dict[str, str],
    owners: list[dict[str, Any]],
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": owners,
        },
        "data": config_map_data(services),
    }


def attach(spec: dict[str, Any], container: str, config_map_name: str, probe: bool) -> None:
    """Mount the services into ``container`` of a Pod spec; with ``probe``, make the container
    ready only once its oneshots succeeded (unless the template has its own probe)."""
    spec["volumes"] = [
        *(spec.get("volumes") or []),
        {"name": VOLUME, "configMap": {"name": config_map_name}},
    ]
    for c in spec.get("containers") or []:
        if c.get("name") != container:
            continue
        c["volumeMounts"] = [
            *(c.get("volumeMounts") or []),
            {"name": VOLUME, "mountPath": MOUNT, "readOnly": True},
        ]
        if probe:
            c.setdefault("readinessProbe", copy.deepcopy(READY_PROBE))
