from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from sunk.chartio.manifests import RenderedRelease
from sunk.operator.cluster.base import ClusterContext
from sunk.operator.nodeset.pod import build_pod
from sunk.operator.nodeset.reconcile import pod_context
from sunk.slurmconf import NodeSetInput, render_all

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


@pytest.fixture(scope="session")
def render(helm, repo):
    """helm template of a chart with values files / --set; returns (rc, stdout, stderr)."""

    def _render(
        chart: str,
        *files: Path,
        sets: tuple[str, ...] = (),
        ns: str = "tenant-slurm",
        api_versions: tuple[str, ...] = (),
    ):
        cmd = [helm, "template", "rel", str(repo / "charts" / chart), "-n", ns]
        for api in api_versions:
            cmd += ["--api-versions", api]
        for f in files:
            cmd += ["-f", str(f)]
        for s in sets:
            cmd += ["--set", s]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        return proc

    return _render


@pytest.fixture(scope="session")
def objects(render):
    def _objects(
        chart: str, *files: Path, sets: tuple[str, ...] = (), api_versions: tuple[str, ...] = ()
    ):
        proc = render(chart, *files, sets=sets, api_versions=api_versions)
        assert proc.returncode == 0, proc.stderr
        return [d for d in yaml.safe_load_all(proc.stdout) if d]

    return _objects


def write_values(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "values.yaml"
    path.write_text(text)
    return path


@dataclasses.dataclass(frozen=True)
class Built:
    """What the operator starts from for one rendered `slurm` chart: the cluster's context
    (its spec and rendered Slurm files) and the NodeSets."""

    ctx: ClusterContext
    nodesets: tuple[NodeSetInput, ...]

    def slurmd_pod(self, nodeset: NodeSetInput) -> dict[str, Any]:
        owner = {"metadata": {"name": nodeset.name, "uid": "uid"}}
        pod_ctx = pod_context(self.ctx.namespace, self.ctx.name, self.ctx.spec, nodeset.spec)
        return build_pod(nodeset, owner, pod_ctx, "node-1", f"{nodeset.name}-000-001", {})


def operator_view(docs: list[dict[str, Any]], namespace: str) -> Built:
    inputs = RenderedRelease(docs).cluster_inputs(namespace)
    rendered = render_all(dataclasses.replace(inputs, db_password="pw"))
    (cluster,) = [d for d in docs if d["kind"] == "SlurmCluster"]
    name = cluster["metadata"]["name"]
    ctx = ClusterContext(name, namespace, "uid", inputs.cluster, rendered, "munge", "jwt", None)
    return Built(ctx, inputs.nodesets)
