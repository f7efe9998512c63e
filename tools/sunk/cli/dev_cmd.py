"""`sunkctl dev`: a Slurm cluster on real Kubernetes nodes on this machine (a checkout's
development and demo environment; needs root, Go and the toolchain's `nodes` component)."""

from __future__ import annotations

from pathlib import Path

import typer

from sunk.cli.common import EXIT_ENV, SunkCommand, err, fail, out

dev_app = typer.Typer(
    help="A Slurm cluster on real Kubernetes nodes on this machine (development, demo).",
    no_args_is_help=True,
)

DIR_HELP = "State directory of the cluster (default: .tools/dev-cluster in the checkout)."


NEEDS_CHECKOUT = (
    "sunkctl dev needs a source checkout: the development environment (sunk.devenv) is not "
    "part of the sunkctl wheel; clone the repository and run `make setup`"
)


def _devcluster():
    """The development environment, imported here: it is not part of the CLI's runtime."""
    try:
        from sunk.devenv import devcluster
    except ImportError:
        fail(NEEDS_CHECKOUT, EXIT_ENV)
    return devcluster


def _errors():
    from sunk.devenv.controlplane import ControlPlaneError
    from sunk.devenv.deploy import DeployError
    from sunk.devenv.images import ImageBuildError
    from sunk.devenv.nodes import NodeClusterError

    return (ControlPlaneError, DeployError, ImageBuildError, NodeClusterError, TimeoutError)


def _dir(directory: Path | None) -> Path:
    return directory or _devcluster().default_dir()


@dev_app.command(cls=SunkCommand)
def up(
    example: Path = typer.Option(
        Path("examples/minimal-cpu.yaml"), "-f", "--values", help="The slurm chart's values."
    ),
    nodes: int = typer.Option(2, min=1, max=8, help="Real worker nodes."),
    directory: Path | None = typer.Option(None, "--dir", help=DIR_HELP),
) -> None:
    """Start (or reuse) the cluster, install both charts, run a two-node job; leave it up."""
    devcluster = _devcluster()
    try:
        result = devcluster.up(
            _dir(directory), example, nodes, say=lambda m: err.print(f"[dev] {m}", markup=False)
        )
    except _errors() as exc:
        fail(str(exc), EXIT_ENV)
    out.print(result.job_output.rstrip())
    out.print(f"KUBECONFIG={result.kubeconfig}")
    out.print("A shell in the login Pod (then `sinfo`, `srun -N2 hostname`):")
    out.print(f"  {result.shell}")


@dev_app.command(cls=SunkCommand)
def down(directory: Path | None = typer.Option(None, "--dir", help=DIR_HELP)) -> None:
    """Stop the cluster and remove everything it made (processes, mounts, namespaces)."""
    devcluster = _devcluster()
    try:
        devcluster.down(_dir(directory))
    except _errors() as exc:
        fail(str(exc), EXIT_ENV)
    err.print("[dev] down", markup=False)


@dev_app.command(cls=SunkCommand)
def status(directory: Path | None = typer.Option(None, "--dir", help=DIR_HELP)) -> None:
    """Say whether the cluster runs and where its kubeconfig is."""
    devcluster = _devcluster()
    try:
        out.print(devcluster.status(_dir(directory)))
    except _errors() as exc:
        fail(str(exc), EXIT_ENV)
