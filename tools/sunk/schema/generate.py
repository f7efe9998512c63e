"""Every generated file users need, from the typed models.

`sunkctl schema` writes them; `sunkctl schema --check` reports the stale ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from sunk.models import not_acted_on
from sunk.models.crds import (
    API_VERSION,
    GROUP,
    VERSION,
    NodeSetSpec,
    NodeSetStatus,
    SlurmClusterSpec,
    SlurmClusterStatus,
)
from sunk.models.values import SlurmValues, SunkValues
from sunk.schema.convert import convert
from sunk.schema.crd import crd_documents
from sunk.schema.docs import replace_block, replace_table, values_table
from sunk.schema.values_yaml import values_yaml

DRAFT7 = "http://json-schema.org/draft-07/schema#"
CHART_MODELS: dict[str, type[BaseModel]] = {"slurm": SlurmValues, "sunk": SunkValues}


def values_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = convert(model.model_json_schema(by_alias=True), "values")
    return {"$schema": DRAFT7, **schema}


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def kubeconform_schema(kind: str, spec: type[BaseModel], status: type[BaseModel]) -> dict:
    """A standalone JSON schema of one custom resource, as kubeconform's -schema-location wants."""
    spec_schema = convert(spec.model_json_schema(by_alias=True), "values")
    status_schema = convert(status.model_json_schema(by_alias=True), "values")
    return {
        "$schema": DRAFT7,
        "description": f"{kind} ({API_VERSION}), generated from the sunk typed models.",
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"type": "string", "enum": [API_VERSION]},
            "kind": {"type": "string", "enum": [kind]},
            "metadata": {"type": "object"},
            "spec": spec_schema,
            "status": status_schema,
        },
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class Generated:
    path: str
    render: Callable[[Path], str]  # receives the repo root (for files merged into prose)


def _readme(chart: str) -> Callable[[Path], str]:
    def render(root: Path) -> str:
        readme = root / "charts" / chart / "README.md"
        current = readme.read_text() if readme.exists() else f"# {chart}\n"
        schema = values_schema(CHART_MODELS[chart])
        return replace_table(current, values_table(schema))

    return render


def _not_acted_on_section(root: Path) -> str:
    """The root README with its "Accepted, not acted on yet" list taken from the table."""
    text = (root / "README.md").read_text()
    body = not_acted_on.readme_list()
    replaced = replace_block(text, not_acted_on.BEGIN, not_acted_on.END, body)
    if replaced is None:
        raise ValueError(f"README.md lacks the markers {not_acted_on.BEGIN} … {not_acted_on.END}")
    return replaced


def generated_files() -> list[Generated]:
    files: list[Generated] = [Generated("README.md", _not_acted_on_section)]
    for chart, model in CHART_MODELS.items():
        files.append(
            Generated(
                f"charts/{chart}/values.schema.json",
                lambda _r, m=model: dump_json(values_schema(m)),
            )
        )
        files.append(Generated(f"charts/{chart}/values.yaml", lambda _r, m=model: values_yaml(m)))
        files.append(Generated(f"charts/{chart}/README.md", _readme(chart)))
    for name, text in crd_documents().items():
        files.append(Generated(f"charts/sunk/templates/crds/{name}", lambda _r, t=text: t))
    for kind, spec, status in (
        ("SlurmCluster", SlurmClusterSpec, SlurmClusterStatus),
        ("NodeSet", NodeSetSpec, NodeSetStatus),
    ):
        # kubeconform's default -schema-location layout: {group}/{kind}_{version}.json
        path = f"schemas/{GROUP}/{kind.lower()}_{VERSION}.json"
        files.append(
            Generated(
                path, lambda _r, k=kind, s=spec, st=status: dump_json(kubeconform_schema(k, s, st))
            )
        )
    return files


def write_all(root: Path) -> list[str]:
    changed = []
    for item in generated_files():
        target = root / item.path
        text = item.render(root)
        if not target.exists() or target.read_text() != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            changed.append(item.path)
    return changed


def stale(root: Path) -> list[str]:
    return [
        item.path
        for item in generated_files()
        if not (root / item.path).exists() or (root / item.path).read_text() != item.render(root)
    ]


__all__ = ["generated_files", "stale", "values_schema", "write_all", "yaml"]
