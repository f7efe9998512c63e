"""SUNK027: a values key the chart accepts but that nothing acts on yet.

The keys and the reasons are `sunk.models.not_acted_on.TABLE`. A key counts when a user layer
(a values file or `--set`, not the chart's values.yaml) sets it to something other than the
chart's default and other than empty (null, false-by-default, `{}`, `[]`, `""`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sunk.models import not_acted_on
from sunk.validate.rules.context import RuleContext, get
from sunk.validate.rules.registry import Hit, rule

_MISSING = object()


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, dict | list | str) and not value)


def _chart_default(ctx: RuleContext, path: tuple[str, ...]) -> Any:
    if ctx.coalesced is None or not ctx.coalesced.layers:
        return _MISSING
    return get(ctx.coalesced.layers[0].data, *path, default=_MISSING)


@rule(
    "SUNK027",
    "not-acted-on",
    "warning",
    'A values key the chart accepts but that nothing acts on yet (README: "Accepted, not '
    'acted on yet").',
    "remove the key, or keep it knowing it has no effect yet (`# sunkctl: ignore=SUNK027`)",
    charts=("slurm", "sunk"),
)
def not_acted_on_keys(ctx: RuleContext) -> Iterator[Hit]:
    """Some keys are accepted so that SUNK values files validate, but nothing acts on them yet (the
    keys and reasons: `sunk.models.not_acted_on.TABLE`, listed in the root README under
    "Accepted, not acted on yet"). The rule warns when a values file or `--set` (not the chart's
    own values.yaml) sets one to something other than its chart default and other than empty
    (null, `{}`, `[]`, `""`), so a setting that changes nothing does not pass unnoticed.

    Fails:
        compute:
          pyxis: {enabled: true, enrootConfig: {ENROOT_TEMP_PATH: /enroot}}

    Passes:
        compute:
          pyxis: {enabled: true, enrootConfig: {ENROOT_DATA_PATH: /enroot/data}}
    """
    seen: set[tuple[str, ...]] = set()
    for entry in not_acted_on.entries(ctx.chart):
        for path, value in not_acted_on.expand(ctx.values, entry.path):
            if path in seen or not entry.covers(path) or _empty(value):
                continue
            if not ctx.set_by_user(path) or value == _chart_default(ctx, path):
                continue
            seen.add(path)
            yield Hit(
                path,
                f"`{'.'.join(path)}` is accepted but not acted on yet: {entry.reason}",
            )
