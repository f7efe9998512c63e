"""The operator image, not just the package: the container reconciles a SlurmCluster on the
real API server (built from Go modules) and answers its health and metrics endpoints."""

from __future__ import annotations

import base64
import subprocess
import time
import urllib.request
import uuid

import pytest
import yaml

from sunk.devenv.controlplane import ControlPlane, free_port, missing_binaries
from tests.images.test_smoke import built_images, ref, sh  # noqa: F401 — shared fixture

API = "/apis/sunk.coreweave.com/v1alpha1"


def embedded_kubeconfig(cp: ControlPlane, path) -> None:
    """The admin kubeconfig with its certificates inline: the container runs as uid 65532 and
    cannot read the root-owned key files the test control plane writes."""

    def data(name: str) -> str:
        return base64.b64encode((cp.pki / name).read_bytes()).decode()

    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "t",
                "clusters": [
                    {
                        "name": "t",
                        "cluster": {
                            "server": cp.server,
                            "certificate-authority-data": data("ca.crt"),
                        },
                    }
                ],
                "users": [
                    {
                        "name": "admin",
                        "user": {
                            "client-certificate-data": data("admin.crt"),
                            "client-key-data": data("admin.key"),
                        },
                    }
                ],
                "contexts": [{"name": "t", "context": {"cluster": "t", "user": "admin"}}],
            }
        )
    )
    path.chmod(0o644)


def test_operator_container_reconciles(built_images, helm, tmp_path):  # noqa: F811
    missing = missing_binaries()
    if missing:
        pytest.skip(
            f"{', '.join(missing)} not installed: run "
            "`python -m sunk.devenv.toolchain install kube`"
        )
    name = f"sunk-operator-test-{uuid.uuid4().hex[:6]}"
    with ControlPlane() as cp:
        subprocess.run(
            [
                helm,
                "--kubeconfig",
                str(cp.kubeconfig),
                "install",
                "sunk",
                "charts/sunk",
                "-n",
                "sunk",
                "--create-namespace",
            ],
            check=True,
            capture_output=True,
        )
        cp.client.create("/api/v1/namespaces", {"metadata": {"name": "img"}})
        kubeconfig = tmp_path / "kubeconfig"
        embedded_kubeconfig(cp, kubeconfig)
        port = free_port()
        sh("docker", "run", "-d", "--name", name, "--network", "host",
           "-v", f"{kubeconfig}:/etc/sunk/kubeconfig:ro", ref("operator"), "run",
           "--kubeconfig", "/etc/sunk/kubeconfig", "--health-host", "127.0.0.1",
           "--health-port", str(port), "--metrics-port", str(port),
           "--hook-port", str(free_port()),
           "--leader-election-namespace", "img", "--namespace", "img")  # fmt: skip
        try:
            cp.client.create(
                f"{API}/namespaces/img/slurmclusters",
                {
                    "apiVersion": "sunk.coreweave.com/v1alpha1",
                    "kind": "SlurmCluster",
                    "metadata": {"name": "img"},
                    "spec": {"clusterName": "img", "login": {"service": {"type": "ClusterIP"}}},
                },
            )

            def controller():
                try:
                    return cp.client.get("/apis/apps/v1/namespaces/img/statefulsets/img-controller")
                except Exception:
                    return None

            statefulset = cp.wait_for(controller, 120, "controller StatefulSet from the image")
            assert statefulset["metadata"]["ownerReferences"][0]["name"] == "img"
            deadline = time.monotonic() + 30
            while True:
                try:
                    with urllib.request.urlopen(
                        f"http://127.0.0.1:{port}/metrics", timeout=5
                    ) as response:
                        metrics = response.read().decode()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "no /metrics from the container"
                    time.sleep(1)
            assert "sunk_operator_leader 1" in metrics
        finally:
            logs = sh("docker", "logs", name, check=False)
            sh("docker", "rm", "-f", name, check=False)
            print(logs.stdout[-3000:], logs.stderr[-3000:])
