"""Shared fixtures. Each test tier finds its runtime through the toolchain; a missing runtime
is a skip with the install command in the reason, never a silent pass."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sunk.devenv.paths import tool_path
from tests.real_nodes import real_nodes  # noqa: F401  (the e2e and faults tiers share it)

REPO = Path(__file__).resolve().parent.parent

# The CLI takes helm from --helm, $SUNK_HELM or PATH, kubeconform from $SUNKCTL_KUBECONFORM or
# PATH; the tests use the toolchain's pinned binaries unless the caller chose others.
for _var, _tool in (("SUNK_HELM", "helm"), ("SUNKCTL_KUBECONFORM", "kubeconform")):
    if not os.environ.get(_var) and tool_path(_tool) is not None:
        os.environ[_var] = str(tool_path(_tool))
# Each test directory is one tier; its tests carry the tier's marker.
TIERS = (
    "unit",
    "chart",
    "slurm",
    "cgroupv2",
    "cluster",
    "gitops",
    "e2e",
    "faults",
    "argocd",
    "images",
)


def pytest_collection_modifyitems(items):
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO / "tests").parts
        tier = parts[0] if len(parts) > 1 else "unit"
        marker = "unit" if tier == "argocd" else tier
        if marker in TIERS:
            item.add_marker(getattr(pytest.mark, marker))


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


def toolchain_binary(tool: str) -> str:
    """The toolchain's pinned ``tool``, or a skip naming the install command."""
    path = tool_path(tool)
    if path is None:
        pytest.skip(f"{tool} not installed: run `make setup`")
    return str(path)


@pytest.fixture(scope="session")
def helm() -> str:
    return toolchain_binary("helm")


# Seconds spent per tier (setup, call and teardown of its tests), printed at the end of the run
# so the budget of each tier is visible in every `make test`.
_TIER_SECONDS: dict[str, float] = {}


def _tier_of(nodeid: str) -> str:
    parts = Path(nodeid.split("::", 1)[0]).parts
    tier = parts[1] if len(parts) > 2 and parts[0] == "tests" else "unit"
    return tier if tier in TIERS else "unit"


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    tier = _tier_of(report.nodeid)
    _TIER_SECONDS[tier] = _TIER_SECONDS.get(tier, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter) -> None:
    if not _TIER_SECONDS:
        return
    terminalreporter.section("time per tier")
    for tier, seconds in sorted(_TIER_SECONDS.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{tier:8} {seconds / 60:6.1f} min ({seconds:.0f} s)")


@pytest.fixture(scope="session")
def oci_registry(tmp_path_factory: pytest.TempPathFactory):
    """A throwaway OCI registry on 127.0.0.1 (a free port), stopped at session end."""
    from sunk.devenv.oci_registry import INSTALL_HINT, OciRegistry

    if tool_path("registry") is None:
        pytest.skip(f"registry not installed: run `{INSTALL_HINT}` (or `make setup`)")
    log = tmp_path_factory.mktemp("oci-registry") / "registry.log"
    with OciRegistry(log_path=log) as registry:
        yield registry


@pytest.fixture(scope="session")
def oci_helm(helm: str, tmp_path_factory: pytest.TempPathFactory):
    """The real helm with cache/config/data of its own (see tests/oci.py)."""
    from tests.oci import Helm

    return Helm(helm, tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="session")
def published_charts(oci_helm, oci_registry, tmp_path_factory: pytest.TempPathFactory):
    """Both charts packaged and pushed to ``oci://127.0.0.1:PORT/charts``."""
    from tests.oci import publish

    out = tmp_path_factory.mktemp("packages")
    return publish(oci_helm, REPO / "charts", oci_registry.host, out)
