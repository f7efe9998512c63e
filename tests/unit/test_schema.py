"""Generated schemas: the values schema accepts the examples, rejects typos; CRDs are
structural."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft7Validator

from sunk.models.merge import deep_merge
from sunk.models.values import SlurmValues
from sunk.schema.crd import nodeset_crd, slurmcluster_crd
from sunk.schema.generate import stale, values_schema

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def coalesced(path: Path) -> dict:
    defaults = yaml.safe_load((REPO / "charts/slurm/values.yaml").read_text())
    return deep_merge(defaults, yaml.safe_load(path.read_text()))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_examples_satisfy_the_values_schema_and_the_model(example):
    values = coalesced(example)
    errors = list(Draft7Validator(values_schema(SlurmValues)).iter_errors(values))
    assert errors == []
    SlurmValues.model_validate(values)


@pytest.mark.parametrize(
    ("patch", "path"),
    [
        ({"compute": {"nodes": {"a": {"replica": 2}}}}, ["compute", "nodes", "a"]),
        ({"compute": {"reservedMemory": "4GB"}}, ["compute", "reservedMemory"]),
        ({"login": {"service": {"type": "Ingress"}}}, ["login", "service", "type"]),
        ({"controler": {}}, []),
    ],
)
def test_values_schema_is_strict(patch, path):
    errors = list(Draft7Validator(values_schema(SlurmValues)).iter_errors(patch))
    assert [list(e.absolute_path) for e in errors] == [path]


def test_global_stays_open_for_parent_charts():
    assert (
        list(
            Draft7Validator(values_schema(SlurmValues)).iter_errors(
                {"global": {"anything": {"a": 1}}}
            )
        )
        == []
    )


def _walk(node, path=""):
    yield path, node
    for key, sub in (node.get("properties") or {}).items():
        yield from _walk(sub, f"{path}.{key}")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}.*")


@pytest.mark.parametrize(
    "crd", [nodeset_crd(), slurmcluster_crd()], ids=lambda c: c["spec"]["names"]["kind"]
)
def test_crd_schemas_are_structural(crd):
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _walk(schema):
        assert "$ref" not in node and "default" not in node, path
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string"), path
        assert (
            "type" in node
            or node.get("x-kubernetes-int-or-string")
            or node.get("x-kubernetes-preserve-unknown-fields")
        ), path
        assert not ("properties" in node and "additionalProperties" in node), path
        assert node.get("additionalProperties", True) is not False, path


def test_generated_files_are_current():
    assert stale(REPO) == []


def _schema_node(schema: dict, path: list[str]) -> dict | None:
    node = schema
    for key in path:
        props = node.get("properties")
        if props is None and "anyOf" in node:
            props = next((o.get("properties") for o in node["anyOf"] if "properties" in o), None)
        if not props or key not in props:
            return None
        node = props[key]
    return node


@pytest.mark.parametrize("chart", ["slurm", "sunk"])
def test_values_yaml_documents_every_model_key(chart):
    schema = json.loads((REPO / f"charts/{chart}/values.schema.json").read_text())
    lines = (REPO / f"charts/{chart}/values.yaml").read_text().splitlines()
    stack: list[tuple[int, str]] = []
    checked = 0
    for index, line in enumerate(lines):
        body = line.strip()
        if not body or body.startswith(("#", "-")) or ":" not in body:
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = body.split(":", 1)[0].strip("'\"")
        path = [k for _, k in stack] + [key]
        stack.append((indent, key))
        if _schema_node(schema, path) is not None:  # a model field, not data inside a map
            assert lines[index - 1].lstrip().startswith("# -- "), f"{chart}: {'.'.join(path)}"
            checked += 1
    assert checked > 20
