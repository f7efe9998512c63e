"""`sunkctl upgrade-check`: what the next `helm upgrade` of a slurm release will change in the
live cluster, restart and drain."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from sunk.chartio.helm import Release, template
from sunk.chartio.manifests import parse_release
from sunk.cli.common import Output, err, existing_files, helm_option, out
from sunk.errors import EXIT_FINDINGS, InputError
from sunk.upgradecheck.live import Kubectl, read
from sunk.upgradecheck.plan import Plan, Side, plan
from sunk.validate import Options
from sunk.validate import validate as run_validate
from sunk.validate.reporters import render_text

EPILOG = (
    "Exit codes: 0 reported, 1 the values are refused (validate's errors, a version skew among "
    "them), 2 usage error, 3 tool failure (helm or kubectl missing, the cluster unreachable)."
)
SECTIONS = (
    ("changes", "Changes"),
    ("files", "Slurm files"),
    ("slurmUpgrade", "Slurm upgrade, in Slurm's order"),
    ("restarts", "Control plane"),
    ("drains", "slurmd Pods"),
)


def _rendered_side(manifest: str, namespace: str) -> Side:
    release = parse_release(manifest)
    clusters = release.of_kind("SlurmCluster")
    if len(clusters) != 1:
        raise InputError(f"the values render {len(clusters)} SlurmClusters; expected one")
    nodesets = {o["metadata"]["name"]: o.get("spec") or {} for o in release.of_kind("NodeSet")}
    return Side(clusters[0]["metadata"]["name"], namespace, clusters[0].get("spec") or {}, nodesets)


def _print(result: Plan, title: str) -> None:
    out.print(title)
    if result.empty:
        out.print("  nothing changes: no restart, no drain")
        return
    data = result.as_dict()
    for key, heading in SECTIONS:
        if data[key]:
            out.print(f"{heading}:")
            for line in data[key]:
                out.print(f"  {escape(line)}")


def upgrade_check(
    values: list[Path] = typer.Option(
        ..., "-f", "--values", help="Values file(s) of the upgrade, as given to helm upgrade."
    ),
    set_values: list[str] = typer.Option([], "--set", help="helm --set overrides."),
    release: str = typer.Option("slurm", "--release", help="The helm release's name."),
    namespace: str = typer.Option("tenant-slurm", "-n", "--namespace", help="Release namespace."),
    kubeconfig: str | None = typer.Option(None, "--kubeconfig", help="kubectl's --kubeconfig."),
    context: str | None = typer.Option(None, "--context", help="kubectl's --context."),
    kubectl: str = typer.Option("kubectl", "--kubectl", help="kubectl binary.", metavar="PATH"),
    output: Output = typer.Option(
        Output.text,
        "-o",
        "--output",
        help="text, or json: {schemaVersion, cluster, namespace, installed, changes, files, "
        "slurmUpgrade, restarts, drains}.",
    ),
    helm: str | None = helm_option(),
) -> None:
    """List what upgrading a running slurm release with these values will change, which
    daemons restart (in Slurm's upgrade order when the release changes) and which slurmd Pods
    are drained and replaced, before you run helm upgrade.

    The values are checked as `sunkctl validate` checks them first; the live SlurmCluster and
    NodeSets are read with kubectl (get only), and both sides go through the operator's own
    builders."""
    existing_files(values)
    report = run_validate(Options(values=[str(p) for p in values], sets=list(set_values),
                                  chart="slurm", render=False))  # fmt: skip
    report.findings = report.errors
    if report.findings:
        render_text(report, err, err)
        raise typer.Exit(EXIT_FINDINGS)
    manifest = template(Release(name=release, namespace=namespace, helm=helm), values, set_values)
    new = _rendered_side(manifest, namespace)
    live = read(Kubectl(kubectl, kubeconfig, context), namespace, new.name)
    result = plan(live.side, new, live.pods, live.nodes) if live.side is not None else Plan()
    if output is Output.json:
        data = {"schemaVersion": 1, "cluster": new.name, "namespace": namespace,
                "installed": live.side is not None, **result.as_dict()}  # fmt: skip
        typer.echo(json.dumps(data, indent=2))
        return
    if live.side is None:
        out.print(f"no SlurmCluster {new.name} in namespace {namespace}: the upgrade installs it")
        return
    _print(result, f"SlurmCluster {new.name} in {namespace}, release {release}:")
