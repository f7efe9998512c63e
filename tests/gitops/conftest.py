"""The ``gitops`` tier: a real Argo CD (v3.3.9, built by the toolchain) syncs the app-of-apps
``sunkctl argocd gen`` writes, from a local git repository, onto the cluster tier's control
plane (kube-apiserver + kwok Nodes), with the operator running as the cluster tier runs it.

One deployment per session: the bootstrap (``deployed``) runs once, the tests read and change
it in file order.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from sunk.devenv import argocd_build
from sunk.devenv.controlplane import ControlPlane, KubeClient
from tests.cluster.conftest import control_plane, control_plane_available, kube  # noqa: F401
from tests.cluster.operator_process import OperatorProcess
from tests.gitops.argocd_process import ArgoCD, GitServer, Processes

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CLUSTER = "gitops"  # --cluster: the Applications are gitops-root, gitops-sunk, gitops-slurm-…
SLURM = "alpha"  # the Slurm cluster (clusterName, release and namespace)
SUNK_NS = "sunk-system"
VALUES_PATH = "clusters/alpha.yaml"
# A small cluster: no Syncer (kwok runs no slurmrestd to talk to), one slurmd Pod.
VALUES = {
    "clusterName": SLURM,
    "syncer": {"enabled": False},
    "compute": {
        "nodes": {
            "cpu": {
                "replicas": 1,
                "resources": {"requests": {"cpu": "1", "memory": "8Gi"}},
            }
        }
    },
    "login": {"service": {"type": "ClusterIP", "externalTrafficPolicy": None}},
}
NODES = ("gitops-0", "gitops-1")
# The controller's state and MariaDB's data are StatefulSet claims: static PVs bind them.
VOLUMES = 3


def _skip_reason() -> str | None:
    if argocd_build.installed() is None:
        return (
            f"Argo CD {argocd_build.ARGOCD_VERSION} not built: run "
            "`python -m sunk.devenv.toolchain install argocd` (or `make setup`)"
        )
    for package, command in argocd_build.DEBIAN_PACKAGES:
        if shutil.which(command) is None:
            return f"{command} not installed (apt-get install {package}, or `make setup` as root)"
    return None


@pytest.fixture(scope="session")
def argocd_available() -> None:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)


@dataclass
class GitOps:
    """The running deployment and what the bootstrap observed on the way."""

    argocd: ArgoCD
    git: GitServer
    cp: ControlPlane
    kube: KubeClient
    operator: OperatorProcess | None = None
    # (seconds since the root Application was applied, app name, sync, health), on change
    timeline: list[tuple[float, str, str, str]] = field(default_factory=list)

    @property
    def apps(self) -> list[str]:
        return [f"{CLUSTER}-root", f"{CLUSTER}-sunk", f"{CLUSTER}-slurm-{SLURM}"]

    def state(self, name: str) -> tuple[str, str]:
        app = self.argocd.app(name) or {}
        status = app.get("status") or {}
        return (
            (status.get("sync") or {}).get("status", ""),
            (status.get("health") or {}).get("status", ""),
        )

    def wait(self, predicate, timeout: float, what: str):
        """Poll ``predicate`` while checking every process; the logs come with a timeout."""
        deadline = time.monotonic() + timeout
        while True:
            self.argocd.procs.check()
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{self.debug()}")
            time.sleep(1)

    def debug(self) -> str:
        states = {name: self.state(name) for name in self.apps}
        conditions = {
            name: ((self.argocd.app(name) or {}).get("status") or {}).get("conditions")
            for name in self.apps
        }
        unhealthy = [
            (r["kind"], r["name"], r.get("status"), r.get("health"))
            for name in self.apps
            for r in ((self.argocd.app(name) or {}).get("status") or {}).get("resources") or []
            if (r.get("health") or {}).get("status") not in (None, "Healthy")
            or r.get("status") != "Synced"
        ]
        operator = self.operator.last_log()[-2000:] if self.operator else ""
        return (
            f"apps: {states}\nconditions: {conditions}\nnot Healthy or not Synced: {unhealthy}"
            f"\n{self.argocd.logs()}\n{operator}"
        )

    def commit_values(self, values: dict, message: str) -> str:
        (self.git.path / VALUES_PATH).write_text(yaml.safe_dump(values, sort_keys=False))
        sha = self.commit(message)
        return sha

    def commit(self, message: str) -> str:
        sha = self.git.commit(message)
        for name in self.apps:
            self.argocd.refresh(name)
        return sha

    def slurm_object(self, plural: str, name: str) -> dict:
        return self.kube.get(
            f"/apis/sunk.coreweave.com/v1alpha1/namespaces/{SLURM}/{plural}/{name}"
        )


def _generate(git: GitServer, server: str) -> None:
    """The repository: both charts, one values file and the generated bundle."""
    for chart in ("sunk", "slurm"):
        shutil.copytree(REPO / "charts" / chart, git.path / "charts" / chart)
    (git.path / "clusters").mkdir()
    (git.path / VALUES_PATH).write_text(yaml.safe_dump(VALUES, sort_keys=False))
    argocd_gen(git, "argocd", server, "--self-heal", "--ignore-replicas", "--cluster-secret",
               "--app-project")  # fmt: skip


def argocd_gen(
    git: GitServer,
    out: str,
    server: str,
    *extra: str,
    cluster: str = CLUSTER,
    values: str = VALUES_PATH,
) -> Path:
    """`sunkctl argocd gen` in the repository for one values file, Applications auto-synced to
    the test control plane; ``extra`` options on top. Returns the bundle's directory."""
    sunkctl = Path(sys.executable).with_name("sunkctl")
    proc = subprocess.run(
        [
            str(sunkctl), "argocd", "gen", "--repo", git.url, "--revision", "main",
            "--cluster", cluster, "-f", values, "--out", out,
            "--no-cert-manager", "--no-moco", "--auto-sync",
            "--destination-server", server, "--root-destination-server", server, *extra,
        ],
        cwd=git.path,
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return git.path / out


def _load(git: GitServer, name: str) -> dict:
    docs = [d for d in yaml.safe_load_all((git.path / "argocd" / name).read_text()) if d]
    assert len(docs) == 1, name
    return docs[0]


def _nodes_and_volumes(cp: ControlPlane, client: KubeClient) -> None:
    for i, name in enumerate(NODES):
        cp.create_node(name, capacity={"cpu": 32, "memory": "128Gi"}, address=f"127.78.0.{i + 1}")
    for i in range(VOLUMES):
        client.create(
            "/api/v1/persistentvolumes",
            {
                "metadata": {"name": f"gitops-pv-{i}"},
                "spec": {
                    "capacity": {"storage": "64Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "hostPath": {"path": f"/tmp/sunk-gitops-pv-{i}"},
                },
            },
        )
    for name in NODES:
        cp.wait_node_ready(name)


def _start_operator(gitops: GitOps, log_dir: Path) -> None:
    """The operator as the cluster tier runs it: the chart's ServiceAccount (created by Argo
    CD's sync of the sunk chart), every namespace (the chart's default), its Lease in the
    release namespace."""
    kubeconfig = gitops.cp.token_kubeconfig(SUNK_NS, "sunk-operator", log_dir / "kubeconfig")
    gitops.operator = OperatorProcess(kubeconfig, [], log_dir, SUNK_NS).start()


@pytest.fixture(scope="session")
def deployed(
    argocd_available: None,
    control_plane: ControlPlane,  # noqa: F811
    kube: KubeClient,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[GitOps]:
    """Argo CD bootstrapped once as the generated README says (argocd-cm patch, project,
    cluster Secret, root.yaml), then followed until every Application is Synced and Healthy."""
    binary, crds = argocd_build.installed() or (None, None)
    assert binary and crds
    work = tmp_path_factory.mktemp("gitops")
    procs = Processes(work)
    git = GitServer(work / "git", procs)
    argocd = ArgoCD(binary, control_plane, procs)
    gitops = GitOps(argocd, git, control_plane, kube)
    try:
        git.init()
        _generate(git, control_plane.server)
        git.commit("clusters: alpha, generated Argo CD bundle")
        git.serve()
        _nodes_and_volumes(control_plane, kube)
        argocd.install(crds, _load(git, "argocd-cm-patch.yaml")["data"])
        argocd.start()
        argocd.apply(_load(git, "project.yaml"))
        argocd.apply(argocd.cluster_secret(_load(git, "cluster-secret.yaml")))
        argocd.apply(_load(git, "root.yaml"))
        started = time.monotonic()
        last: dict[str, tuple[str, str]] = {}

        def settled() -> bool:
            for name in gitops.apps:
                state = gitops.state(name)
                if state != last.get(name) and argocd.app(name) is not None:
                    last[name] = state
                    gitops.timeline.append((time.monotonic() - started, name, *state))
            if gitops.operator is None and kube.get(
                f"/api/v1/namespaces/{SUNK_NS}/serviceaccounts/sunk-operator", missing_ok=True
            ):
                _start_operator(gitops, work)
            return all(gitops.state(name) == ("Synced", "Healthy") for name in gitops.apps)

        gitops.wait(settled, 240, "every Application Synced and Healthy")
        yield gitops
    finally:
        if gitops.operator is not None:
            gitops.operator.kill(signal.SIGTERM)
        procs.stop()
