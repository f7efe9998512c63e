"""`sunkctl dev`: a Slurm cluster on real Kubernetes nodes on this machine (a checkout's
development and demo environment; needs root, Go and the toolchain's `nodes` component)."""

from __future__ import annotations

from pathlib import Path

import typer

from sunk.cli.common import SunkCommand, err, out
from sunk.errors import ToolError

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
        raise ToolError(NEEDS_CHECKOUT) from None
    return devcluster


def _dir(directory: Path | None) -> Path:
    return directory or _devcluster().default_dir()


@dev_app.command(cls=SunkCommand)
def up(
    values: list[Path] = typer.Option(
        [Path("examples/minimal-cpu.yaml")],
        "-f",
        "--values",
        help="The slurm chart's values (repeat: later files win); this machine's overlay is "
        "applied after them. Run again with other values to change a running cluster.",
    ),
    nodes: int = typer.Option(2, min=1, max=8, help="Real worker nodes."),
    directory: Path | None = typer.Option(None, "--dir", help=DIR_HELP),
) -> None:
    """Start (or reuse) the cluster, install both charts, run a two-node job; leave it up."""
    # The environment's errors (ControlPlaneError, DeployError, …) are ToolErrors: exit 3.
    devcluster = _devcluster()
    result = devcluster.up(
        _dir(directory), values, nodes, say=lambda m: err.print(f"[dev] {m}", markup=False)
    )
    out.print(result.job_output.rstrip())
    out.print(f"KUBECONFIG={result.kubeconfig}")
    out.print("A shell in the login Pod (then `sinfo`, `srun -N2 hostname`):")
    out.print(f"  {result.shell}")
    out.print(result.change_values)


@dev_app.command(cls=SunkCommand)
def down(directory: Path | None = typer.Option(None, "--dir", help=DIR_HELP)) -> None:
    """Stop the cluster and remove everything it made (processes, mounts, namespaces)."""
    _devcluster().down(_dir(directory))
    err.print("[dev] down", markup=False)


@dev_app.command(cls=SunkCommand)
def status(directory: Path | None = typer.Option(None, "--dir", help=DIR_HELP)) -> None:
    """Say whether the cluster runs and where its kubeconfig is."""
    out.print(_devcluster().status(_dir(directory)))
