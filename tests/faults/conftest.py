"""The ``faults`` tier: parts of a running cluster fail while jobs run, on the e2e tier's real
nodes (one session cluster, ``tests/real_nodes.py``). Its own release of the slurm chart, from
``examples/minimal-cpu.yaml`` with this machine's overlay, and slurmd Pods that Slurm counts
two CPUs each, so a two-node job and a one-node job run side by side while a third waits."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sunk.devenv.deploy import DeployError, SlurmDeployment
from sunk.devenv.nodes import NodeCluster, NodeClusterError
from tests.real_nodes import host_pid

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "minimal-cpu.yaml"
CLUSTER = "minimal"
NAMESPACE = "faults-slurm"
# After the overlay (which gives one CPU per node): two CPUs a node for Slurm, few requested.
TWO_CPUS = """
compute:
  nodes:
    cpu:
      resources:
        requests: {cpu: 100m, memory: 256Mi}
        limits: {cpu: "2", memory: 2Gi}
"""


# Module-scoped: the release goes once its scenarios are done, so the HA release
# (test_faults_ha.py) has the two nodes to itself.
@pytest.fixture(scope="module")
def faulty(real_nodes: NodeCluster, tmp_path_factory) -> Iterator[SlurmDeployment]:
    deployment = SlurmDeployment(real_nodes, CLUSTER, namespace=NAMESPACE, release="faults")
    shape = tmp_path_factory.mktemp("faults") / "two-cpus.yaml"
    shape.write_text(TWO_CPUS)
    deployment.install_operator()
    deployment.install_slurm(EXAMPLE, after_overlay=(shape,))
    deployment.wait_ready(nodes=len(real_nodes.nodes))
    deployment.shape = shape  # type: ignore[attr-defined]
    yield deployment
    deployment.uninstall_slurm()


@dataclass(frozen=True)
class Workload:
    """A two-node job and a one-node job running, a job pending behind them."""

    two_nodes: str
    one_node: str
    pending: str

    @property
    def jobs(self) -> tuple[str, str, str]:
        return (self.two_nodes, self.one_node, self.pending)


def submit(slurm: SlurmDeployment, *args: str) -> str:
    out = slurm.login("sbatch", "--parsable", "--output=/dev/null", *args)
    match = re.match(r"(\d+)", out.strip())
    assert match, out
    return match.group(1)


def job_states(slurm: SlurmDeployment, jobs: tuple[str, ...]) -> dict[str, str]:
    out = slurm.login("squeue", "--noheader", "--format=%i %T", "--jobs", ",".join(jobs))
    return dict(line.split() for line in out.splitlines() if line.strip())


def start_workload(slurm: SlurmDeployment, seconds: int) -> Workload:
    """The jobs each scenario runs under: the two running ones sleep ``seconds``."""
    two = submit(slurm, "-N2", "--ntasks-per-node=1", "--wrap", f"srun sleep {seconds}")
    one = submit(slurm, "-N1", "-n1", "--wrap", f"sleep {seconds}")
    # two CPUs on one node: none has both free while the others run
    pending = submit(slurm, "-N1", "-n2", "--wrap", "sleep 2")
    work = Workload(two, one, pending)
    slurm.wait(
        "two jobs running, one pending",
        lambda: (
            job_states(slurm, work.jobs) == {two: "RUNNING", one: "RUNNING", pending: "PENDING"}
        ),
        timeout=120,
        interval=2,
    )
    wait_step(slurm, two)
    return work


def wait_step(slurm: SlurmDeployment, job: str) -> None:
    """Until the batch script's `srun` runs its step: RUNNING is the allocation, and the
    step launches a moment later. A launch that meets the fault fails the job (Slurm does not
    retry a step launch), so each fault comes after the step runs on every node."""
    slurm.wait(
        f"job {job}'s step running",
        lambda: (
            f"{job}.0"
            in slurm.login(
                "squeue", "--steps", "--noheader", "--format=%i", f"--jobs={job}"
            ).split()
        ),
        timeout=60,
        interval=1,
    )


def assert_no_job_lost(slurm: SlurmDeployment, work: Workload, timeout: float = 600) -> None:
    """Every job ends COMPLETED with its record in sacct, and no Slurm node is left drained
    with a `k8s:` reason (the Syncer's) once the cause is gone."""
    try:
        states = slurm.wait(
            "every job COMPLETED in sacct",
            lambda: (
                (s := slurm.sacct_jobs()) and all(s.get(j) == "COMPLETED" for j in work.jobs) and s
            ),
            timeout=timeout,
            interval=5,
        )
    except DeployError as exc:
        raise DeployError(f"{exc}\n{slurm_view(slurm, work.jobs)}") from None
    assert {j: states[j] for j in work.jobs} == dict.fromkeys(work.jobs, "COMPLETED")
    drained = slurm.login("sinfo", "--noheader", "--Node", "--format=%N|%T|%E")
    left = [line for line in drained.splitlines() if "|k8s:" in line and "drain" in line]
    assert not left, drained


def slurm_view(slurm: SlurmDeployment, jobs: tuple[str, ...]) -> str:
    """What Slurm shows of ``jobs`` and its nodes, and slurmctld's last words: a lost or stuck
    job's timeout message carries them (the Kubernetes view alone did not explain a CI run
    where a job finished ten minutes late)."""
    commands = {
        "squeue": ("squeue", "--all", "--noheader", "--format=%i %T %r %N %M"),
        "scontrol show job": ("scontrol", "show", "job", ",".join(jobs)),
        "sinfo": ("sinfo", "--noheader", "--Node", "--format=%N %T %E"),
        "sacct": ("sacct", "--allusers", "--noheader", "--parsable2", "-X",
                  "--starttime=2000-01-01", "--format=JobID,State,Start,End,ExitCode"),
    }  # fmt: skip
    parts = []
    for title, command in commands.items():
        try:
            parts.append(f"{title}:\n{slurm.login(*command, timeout=60)}")
        except (DeployError, NodeClusterError) as exc:
            parts.append(f"{title}: failed: {exc}")
    try:
        log = slurm.cluster.kubectl(
            "logs", "-n", slurm.namespace, f"{CLUSTER}-controller-0", "-c", "slurmctld",
            "--tail=80", timeout=30,
        )  # fmt: skip
        parts.append(f"slurmctld log:\n{log}")
    except NodeClusterError as exc:
        parts.append(f"slurmctld log: failed: {exc}")
    return "\n".join(parts)


def in_pod(pod: dict, process: str, *command: str, timeout: float = 120) -> tuple[int, str]:
    """(exit status, stdout and stderr) of ``command`` run in the namespaces of ``process`` in
    ``pod``, straight from the host: this works while the Pod's kubelet is down, where
    `kubectl exec` (through the kubelet) does not."""
    argv = ["nsenter", "-t", str(host_pid(pod, process)), "-m", "-u", "-i", "-n", "-p", "--"]
    try:
        proc = subprocess.run(
            [*argv, *command], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout} s"
    return proc.returncode, proc.stdout + proc.stderr


def get_pod(slurm: SlurmDeployment, name: str) -> dict:
    return slurm.cluster.client.get(f"/api/v1/namespaces/{slurm.namespace}/pods/{name}")


def restarts(pod: dict, container: str) -> int:
    return next(
        c.get("restartCount", 0)
        for c in pod["status"].get("containerStatuses") or []
        if c["name"] == container
    )


# Longer than slurmctld takes to write its state after a change: its save thread batches
# requests and writes at most 5 s after one (SAVE_MAX_WAIT, src/slurmctld/state_save.c).
STATE_SAVED = 15


def report(scenario: str, seconds: float) -> None:
    print(f"FAULT {scenario}: recovered in {seconds} s")


def elapsed(since: float) -> float:
    return round(time.monotonic() - since, 1)
