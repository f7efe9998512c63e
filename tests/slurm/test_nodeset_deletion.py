"""A node group deleted while jobs name its partition, on real Slurm 24.11 with the
configuration our renderer writes (two groups, `cpu` and `gpu`, and a declared partition
`all` over both):

- what the operator reads to decide (``jobs_naming_partition`` on slurmrestd's ``/jobs``);
- why it must wait: slurmctld, reconfigured without the partition, ends every job that named
  it, held pending ones included (NODE_FAIL);
- and that the renderer never writes a partition naming a NodeSet that is gone: the declared
  partition keeps its other group, so slurmctld (reconfigured, then restarted from its state)
  stays up. Written as the chart's values name them, ``Nodes=cpu,gpu`` without a `gpu`
  NodeSet line is fatal: "Invalid node names in partition all"."""

from __future__ import annotations

import asyncio
import dataclasses
import secrets

from tests.slurm.test_rendered import DATA, inputs_for

from sunk.devenv.slurm_runtime import SlurmRuntime
from sunk.slurmconf import render_all
from sunk.syncer.plan import jobs_naming_partition
from sunk.syncer.restd import Slurmrestd

CPU, GPU = "cpu-000-001", "gpu-000-001"


def _jobs(url: str, key: bytes) -> list[dict]:
    async def read() -> list[dict]:
        restd = Slurmrestd(url, key)
        try:
            return await restd.jobs()
        finally:
            await restd.close()

    return asyncio.run(read())


def _job_state(rt: SlurmRuntime, job: str) -> str:
    out = rt.run("scontrol", "-o", "show", "job", job).stdout
    return next((w.split("=", 1)[1] for w in out.split() if w.startswith("JobState=")), out)


def test_nodeset_deletion_waits_for_jobs_naming_its_partition_and_never_breaks_slurmctld(
    slurm_rootfs_path, helm
):
    rt = SlurmRuntime(slurm_rootfs_path, subnet="10.85.0.0/24")
    try:
        inputs = inputs_for(DATA / "values-two-groups.yaml", rt)
        rendered = render_all(inputs)
        rt.start(rendered.files, munge_key=secrets.token_bytes(128))
        url = rt.start_restd()
        rt.add_node(CPU, rendered.registrations["cpu"])
        rt.add_node(GPU, rendered.registrations["gpu"], gpus=2)
        rt.wait_nodes_idle([CPU, GPU], timeout=180)

        def sbatch(*args: str) -> str:
            out = rt.run("sbatch", "--parsable", "--hold", *args, "--wrap", "true", check=True)
            return out.stdout.strip().split(";")[0]

        only_gpu, gpu_or_cpu, only_cpu = (
            sbatch("-p", "gpu"),
            sbatch("-p", "gpu,cpu"),
            sbatch("-p", "cpu"),
        )
        jobs = _jobs(url, rt.jwt_key)
        assert jobs_naming_partition(jobs, "gpu") == sorted(map(int, (only_gpu, gpu_or_cpu)))
        assert jobs_naming_partition(jobs, "cpu") == sorted(map(int, (gpu_or_cpu, only_cpu)))

        # The gpu group's Pod is gone (drained, removed, its node record deleted), and the
        # cluster renders without its NodeSet, as the operator would if it did not wait.
        rt.remove_node(GPU)  # stops its slurmd and deletes its node record
        assert GPU not in rt.node_states()
        without = render_all(
            dataclasses.replace(
                inputs, nodesets=tuple(n for n in inputs.nodesets if n.name != "gpu")
            )
        )
        conf = without.files["slurm.conf"].splitlines()
        assert "compute.partitions[0].nodeSets: no NodeSet gpu in this cluster; left out of " \
            "the partition" in without.warnings  # fmt: skip
        assert not any(line.startswith(("NodeSet=gpu", "PartitionName=gpu ")) for line in conf)
        assert any(line.startswith("PartitionName=all Nodes=cpu ") for line in conf), conf

        rt.reconfigure(without.files)
        # what the operator's wait prevents: both jobs that named gpu are ended
        assert _job_state(rt, only_gpu) == "NODE_FAIL"
        assert _job_state(rt, gpu_or_cpu) == "NODE_FAIL"
        assert _job_state(rt, only_cpu) == "PENDING"
        rt.restart_controller(push_to_nodes=False)  # and from its saved state
        assert "UP" in rt.run("scontrol", "ping", check=True).stdout
        assert _job_state(rt, only_cpu) == "PENDING"
        rt.run("scontrol", "release", only_cpu, check=True)
        assert rt.wait_job(only_cpu, timeout=120) == "COMPLETED"
    finally:
        rt.close()
