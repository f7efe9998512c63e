from __future__ import annotations

import json

from sunk.validate.yamlload import Document, inline_ignores, load_file, load_text


def test_positions_of_keys_and_items():
    doc, findings = load_text("a:\n  b: 1\n  c:\n    - p\n    - q\n", "f.yaml")
    assert not findings
    assert doc.data == {"a": {"b": 1, "c": ["p", "q"]}}
    assert doc.positions[("a", "b")] == (2, 3)
    assert doc.positions[("a", "c", 1)] == (5, 7)


def test_every_duplicate_key_is_reported():
    doc, findings = load_text("a: 1\na: 2\nb:\n  c: 1\n  c: 2\n", "f.yaml")
    assert [(f.rule_id, f.line) for f in findings] == [("YAML", 2), ("YAML", 5)]
    assert doc.data == {"a": 2, "b": {"c": 2}}  # Helm keeps the last one
    assert "first defined on line 1" in findings[0].message


def test_yaml_11_booleans_and_numbers_as_keys():
    doc, findings = load_text("on: 1\n'off': 2\nyes: 3\n7: 4\n~: 5\n", "f.yaml")
    assert [f.line for f in findings] == [1, 3, 3, 4, 5]  # on and yes are both `true`: a duplicate
    assert "bool" in findings[0].message and '"on"' in findings[0].hint
    assert doc.data["off"] == 2


def test_yaml_11_scalars_like_helm():
    doc, _ = load_text("a: yes\nb: off\nc: 2021-01-01\nd: '3'\ne: 1.5\n", "f.yaml")
    assert doc.data == {"a": True, "b": False, "c": "2021-01-01", "d": "3", "e": 1.5}


def test_anchors_merge_keys_and_recursion():
    doc, findings = load_text("base: &b {x: 1, z: 2}\nuse:\n  <<: *b\n  z: 3\n", "f.yaml")
    assert not findings and doc.data["use"] == {"x": 1, "z": 3}
    _, findings = load_text("a: &a [*a]\n", "f.yaml")
    assert all(f.rule_id == "YAML" for f in findings)


def test_syntax_error_has_position():
    doc, findings = load_text("a: [1, 2\nb: 1\n", "f.yaml")
    assert doc is None and findings[0].line == 2 and "started on line 1" in findings[0].message


def test_inline_ignores():
    assert inline_ignores("a: 1  # sunkctl: ignore=SUNK001, sunk002\n") == {
        1: {"SUNK001", "SUNK002"}
    }


def test_a_document_survives_the_json_cache_whole():
    """The chart's values.yaml is cached as JSON between runs (engine._chart_values)."""
    from sunk.resources import chart_dir

    path = chart_dir("slurm") / "values.yaml"
    doc, findings = load_file(str(path), "values.yaml")
    assert doc is not None and not findings and doc.positions and doc.blocks is not None
    again = Document.from_json("values.yaml", json.loads(json.dumps(doc.to_json())))
    assert again == doc
