"""The real Slurm runtime boots a hand-written cluster: dynamic configless nodes in two node
groups, jobs in both partitions, a multi-node step, accounting and topology changes."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest

from sunk.devenv.slurm_runtime import SlurmRuntime, SlurmRuntimeError
from sunk.models.crds import SlurmClusterSpec
from sunk.operator.cluster.controller import slurmctld_answers

DATA = Path(__file__).resolve().parent / "data"
NODES = ("cpu-0", "cpu-1", "gpu-0")  # the slurm_cluster fixture's nodes


def _sinfo_partitions(rt: SlurmRuntime) -> dict[str, set[str]]:
    out = rt.run("sinfo", "-h", "-N", "-o", "%R %N", check=True).stdout
    parts: dict[str, set[str]] = {}
    for line in out.splitlines():
        part, node = line.split()
        parts.setdefault(part, set()).add(node)
    return parts


def _submit(rt: SlurmRuntime, *args: str) -> str:
    out = rt.run("sbatch", "--parsable", *args, check=True).stdout.strip()
    return out.split(";")[0]


def test_controller_boots(slurm_cluster: SlurmRuntime) -> None:
    ping = slurm_cluster.run("scontrol", "ping", check=True).stdout
    assert f"{slurm_cluster.controller_host} is UP" in ping
    config = slurm_cluster.run("scontrol", "show", "config", check=True).stdout
    assert re.search(r"ClusterName\s*=\s*sunktest", config)
    assert re.search(r"SLURM_VERSION\s*=\s*24\.11\.", config)


def test_dynamic_nodes_register(slurm_cluster: SlurmRuntime) -> None:
    assert slurm_cluster.node_states() == dict.fromkeys(NODES, "idle")
    gpu = slurm_cluster.run("scontrol", "show", "node", "gpu-0", check=True).stdout
    assert "Gres=gpu:h100:2" in gpu
    assert "ActiveFeatures=gpu" in gpu
    assert f"NodeAddr={slurm_cluster.node_addr('gpu-0')}" in gpu
    assert "DYNAMIC" in gpu


def test_partitions_follow_node_groups(slurm_cluster: SlurmRuntime) -> None:
    assert _sinfo_partitions(slurm_cluster) == {
        "cpu": {"cpu-0", "cpu-1"},
        "gpu": {"gpu-0"},
    }


@pytest.mark.parametrize(
    ("partition", "extra", "nodes"),
    [("cpu", [], {"cpu-0", "cpu-1"}), ("gpu", ["--gres=gpu:h100:2"], {"gpu-0"})],
)
def test_sbatch_completes_in_each_partition(
    slurm_cluster: SlurmRuntime, partition: str, extra: list[str], nodes: set[str]
) -> None:
    out = f"/tmp/sbatch-{partition}-%j.out"
    script = "hostname; echo gpus=${CUDA_VISIBLE_DEVICES:-none}"
    job = _submit(slurm_cluster, "-p", partition, *extra, "-o", out, "--wrap", script)
    assert slurm_cluster.wait_job(job, timeout=180) == "COMPLETED"
    host, gpus = slurm_cluster.read_file(out.replace("%j", job)).split()
    assert host in nodes
    assert gpus == ("gpus=0,1" if partition == "gpu" else "gpus=none")


def test_two_node_srun_spans_both_nodes(slurm_cluster: SlurmRuntime) -> None:
    proc = slurm_cluster.run("srun", "-N2", "-p", "cpu", "hostname", timeout=180, check=True)
    assert sorted(proc.stdout.split()) == ["cpu-0", "cpu-1"]


def test_sacct_lists_finished_jobs(slurm_cluster: SlurmRuntime) -> None:
    job = _submit(slurm_cluster, "-p", "gpu", "-o", "/dev/null", "--wrap", "true")
    assert slurm_cluster.wait_job(job, timeout=180) == "COMPLETED"
    deadline = time.monotonic() + 60
    rows: dict[str, tuple[str, str]] = {}
    while time.monotonic() < deadline:
        out = slurm_cluster.run(
            "sacct", "-a", "-X", "-n", "-P", "-o", "JobID,Partition,State", check=True
        ).stdout
        rows = {j: (p, s) for j, p, s in (line.split("|") for line in out.splitlines())}
        if rows.get(job, ("", ""))[1] == "COMPLETED":
            break
        time.sleep(1)
    assert rows.get(job) == ("gpu", "COMPLETED")
    # Jobs of the earlier tests (both partitions) are in the accounting database too.
    assert {p for p, s in rows.values() if s == "COMPLETED"} >= {"cpu", "gpu"}


def _topology(rt: SlurmRuntime) -> dict[str, str]:
    out = rt.run("scontrol", "show", "topology", check=True).stdout
    return {
        m.group(1): line
        for line in out.splitlines()
        if (m := re.match(r"(?:SwitchName|BlockName)=(\S+)", line))
    }


def test_tree_topology_lists_switches(slurm_cluster: SlurmRuntime) -> None:
    topo = _topology(slurm_cluster)
    assert set(topo) == {"leaf-cpu", "leaf-gpu", "spine"}
    assert "Nodes=cpu-[0-1]" in topo["leaf-cpu"]
    assert "Switches=leaf-cpu,leaf-gpu" in topo["spine"]


def test_topology_change_applies_on_reconfigure(slurm_cluster: SlurmRuntime) -> None:
    slurm_cluster.reconfigure({"topology.conf": (DATA / "topology-changed.conf").read_text()})
    topo = _topology(slurm_cluster)
    assert set(topo) == {"leaf-all", "core"}
    assert "Nodes=cpu-[0-1],gpu-0" in topo["leaf-all"]
    slurm_cluster.wait_nodes_idle(NODES)


def test_block_topology_after_controller_restart(slurm_cluster: SlurmRuntime, slurm_config) -> None:
    """topology/block in stock 24.11 with dynamic configless nodes: slurmctld accepts it once
    the nodes exist (TopologyPlugin changes need a restart), but every slurmd that receives it
    dies, since a dynamic slurmd knows only itself and any block without it is fatal.  Runs
    last on the shared cluster because it kills the nodes."""
    files = slurm_config(
        slurm_cluster,
        accounting=True,
        topology_plugin="topology/block",
        topology=(DATA / "topology-block.conf").read_text(),
    )
    slurm_cluster.restart_controller(files, push_to_nodes=False)
    topo = _topology(slurm_cluster)
    assert set(topo) == {"nvl-a", "nvl-b"}
    assert "Nodes=cpu-[0-1]" in topo["nvl-a"]
    assert "Nodes=gpu-0" in topo["nvl-b"]

    slurm_cluster.run("scontrol", "reconfigure", check=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(slurm_cluster.node_running(n) for n in NODES):
        time.sleep(0.5)
    for name in NODES:
        assert not slurm_cluster.node_running(name)
        assert "children count lower than bblock_node_cnt" in slurm_cluster.node_log(name)


def test_mixed_tree_and_block_file_is_fatal_for_24_11(slurm_runtime, slurm_config) -> None:
    """Stock 24.11 parses topology.conf with the active plugin only: BlockName lines under
    topology/tree are fatal (a renderer must not emit both kinds of line in one file)."""
    mixed = (DATA / "topology.conf").read_text() + (DATA / "topology-block.conf").read_text()
    files = slurm_config(slurm_runtime, topology_plugin="topology/tree", topology=mixed)
    with pytest.raises(SlurmRuntimeError, match="unrecognized key: BlockName"):
        slurm_runtime.start(files)


def test_killed_run_is_cleaned_up_by_the_next(slurm_rootfs_path: Path, tmp_path: Path) -> None:
    """A run killed without close() leaves mounts, namespaces and daemons; the next runtime's
    start() (via cleanup_stale) removes them."""
    import subprocess
    import sys

    from sunk.devenv.slurm_runtime import cleanup_stale

    script = f"""
import sys, time
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
from conftest import render_test_config
from sunk.devenv.slurm_runtime import SlurmRuntime
rt = SlurmRuntime({str(slurm_rootfs_path)!r})
rt.start(render_test_config(rt))
rt.add_node("cpu-0", "Features=cpu CPUs=1 RealMemory=500", wait=True)
print(rt.workdir, rt.ctl_netns, flush=True)
time.sleep(600)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        workdir, netns = proc.stdout.readline().split()
    finally:
        proc.kill()
        proc.wait()
    assert Path(workdir, "root/usr/sbin/slurmctld-wlm").exists(), "overlay still mounted"
    assert netns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert Path(workdir) in cleanup_stale()
    assert not Path(workdir).exists()
    assert (
        netns not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    )
    with open("/proc/self/mountinfo") as fh:
        assert workdir not in fh.read()


def test_hung_slurmctld_fails_the_liveness_probe_the_operator_renders(
    slurm_cluster: SlurmRuntime,
) -> None:
    """The controller Pod's startup and liveness probes run ``SLURMCTLD_PING`` in the
    slurmctld container: it passes while slurmctld answers and fails once it is stopped
    (SIGSTOP, as a deadlock: the port still accepts), within the probe's own timeout, so
    kubelet restarts a hung controller instead of keeping it Ready."""
    answers = slurmctld_answers(SlurmClusterSpec(clusterName="c"))  # one controller, defaults
    command = answers["exec"]["command"]
    assert slurm_cluster.run(*command, timeout=30).returncode == 0
    slurm_cluster.signal_controller(signal.SIGSTOP)
    try:
        started = time.monotonic()
        hung = slurm_cluster.run(*command, timeout=30)
        took = time.monotonic() - started
    finally:
        slurm_cluster.signal_controller(signal.SIGCONT)
    assert hung.returncode != 0
    assert took < answers["timeoutSeconds"], took
    assert slurm_cluster.run(*command, timeout=30).returncode == 0
