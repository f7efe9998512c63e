"""The ``cluster`` tier: a real kube-apiserver (+ etcd, controller-manager, scheduler) with
kwok-simulated Nodes, started once per session on 127.0.0.1."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sunk.devenv.controlplane import INSTALL_HINT, ControlPlane, KubeClient, missing_binaries
from tests.cluster.operator_process import OperatorProcess

HERE = Path(__file__).resolve().parent
AUDIT_TEST_FILE = "test_rbac_audit.py"

# The `sunk` chart is installed once per session as release `sunk` in SUNK_NS; the operator
# processes of the tier run as its ServiceAccount, with the rights the chart grants.
SUNK_NS = "sunk-system-test"
OPERATOR_ACCOUNT = "sunk-operator"
TEST_ACCOUNT = "sunk-operator-test"  # the `helm test` Pod's own
AUDITED_USERS = [f"system:serviceaccount:{SUNK_NS}:{a}" for a in (OPERATOR_ACCOUNT, TEST_ACCOUNT)]
# Metadata (who, verb, resource, response code) of every request of those two; nothing else.
AUDIT_POLICY = {
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "users": AUDITED_USERS}, {"level": "None"}],
}
# Owner references with blockOwnerDeletion then need `update` on the owner's finalizers, as on
# clusters that enable it (OpenShift does): the operator's grant of it is put to the test.
APISERVER_ARGS = ["--enable-admission-plugins=OwnerReferencesPermissionEnforcement"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.cluster)
    # The audit-log check reads what the operator did in the tests before it: it runs last.
    audit = [item for item in items if Path(item.path).name == AUDIT_TEST_FILE]
    items[:] = [item for item in items if item not in audit] + audit


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
    """One control plane for the whole session; stopped (every process) at session end. It
    keeps an audit log of the requests of the chart's ServiceAccounts (`test_rbac_audit`)."""
    with ControlPlane(audit_policy=AUDIT_POLICY, apiserver_args=APISERVER_ARGS) as cp:
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


CRDS = ("slurmclusters.sunk.coreweave.com", "nodesets.sunk.coreweave.com")


def _established(kube: KubeClient, crd: str) -> bool:
    body = kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}") or {}
    # A CRD just created may have no status, or a status without conditions yet.
    return any(
        c["type"] == "Established" and c["status"] == "True"
        for c in (body.get("status") or {}).get("conditions") or []
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


@pytest.fixture(scope="session")
def operator_kubeconfig(
    sunk_chart: Helm, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A kubeconfig with a token of the chart's operator ServiceAccount (not an admin): the
    tier's operator processes run with exactly the rights the chart grants."""
    path = tmp_path_factory.mktemp("operator-account") / "kubeconfig"
    return control_plane.token_kubeconfig(SUNK_NS, OPERATOR_ACCOUNT, path)


def _allowed(kube: KubeClient, namespace: str, resource: str) -> bool:
    review = kube.create(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": AUDITED_USERS[0],
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{SUNK_NS}"],
                "resourceAttributes": {
                    "namespace": namespace,
                    "group": "sunk.coreweave.com",
                    "resource": resource,
                    "verb": "watch",
                },
            },
        },
    )
    return bool(review["status"].get("allowed"))


@pytest.fixture(scope="session")
def chart_operator(
    sunk_chart: Helm, operator_kubeconfig: Path, control_plane: ControlPlane, kube: KubeClient
) -> Callable[..., OperatorProcess]:
    """Starts the operator the way the chart runs it, watching ``namespaces``: the release is
    upgraded with ``operator.watchNamespaces`` (so the operator gets a Role in each, and the
    namespaced Roles are what is tested), the process authenticates as the chart's
    ServiceAccount and holds its Lease in the release namespace."""

    def start(
        namespaces: list[str], log_dir: Path, extra: list[str] | None = None
    ) -> OperatorProcess:
        sunk_chart(
            "upgrade",
            "sunk",
            str(HERE.parents[1] / "charts/sunk"),
            "-n",
            SUNK_NS,
            "--set",
            "operator.watchNamespaces={" + ",".join(namespaces) + "}",
        )
        for ns in namespaces:  # the authorizer sees new RoleBindings a moment later
            control_plane.wait_for(
                lambda n=ns: _allowed(kube, n, "nodesets"), 30, f"the operator's Role in {ns}"
            )
        return OperatorProcess(operator_kubeconfig, namespaces, log_dir, SUNK_NS, extra).start()

    return start
