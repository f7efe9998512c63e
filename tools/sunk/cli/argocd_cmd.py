"""``sunkctl argocd``: Argo CD manifests for a GitOps deployment (app-of-apps or ApplicationSet).

Thin: parse flags, call :mod:`sunk.argocd`, report. Errors are one line on stderr, never a
traceback: exit 2 for usage errors (bad flag, missing file, clashing names), 1 for invalid input
content (values YAML) or ``--check`` finding differences, 3 when the output cannot be written.
"""

from __future__ import annotations

import fnmatch
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from sunk import __version__
from sunk.argocd import ArgoCDGenError, GenSpec, SyncSettings, versions
from sunk.argocd import spec as specs
from sunk.argocd.spec import IN_CLUSTER
from sunk.cli.common import SunkCommand
from sunk.errors import EXIT_FINDINGS

EPILOG = (
    "Exit codes: 0 written (or up to date with --check), 1 invalid values file or --check found "
    "changes, 2 usage error, 3 cannot write the output."
)

argocd_app = typer.Typer(
    name="argocd",
    help="Argo CD manifests for deploying SUNK and Slurm clusters from Git.",
    epilog=EPILOG,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@dataclass(frozen=True)
class OciCharts:
    """--chart-registry and --chart-version, checked."""

    registry: str  # Argo CD's repoURL: HOST/PATH
    version: str


class Style(StrEnum):
    app_of_apps = "app-of-apps"
    appset = "appset"


class Generator(StrEnum):
    list = "list"
    git = "git"


@argocd_app.command("gen", epilog=EPILOG, cls=SunkCommand)
def gen(
    repo: Annotated[str, typer.Option("--repo", help="Git URL of this repository.")],
    revision: Annotated[
        str, typer.Option("--revision", help="Git revision Argo CD syncs (pin a commit SHA).")
    ],
    cluster: Annotated[
        str,
        typer.Option(
            "--cluster",
            help="Destination cluster as registered in Argo CD; prefixes every Application name.",
        ),
    ],
    values: Annotated[
        list[Path] | None,
        typer.Option(
            "-f",
            "--values",
            help="charts/slurm values file of one Slurm cluster (repeatable). The release and "
            "namespace are its clusterName, else the file stem.",
        ),
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Output directory, inside the repository.")
    ] = Path("argocd"),
    style: Annotated[
        Style,
        typer.Option("--style", help="One Application per Slurm cluster, or an ApplicationSet."),
    ] = Style.app_of_apps,
    repo_root: Annotated[
        Path | None,
        typer.Option(
            "--repo-root",
            help="Repository root that paths in the manifests are relative to "
            "(default: the enclosing Git checkout, else the current directory).",
        ),
    ] = None,
    release_name: Annotated[
        list[str] | None,
        typer.Option("--release-name", help="KEY=NAME: rename the release derived as KEY."),
    ] = None,
    slurm_namespace: Annotated[
        list[str] | None,
        typer.Option("--slurm-namespace", help="KEY=NAMESPACE for the release derived as KEY."),
    ] = None,
    extra_app: Annotated[
        list[str] | None,
        typer.Option(
            "--extra-app",
            help="NAME=DIR\\[@NAMESPACE]: a supporting Application over a directory of plain "
            "manifests (storage claims, prolog/epilog scripts).",
        ),
    ] = None,
    cert_manager: Annotated[
        bool, typer.Option("--cert-manager/--no-cert-manager", help="Install cert-manager.")
    ] = True,
    cert_manager_version: Annotated[
        str, typer.Option("--cert-manager-version", help="cert-manager chart version.")
    ] = versions.CERT_MANAGER.version,
    moco: Annotated[
        bool, typer.Option("--moco/--no-moco", help="Install the MOCO MySQL operator.")
    ] = True,
    moco_version: Annotated[
        str, typer.Option("--moco-version", help="MOCO chart version.")
    ] = versions.MOCO.version,
    sunk_values: Annotated[
        list[Path] | None,
        typer.Option("--sunk-values", help="Values file for charts/sunk (repeatable)."),
    ] = None,
    sunk_namespace: Annotated[
        str, typer.Option("--sunk-namespace", help="Namespace of the SUNK operator.")
    ] = "sunk-system",
    auto_sync: Annotated[
        bool, typer.Option("--auto-sync", help="Sync automatically when Git changes.")
    ] = False,
    prune: Annotated[
        bool, typer.Option("--prune", help="With --auto-sync: delete what leaves Git.")
    ] = False,
    self_heal: Annotated[
        bool, typer.Option("--self-heal", help="With --auto-sync: revert live changes.")
    ] = False,
    ignore_replicas: Annotated[
        bool,
        typer.Option(
            "--ignore-replicas",
            help="Ignore NodeSet /spec/replicas in diffs and syncs (autoscaled groups).",
        ),
    ] = False,
    appset_generator: Annotated[
        Generator,
        typer.Option(
            "--appset-generator",
            help="With --style appset: list (the -f files) or git (files matching "
            "--git-values-glob).",
        ),
    ] = Generator.list,
    git_values_glob: Annotated[
        str | None,
        typer.Option(
            "--git-values-glob",
            help="With --appset-generator git: repository glob of values files; each must set "
            "clusterName.",
        ),
    ] = None,
    project: Annotated[
        str | None,
        typer.Option(
            "--project",
            help="Argo CD project (default: `default`; with --chart-registry sunk-<cluster>).",
        ),
    ] = None,
    argocd_namespace: Annotated[
        str, typer.Option("--argocd-namespace", help="Namespace Argo CD runs in.")
    ] = "argocd",
    destination_server: Annotated[
        str | None,
        typer.Option(
            "--destination-server",
            help="Use this API server URL as destination instead of the --cluster name.",
        ),
    ] = None,
    root_destination_server: Annotated[
        str,
        typer.Option(
            "--root-destination-server",
            help="API server URL the root Application deploys the child Applications to (the "
            "cluster Argo CD runs in; its in-cluster address by default).",
        ),
    ] = IN_CLUSTER,
    cluster_secret: Annotated[
        bool,
        typer.Option(
            "--cluster-secret/--no-cluster-secret",
            help="Also write cluster-secret.yaml, a template of Argo CD's cluster Secret for "
            "--destination-server (credentials left as placeholders).",
        ),
    ] = False,
    app_project: Annotated[
        bool,
        typer.Option(
            "--app-project/--no-app-project",
            help="Also write project.yaml, the --project AppProject allowing exactly the "
            "generated repositories and destinations.",
        ),
    ] = False,
    cascade_delete: Annotated[
        bool,
        typer.Option(
            "--cascade-delete/--no-cascade-delete",
            help="Add the resources finalizer (deleting an Application deletes its objects).",
        ),
    ] = True,
    chart_registry: Annotated[
        str | None,
        typer.Option(
            "--chart-registry",
            help="oci://HOST/PATH the charts were pushed to (helm push): both charts come from "
            "there at --chart-version, their values files from --repo (Argo CD's $values); "
            "also writes project.yaml and repository-secret.yaml.",
        ),
    ] = None,
    chart_version: Annotated[
        str | None,
        typer.Option(
            "--chart-version",
            help=f"With --chart-registry: the charts' version (default {__version__}).",
        ),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; exit 1 if the output would change.")
    ] = False,
) -> None:
    """Write the parent Application, its children and the argocd-cm patch into --out."""
    # An ArgoCDGenError exits with its class's code (sunk.cli.common.SunkCommand).
    gen_spec, out_path = _spec(
        repo=repo,
        revision=revision,
        cluster=cluster,
        values=values or [],
        out=out,
        style=style,
        repo_root=repo_root if repo_root is not None else _default_repo_root(),
        release_name=release_name or [],
        slurm_namespace=slurm_namespace or [],
        extra_app=extra_app or [],
        cert_manager=cert_manager,
        cert_manager_version=cert_manager_version,
        moco=moco,
        moco_version=moco_version,
        sunk_values=sunk_values or [],
        sunk_namespace=sunk_namespace,
        sync=_sync(auto_sync, prune, self_heal),
        ignore_replicas=ignore_replicas,
        appset_generator=appset_generator,
        git_values_glob=git_values_glob,
        project=project,
        argocd_namespace=argocd_namespace,
        destination_server=destination_server,
        root_destination_server=root_destination_server,
        cluster_secret=cluster_secret,
        app_project=app_project,
        cascade_delete=cascade_delete,
        charts=_charts(chart_registry, chart_version),
    )
    from sunk.argocd import builders, writer  # the CRD models: only this command needs them

    bundle = builders.build(gen_spec, out_path)
    files = writer.render(bundle)
    result = writer.plan(out, files) if check else writer.write(out, files)

    for note in bundle.notes:
        typer.echo(f"note: {note}", err=True)
    verb = "would write" if check else "wrote"
    for rel in result.written:
        typer.echo(f"{verb} {out / rel}", err=True)
    for rel in result.removed:
        typer.echo(f"{'would remove' if check else 'removed'} {out / rel} (stale)", err=True)
    if check and (result.written or result.removed):
        typer.echo(f"{out}: out of date; run without --check to update", err=True)
        raise typer.Exit(EXIT_FINDINGS)
    if not result.written and not result.removed:
        typer.echo(f"{out}: up to date ({len(result.unchanged)} files)", err=True)


def _sync(auto_sync: bool, prune: bool, self_heal: bool) -> SyncSettings:
    if (prune or self_heal) and not auto_sync:
        flag = "--prune" if prune else "--self-heal"
        raise ArgoCDGenError(f"{flag} only applies to automated sync; add --auto-sync")
    return SyncSettings(auto_sync=auto_sync, prune=prune, self_heal=self_heal)


def _charts(registry: str | None, version: str | None) -> OciCharts | None:
    if registry is None:
        if version is not None:
            raise ArgoCDGenError("--chart-version needs --chart-registry oci://HOST/PATH")
        return None
    version = version or __version__
    if not version or any(c.isspace() for c in version):
        raise ArgoCDGenError(f"--chart-version: {version!r} is not a chart version")
    return OciCharts(specs.check_chart_registry(registry), version)


def _spec(
    *,
    repo: str,
    revision: str,
    cluster: str,
    values: list[Path],
    out: Path,
    style: Style,
    repo_root: Path,
    release_name: list[str],
    slurm_namespace: list[str],
    extra_app: list[str],
    cert_manager: bool,
    cert_manager_version: str,
    moco: bool,
    moco_version: str,
    sunk_values: list[Path],
    sunk_namespace: str,
    sync: SyncSettings,
    ignore_replicas: bool,
    appset_generator: Generator,
    git_values_glob: str | None,
    project: str | None,
    argocd_namespace: str,
    destination_server: str | None,
    cascade_delete: bool,
    root_destination_server: str = IN_CLUSTER,
    cluster_secret: bool = False,
    app_project: bool = False,
    charts: OciCharts | None = None,
) -> tuple[GenSpec, str]:
    if not repo_root.is_dir():
        raise ArgoCDGenError(f"--repo-root: {repo_root} is not a directory")
    repo_url = specs.check_repo_url(repo)
    specs.check_revision(revision)
    specs.check_dns_label(cluster, "--cluster")
    if charts is not None:
        # The charts' own registry gets a project of its own, never Argo CD's catch-all.
        if project == "default":
            raise ArgoCDGenError(
                "--project default: with --chart-registry the Applications get a generated "
                "AppProject; name it something other than Argo CD's built-in `default`"
            )
        project = project or f"sunk-{cluster}"
        app_project = True
    project = project or "default"
    specs.check_dns_label(project, "--project", 253)
    specs.check_dns_label(argocd_namespace, "--argocd-namespace")
    specs.check_dns_label(sunk_namespace, "--sunk-namespace")
    for flag, url in (
        ("--destination-server", destination_server),
        ("--root-destination-server", root_destination_server),
    ):
        if url is not None and not url.startswith("https://"):
            raise ArgoCDGenError(f"{flag}: {url!r} is not an https:// URL")
    if cluster_secret and destination_server is None:
        raise ArgoCDGenError("--cluster-secret needs --destination-server (the Secret's server)")
    for flag, version in (
        ("--cert-manager-version", cert_manager_version),
        ("--moco-version", moco_version),
    ):
        if not version or any(c.isspace() for c in version):
            raise ArgoCDGenError(f"{flag}: {version!r} is not a chart version")

    git_mode = style is Style.appset and appset_generator is Generator.git
    if appset_generator is Generator.git and style is not Style.appset:
        raise ArgoCDGenError("--appset-generator git needs --style appset")
    if git_mode and not git_values_glob:
        raise ArgoCDGenError("--appset-generator git needs --git-values-glob")
    if git_values_glob and not git_mode:
        raise ArgoCDGenError("--git-values-glob needs --style appset --appset-generator git")
    names = specs.parse_pairs("--release-name", release_name)
    namespaces = specs.parse_pairs("--slurm-namespace", slurm_namespace)
    if git_mode and (names or namespaces):
        raise ArgoCDGenError(
            "--release-name/--slurm-namespace do not apply to the git generator (each values "
            "file's clusterName names its release and namespace)"
        )

    releases = specs.resolve_releases(values, repo_root, names, namespaces)
    if git_mode:
        assert git_values_glob is not None
        for path, rel in zip(values, releases, strict=True):
            if not rel.origin.startswith("clusterName"):
                raise ArgoCDGenError(f"{path}: the git generator needs clusterName in the file")
            if not fnmatch.fnmatchcase(rel.values_file, git_values_glob):
                raise ArgoCDGenError(
                    f"-f/--values: {rel.values_file} does not match --git-values-glob "
                    f"{git_values_glob!r}"
                )
    extras = specs.parse_extra_apps(extra_app, repo_root, releases)
    out_path = specs.repo_relative(out, repo_root, "--out")
    apps_path = "apps" if out_path == "." else f"{out_path}/apps"
    sunk_files = tuple(
        specs.repo_relative(_existing(p, "--sunk-values"), repo_root, "--sunk-values")
        for p in sunk_values
    )
    gen_spec = GenSpec(
        repo_url=repo_url,
        revision=revision,
        cluster=cluster,
        apps_path=apps_path,
        slurm=() if git_mode else releases,
        style=style.value,
        appset_git_glob=git_values_glob if git_mode else None,
        destination_server=destination_server,
        root_destination_server=root_destination_server,
        cluster_secret=cluster_secret,
        app_project=app_project,
        argocd_namespace=argocd_namespace,
        project=project,
        cert_manager=versions.CERT_MANAGER.with_version(cert_manager_version)
        if cert_manager
        else None,
        moco=versions.MOCO.with_version(moco_version) if moco else None,
        sunk_namespace=sunk_namespace,
        sunk_value_files=sunk_files,
        extra_apps=extras,
        sync=sync,
        ignore_replicas=ignore_replicas,
        cascade_delete=cascade_delete,
        chart_registry=charts.registry if charts else None,
        chart_version=charts.version if charts else "",
    )
    return gen_spec, out_path


def _default_repo_root() -> Path:
    cwd = Path.cwd()
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    return cwd


def _existing(path: Path, flag: str) -> Path:
    if not path.is_file():
        raise ArgoCDGenError(f"{flag}: {path} does not exist")
    return path


if __name__ == "__main__":  # pragma: no cover
    sys.exit(argocd_app())
