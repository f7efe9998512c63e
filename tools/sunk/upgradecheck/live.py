"""The live side of `sunkctl upgrade-check`: the release's SlurmCluster, its NodeSets and their
slurmd Pods, read with the user's kubectl (its kubeconfig and context, as `helm upgrade` would
use them). Read-only: `get` and nothing else."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from sunk.errors import ToolError
from sunk.models.crds import GROUP
from sunk.operator import names
from sunk.upgradecheck.plan import Side

TIMEOUT = 60  # seconds per kubectl call


class KubectlError(ToolError):  # exit 3
    """kubectl is missing, cannot reach the cluster, or is refused."""


@dataclass(frozen=True)
class Kubectl:
    binary: str = "kubectl"
    kubeconfig: str | None = None
    context: str | None = None

    def get(self, namespace: str, *what: str, missing_ok: bool = False) -> dict[str, Any] | None:
        path = shutil.which(self.binary)
        if path is None:
            raise KubectlError(f"{self.binary} not found: install kubectl or pass --kubectl PATH")
        argv = [path, "get", *what, "-n", namespace, "-o", "json"]
        if self.kubeconfig:
            argv.insert(1, f"--kubeconfig={self.kubeconfig}")
        if self.context:
            argv.insert(1, f"--context={self.context}")
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise KubectlError(f"kubectl get {' '.join(what)} took over {TIMEOUT}s") from exc
        if proc.returncode != 0:
            if missing_ok and "NotFound" in proc.stderr:
                return None
            raise KubectlError(
                f"kubectl get {' '.join(what)} -n {namespace}: {proc.stderr.strip()}"
            )
        try:
            return json.loads(proc.stdout)
        except json.JSONDecodeError as exc:
            raise KubectlError(f"kubectl get {' '.join(what)}: not JSON ({exc})") from exc


@dataclass(frozen=True)
class Live:
    side: Side | None  # None: the release has no SlurmCluster yet
    pods: list[dict[str, Any]]  # its slurmd Pods
    nodes: list[dict[str, Any]]  # the Nodes they run on


def read(kubectl: Kubectl, namespace: str, name: str) -> Live:
    """The SlurmCluster ``name`` and its NodeSets as stored, its slurmd Pods and their Nodes
    (whose lock annotations name the jobs holding them; left out where listing Nodes is not
    allowed)."""
    cluster = kubectl.get(namespace, f"slurmclusters.{GROUP}", name, missing_ok=True)
    if cluster is None:
        return Live(None, [], [])
    spec = cluster.get("spec") or {}
    cluster_name = spec.get("clusterName", name)
    listed = kubectl.get(namespace, f"nodesets.{GROUP}") or {}
    nodesets = {
        o["metadata"]["name"]: o.get("spec") or {}
        for o in listed.get("items", [])
        if (o.get("spec") or {}).get("clusterName") in (name, cluster_name)
        and not o["metadata"].get("deletionTimestamp")
    }
    selector = f"{names.LABEL_CLUSTER}={cluster_name},{names.LABEL_NODESET}"
    pods = (kubectl.get(namespace, "pods", "-l", selector) or {}).get("items", [])
    try:
        nodes = (kubectl.get(namespace, "nodes") or {}).get("items", [])
    except KubectlError:  # a namespaced user may not list Nodes: the Pods' lock state is enough
        nodes = []
    return Live(Side(name, namespace, spec, nodesets), pods, nodes)
