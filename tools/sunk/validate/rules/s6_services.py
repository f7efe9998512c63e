"""Rules on s6 services (`compute.s6`, `compute.nodes.<name>.s6`, `login.s6` …)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sunk.validate.rules.context import RuleContext, as_map
from sunk.validate.rules.registry import Hit, rule

# Which timeout each type has no use for (the images: images/common/sunk-lib.sh).
UNUSED = {
    "longrun": ("timeoutUp", "a longrun is up once it starts (there is no readiness to wait for)"),
    "oneshot": ("timeoutDown", "a oneshot has no down script to bound"),
}


def _service_maps(ctx: RuleContext) -> Iterator[tuple[tuple[Any, ...], dict[str, Any]]]:
    values = ctx.values
    yield ("login", "s6"), as_map(as_map(values.get("login")).get("s6"))
    compute = as_map(values.get("compute"))
    yield ("compute", "s6"), as_map(compute.get("s6"))
    yield ("compute", "nodeDefaults", "s6"), as_map(as_map(compute.get("nodeDefaults")).get("s6"))
    for block in ("definitions", "nodes"):
        for name, group in as_map(compute.get(block)).items():
            yield ("compute", block, name, "s6"), as_map(as_map(group).get("s6"))


@rule(
    "SUNK036",
    "s6-timeout-unused",
    "warning",
    "An s6 service sets the timeout its type does not use: timeoutUp on a longrun, or "
    "timeoutDown on a oneshot. It is accepted, as SUNK accepts it, but nothing acts on it.",
    "remove the key, or change the service's type",
)
def s6_timeout_unused(ctx: RuleContext) -> Iterator[Hit]:
    """s6 services (under `login.s6`, `compute.s6`, `compute.nodeDefaults.s6`, a definition's or a
    group's `s6`) have a type and two timeouts, and each type uses one of them: a longrun is up
    as soon as it starts, so its `timeoutUp` bounds nothing, and a oneshot has no down script for
    `timeoutDown` to bound. The key is accepted, as SUNK accepts it, but nothing acts on it. A
    timeout of 0 is not reported.

    Fails:
        compute:
          s6:
            exporter: {type: longrun, script: exec sleep infinity, timeoutUp: 5000}

    Passes:
        compute:
          s6:
            exporter: {type: longrun, script: exec sleep infinity, timeoutDown: 3000}
    """
    for path, services in _service_maps(ctx):
        for name, service in services.items():
            service = as_map(service)
            unused = UNUSED.get(service.get("type"))  # type: ignore[arg-type]
            if unused is None or service.get(unused[0]) in (None, 0):
                continue
            key, why = unused
            yield Hit((*path, name, key), f"{key} of the {service['type']} {name}: {why}")
