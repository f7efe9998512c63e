"""Runtime code never imports the development environment (`sunk.devenv`): the wheel does not
carry it. Only `sunkctl dev` reaches for it, lazily, and says it needs a checkout when absent."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tools" / "sunk"
ALLOWED = {"cli/dev_cmd.py"}  # the development command itself


def devenv_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [f"{path.name}:{node.lineno} {n}" for n in names if n.startswith("sunk.devenv")]
    return found


RUNTIME = sorted(
    p for p in PACKAGE.rglob("*.py")
    if "devenv" not in p.relative_to(PACKAGE).parts
    and p.relative_to(PACKAGE).as_posix() not in ALLOWED
)  # fmt: skip


def test_the_scan_sees_the_runtime_packages():
    rel = {p.relative_to(PACKAGE).as_posix() for p in RUNTIME}
    for expected in ("chartio/helm.py", "validate/engine.py", "cli/main.py", "resources.py"):
        assert expected in rel


@pytest.mark.parametrize("path", RUNTIME, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_runtime_module_does_not_import_devenv(path):
    assert devenv_imports(path) == []


def test_the_check_catches_an_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def f():\n    from sunk.devenv.paths import repo_root\n    import sunk.devenv\n"
    )
    assert devenv_imports(bad) == [
        "bad.py:2 sunk.devenv.paths",
        "bad.py:2 sunk.devenv.paths.repo_root",
        "bad.py:3 sunk.devenv",
    ]
