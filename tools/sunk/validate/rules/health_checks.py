"""Node health rules: checks that never run, and slurm.conf keys that take the checks' place."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import ValidationError

from sunk.models.values import HealthCheck
from sunk.slurmconf import health
from sunk.validate.rules.context import RuleContext, as_map, get
from sunk.validate.rules.registry import Hit, rule


def _health(ctx: RuleContext) -> HealthCheck | None:
    try:
        return HealthCheck.model_validate(ctx.values.get("healthCheck") or {})
    except ValidationError:
        return None  # the schema step reports it


@rule(
    "SUNK047",
    "health-check-never-runs",
    "warning",
    "Health check settings that cannot act: checks with no interval, prolog or epilog to run "
    "them, a schedule with no check, a Node condition to verify with no periodic check, or "
    "Node conditions or active checks with the Syncer off.",
    "give the checks an interval (or prolog/epilog), enable a check, or drop the setting",
)
def health_check_never_runs(ctx: RuleContext) -> Iterator[Hit]:
    """`healthCheck` runs its checks from slurmd (`interval`) and from the prolog and epilog.
    Checks with none of the three never run; an interval, prolog or epilog with no check
    enabled renders nothing. A `nodeConditions` entry with `verify` keeps its node drained
    after the condition clears until a periodic run passes: without `interval` and a check,
    the node stays drained until an administrator resumes it. Node conditions drain through
    the Syncer, and the Syncer submits the active checks' jobs, so neither is acted on with
    `syncer.enabled: false`.

    Fails:
        healthCheck:
          mounts: [/scratch]

    Passes:
        healthCheck:
          interval: 300
          mounts: [/scratch]
    """
    hc = _health(ctx)
    if hc is None:
        return
    scheduled = bool(hc.interval or hc.prolog or hc.epilog)
    if hc.checks() and not scheduled:
        yield Hit(
            ("healthCheck",),
            f"checks {', '.join(hc.checks())} never run: no interval, prolog or epilog is set",
        )
    elif scheduled and not hc.checks():
        key = "interval" if hc.interval else "prolog" if hc.prolog else "epilog"
        yield Hit(("healthCheck", key), "no check is enabled: nothing runs")
    periodic = bool(hc.interval and hc.checks())
    for index, condition in enumerate(hc.nodeConditions):
        if condition.verify and not periodic:
            yield Hit(
                ("healthCheck", "nodeConditions", index, "verify"),
                f"no periodic check runs: a node drained for {condition.type} stays drained "
                "after the condition clears until an administrator resumes it",
            )
    if get(ctx.values, "syncer", "enabled") is False:
        for key, what in (("nodeConditions", "drains for Node conditions"),
                          ("active", "submits the active checks' jobs")):  # fmt: skip
            if getattr(hc, key):
                yield Hit(
                    ("healthCheck", key),
                    f"accepted, not acted on: the Syncer {what}, and it is off",
                )


@rule(
    "SUNK048",
    "health-check-program-replaced",
    "warning",
    "slurmConfig sets a HealthCheck key that healthCheck renders: the value replaces ours, and "
    "with HealthCheckProgram the periodic checks do not run.",
    "drop the slurmConfig key and set healthCheck.interval / nodeState, or drop healthCheck",
)
def health_check_program_replaced(ctx: RuleContext) -> Iterator[Hit]:
    """With periodic checks (`healthCheck.interval` and a check) the renderer sets
    HealthCheckProgram, HealthCheckInterval and HealthCheckNodeState. The same key in
    `slurmConfig` (any case, as Slurm reads keys) replaces ours: another HealthCheckProgram
    means our checks never run periodically; the other two override `healthCheck`.

    Fails:
        healthCheck:
          interval: 300
          mounts: [/scratch]
        slurmConfig:
          HealthCheckProgram: /usr/sbin/nhc

    Passes:
        slurmConfig:
          HealthCheckProgram: /usr/sbin/nhc
          HealthCheckInterval: 300
    """
    hc = _health(ctx)
    if hc is None:
        return
    ours = {key.lower(): key for key in health.slurm_settings(hc) if key.startswith("HealthCheck")}
    for key in sorted(as_map(ctx.values.get("slurmConfig"))):
        if key.lower() not in ours:
            continue
        replaced = ours[key.lower()]
        what = (
            "healthCheck's periodic checks do not run"
            if replaced == "HealthCheckProgram"
            else "it overrides healthCheck"
        )
        yield Hit(("slurmConfig", key), f"replaces the {replaced} healthCheck renders: {what}")
