"""The renderer's output, through the real chart, booted on real Slurm 24.11 daemons."""

from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from sunk.chartio.helm import Release, template
from sunk.chartio.manifests import parse_release
from sunk.devenv.slurm_runtime import SlurmRuntime
from sunk.slurmconf import Placement, Rendered, render_all

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
TREE = ("ib.coreweave.cloud/fabric", "ib.coreweave.cloud/superpod", "ib.coreweave.cloud/leafgroup")
DB_PASSWORD = secrets.token_hex(8)  # one per run: part of the config hash
NODES = {
    "cpu-000-001": ("cpu", 0, "leaf1"),
    "cpu-000-002": ("cpu", 0, "leaf2"),
    "gpu-000-001": ("gpu", 2, "leaf2"),
}


def inputs_for(values: Path | list[Path], rt: SlurmRuntime, placements=()):
    files = values if isinstance(values, list) else [values]
    inputs = parse_release(template(Release(), files)).cluster_inputs("tenant-slurm")
    return dataclasses.replace(
        inputs, endpoints=rt.endpoints(), placements=tuple(placements), db_password=DB_PASSWORD
    )


def placements(leaf_of: dict[str, str]) -> list[Placement]:
    return [
        Placement(node, dict(zip(TREE, ("fab", "sp1", leaf), strict=True)))
        for node, leaf in leaf_of.items()
    ]


@pytest.fixture(scope="module")
def booted(slurm_rootfs_path, helm) -> Iterator[tuple[SlurmRuntime, Rendered]]:
    rt = SlurmRuntime(slurm_rootfs_path)
    try:
        rendered = render_all(
            inputs_for(
                DATA / "values-two-groups.yaml",
                rt,
                placements({name: leaf for name, (_, _, leaf) in NODES.items()}),
            )
        )
        rt.start(rendered.files, munge_key=secrets.token_bytes(128))
        for name, (group, gpus, _) in NODES.items():
            rt.add_node(name, rendered.registrations[group], gpus=gpus)
        rt.wait_nodes_idle(NODES, timeout=180)
        rt.reconfigure()  # dynamic nodes join the tree topology on reconfigure
        rt.wait_nodes_idle(NODES, timeout=180)
        yield rt, rendered
    finally:
        rt.close()


def sinfo(rt: SlurmRuntime) -> dict[str, list[str]]:
    out = rt.run("sinfo", "-h", "-N", "-o", "%P|%N|%f|%G", check=True).stdout
    rows: dict[str, list[str]] = {}
    for line in out.split():
        partition, node, features, gres = line.split("|")
        rows.setdefault(partition.rstrip("*"), []).append(f"{node};{features};{gres}")
    return rows


def test_partitions_nodes_features_and_gres(booted):
    rt, rendered = booted
    assert rendered.registrations["gpu"] == (
        "Features=gpu,gpu-node Gres=gpu:h100:2 CPUs=2 RealMemory=1536"
    )
    rows = sinfo(rt)
    assert sorted(rows) == ["all", "cpu", "gpu"]
    assert sorted(r.split(";")[0] for r in rows["cpu"]) == ["cpu-000-001", "cpu-000-002"]
    assert rows["gpu"] == ["gpu-000-001;gpu,gpu-node;gpu:h100:2"]
    assert len(rows["all"]) == 3
    default = rt.run("scontrol", "show", "partition", "all", check=True).stdout
    assert "Default=YES" in default and "DefMemPerCPU=768" in default


@pytest.mark.parametrize("partition", ["cpu", "gpu", "all"])
def test_batch_job_completes_in_every_partition(booted, partition):
    rt, _ = booted
    out = rt.run("sbatch", "-p", partition, "--parsable", "--wrap", "hostname", check=True)
    assert rt.wait_job(out.stdout.strip().split(";")[0]) == "COMPLETED"


def test_multi_node_srun_spans_two_nodes(booted):
    rt, _ = booted
    out = rt.run("srun", "-p", "cpu", "-N2", "hostname", check=True, timeout=120)
    assert sorted(out.stdout.split()) == ["cpu-000-001", "cpu-000-002"]


def test_gpu_job_gets_its_gres(booted):
    rt, _ = booted
    out = rt.run(
        "srun",
        "-p",
        "gpu",
        "--gres=gpu:h100:2",
        "sh",
        "-c",
        "echo $CUDA_VISIBLE_DEVICES",
        check=True,
        timeout=120,
    )
    assert out.stdout.strip() == "0,1"


def test_topology_accepted_and_reconfigured_after_a_label_change(booted):
    rt, rendered = booted
    topo = rt.run("scontrol", "show", "topology", check=True).stdout
    assert re.search(r"SwitchName=fab-sp1-leaf1 .*Nodes=cpu-000-001", topo)
    assert re.search(r"SwitchName=fab-sp1 .*Switches=fab-sp1-leaf\[1-2\]", topo)
    moved = render_all(
        inputs_for(
            DATA / "values-two-groups.yaml",
            rt,
            placements({"cpu-000-001": "leaf2", "cpu-000-002": "leaf2", "gpu-000-001": "leaf2"}),
        )
    )
    assert moved.config_hash == rendered.config_hash  # no restart needed, only reconfigure
    rt.reconfigure({"topology.conf": moved.files["topology.conf"]})
    topo = rt.run("scontrol", "show", "topology", check=True).stdout
    assert "fab-sp1-leaf1" not in topo
    assert re.search(r"SwitchName=fab-sp1-leaf2 .*Nodes=cpu-000-\[001-002\],gpu-000-001", topo)


def test_accounting_lists_finished_jobs(booted):
    rt, _ = booted
    job = rt.run(
        "sbatch", "-p", "cpu", "--parsable", "-J", "acct-check", "--wrap", "true", check=True
    ).stdout.strip()
    assert rt.wait_job(job) == "COMPLETED"

    def listed():
        out = rt.run("sacct", "-n", "-X", "-P", "-o", "JobID,JobName,State", check=True).stdout
        return f"{job}|acct-check|COMPLETED" in out

    import time

    deadline = time.monotonic() + 60
    while not listed():
        assert time.monotonic() < deadline, "sacct never listed the job"
        time.sleep(2)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_slurmctld_boots_with_every_example(slurm_rootfs_path, helm, example):
    rt = SlurmRuntime(slurm_rootfs_path)
    try:
        rendered = render_all(inputs_for(example, rt))
        # slurmctld 24.11 waits for slurmdbd (its ClusterID) before serving: boot both.
        rt.start(rendered.files, munge_key=secrets.token_bytes(128))
        shown = rt.run("scontrol", "show", "partition", "-o", check=True).stdout
        partitions = {m.group(1) for m in re.finditer(r"PartitionName=(\S+)", shown)}
        expected = {
            line.split()[0].split("=", 1)[1]
            for line in rendered.files["slurm.conf"].splitlines()
            if line.startswith("PartitionName=")
        }
        assert partitions == expected
        config = rt.run("scontrol", "show", "config", check=True).stdout
        assert re.search(
            r"ClusterName\s+=\s+"
            + re.escape(rendered.files["slurm.conf"].split("ClusterName=")[1].split()[0]),
            config,
        )
    finally:
        rt.close()
