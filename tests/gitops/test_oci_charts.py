"""The real Argo CD syncs a Slurm cluster whose chart comes from an OCI registry and whose
values come from Git (``argocd gen --chart-registry``): the charts are pushed to the loopback
registry, the bundle is generated into the tier's repository, and the generated AppProject
(not ``default``), repository Secret and slurm Application are applied.

It runs after ``test_argocd_sync.py`` on the same deployment, beside the Git-sourced `alpha`:
the `sunk` child of this bundle is left out, since the `sunk` chart (CRDs, operator) is
already there, owned by the Git-sourced bundle.

Argo CD 3.3.9 pulls an OCI Helm chart with ``helm pull`` over HTTPS only (its
``insecureOCIForceHttp`` is for its own OCI sources, not Helm's), so the registry is reached
through socat's TLS on 127.0.0.1 with a throwaway self-signed certificate, and the applied
copy of the repository Secret says ``insecure: "true"`` (helm's --insecure-skip-tls-verify).
"""

from __future__ import annotations

import os
import shutil
import signal
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from sunk.devenv.controlplane import free_port, wait_for
from tests.gitops.conftest import GitOps, argocd_gen

GROUP = "sunk.coreweave.com"

CLUSTER = "gitops-oci"
SLURM = "beta"
VALUES_PATH = "clusters/beta.yaml"
VALUES = {
    "clusterName": SLURM,
    "syncer": {"enabled": False},
    "slurmConfig": {"MaxJobCount": 777},
    "compute": {"nodes": {"cpu": {"replicas": 0}}},
    "login": {"enabled": False},
}


@pytest.fixture(scope="module")
def tls_registry(oci_registry, tmp_path_factory) -> Iterator[str]:
    """``127.0.0.1:PORT``: TLS in front of the loopback registry (socat), stopped after."""
    if shutil.which("socat") is None:
        pytest.skip("socat not installed (apt-get install socat)")
    work = tmp_path_factory.mktemp("registry-tls")
    pem = work / "registry.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            str(pem),
            "-out",
            str(work / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )
    with pem.open("a") as fh:
        fh.write((work / "cert.pem").read_text())
    port = free_port()
    proc = subprocess.Popen(
        [
            "socat",
            f"OPENSSL-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,cert={pem},verify=0",
            f"TCP:{oci_registry.host}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: _answers(port), 20, "socat TLS in front of the registry")
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


def _answers(port: int) -> bool:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/v2/", context=context) as resp:
            return resp.status == 200
    except OSError:
        return False


def _generate(deployed: GitOps, registry: str) -> Path:
    git = deployed.git
    (git.path / VALUES_PATH).write_text(yaml.safe_dump(VALUES, sort_keys=False))
    registry_url = f"oci://{registry}/charts"
    return argocd_gen(
        git,
        "argocd-oci",
        deployed.cp.server,
        "--chart-registry",
        registry_url,
        cluster=CLUSTER,
        values=VALUES_PATH,
    )


def _load(path: Path) -> dict:
    (doc,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    return doc


def test_slurm_chart_from_oci_with_values_from_git(
    deployed: GitOps, published_charts, tls_registry
):
    out = _generate(deployed, tls_registry)
    sha = deployed.git.commit("beta: a Slurm cluster from the published chart")
    project = _load(out / "project.yaml")
    app = _load(out / f"apps/slurm-{SLURM}.yaml")
    assert project["metadata"]["name"] == app["spec"]["project"] == f"sunk-{CLUSTER}"
    deployed.argocd.apply(project)
    secret = _load(out / "repository-secret.yaml")
    assert secret["stringData"]["enableOCI"] == "true"
    secret["stringData"]["insecure"] = "true"  # the throwaway self-signed certificate
    deployed.argocd.apply(secret)
    deployed.argocd.apply(app)
    name = app["metadata"]["name"]
    version = published_charts.versions["slurm"]

    def synced() -> dict | None:
        status = (deployed.argocd.app(name) or {}).get("status") or {}
        sync = status.get("sync") or {}
        if sync.get("status") != "Synced" or sync.get("revisions") != [version, sha]:
            return None
        return status

    status = deployed.wait(synced, 180, f"{name} Synced at chart {version} and values {sha[:8]}\n")
    assert status["sourceTypes"][0] == "Helm"
    cluster = deployed.kube.get(f"/apis/{GROUP}/v1alpha1/namespaces/{SLURM}/slurmclusters/{SLURM}")
    # The values file from Git reached the chart from the registry.
    assert cluster["spec"]["slurmConfig"]["MaxJobCount"] == 777
    assert cluster["metadata"]["labels"]["helm.sh/chart"] == f"slurm-{version}"
