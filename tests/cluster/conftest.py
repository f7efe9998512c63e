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


class Helm:
    """The real helm against the test control plane."""

    def __init__(self, binary: str, kubeconfig: Path):
        self.binary, self.kubeconfig = binary, kubeconfig

    def __call__(self, *args: str):
        import subprocess

        proc = subprocess.run(
            [self.binary, "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc


SUNK_NS = "sunk-system-test"
CRDS = ("slurmclusters.sunk.coreweave.com", "nodesets.sunk.coreweave.com")


def _established(kube: KubeClient, crd: str) -> bool:
    body = kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
    return any(
        c["type"] == "Established" and c["status"] == "True"
        for c in body.get("status", {}).get("conditions", [])
    )


@pytest.fixture(scope="session")
def sunk_chart(helm: str, control_plane: ControlPlane, kube: KubeClient) -> Helm:
    """The `sunk` chart installed once per session with the real helm; CRDs Established."""
    run = Helm(helm, control_plane.kubeconfig)
    run(
        "upgrade",
        "--install",
        "sunk",
        str(HERE.parents[1] / "charts/sunk"),
        "-n",
        SUNK_NS,
        "--create-namespace",
    )
    for crd in CRDS:
        control_plane.wait_for(lambda c=crd: _established(kube, c), 60, f"{crd} Established")
    return run


@pytest.fixture(scope="session")
def crds(sunk_chart: Helm) -> None:
    """Our CRDs are installed (through the sunk chart)."""
