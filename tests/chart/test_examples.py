"""Every example lints, renders deterministically and matches its snapshot."""

from __future__ import annotations

import subprocess

import pytest

from tests.chart.conftest import EXAMPLES

SNAPSHOT_EXAMPLES = [p for p in EXAMPLES if p.stem != "stress-64"]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_helm_lint_strict(helm, repo, example):
    proc = subprocess.run(
        [helm, "lint", "--strict", str(repo / "charts/slurm"), "-f", str(example)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_render_is_byte_identical(render, example):
    first, second = render("slurm", example), render("slurm", example)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout


@pytest.mark.parametrize("example", SNAPSHOT_EXAMPLES, ids=lambda p: p.stem)
def test_rendered_snapshot(render, example, snapshot):
    proc = render("slurm", example)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == snapshot


def test_stress_example_shape(objects, repo):
    docs = objects("slurm", repo / "examples/stress-64.yaml")
    nodesets = [d for d in docs if d["kind"] == "NodeSet"]
    (cluster,) = [d for d in docs if d["kind"] == "SlurmCluster"]
    assert len(nodesets) == 64
    assert len(cluster["spec"]["compute"]["partitions"]) == 16


def test_one_cluster_and_one_nodeset_per_enabled_group(objects, repo):
    docs = objects("slurm", repo / "examples/multi-pool.yaml")
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["NodeSet", "NodeSet", "NodeSet", "SlurmCluster"]
    assert sorted(d["metadata"]["name"] for d in docs if d["kind"] == "NodeSet") == [
        "cpu",
        "h100",
        "l40s",
    ]
    for doc in docs:
        labels = doc["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/instance"] == "rel"
        assert labels["sunk.coreweave.com/cluster"] == "multipool"
