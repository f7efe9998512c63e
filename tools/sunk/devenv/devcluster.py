"""``sunkctl dev up|down|status``: a Slurm cluster on real Kubernetes nodes on this machine.

``up`` starts the control plane and two real nodes (``sunk.devenv.nodes``), imports the images
from ``make images``, installs both charts from an example, waits for Slurm and runs a two-node
job; the cluster stays up. Running ``up`` again reuses a healthy cluster (helm upgrades are
idempotent) and tears down and rebuilds one that a crash or reboot left broken. ``down``
removes every process, mount, cgroup and network namespace the cluster made.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from sunk.devenv import deploy
from sunk.devenv.nodes import NodeCluster, NodeClusterError, stop_from_state
from sunk.devenv.paths import repo_root, tools_dir

DEFAULT_EXAMPLE = Path("examples/minimal-cpu.yaml")


def default_dir() -> Path:
    return tools_dir() / "dev-cluster"


@dataclass
class DevCluster:
    kubeconfig: Path
    job_output: str
    shell: str


def cluster_name(values_file: Path) -> str:
    try:
        data = yaml.safe_load(values_file.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise NodeClusterError(f"{values_file}: {exc}") from exc
    return str(data.get("clusterName") or "slurm")


def up(
    workdir: Path,
    example: Path,
    nodes: int = 2,
    say: Callable[[str], None] = print,
) -> DevCluster:
    if not example.is_absolute():
        example = repo_root() / example
    if not example.is_file():
        raise NodeClusterError(f"{example}: no such values file")
    cluster = _running_cluster(workdir, say)
    fresh = cluster is None
    if cluster is None:
        say("building the images (cached after the first run) and exporting them")
        archives = deploy.image_archives()
        cluster = NodeCluster(nodes, workdir=workdir, images=archives, progress=True)
        cluster.start()
    try:
        deployment = deploy.SlurmDeployment(cluster, cluster_name(example))
        say("installing the sunk chart (operator) and waiting for it")
        deployment.install_operator()
        say(f"installing the slurm chart from {example.name} and waiting for Slurm")
        deployment.install_slurm(example)
        deployment.wait_ready(nodes=len(cluster.nodes))
        say("running `srun -N2 hostname` from the login Pod")
        output = deployment.login("srun", f"-N{len(cluster.nodes)}", "hostname")
        result = DevCluster(cluster.kubeconfig, output, deployment.shell_command())
    except BaseException:
        if fresh:
            say(f"leaving the cluster up for inspection; `sunkctl dev down --dir {workdir}`")
            cluster.detach()
        raise
    cluster.detach()
    return result


def _running_cluster(workdir: Path, say: Callable[[str], None]) -> NodeCluster | None:
    if not (workdir / "nodes.json").exists():
        return None
    try:
        cluster = NodeCluster.attach(workdir)
        if cluster.healthy():
            say(f"reusing the running cluster in {workdir}")
            return cluster
    except (NodeClusterError, OSError, ValueError, KeyError):
        pass
    say(f"the cluster in {workdir} is not healthy: tearing it down and starting again")
    down(workdir)
    return None


def down(workdir: Path) -> None:
    errors = stop_from_state(workdir)
    if errors:
        raise NodeClusterError("teardown left things behind: " + "; ".join(errors))
    # the images unpacked on each node take a few GiB
    shutil.rmtree(workdir, ignore_errors=True)


def status(workdir: Path) -> str:
    if not (workdir / "nodes.json").exists():
        return f"no development cluster in {workdir}"
    cluster = NodeCluster.attach(workdir)
    state = "healthy" if cluster.healthy() else "NOT healthy (run `sunkctl dev up` to rebuild)"
    return f"cluster in {workdir}: {state}; KUBECONFIG={cluster.kubeconfig}"
