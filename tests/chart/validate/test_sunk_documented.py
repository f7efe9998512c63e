"""A values file written only from SUNK's documented keys and examples
(fixtures/sunk-documented.yaml): `sunkctl validate` passes it (exit 0), warns where SUNK's
patterns leave something to chance or to nobody, and no key of it passes silently: each one
changes what the operator builds, says what is already so, or gets a warning that nothing
acts on it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from sunk.cli.main import app
from sunk.models import not_acted_on
from sunk.operator.cluster.objects import desired_objects
from sunk.scheduler.loop import scheduler_options
from tests.chart.conftest import operator_view

FIXTURE = Path(__file__).parent / "fixtures" / "sunk-documented.yaml"
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "sunk-compat.yaml"
# Rules whose warning says that nothing acts on the key.
NOT_ACTED_ON_RULES = {"SUNK027", "SUNK007"}
EXPECTED_WARNINGS = {
    ("SUNK007", "compute.nodes.cpu-workers.nodeSelector"),
    ("SUNK008", "compute.nodes.gpu-workers"),
    # SUNK's example exposes sshd through a LoadBalancer open to every address
    ("SUNK034", "login.service.type"),
    ("SUNK008", "compute.nodes.my-gpu-nodes.affinity"),
    ("SUNK017", "compute.nodes.my-gpu-nodes"),
    ("SUNK027", "global.cks"),
    ("SUNK027", "global.nodeSelector"),
    ("SUNK027", "controller.etcConfigMap"),
    ("SUNK027", "login.sshKeyVolume"),
    ("SUNK027", "compute.securityContext"),
    ("SUNK027", "compute.autoPartition"),
    ("SUNK027", "compute.gpusd"),
    # enroot.conf keys other than those the container plugin takes as options
    ("SUNK027", "compute.pyxis.enrootConfig.ENROOT_TEMP_PATH"),
    ("SUNK027", "nsscache.existingSecret"),
    ("SUNK027", "nsscache.sudoGroups"),
    ("SUNK027", "nsscache.nsscacheConfig"),
    ("SUNK027", "nsscache.nsswitchConfig"),
}


def _validate(path: Path) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["validate", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def report(helm) -> dict[str, Any]:
    return _validate(FIXTURE)


def test_validates_with_warnings_only(report):
    assert report["summary"]["errors"] == 0, report["findings"]
    assert {"render", "kubernetes"} <= set(report["files"][0]["checks"])
    found = {(f["ruleId"], f["keyPath"]) for f in report["findings"]}
    assert found == EXPECTED_WARNINGS
    assert {f["severity"] for f in report["findings"]} == {"warning"}


def test_overlapping_groups_are_a_warning_that_explains_the_claim(report):
    (gpu,) = [f for f in report["findings"] if f["keyPath"] == "compute.nodes.gpu-workers"]
    assert gpu["message"].startswith(
        "group `gpu-workers` can land on the same Nodes as `cpu-workers`"
    )
    assert "one NodeSet only, the first to claim it" in gpu["message"]
    assert "NodeConflict" in gpu["message"]


def test_a_quoted_sku_cpu_is_a_number_in_the_nodeset(objects):
    (gpu,) = [d for d in objects("slurm", FIXTURE) if d["metadata"].get("name") == "gpu-workers"]
    assert gpu["spec"]["skuCpu"] == 4


def _leaves(node: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Key paths of the file's values: scalars, lists and empty maps are leaves."""
    if isinstance(node, dict) and node:
        return [leaf for key, value in node.items() for leaf in _leaves(value, (*path, key))]
    return [path]


def _without(values: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    out = copy.deepcopy(values)
    node = out
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return out


def _built(objects, tmp_path: Path, values: dict[str, Any]) -> str:
    """What the operator builds from the rendered chart: every control-plane object, a slurmd
    Pod of each NodeSet and what it plans that NodeSet's Pods with, the Slurm files and
    registrations, and the Syncer's settings."""
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    view = operator_view(objects("slurm", path), "ns")
    spec, rendered = view.ctx.spec, view.ctx.rendered
    pods = {
        ns.name: (
            # what the operator plans with: how many Pods, how many replaced at once
            (ns.spec.replicas, ns.spec.maxUnavailable, ns.spec.updateStrategy.type),
            view.slurmd_pod(ns),
        )
        for ns in view.nodesets
    }
    built = {
        # what the operator runs the cluster's Syncer with (operator/runtime.py, the removal
        # grace period in nodeset/reconcile.py); the Syncer has no object of its own
        "syncer": spec.syncer.model_dump(),
        # and its Pod Scheduler with, when it runs one (it too has no object of its own)
        "scheduler": scheduler_options(spec, "ns") if spec.schedules() else None,
        "objects": desired_objects(view.ctx),
        "pods": pods,
        "files": rendered.files,
        "registrations": rendered.registrations,
    }
    return json.dumps(built, sort_keys=True, default=str)


def _enum(schema: dict[str, Any], path: tuple[str, ...]) -> list[Any]:
    """The values the chart's schema allows at `path`, when it lists them."""
    node: Any = schema
    for key in path:
        props = node.get("properties") or {}
        node = props[key] if key in props else node.get("additionalProperties")
        if not isinstance(node, dict):
            return []
    return node.get("enum") or []


def _probe(value: Any, allowed: list[Any]) -> Any:
    """Another valid value of the same kind, or None when there is none to try."""
    if allowed:
        return next((v for v in allowed if v not in (value, None)), None)
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        if value in ("yes", "no"):
            return {"yes": "no", "no": "yes"}[value]
        digits = len(value) - len(value.lstrip("0123456789"))
        return f"{int(value[:digits]) + 1}{value[digits:]}" if digits else f"{value}-probe"
    if isinstance(value, list) and value:
        extra = copy.deepcopy(value[-1])
        if isinstance(extra, str):
            extra += "-probe"
        elif isinstance(extra, dict):
            key = next(k for k, v in extra.items() if isinstance(v, str))
            extra[key] += "-probe"
        return [*value, extra]
    return None


def _set(values: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(values)
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


@pytest.mark.parametrize("path", [FIXTURE, EXAMPLE], ids=lambda p: p.stem)
def test_no_key_passes_silently(helm, objects, repo, tmp_path, path):
    """Each key is dropped, then (when that changes nothing, as for a value the renderer or
    the operator would write anyway) set to another valid value: what the operator builds
    must change, unless a warning says that nothing acts on the key."""
    report = _validate(path)
    values = yaml.safe_load(path.read_text())
    warned = [
        tuple(f["keyPath"].split("."))
        for f in report["findings"]
        if f["ruleId"] in NOT_ACTED_ON_RULES
    ]
    everything = _built(objects, tmp_path, values)

    def changes(changed: dict[str, Any], refused: bool) -> bool:
        """Whether `changed` builds something else; `refused` when helm, the models or a
        builder refuse it (a key that cannot be dropped matters; a refused probe proves
        nothing)."""
        try:
            return _built(objects, tmp_path, changed) != everything
        except (AssertionError, ValueError):
            return refused

    chart_values = yaml.safe_load((repo / "charts/slurm/values.yaml").read_text())
    schema = json.loads((repo / "charts/slurm/values.schema.json").read_text())
    silent = []
    checked = 0
    for leaf in _leaves(values):
        if any(leaf[: len(w)] == w for w in warned):
            continue
        checked += 1
        if changes(_without(values, leaf), refused=True):
            continue
        if _value(values, leaf) in ([], {}, None):
            continue  # names nothing to act on
        if _not_acted_on_at_default(chart_values, leaf, _value(values, leaf)):
            continue  # SUNK027 warns once it differs from the default
        probe = _probe(_value(values, leaf), _enum(schema, leaf))
        if probe is None or not changes(_set(values, leaf, probe), refused=False):
            silent.append((".".join(leaf), _value(values, leaf)))
    assert silent == [], "\n".join(f"{k}: {v!r}" for k, v in silent)
    assert checked >= 20


def _not_acted_on_at_default(chart: dict[str, Any], path: tuple[str, ...], value: Any) -> bool:
    """A key in (or under one in) the not-acted-on table, at the chart's default."""
    covered = any(
        e.covers(path[:n]) for e in not_acted_on.entries("slurm") for n in range(1, len(path) + 1)
    )
    try:
        return covered and _value(chart, path) == value
    except KeyError:
        return False


def _value(values: dict[str, Any], path: tuple[str, ...]) -> Any:
    for key in path:
        values = values[key]
    return values
