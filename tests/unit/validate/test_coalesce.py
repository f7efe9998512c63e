from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sunk.validate.coalesce import (
    Layer,
    SetError,
    coalesce,
    coalesce_over,
    merge_maps,
    parse_set,
)


def test_helm_coalescing_rules():
    defaults = {"a": {"b": 1, "c": [1, 2]}, "d": "x", "e": {"f": 1}}
    user = {"a": {"c": [3]}, "d": None, "e": None, "g": None}
    # maps merge, lists replace, null deletes a default; a null without a default stays
    assert coalesce_over(defaults, user) == {"a": {"b": 1, "c": [3]}, "g": None}


def test_files_merge_in_order_and_set_wins():
    merged = merge_maps({"a": {"b": 1, "c": 2}}, {"a": {"c": 3}, "d": [1]})
    assert merged == {"a": {"b": 1, "c": 3}, "d": [1]}


def test_provenance_points_at_the_last_file_that_set_a_key():
    defaults = Layer("values.yaml", {"x": {"y": 1}}, {("x",): (1, 1), ("x", "y"): (2, 3)})
    one = Layer("one.yaml", {"x": {"y": 2}, "l": [{"a": 1}]}, {("x",): (4, 1), ("x", "y"): (5, 3)})
    two = Layer("two.yaml", {"l": [{"b": 1}]}, {("l",): (1, 1), ("l", 0): (2, 5)})
    result = coalesce(defaults, [one, two])
    assert result.values == {"x": {"y": 2}, "l": [{"b": 1}]}
    assert result.locate(("x", "y")) == ("one.yaml", 5, 3)
    assert result.locate(("l", 0, "b")) == ("two.yaml", 2, 5)
    assert result.locate(("x", "missing")) == ("one.yaml", 4, 1)
    assert result.locate(("d",)) == ("two.yaml", None, None)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("a=1", {"a": 1}),
        ("a.b=true,c=null", {"a": {"b": True}, "c": None}),
        ("a=007", {"a": "007"}),
        ("a=1.5", {"a": "1.5"}),
        ("a={x,y}", {"a": ["x", "y"]}),
        ("a[1].b=x", {"a": [None, {"b": "x"}]}),
        (r"a\.b=1", {"a.b": 1}),
        ("compute.nodes.gpu.replicas=4", {"compute": {"nodes": {"gpu": {"replicas": 4}}}}),
    ],
)
def test_set_parsing(expr, expected):
    assert parse_set(expr) == expected


@pytest.mark.parametrize("expr", ["a", "=1", "a..b=1", "a[99999999]=1"])
def test_bad_set_is_a_usage_error(expr):
    with pytest.raises(SetError):
        parse_set(expr)


keys = st.sampled_from(["a", "b", "c", "compute", "nodes"])
leaves = st.one_of(
    st.none(), st.integers(), st.text(max_size=3), st.lists(st.integers(), max_size=2)
)
trees = st.recursive(leaves, lambda inner: st.dictionaries(keys, inner, max_size=3), max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(keys, trees, max_size=4), st.dictionaries(keys, trees, max_size=4))
def test_coalescing_properties(defaults, user):
    result = coalesce_over(defaults, user)
    for key, value in user.items():
        if value is None and key in defaults:
            assert key not in result  # a user null deletes the default
        elif not (isinstance(value, dict) and isinstance(defaults.get(key), dict)):
            assert result[key] == value  # user scalars and lists win
    for key, value in defaults.items():
        if key not in user:
            assert result[key] == value
