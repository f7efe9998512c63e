"""`sunkctl demo`: what the examples would deploy, rendered through both charts."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from sunk.chartio.helm import Release, template
from sunk.chartio.manifests import parse_release
from sunk.cli.common import helm_option, out
from sunk.errors import InputError, ToolError
from sunk.resources import checkout_root
from sunk.slurmconf import RenderError, render_all


def demo(
    examples: Path | None = None,
    helm: str | None = helm_option(),
) -> None:
    """Render every example cluster through the `sunk` and `slurm` charts and the Slurm renderer.

    The examples are a checkout's `examples/`; an installed sunkctl needs `--examples DIR`."""
    root = checkout_root()
    if examples is None and root is None:
        raise ToolError(
            "demo renders a checkout's examples/: run it in a checkout, or pass --examples DIR"
        )
    directory = examples or root / "examples"
    # helm missing or failing is a HelmError, a ToolError: exit 3.
    operator_release = Release(chart="sunk", name="sunk", namespace="sunk", helm=helm)
    operator = parse_release(template(operator_release, []))
    kinds = sorted({o["kind"] for o in operator.objects})
    out.print(
        f"[bold]sunk chart[/] (namespace sunk): {len(operator.objects)} objects — "
        + ", ".join(kinds)
    )
    for path in sorted(directory.glob("*.yaml")):
        release = parse_release(template(Release(helm=helm), [path]))
        inputs = release.cluster_inputs("tenant-slurm")
        try:
            rendered = render_all(inputs)
        except RenderError as exc:
            raise InputError(f"{path}: {exc}") from exc
        _print_cluster(path, release, rendered, inputs)


def _print_cluster(path, release, rendered, inputs) -> None:
    table = Table(
        title=f"{path.name}: SlurmCluster {inputs.cluster.clusterName!r}", title_justify="left"
    )
    for column in ("NodeSet", "replicas", "slurmd --conf"):
        table.add_column(column)
    for ns in inputs.nodesets:
        replicas = "all feasible" if ns.spec.replicas is None else str(ns.spec.replicas)
        table.add_row(ns.name, replicas, rendered.registrations[ns.name])
    out.print(table)
    partitions = [
        line.split()[0].split("=", 1)[1]
        for line in rendered.files["slurm.conf"].splitlines()
        if line.startswith("PartitionName=")
    ]
    out.print(
        f"  objects: {len(release.objects)}; partitions: {', '.join(partitions)}; "
        f"files: {', '.join(sorted(rendered.files))}; config hash {rendered.config_hash}"
    )
