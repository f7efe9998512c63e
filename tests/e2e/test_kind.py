"""End to end on kind: our images, both charts, a job submitted from the login pod.

For users with Docker, kind, kubectl and internet access (kind pulls its node image). Opt in
with SUNK_E2E=1; everywhere else the test skips and says what is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sunk.devenv.images import images

REPO = Path(__file__).resolve().parents[2]
CLUSTER = "sunk-e2e"
VALUES = """
clusterName: e2e
compute:
  reservedMemory: 256Mi
  nodes:
    cpu:
      replicas: 1
      resources:
        requests: {cpu: 500m, memory: 512Mi}
        limits: {memory: 1Gi}
login:
  service: {type: ClusterIP, externalTrafficPolicy: null}
"""


def missing_requirements() -> list[str]:
    missing = []
    if os.environ.get("SUNK_E2E") != "1":
        missing.append("SUNK_E2E=1 (opt-in: needs internet for kind's node image)")
    for tool in ("kind", "kubectl", "docker"):
        if shutil.which(tool) is None:
            missing.append(f"{tool} on PATH")
    if (
        shutil.which("docker")
        and subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0
    ):
        missing.append("a running Docker engine")
    return missing


pytestmark = pytest.mark.skipif(
    bool(missing_requirements()), reason="kind e2e needs " + ", ".join(missing_requirements())
)


def run(*cmd: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs)


@pytest.fixture(scope="module")
def kind_cluster(tmp_path_factory, helm):
    kubeconfig = tmp_path_factory.mktemp("kind") / "kubeconfig"
    run(
        "kind",
        "create",
        "cluster",
        "--name",
        CLUSTER,
        "--kubeconfig",
        str(kubeconfig),
        "--wait",
        "120s",
    )
    try:
        run(sys.executable, "-m", "sunk.devenv.images", "build")
        for spec in images():
            run("kind", "load", "docker-image", spec.ref, "--name", CLUSTER)
        yield kubeconfig
    finally:
        subprocess.run(["kind", "delete", "cluster", "--name", CLUSTER], check=False)


def kubectl(kubeconfig: Path, *args: str) -> str:
    return run("kubectl", "--kubeconfig", str(kubeconfig), *args).stdout


def test_job_runs_from_the_login_pod(kind_cluster, helm, tmp_path):
    kc = str(kind_cluster)
    run(
        helm,
        "--kubeconfig",
        kc,
        "install",
        "sunk",
        str(REPO / "charts/sunk"),
        "-n",
        "sunk",
        "--create-namespace",
        "--wait",
        "--timeout",
        "5m",
    )
    run(helm, "--kubeconfig", kc, "test", "sunk", "-n", "sunk")
    values = tmp_path / "values.yaml"
    values.write_text(VALUES)
    run(
        helm,
        "--kubeconfig",
        kc,
        "install",
        "slurm",
        str(REPO / "charts/slurm"),
        "-n",
        "tenant-slurm",
        "--create-namespace",
        "-f",
        str(values),
    )
    deadline = time.monotonic() + 600
    while True:
        status = json.loads(
            kubectl(kind_cluster, "get", "slurmcluster", "e2e", "-n", "tenant-slurm", "-o", "json")
        ).get("status", {})
        ready = [c for c in status.get("conditions", []) if c["type"] == "Ready"]
        if ready and ready[0]["status"] == "True":
            break
        assert time.monotonic() < deadline, status
        time.sleep(5)
    out = kubectl(
        kind_cluster,
        "exec",
        "-n",
        "tenant-slurm",
        "e2e-login-0",
        "-c",
        "sshd",
        "--",
        "sbatch",
        "--wait",
        "-o",
        "/tmp/out",
        "--wrap",
        "hostname",
    )
    assert "Submitted batch job" in out
