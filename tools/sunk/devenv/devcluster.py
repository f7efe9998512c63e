"""``sunkctl dev up|down|status``: a Slurm cluster on real Kubernetes nodes on this machine.

``up`` starts the control plane and two real nodes (``sunk.devenv.nodes``), imports the images
from ``make images``, installs both charts from the values files given (then this machine's
overlay, ``deploy.OVERLAY``), waits for Slurm and runs a two-node job; the cluster stays up.
Running ``up`` again reuses a healthy cluster (helm upgrades are idempotent: ``up -f A -f B``
applies new values, overlay included) and tears down and rebuilds one that a crash or reboot
left broken. ``down`` removes every process, mount, cgroup and network namespace it made.
"""

from __future__ import annotations

import shlex
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
    change_values: str  # how to apply other values over this machine's overlay


def cluster_name(values_files: list[Path]) -> str:
    """The cluster name the values give (the last file that sets it wins, as in helm)."""
    name = "slurm"
    for values_file in values_files:
        try:
            data = yaml.safe_load(values_file.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise NodeClusterError(f"{values_file}: {exc}") from exc
        if isinstance(data, dict) and data.get("clusterName"):
            name = str(data["clusterName"])
    return name


def change_values_hint(values_files: list[Path]) -> str:
    """What the demo prints: the cluster runs with an overlay for this machine (small Pods,
    MariaDB from our images) that a plain `helm upgrade -f VALUES` would drop, swapping
    MariaDB for an image that cannot be pulled here."""
    shown = " ".join(f"-f {shlex.quote(_shown(f))}" for f in values_files)
    overlay = _shown(deploy.OVERLAY)
    return (
        f"To change values, apply yours over this machine's overlay ({overlay}):\n"
        f"  sunkctl dev up {shown} -f YOUR-VALUES.yaml\n"
        f"(a plain `helm upgrade -f YOUR-VALUES.yaml` drops the overlay: add `-f {overlay}` "
        "last if you use helm)"
    )


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(repo_root()))
    except ValueError:
        return str(path)


def up(
    workdir: Path,
    values_files: list[Path],
    nodes: int = 2,
    say: Callable[[str], None] = print,
) -> DevCluster:
    """Values files apply in order, then this machine's overlay (``deploy.OVERLAY``)."""
    values_files = [f if f.is_absolute() else repo_root() / f for f in values_files]
    for values_file in values_files:
        if not values_file.is_file():
            raise NodeClusterError(f"{values_file}: no such values file")
    cluster = _running_cluster(workdir, say)
    fresh = cluster is None
    if cluster is None:
        say("building the images (cached after the first run) and exporting them")
        archives = deploy.image_archives()
        cluster = NodeCluster(nodes, workdir=workdir, images=archives, progress=True)
        cluster.start()
    try:
        deployment = deploy.SlurmDeployment(cluster, cluster_name(values_files))
        say("installing the sunk chart (operator) and waiting for it")
        deployment.install_operator()
        shown = ", ".join(f.name for f in values_files)
        say(f"installing the slurm chart from {shown} (then this machine's overlay)")
        deployment.install_slurm(*values_files)
        deployment.wait_ready(nodes=len(cluster.nodes))
        say("running `srun -N2 hostname` from the login Pod")
        output = deployment.login("srun", f"-N{len(cluster.nodes)}", "hostname")
        result = DevCluster(
            cluster.kubeconfig, output, deployment.shell_command(), change_values_hint(values_files)
        )
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
