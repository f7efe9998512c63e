"""A Slurm upgrade with jobs in the queue: 24.11 (trixie, what our images ship) to 26.05
(forky), on the configuration our renderer writes, in Slurm's order: slurmdbd (its first
start converts the database), slurmctld (state saved and read back), then each slurmd, the
busy one drained first and upgraded once its job has ended, as the NodeSet's safe update
does. Each daemon restarts with the new release's programs over the same configuration,
state and keys (``SlurmRuntime.use_release``), as a Pod restarted with a new image keeps its
volumes. And the skew Slurm forbids: a slurmd newer than slurmctld is refused. Our Slurm
client (Syncer, Pod Scheduler, metrics) speaks every data_parser version each release serves,
and follows slurmrestd across the upgrade."""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.slurm.test_rendered import DATA, inputs_for

from sunk.devenv import slurm_rootfs
from sunk.devenv.controlplane import wait_for
from sunk.devenv.slurm_runtime import SlurmRuntime
from sunk.scheduler.plan import Job
from sunk.scheduler.podjob import STARTED, Placeholder, PodRef
from sunk.slurmconf import Rendered, render_all
from sunk.syncer.plan import SlurmNode
from sunk.syncer.restd import VERSIONS, SlurmApiError, Slurmrestd
from sunk.syncer.slurm_metrics import snapshot

NEXT = slurm_rootfs.RELEASES[slurm_rootfs.NEXT_SERIES]
NODES = ("cpu-000-001", "cpu-000-002")


@pytest.fixture(scope="module")
def next_root(slurm_rootfs_path: Path) -> Path:
    found = slurm_rootfs.installed(NEXT.suite)
    if found is None:
        pytest.skip(
            f"the Slurm {NEXT.series} root is not built: run "
            f"`python -m sunk.devenv.toolchain install slurm-{NEXT.series}` (or `make setup`)"
        )
    return found.root


@pytest.fixture
def old_cluster(slurm_rootfs_path: Path, helm) -> Iterator[tuple[SlurmRuntime, Rendered]]:
    """Our rendered two-group cluster on 24.11, with accounting, both cpu nodes idle."""
    rt = SlurmRuntime(slurm_rootfs_path, subnet="10.84.0.0/24")
    try:
        rendered = render_all(inputs_for(DATA / "values-two-groups.yaml", rt))
        assert "slurmdbd.conf" in rendered.files
        rt.start(rendered.files, munge_key=secrets.token_bytes(128))
        for name in NODES:
            rt.add_node(name, rendered.registrations["cpu"])
        rt.wait_nodes_idle(NODES, timeout=180)
        yield rt, rendered
    finally:
        rt.close()


def _version(rt: SlurmRuntime) -> str:
    out = rt.run("scontrol", "show", "config", check=True).stdout
    match = re.search(r"^SLURM_VERSION\s*=\s*(\S+)", out, re.M)
    assert match, out
    return match.group(1)


def _node_versions(rt: SlurmRuntime) -> dict[str, str]:
    out = rt.run("scontrol", "-o", "show", "node", check=True).stdout
    found = dict(re.findall(r"NodeName=(\S+) .*?\bVersion=(\S+)", out))
    return {name: found.get(name, "") for name in NODES}


def _state(rt: SlurmRuntime, job: str) -> str:
    return rt.run("squeue", "-h", "-j", job, "-o", "%T").stdout.strip()


def _sbatch(rt: SlurmRuntime, *args: str) -> str:
    return rt.run("sbatch", "--parsable", *args, check=True).stdout.strip().split(";")[0]


def test_slurm_upgrade_24_11_to_26_05_keeps_the_running_and_the_pending_job(
    old_cluster: tuple[SlurmRuntime, Rendered], next_root: Path
):
    rt, _ = old_cluster
    old = _version(rt)
    assert old.startswith(slurm_rootfs.SLURM_SERIES + "."), old
    running = _sbatch(rt, "-p", "cpu", "-w", NODES[0], "--wrap", "sleep 45; echo ran")
    wait_for(lambda: _state(rt, running) == "RUNNING", 60, f"job {running} RUNNING", 0.5)
    pending = _sbatch(rt, "-p", "cpu", f"--dependency=afterok:{running}", "--wrap", "hostname")

    rt.use_release(next_root)
    rt.restart_accounting()  # first: slurmctld's records go to a slurmdbd as new as it
    rt.restart_controller(push_to_nodes=False)
    assert _version(rt).startswith(NEXT.series + "."), _version(rt)
    # the jobs came back from the saved state, one still running on its 24.11 slurmd
    states = rt.run("squeue", "-h", "-o", "%i %T", check=True).stdout.split("\n")
    assert f"{running} RUNNING" in states and f"{pending} PENDING" in states, states

    # slurmds: the idle one at once; the busy one drained, and upgraded once its job is done
    rt.restart_node(NODES[1])
    rt.run("scontrol", "update", f"nodename={NODES[0]}", "state=drain", "reason=upgrade",
           check=True)  # fmt: skip
    assert rt.wait_job(running, timeout=120) == "COMPLETED"
    rt.restart_node(NODES[0])
    rt.run("scontrol", "update", f"nodename={NODES[0]}", "state=resume", check=True)
    rt.wait_nodes_idle(NODES, timeout=120)
    assert rt.wait_job(pending, timeout=120) == "COMPLETED"
    assert {v[:5] for v in _node_versions(rt).values()} == {NEXT.series}, _node_versions(rt)

    # accounting kept both jobs through the database's conversion
    sacct = rt.run("sacct", "-n", "-X", "-P", "-j", f"{running},{pending}", "-o",
                   "JobID,State", check=True).stdout.split()  # fmt: skip
    assert sorted(sacct) == sorted([f"{running}|COMPLETED", f"{pending}|COMPLETED"]), sacct


def test_slurm_upgrade_refuses_a_slurmd_newer_than_slurmctld_skew(
    old_cluster: tuple[SlurmRuntime, Rendered], next_root: Path
):
    """Slurm's order is the rule: a 26.05 slurmd started against the 24.11 slurmctld cannot
    even fetch its configuration. slurmctld says why, and the node keeps its 24.11
    registration (which lapses once SlurmdTimeout passes)."""
    rt, _ = old_cluster
    assert rt.workdir is not None
    rt.restart_node(NODES[1], release=next_root)
    ctld_log = rt.workdir / "logs" / "slurmctld.log"
    refused = f"[[{NODES[1]}]"
    wait_for(lambda: refused in ctld_log.read_text(), 60, "slurmctld to refuse the slurmd", 1)
    lines = [line for line in ctld_log.read_text().splitlines() if refused in line]
    assert "Incompatible versions of client and server code" in lines[0], lines
    wait_for(
        lambda: "failed to fetch remote configs" in rt.node_log(NODES[1]),
        60, "the slurmd to say it has no configuration", 1,
    )  # fmt: skip
    assert _node_versions(rt)[NODES[1]].startswith(slurm_rootfs.SLURM_SERIES + "."), _node_versions(
        rt
    )


# What each release's slurmrestd serves of the versions we speak (its OpenAPI listing).
SPOKEN = {
    slurm_rootfs.SLURM_SERIES: ["v0.0.41", "v0.0.42"],
    NEXT.series: ["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"],
}
PLACEHOLDER = Placeholder(
    pod=PodRef("tenant", "restd-check", "0b1c"), cpus=1, memory_mib=16, partition="cpu"
)


async def _speaks(restd: Slurmrestd, node_name: str) -> None:
    """Every call the Syncer, the Pod Scheduler and the metrics make, read back through the
    parsers they use: a drain and resume, a placeholder job that marks itself started, the
    metrics' reads, and the errors that mean "already gone". (The placeholders killed before
    may still be completing: KillWait.)"""
    nodes = {n.name: n for n in map(SlurmNode.from_restd, await restd.nodes())}
    assert set(NODES) <= set(nodes) and "DRAIN" not in nodes[node_name].states, nodes
    await restd.drain(node_name, "k8s: restd check")
    node = await restd.node(node_name)
    assert node is not None
    drained = SlurmNode.from_restd(node)
    assert "DRAIN" in drained.states and drained.reason == "k8s: restd check", drained
    await restd.resume(node_name)
    node = await restd.node(node_name)
    assert node is not None and "DRAIN" not in SlurmNode.from_restd(node).states, node

    job_id = await restd.submit(PLACEHOLDER.script(), PLACEHOLDER.job())
    deadline = time.monotonic() + 60
    while True:
        found = await restd.job(job_id)
        job = Job.from_restd(found) if found else None
        if job is not None and job.extra == STARTED:
            break
        assert time.monotonic() < deadline, f"placeholder {job_id}: {found}"
        await asyncio.sleep(0.5)
    assert job.pod == PLACEHOLDER.pod and "RUNNING" in job.states and job.nodes, job
    samples = snapshot(
        await restd.nodes(), await restd.jobs(), await restd.partitions(), await restd.diag()
    )
    assert samples["slurm_queue_running"][0][1] >= 1, samples["slurm_queue_running"]
    assert samples["slurm_node_cpu_alloc"] and samples["slurm_controller_rpc_count"], samples
    cpu_total = dict(samples["slurm_partition_cpu_total"])
    assert cpu_total[("cpu",)] > 0, cpu_total
    await restd.signal_job(job_id, "KILL")

    with pytest.raises(SlurmApiError) as caught:
        await restd.delete_node("no-such-node")
    assert Slurmrestd.missing(caught.value), caught.value
    assert await restd.job(999_999) is None


def _speaks_each_version(rt: SlurmRuntime, url: str, series: str) -> list[str]:
    spoken = []
    for version in SPOKEN[series]:
        restd = Slurmrestd(url, rt.jwt_key, version=version)
        try:
            asyncio.run(_speaks(restd, NODES[1]))
        finally:
            asyncio.run(restd.close())
        spoken.append(version)
    return spoken


def test_slurm_upgrade_restd_client_speaks_both_releases_and_follows_the_upgrade(
    old_cluster: tuple[SlurmRuntime, Rendered], next_root: Path
):
    rt, _ = old_cluster
    assert set(VERSIONS) >= {v for vs in SPOKEN.values() for v in vs}
    url = rt.start_restd()
    loop = asyncio.new_event_loop()
    live = Slurmrestd(url, rt.jwt_key)  # negotiates, as the Syncer's client does
    try:
        loop.run_until_complete(live.nodes())
        assert live.version == "v0.0.42", live.version  # 24.11's newest
        assert _speaks_each_version(rt, url, slurm_rootfs.SLURM_SERIES) == ["v0.0.41", "v0.0.42"]

        rt.use_release(next_root)
        rt.restart_accounting()
        rt.restart_controller(push_to_nodes=False)
        for name in NODES:
            rt.restart_node(name)
        rt.wait_nodes_idle(NODES, timeout=120)
        rt.restart_restd()
        assert _version(rt).startswith(NEXT.series + "."), _version(rt)

        # The client made before the upgrade keeps v0.0.42, which 26.05 still serves; one
        # that had chosen v0.0.41 (what our previous release always spoke) gets 26.05's
        # "Unable to find requested URL endpoint" 404, asks again and takes v0.0.45.
        assert {n["name"] for n in loop.run_until_complete(live.nodes())} >= set(NODES)
        assert live.version == "v0.0.42", live.version
        live.version = "v0.0.41"
        assert {n["name"] for n in loop.run_until_complete(live.nodes())} >= set(NODES)
        assert live.version == "v0.0.45", live.version
        assert _speaks_each_version(rt, url, NEXT.series) == SPOKEN[NEXT.series]
    finally:
        loop.run_until_complete(live.close())
        loop.close()
