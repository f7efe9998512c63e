"""The ``cluster`` tier: a real kube-apiserver (+ etcd, controller-manager, scheduler) with
kwok-simulated Nodes, started once per session on 127.0.0.1."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sunk.devenv.controlplane import INSTALL_HINT, ControlPlane, KubeClient, missing_binaries

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.cluster)


def _skip_reason() -> str | None:
    missing = missing_binaries()
    if missing:
        return f"{', '.join(missing)} not installed: run `{INSTALL_HINT}` (or `make setup`)"
    if shutil.which("openssl") is None:
        return "the openssl CLI is needed for test certificates (apt-get install openssl)"
    return None


@pytest.fixture(scope="session")
def control_plane_available() -> None:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def control_plane(control_plane_available: None) -> Iterator[ControlPlane]:
    """One control plane for the whole session; stopped (every process) at session end."""
    with ControlPlane() as cp:
        yield cp


@pytest.fixture(scope="session")
def kube(control_plane: ControlPlane) -> KubeClient:
    """Admin API client (group ``system:masters``)."""
    return control_plane.client


@pytest.fixture
def namespace(control_plane: ControlPlane, kube: KubeClient) -> Iterator[str]:
    """A fresh namespace (with its ``default`` ServiceAccount, so pods can be created),
    deleted after the test (without waiting)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": name}})
    control_plane.wait_for(
        lambda: kube.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
        30,
        f"ServiceAccount {name}/default",
    )
    yield name
    kube.delete(f"/api/v1/namespaces/{name}", missing_ok=True)


@pytest.fixture
def unique() -> str:
    """A short suffix for cluster-scoped names (Nodes) so tests do not collide."""
    return uuid.uuid4().hex[:6]
