"""Shared building blocks for the typed models."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

# Extension keys understood by our schema generators (see sunk.schema):
#   x-open        the object is a raw Kubernetes fragment: any keys allowed, passed through
#   x-int-or-string  a Kubernetes IntOrString
OPEN = {"x-open": True}


class Strict(BaseModel):
    """A values/spec object: unknown keys are errors, field names are SUNK's camelCase keys."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_default=True)


def open_object(description: str, **kwargs: Any) -> Any:
    """A raw Kubernetes fragment (affinity, securityContext, volume …): passed through as is."""
    return Field(description=description, json_schema_extra=OPEN, **kwargs)


# A Kubernetes resource quantity ("500m", "4Gi", 8). RE2-safe pattern.
# Bounded: at most 30 digits and a two-digit exponent (the magnitude itself is checked by
# sunk.models.quantity: at most 2^63-1, as Kubernetes stores it).
QUANTITY_PATTERN = (
    r"^[+]?([0-9]{1,30}([.][0-9]{0,30})?|[.][0-9]{1,30})([eE][-+]?[0-9]{1,2}|[mkMGTPE]|[KMGTPE]i)?$"
)
# Counts as Kubernetes and Slurm store them.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
SLURM_CPUS_MAX = 65535  # Slurm keeps a node's CPU count in 16 bits
_QUANTITY_RE = re.compile(QUANTITY_PATTERN)


def _check_quantity(value: str | int | float) -> str | int | float:
    from sunk.models.quantity import parse_quantity  # (quantity imports nothing of ours)

    if isinstance(value, str) and not _QUANTITY_RE.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 500m, 4Gi, 8)")
    if not isinstance(value, str) and value < 0:
        raise ValueError(f"{value!r} is negative")
    parse_quantity(value)  # bounded: raises QuantityError (a ValueError) when out of range
    return value


Quantity = Annotated[
    str | int | float,
    AfterValidator(_check_quantity),
    Field(json_schema_extra={"x-quantity": True}),
]

# 0% to 100%, written as Kubernetes writes them (no leading zeros): the one pattern of the
# model, the values schema (sunk.schema.convert) and the CRDs' CEL rule below.
PERCENT = r"^(100|[1-9]?[0-9])%$"
_PERCENT = re.compile(PERCENT)


def _check_int_or_percent(value: int | str) -> int | str:
    if isinstance(value, bool) or (isinstance(value, int) and value < 0):
        raise ValueError("expected a whole number of Pods (0 or more) or a percentage like '10%'")
    if isinstance(value, str) and not _PERCENT.match(value):
        raise ValueError(f"{value!r}: expected a percentage from '0%' to '100%', or a whole number")
    return value


# A rolling-update budget as Kubernetes writes it: Pods, or a percentage of the desired Pods.
# The CRDs say the same in CEL (an int-or-string schema cannot carry a pattern), so the API
# server refuses `maxUnavailable: "abc"` instead of the operator meeting it.
INT_OR_PERCENT_RULE = {
    "rule": f"type(self) == string ? self.matches('{PERCENT}') : self >= 0",
    "message": "expected a whole number of Pods (0 or more) or a percentage from '0%' to '100%'",
}
IntOrPercent = Annotated[
    int | str,
    AfterValidator(_check_int_or_percent),
    Field(json_schema_extra={"x-int-or-string": True, "x-cel": [INT_OR_PERCENT_RULE]}),
]

# A CPU count written as text, as SUNK's values files do (`skuCpu: "4"`): 1 to 65535, the most
# Slurm keeps in 16 bits (SLURM_CPUS_MAX).
CPU_COUNT = (
    r"^([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$"
)
CpuCount = Annotated[str, Field(pattern=CPU_COUNT)]

# DNS-1123 label: Kubernetes object names we derive from node group names.
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


# Text that reaches a Slurm daemon's configuration: the patterns of the one guard
# (sunk.slurmconf.guard), so the values schema and the CRDs refuse what the renderer refuses.
CONF_KEY = r"^[A-Za-z][A-Za-z0-9_]*$"
CONF_VALUE = r'^[^\x00-\x1f\x7f#"\\]*$'
CONF_WORD = r'^[^\x00-\x20\x7f#"\\]+$'
FEATURE = r"^[A-Za-z0-9_.:+-]+$"
FEATURE_PREFIX = r"^[A-Za-z0-9_.:+-]*$"
SLURM_NAME = r"^[A-Za-z0-9_.-]+$"
HOST = r"^[A-Za-z0-9_.:\[\]-]+$"
MAX_CONF_VALUE = 4096

# A Lua plugin script (job_submit.lua, cli_filter.lua): multi-line by nature, so line feeds and
# tabs pass; every other C0 control character (NUL, CR, ESC …) and DEL is refused (why:
# sunk.slurmconf.guard). The guard also refuses the Unicode bidirectional controls, which this
# pattern cannot say: RE2 (the API server, Helm) and Python's `re` share no escape for them.
LUA_TEXT = r"^[^\x00-\x08\x0b-\x1f\x7f]*$"
MAX_LUA = 256 * 1024
# Kubernetes object names (DNS-1123 subdomain) and ConfigMap keys.
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
CONFIG_MAP_KEY = r"^[-._a-zA-Z0-9]+$"

ConfKey = Annotated[str, Field(pattern=CONF_KEY, max_length=128)]
ConfText = Annotated[str, Field(pattern=CONF_VALUE, max_length=MAX_CONF_VALUE)]
ConfWord = Annotated[str, Field(pattern=CONF_WORD, max_length=MAX_CONF_VALUE)]
Feature = Annotated[str, Field(pattern=FEATURE, max_length=256)]
FeaturePrefix = Annotated[str, Field(pattern=FEATURE_PREFIX, max_length=256)]
SlurmName = Annotated[str, Field(pattern=SLURM_NAME, max_length=256)]
# A slurm.conf-style value: text, a number, a boolean (yes/no) or a list (comma-joined).
ScalarOrList = ConfText | int | float | bool | list[ConfText | int | float]
