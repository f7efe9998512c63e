"""One error hierarchy (sunk.errors): each class carries its exit code, the library's errors
are its subclasses, and no module keeps exit codes of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sunk.argocd.errors import ArgoCDGenError, ArgoCDInputError, ArgoCDOutputError
from sunk.chartio.helm import HelmError, helm_binary
from sunk.devenv.controlplane import ControlPlaneError
from sunk.devenv.deploy import DeployError
from sunk.devenv.images import ImageBuildError
from sunk.devenv.nodes import NodeClusterError
from sunk.errors import InputError, SunkError, ToolError, UsageError
from sunk.resources import ResourceError, chart_dir

PACKAGE = Path(__file__).resolve().parents[2] / "tools" / "sunk"


@pytest.mark.parametrize(
    ("cls", "code", "family"),
    [
        (InputError, 1, InputError),
        (UsageError, 2, UsageError),
        (ToolError, 3, ToolError),
        (ArgoCDGenError, 2, SunkError),
        (ArgoCDInputError, 1, InputError),
        (ArgoCDOutputError, 3, ToolError),
        (HelmError, 3, ToolError),
        (ResourceError, 3, ToolError),
        (ControlPlaneError, 3, ToolError),
        (DeployError, 3, ToolError),
        (ImageBuildError, 3, ToolError),
        (NodeClusterError, 3, ToolError),
    ],
)
def test_each_class_carries_its_exit_code(cls, code, family):
    error = cls("the message")
    assert isinstance(error, SunkError) and isinstance(error, family)
    assert error.exit_code == code
    assert str(error) == error.message == "the message"


def test_the_argocd_family_is_caught_as_one():
    for cls in (ArgoCDGenError, ArgoCDInputError, ArgoCDOutputError):
        with pytest.raises(ArgoCDGenError):
            raise cls("x")


def test_the_builtin_bases_stay():
    # Callers that caught the builtin bases before the hierarchy still do.
    assert issubclass(UsageError, ValueError) and issubclass(ToolError, RuntimeError)
    assert issubclass(ControlPlaneError, RuntimeError)


def test_library_errors_are_raised_as_the_hierarchy(monkeypatch, tmp_path):
    monkeypatch.delenv("SUNK_HELM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolError, match="helm not found on PATH"):
        helm_binary()
    monkeypatch.delenv("SUNK_CHARTS_DIR", raising=False)
    monkeypatch.setattr("sunk.resources.PACKAGE_DATA", tmp_path / "none")
    monkeypatch.setattr("sunk.resources.checkout_root", lambda: None)
    with pytest.raises(ToolError, match="charts/ not found"):
        chart_dir("slurm")


def exit_constants(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets = node.targets if isinstance(node, ast.Assign) else []
        for target in targets:
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            found += [n.id for n in names if isinstance(n, ast.Name) and n.id.startswith("EXIT_")]
    return found


def test_exit_codes_are_defined_once():
    defined = {
        p.relative_to(PACKAGE).as_posix(): exit_constants(p)
        for p in PACKAGE.rglob("*.py")
        if exit_constants(p)
    }
    assert defined == {"errors.py": ["EXIT_OK", "EXIT_FINDINGS", "EXIT_USAGE", "EXIT_ENV"]}
