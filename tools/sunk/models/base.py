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
QUANTITY_PATTERN = r"^[+]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][-+]?[0-9]+|[mkMGTPE]|[KMGTPE]i)?$"
_QUANTITY_RE = re.compile(QUANTITY_PATTERN)


def _check_quantity(value: str | int | float) -> str | int | float:
    if isinstance(value, str) and not _QUANTITY_RE.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 500m, 4Gi, 8)")
    if not isinstance(value, str) and value < 0:
        raise ValueError(f"{value!r} is negative")
    return value


Quantity = Annotated[
    str | int | float,
    AfterValidator(_check_quantity),
    Field(json_schema_extra={"x-quantity": True}),
]

# DNS-1123 label: Kubernetes object names we derive from node group names.
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
