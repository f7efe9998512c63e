"""The keys accepted but not acted on yet: one table (sunk.models.not_acted_on), the README
list, the keys' descriptions, the runtime code that does not read them, and SUNK027."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from sunk.models import not_acted_on
from sunk.models.crds import SlurmClusterSpec
from sunk.models.not_acted_on import TABLE, NotActedOn
from sunk.schema.convert import convert
from sunk.schema.generate import CHART_MODELS, values_schema
from sunk.validate import Options, validate

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
MARK = "not acted on"


def _readme_block() -> str:
    text = (REPO / "README.md").read_text()
    assert "## Accepted, not acted on yet" in text
    return text.split(not_acted_on.BEGIN, 1)[1].split(not_acted_on.END, 1)[0].strip()


def test_readme_lists_exactly_the_table():
    lines = _readme_block().splitlines()
    assert lines == [entry.readme_line() for entry in TABLE]
    assert len(lines) == len(TABLE) == len({(e.chart, e.path) for e in TABLE})


def _node(schema: dict, path: str) -> dict:
    """The schema node of a dotted values path (`*` steps into a map's values)."""
    node = schema
    for part in path.split("."):
        # a named key of a map (compute.pyxis.enrootConfig.ENROOT_DATA_PATH) is one of its values
        into_map = part == "*" or "properties" not in node
        node = node["additionalProperties"] if into_map else node["properties"][part]
    return node


def _described(path: str) -> str:
    """The key whose description must say so: the block itself for `block.*`."""
    return path[: -len(".*")] if path.endswith(".*") else path


@pytest.mark.parametrize("entry", TABLE, ids=lambda e: f"{e.chart}:{e.path}")
def test_every_key_exists_and_its_description_says_so(entry: NotActedOn):
    schema = values_schema(CHART_MODELS[entry.chart])
    node = _node(schema, _described(entry.path))
    assert MARK in node.get("description", "").lower(), node.get("description")
    for kept in entry.acted_on:
        assert entry.covers(tuple(kept.split("."))) is False
        _node(schema, kept)  # a real key


def _crd_node(model, path: str) -> dict | None:
    schema = convert(model.model_json_schema(by_alias=True), "values")
    try:
        return _node(schema, path)
    except KeyError:
        return None


def test_the_custom_resources_say_so_too():
    checked = 0
    for entry in TABLE:
        if entry.chart != "slurm" or entry.path.startswith(("global.", "compute.nodes.")):
            continue
        node = _crd_node(SlurmClusterSpec, _described(entry.path))
        if node is None:  # compute.nodeDefaults / compute.definitions are values-only
            continue
        assert MARK in node.get("description", "").lower(), (entry.path, node)
        checked += 1
    assert checked >= 10


# Where the code would read each key if it acted on it. When a test below fails, something
# now reads the key: drop its table entry (and the description's "Not acted on yet").
READERS = {
    "scheduler.config.slurm.protocolVersion": r"\bprotocolVersion\b",
    **{f"scheduler.{key}": rf"\bscheduler\.{key}\b" for key in not_acted_on.SCHEDULER_POD_KEYS},
    "nsscache.*": r"\bnsscache\.\w+",
    "controller.etcConfigMap": r"\betcConfigMap\b",
    # values only: the chart does not put them into the SlurmCluster
    **{
        f"compute.{key}": rf"\bcompute\.{key}\b"
        for key in ("dynamic", "securityContext", "ssh", "autoPartition", "gpusd", "cacheDropper")
    },
}
# Read, but not for what the key promises (see their reasons), or open by design (the
# enroot.conf keys: any name, and the plugstack renderer reads the map for the mapped ones).
NO_READER_CHECK = {"login.sshKeyVolume", "global.*", "compute.pyxis.enrootConfig.*"}
RUNTIME = [
    p
    for d in ("operator", "slurmconf", "syncer", "scheduler")
    for p in sorted((REPO / "tools/sunk" / d).rglob("*.py"))
]


def test_every_entry_has_a_reader_check():
    assert set(READERS) | NO_READER_CHECK == {e.path for e in TABLE}


@pytest.mark.parametrize(("path", "pattern"), sorted(READERS.items()))
def test_nothing_reads_the_key(path, pattern):
    assert len(RUNTIME) > 20
    found = [
        f"{p.relative_to(REPO)}:{n}"
        for p in RUNTIME
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(pattern, line)
    ]
    assert found == [], f"{path} is read now: remove it from sunk.models.not_acted_on"


# --------------------------------------------------------------------------- SUNK027


def sunk027(report) -> set[tuple[str | None, int | None]]:
    return {(f.key_path, f.line) for f in report.findings if f.rule_id == "SUNK027"}


def test_fires_on_each_key_set_with_its_line(check):
    text = (
        "scheduler:\n  enabled: true\n  priorityClassName: high\n"
        "compute:\n  nodes:\n    a:\n      enabled: true\n  gpusd: {enabled: true}\n"
        "  pyxis:\n    enrootConfig:\n      ENROOT_DATA_PATH: /data\n      ENROOT_TEMP_PATH: /t\n"
        "global:\n  volumes: []\n  storageClass: fast\n"
    )
    report = check(text)
    assert sunk027(report) == {
        ("scheduler.priorityClassName", 3),
        ("compute.gpusd", 8),
        ("compute.pyxis.enrootConfig.ENROOT_TEMP_PATH", 12),  # not ENROOT_DATA_PATH: mapped
        ("global.storageClass", 15),
    }
    finding = next(f for f in report.findings if f.key_path == "scheduler.priorityClassName")
    assert str(finding.severity) == "warning"
    assert "accepted but not acted on yet" in finding.message
    assert "runs inside the operator" in finding.message


@pytest.mark.parametrize(
    "text",
    [
        "scheduler:\n  enabled: false\n  killWait: 45\n  scope: {type: namespace}\n",
        "compute:\n  pyxis: {enabled: true, mountHome: true, enrootConfig: {}}\n",
        "compute:\n  nodes:\n    a: {enabled: true}\n",
        "controller:\n  etcConfigMap: null\n",
        "nsscache:\n  enabled: false\n  cronJobSchedule: '* * * * *'\n",
        "global:\n  imageRegistry: r.example\n  affinity: {}\n",
    ],
)
def test_quiet_on_defaults_and_empty_values(check, text):
    assert sunk027(check(text)) == set()


def test_the_sunk_chart_has_its_own_entries(check):
    text = "operator:\n  replicas: 2\nglobal:\n  imageRegistry: r.example\n  affinity: {a: 1}\n"
    report = check(text)
    assert report.files[0].chart == "sunk"
    assert sunk027(report) == {("global.affinity", 5)}


def test_set_flags_fire_too(check):
    report = check("{}\n", sets=["nsscache.enabled=true"])
    assert {f.key_path for f in report.findings if f.rule_id == "SUNK027"} == {"nsscache.enabled"}


def test_a_later_file_switching_it_off_is_quiet(check, tmp_path):
    (tmp_path / "base.yaml").write_text("scheduler: {enabled: true}\n")
    report = check("scheduler: {enabled: false}\n", values=["base.yaml"])
    assert sunk027(report) == set()


@pytest.mark.parametrize("chart", ["slurm", "sunk"])
def test_the_charts_own_values_files_do_not_fire(check, chart):
    text = (REPO / "charts" / chart / "values.yaml").read_text()
    report = check(text, chart=chart)
    assert sunk027(report) == set()


EXPECTED_IN_EXAMPLES = {}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_examples_fire_only_where_they_set_such_keys(example):
    report = validate(Options(paths=[str(example)], render=False))
    found = {f.key_path for f in report.findings if f.rule_id == "SUNK027"}
    assert found == EXPECTED_IN_EXAMPLES.get(example.stem, set())
    # The Pod Scheduler keys are really set there (the warning is right).
    data = yaml.safe_load(example.read_text())
    for key in found:
        block, child = key.split(".")
        assert data[block][child]
