"""A Slurm upgrade with jobs in the queue: 24.11 (trixie, what our images ship) to 26.05
(forky), on the configuration our renderer writes, in Slurm's order: slurmdbd (its first
start converts the database), slurmctld (state saved and read back), then each slurmd, the
busy one drained first and upgraded once its job has ended, as the NodeSet's safe update
does. Each daemon restarts with the new release's programs over the same configuration,
state and keys (``SlurmRuntime.use_release``), as a Pod restarted with a new image keeps its
volumes. And the skew Slurm forbids: a slurmd newer than slurmctld is refused."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.slurm.test_rendered import DATA, inputs_for

from sunk.devenv import slurm_rootfs
from sunk.devenv.controlplane import wait_for
from sunk.devenv.slurm_runtime import SlurmRuntime
from sunk.slurmconf import Rendered, render_all

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
