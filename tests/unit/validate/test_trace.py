"""Object fields traced back to values keys (sunk.validate.trace) and key paths read back."""

from __future__ import annotations

import pytest

from sunk.validate.paths import dotted, undotted
from sunk.validate.trace import candidates


@pytest.mark.parametrize(
    "path",
    [("spec",), ("spec", "s6", "a.b"), ("items", 0, "name"), ("data", "a b", 2), ("x-y", "z_1")],
)
def test_undotted_reads_what_dotted_writes(path):
    assert undotted(dotted(path)) == path


def test_custom_resources_map_to_the_values_keys_the_chart_copies():
    cluster = {"kind": "SlurmCluster", "name": "c"}
    assert candidates(cluster, ("spec", "login", "s6"), {}) == [("login", "s6")]
    nodeset = {"kind": "NodeSet", "name": "gpu"}
    assert candidates(nodeset, ("spec", "s6", "x"), {})[:3] == [
        ("compute", "nodes", "gpu", "s6", "x"),
        ("compute", "nodeDefaults", "s6", "x"),
        ("compute", "s6", "x"),
    ]
    assert candidates(nodeset, ("metadata", "name"), {}) == []


def test_extra_objects_map_to_their_entry():
    values = {"extraObjects": [{"kind": "Secret", "metadata": {"name": "s"}}, {"kind": "x"}]}
    assert candidates({"kind": "Secret", "name": "s"}, ("data", "k"), values) == [
        ("extraObjects", 0, "data", "k")
    ]
    assert candidates({"kind": "Secret", "name": "other"}, ("data",), values) == []
