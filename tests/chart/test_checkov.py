"""checkov over every object we ship or build: what `helm template` renders for both charts
(default values and each example) and what the operator builds for each example (the
control-plane objects and one slurmd Pod of each NodeSet, from the same pure builders it runs).

A failed check fails the test unless `checkov-skips.yaml` lists its id with the objects it
applies to and a reason. checkov is slow to start, so it runs once, over one directory that
holds every object in a file of its own, named `<source>/<Kind>.<name>.yaml`."""

from __future__ import annotations

import fnmatch
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from sunk.devenv.paths import tool_path
from sunk.operator.cluster.accounting import slurmdbd_secret
from sunk.operator.cluster.network import network_policies, operator_peer
from sunk.operator.cluster.objects import desired_objects
from tests.chart.conftest import EXAMPLES, operator_view

SKIPS = Path(__file__).with_name("checkov-skips.yaml")
NS = "tenant-slurm"


def operator_objects(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the operator builds from one rendered `slurm` chart: its control-plane objects, its
    NetworkPolicies (the operator in the namespace `sunk`) and a slurmd Pod of each NodeSet."""
    view = operator_view(docs, NS)
    built = desired_objects(view.ctx) + network_policies(view.ctx, operator_peer("sunk"))
    dbd = slurmdbd_secret(view.ctx)
    if dbd is not None:
        built.append(dbd)
    built += [view.slurmd_pod(ns) for ns in view.nodesets]
    return built


def _write(root: Path, source: str, docs: list[dict[str, Any]]) -> int:
    folder = root / source
    folder.mkdir(parents=True)
    for doc in docs:
        path = folder / f"{doc['kind']}.{doc['metadata']['name']}.yaml"
        assert not path.exists(), f"{source}: two objects {doc['kind']}/{doc['metadata']['name']}"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return len(docs)


def _object_of(result: dict[str, Any]) -> str:
    """`<source>/<Kind>/<name>` from checkov's file path (`/<source>/<Kind>.<name>.yaml`)."""
    source, filename = Path(result["file_path"]).parts[-2:]
    kind, name = filename.removesuffix(".yaml").split(".", 1)
    return f"{source}/{kind}/{name}"


def load_skips() -> list[dict[str, Any]]:
    skips = yaml.safe_load(SKIPS.read_text()) or []
    for i, skip in enumerate(skips):
        where = f"{SKIPS.name}: entry {i} ({skip.get('id', '?')})"
        assert set(skip) == {"id", "objects", "reason"}, f"{where}: needs id, objects, reason"
        assert skip["objects"] and all(isinstance(o, str) for o in skip["objects"]), where
        assert len(str(skip["reason"]).strip()) > 20, f"{where}: the reason says too little"
    return skips


def _ids(skip: dict[str, Any]) -> list[str]:
    return [skip["id"]] if isinstance(skip["id"], str) else list(skip["id"])


def _skipped(skips: list[dict[str, Any]], check: str, obj: str) -> dict[str, Any] | None:
    for skip in skips:
        if check in _ids(skip) and any(fnmatch.fnmatchcase(obj, p) for p in skip["objects"]):
            return skip
    return None


@pytest.fixture(scope="module")
def checkov_results(objects, tmp_path_factory, pytestconfig) -> dict[str, Any]:
    checkov = tool_path("checkov")
    if checkov is None:
        pytest.skip("checkov not installed: run `make setup` (toolchain component checkov)")
    root = tmp_path_factory.mktemp("checkov")
    count = _write(root, "sunk-chart", objects("sunk"))
    count += _write(root, "slurm-chart", objects("slurm"))
    for example in EXAMPLES:
        docs = objects("slurm", example)
        count += _write(root, f"{example.stem}", docs)
        count += _write(root, f"{example.stem}.operator", operator_objects(docs))
    start = time.monotonic()
    # --skip-download: no policy download, the checks are the ones checkov ships
    cmd = [str(checkov), "-d", str(root), "--framework", "kubernetes", "--quiet", "--compact"]
    proc = subprocess.run(
        [*cmd, "-o", "json", "--skip-download"],
        capture_output=True,
        text=True,
        check=False,
        cwd=root,
    )
    seconds = time.monotonic() - start
    # printed in every run (not captured): the tier's budget depends on it
    with pytestconfig.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
        print(f"\ncheckov: {count} objects in {seconds:.1f} s")
    assert proc.returncode in (0, 1), f"checkov exit {proc.returncode}: {proc.stderr[-2000:]}"
    report = json.loads(proc.stdout)
    reports = report if isinstance(report, list) else [report]
    failed = [r for rep in reports for r in rep.get("results", {}).get("failed_checks", [])]
    passed = sum(rep.get("summary", {}).get("passed", 0) for rep in reports)
    return {"failed": failed, "passed": passed, "count": count}


def test_no_failed_check_without_a_listed_reason(checkov_results):
    skips = load_skips()
    unlisted = sorted(
        {
            f"{r['check_id']} {_object_of(r)}: {r['check_name']}"
            for r in checkov_results["failed"]
            if _skipped(skips, r["check_id"], _object_of(r)) is None
        }
    )
    assert checkov_results["passed"] > 0
    assert not unlisted, "failed checks not in checkov-skips.yaml:\n" + "\n".join(unlisted)


def test_every_skip_is_used(checkov_results):
    """A skip pattern that matches no failed check is stale (the check was fixed): remove it."""
    failed = {(r["check_id"], _object_of(r)) for r in checkov_results["failed"]}
    stale = [
        f"{check} {pattern}"
        for skip in load_skips()
        for check in _ids(skip)
        for pattern in skip["objects"]
        if not any(c == check and fnmatch.fnmatchcase(o, pattern) for c, o in failed)
    ]
    assert not stale, "skips matching no failed check:\n" + "\n".join(stale)
