"""Bounded input: the alias bomb, the oversized file and absurd numbers are refused quickly,
by validate and by render, with a message and a position (never a traceback)."""

from __future__ import annotations

import time

import pytest
from typer.testing import CliRunner

from sunk.cli.main import app
from sunk.models.quantity import QuantityError, parse_quantity
from sunk.validate.yamlload import MAX_BYTES, load_text


def alias_bomb() -> str:
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = "a"
    for name in "bcdefghi":
        refs = ",".join([f"*{prev}"] * 9)
        text += f"{name}: &{name} [{refs}]\n"
        prev = name
    return text  # 9^9 ≈ 387 million strings once expanded


def test_alias_bomb_is_refused_quickly():
    bomb = alias_bomb()
    assert len(bomb) < 600
    start = time.perf_counter()
    doc, findings = load_text(bomb, "bomb.yaml")
    elapsed = time.perf_counter() - start
    print(f"alias bomb refused in {elapsed * 1000:.0f} ms")
    assert doc is None
    assert "alias bomb" in findings[0].message and findings[0].line is not None
    # a loose bound (it takes milliseconds; unguarded it ran over 60 s and 2 GB): a busy
    # 2-core CI machine must not make it flaky
    assert elapsed < 5.0


def test_oversized_file_is_refused_unread():
    text = "slurmConfig:\n  extraConfig: |\n" + "    MaxArraySize=1\n" * (MAX_BYTES // 10)
    start = time.perf_counter()
    doc, findings = load_text(text, "big.yaml")
    assert doc is None and "limited to" in findings[0].message
    assert time.perf_counter() - start < 5.0  # loose: refused unread, not parsed


def test_normal_aliases_still_work():
    doc, findings = load_text("x: &x {a: 1}\nw: *x\nz:\n  <<: *x\n  b: 2\n", "ok.yaml")
    assert not findings and doc.data == {"x": {"a": 1}, "w": {"a": 1}, "z": {"a": 1, "b": 2}}


@pytest.mark.parametrize(
    "text",
    ["99999999999999999999Ei", "1e29Ei", "9" * 80, "1e99999999999", 1e308, 10**30, "1e31"],
)
def test_absurd_quantities_are_refused(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)


ABSURD = {
    "replicas": ("compute:\n  nodes:\n    g:\n      replicas: 4294967297\n", 4, "at most"),
    "skuCpu": ("compute:\n  nodes:\n    g:\n      skuCpu: 1e308\n", 4, "at most 65535"),
    "memory": (
        "compute:\n  nodes:\n    g:\n      resources:\n        limits:\n"
        "          memory: 99999999999999999999Ei\n",
        6,
        "out of range",
    ),
    "memory-exp": (
        "compute:\n  nodes:\n    g:\n      resources:\n        limits:\n          memory: 1e29Ei\n",
        6,
        "Kubernetes quantity",
    ),
    "cpu": (
        "compute:\n  nodes:\n    g:\n      resources:\n        limits:\n          cpu: 1e30\n",
        6,
        "out of range",
    ),
    "login": ("login:\n  replicas: 99999999999999999999999\n", 2, "at most"),
}


@pytest.mark.parametrize("command", ["validate", "render"])
@pytest.mark.parametrize("name", sorted(ABSURD))
def test_absurd_numbers_are_refused_with_a_position(tmp_path, monkeypatch, command, name):
    text, line, words = ABSURD[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    monkeypatch.setenv("PATH", "/nonexistent")  # refused before helm runs
    args = (
        ["validate", "--no-render", str(path)]
        if command == "validate"
        else ["render", "-f", str(path)]
    )
    start = time.perf_counter()
    result = CliRunner().invoke(app, args)
    assert time.perf_counter() - start < 10
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert f"{path}:{line}:" in result.output and words in result.output


@pytest.mark.parametrize("command", ["validate", "render"])
def test_bomb_and_duplicates_refused_by_both_commands(tmp_path, monkeypatch, command):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    dup = tmp_path / "dup.yaml"
    dup.write_text("compute:\n  nodes:\n    a: {}\n    a: {}\n")
    monkeypatch.setenv("PATH", "/nonexistent")
    for path, words in ((bomb, "alias bomb"), (dup, "duplicate key `a`")):
        args = ["validate", str(path)] if command == "validate" else ["render", "-f", str(path)]
        start = time.perf_counter()
        result = CliRunner().invoke(app, args)
        assert time.perf_counter() - start < 5
        assert result.exit_code == 1, result.output
        assert words in result.output and f"{path}:" in result.output
        assert "Traceback" not in result.output
