"""Validate generated objects against Argo CD's schemas in ``schemas/``: generated from the
CRDs of the pinned Argo CD (sunk.devenv.argocd_schemas; provenance in each ``$comment``),
strict where the API server would silently drop an unknown field.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft7Validator

SCHEMA_FILES = {
    "Application": "application.json",
    "ApplicationSet": "applicationset.json",
    "AppProject": "appproject.json",
}


@cache
def validator(kind: str) -> Draft7Validator:
    text = resources.files("sunk.argocd").joinpath("schemas", SCHEMA_FILES[kind]).read_text("utf-8")
    schema = json.loads(text)
    Draft7Validator.check_schema(schema)
    return Draft7Validator(schema)


def errors(obj: dict[str, Any]) -> list[str]:
    """One line per schema violation; empty when valid or when the kind has no schema here."""
    kind = obj.get("kind")
    if kind not in SCHEMA_FILES:
        return []
    name = (obj.get("metadata") or {}).get("name", "?")
    out = []
    for err in sorted(
        validator(kind).iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path]
    ):
        pointer = "/" + "/".join(str(p) for p in err.absolute_path)
        out.append(f"{kind} {name}: {pointer}: {err.message}")
    return out
