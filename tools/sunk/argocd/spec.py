"""Inputs of ``argocd gen`` and their validation.

Everything a user can get wrong is checked here and reported as :class:`ArgoCDGenError` with a
one-line message naming the file or flag; the builders then assume valid input.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import yaml

from sunk.argocd.errors import ArgoCDGenError, ArgoCDInputError
from sunk.argocd.versions import UpstreamChart

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Git remotes Argo CD accepts: http(s)/ssh/git URLs with a host, and scp-like `user@host:path`.
_URL = re.compile(r"^(https?|ssh|git)://([^/@\s]+@)?[A-Za-z0-9.-]+(:\d+)?(/[^\s]*)?$")
_SCP = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s/][^\s]*$")
_REVISION = re.compile(r"^[^\s~^:?*\[\\]+$")
_SHA = re.compile(r"^[0-9a-f]{40}$")
# Argo CD puts the Application name in a label value (app.kubernetes.io/instance): <= 63 chars.
MAX_APP_NAME = 63
MAX_RELEASE_NAME = 53  # Helm's limit


@dataclass(frozen=True)
class SyncSettings:
    auto_sync: bool = False
    prune: bool = False
    self_heal: bool = False
    retry_limit: int = 5


@dataclass(frozen=True)
class SlurmRelease:
    """One ``charts/slurm`` release: a Slurm cluster."""

    name: str  # Helm release name; also the key users pass to the override flags
    namespace: str
    values_file: str  # repository-relative POSIX path
    origin: str = ""  # where the name came from, for messages


@dataclass(frozen=True)
class ExtraApp:
    """A supporting Application over a directory of plain manifests (PVCs, prolog/epilog, ...)."""

    name: str
    path: str  # repository-relative POSIX path
    namespace: str


# Argo CD's name for the cluster it runs in.
IN_CLUSTER = "https://kubernetes.default.svc"


@dataclass(frozen=True)
class GenSpec:
    repo_url: str
    revision: str
    cluster: str  # Argo CD destination cluster name; prefixes every Application name
    apps_path: str  # repository-relative directory the parent Application syncs
    slurm: tuple[SlurmRelease, ...] = ()
    style: str = "app-of-apps"  # or "appset"
    appset_git_glob: str | None = None  # appset style: git files generator over this glob
    destination_server: str | None = None  # use destination.server instead of .name
    # Where the root Application puts the child Applications: the cluster Argo CD runs in.
    root_destination_server: str = IN_CLUSTER
    cluster_secret: bool = False  # also emit a template of Argo CD's cluster Secret
    app_project: bool = False  # also emit the AppProject the Applications belong to
    argocd_namespace: str = "argocd"
    project: str = "default"
    cert_manager: UpstreamChart | None = None
    moco: UpstreamChart | None = None
    sunk_chart_path: str = "charts/sunk"
    sunk_namespace: str = "sunk-system"
    sunk_value_files: tuple[str, ...] = ()  # repository-relative
    slurm_chart_path: str = "charts/slurm"
    extra_apps: tuple[ExtraApp, ...] = ()
    sync: SyncSettings = field(default_factory=SyncSettings)
    ignore_replicas: bool = False
    cascade_delete: bool = True
    # Both charts from an OCI registry (Argo CD's repoURL: HOST/PATH, no oci://) at this
    # version, their values from this repository through a `ref: values` source. None: the
    # charts are read from this repository (sunk_chart_path, slurm_chart_path).
    chart_registry: str | None = None
    chart_version: str = ""


# An OCI registry and repository path, as `helm push` takes it: oci://HOST[:PORT]/PATH.
_OCI = re.compile(r"^(oci://)?([A-Za-z0-9.-]+(:\d+)?)(/[a-z0-9._/-]+)?$")


def check_chart_registry(ref: str, flag: str = "--chart-registry") -> str:
    """``oci://HOST[:PORT]/PATH`` (the ``oci://`` optional) as Argo CD's repoURL: HOST/PATH."""
    match = _OCI.match(ref.strip().rstrip("/"))
    if not match or ("." not in match.group(2) and ":" not in match.group(2)):
        raise ArgoCDGenError(
            f"{flag}: {ref!r} is not an OCI registry path (expected oci://HOST[:PORT]/PATH, "
            "where helm push put the charts)"
        )
    return ref.strip().rstrip("/").removeprefix("oci://")


# --- small validators ---------------------------------------------------------------------------


def check_repo_url(url: str, flag: str = "--repo") -> str:
    url = url.strip()
    if not (_URL.match(url) or _SCP.match(url)):
        raise ArgoCDGenError(
            f"{flag}: {url!r} is not a Git repository URL "
            "(expected https://host/org/repo.git, ssh://git@host/org/repo.git or git@host:org/repo)"
        )
    return url


def check_revision(revision: str, flag: str = "--revision") -> str:
    if not _REVISION.match(revision or ""):
        raise ArgoCDGenError(f"{flag}: {revision!r} is not a Git revision (commit, tag or branch)")
    return revision


def revision_is_pinned(revision: str) -> bool:
    return bool(_SHA.match(revision))


def check_dns_label(value: str, what: str, limit: int = 63) -> str:
    if not DNS_LABEL.match(value) or len(value) > limit:
        raise ArgoCDGenError(
            f"{what}: {value!r} is not a valid name (lower-case letters, digits and '-', "
            f"starting and ending with a letter or digit, at most {limit} characters)"
        )
    return value


def parse_pairs(flag: str, items: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` flags into a dict; a repeated KEY is an error."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise ArgoCDGenError(f"{flag}: expected KEY=VALUE, got {item!r}")
        if key in out:
            raise ArgoCDGenError(f"{flag}: {key!r} given twice")
        out[key] = value
    return out


# --- paths in the repository -------------------------------------------------------------------


def repo_relative(path: Path, repo_root: Path, what: str) -> str:
    """``path`` as a POSIX path relative to the repository root (Argo CD reads from Git)."""
    try:
        rel = path.resolve().relative_to(repo_root.resolve())
    except ValueError:
        raise ArgoCDGenError(
            f"{what}: {path} is outside the repository root {repo_root} "
            "(Argo CD can only read files committed to the repository; see --repo-root)"
        ) from None
    return PurePosixPath(*rel.parts).as_posix() if rel.parts else "."


def relative_to_chart(repo_path: str, chart_path: str) -> str:
    """A repository path as Argo CD's ``helm.valueFiles`` wants it: relative to the chart."""
    return posixpath.relpath(repo_path, chart_path)


# --- values files ------------------------------------------------------------------------------


def load_values(path: Path, flag: str = "-f/--values") -> Mapping[str, object]:
    if not path.is_file():
        problem = "is not a file" if path.exists() else "does not exist"
        raise ArgoCDGenError(f"{flag}: values file {path} {problem}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ArgoCDGenError(f"{flag}: cannot read values file {path}: {exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ArgoCDInputError(f"{where}: invalid YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ArgoCDInputError(
            f"{path}: a values file must be a YAML mapping, found {type(data).__name__}"
        )
    return data


def slurm_release(path: Path, repo_root: Path, flag: str = "-f/--values") -> SlurmRelease:
    """A release from one values file: named by its ``clusterName`` or else the file stem."""
    values = load_values(path, flag)
    repo_path = repo_relative(path, repo_root, flag)
    cluster_name = values.get("clusterName")
    if cluster_name is not None:
        if not isinstance(cluster_name, str):
            raise ArgoCDInputError(f"{path}: clusterName must be a string")
        name, origin = cluster_name, f"clusterName in {path}"
        check_dns_label(name, origin, MAX_RELEASE_NAME)
    else:
        name, origin = path.stem, f"file stem of {path} (no clusterName)"
        if not DNS_LABEL.match(name) or len(name) > MAX_RELEASE_NAME:
            raise ArgoCDGenError(
                f"{path}: the file stem {name!r} is not a valid release name; set clusterName "
                "in the file or pass --release-name"
            )
    return SlurmRelease(name=name, namespace=name, values_file=repo_path, origin=origin)


def resolve_releases(
    values_files: Sequence[Path],
    repo_root: Path,
    release_names: Mapping[str, str] | None = None,
    namespaces: Mapping[str, str] | None = None,
) -> tuple[SlurmRelease, ...]:
    """Releases for ``-f`` files, with ``--release-name``/``--slurm-namespace`` overrides applied.

    Overrides are keyed by the derived name (``clusterName`` or file stem). Release names must be
    unique; so must the pair (namespace, release).
    """
    release_names = dict(release_names or {})
    namespaces = dict(namespaces or {})
    derived = [slurm_release(p, repo_root) for p in values_files]
    seen_files: dict[str, Path] = {}
    for path, rel in zip(values_files, derived, strict=True):
        if rel.values_file in seen_files:
            raise ArgoCDGenError(f"-f/--values: {path} is given twice")
        seen_files[rel.values_file] = path
    keys = [r.name for r in derived]
    for flag, mapping in (("--release-name", release_names), ("--slurm-namespace", namespaces)):
        for key in mapping:
            if key not in keys:
                known = ", ".join(sorted(set(keys))) or "none"
                raise ArgoCDGenError(
                    f"{flag}: no values file derives the name {key!r} (known: {known})"
                )
            if keys.count(key) > 1:
                raise ArgoCDGenError(
                    f"{flag}: {key!r} is derived from several values files; set distinct "
                    "clusterName values instead"
                )
    out: list[SlurmRelease] = []
    by_name: dict[str, SlurmRelease] = {}
    for rel in derived:
        name = check_dns_label(
            release_names.get(rel.name, rel.name), f"--release-name {rel.name}", MAX_RELEASE_NAME
        )
        ns = check_dns_label(namespaces.get(rel.name, name), f"--slurm-namespace {rel.name}")
        final = SlurmRelease(
            name=name, namespace=ns, values_file=rel.values_file, origin=rel.origin
        )
        if name in by_name:
            other = by_name[name]
            raise ArgoCDGenError(
                f"duplicate Slurm cluster name {name!r}: {other.values_file} ({other.origin}) and "
                f"{rel.values_file} ({rel.origin}); set distinct clusterName values or use "
                "--release-name"
            )
        by_name[name] = final
        out.append(final)
    return tuple(out)


def parse_extra_apps(
    items: Iterable[str], repo_root: Path, releases: Sequence[SlurmRelease]
) -> tuple[ExtraApp, ...]:
    """``--extra-app NAME=PATH[@NAMESPACE]``; the namespace defaults to the only Slurm cluster's."""
    out: list[ExtraApp] = []
    names: set[str] = set()
    for item in items:
        name, sep, rest = item.partition("=")
        name = name.strip()
        if not sep or not name or not rest.strip():
            raise ArgoCDGenError(f"--extra-app: expected NAME=PATH[@NAMESPACE], got {item!r}")
        path_text, at, namespace = rest.strip().rpartition("@") if "@" in rest else (rest, "", "")
        check_dns_label(name, f"--extra-app {item}")
        if name in names:
            raise ArgoCDGenError(f"--extra-app: {name!r} given twice")
        names.add(name)
        path = Path(path_text.strip())
        if not path.is_dir():
            raise ArgoCDGenError(f"--extra-app {name}: {path_text.strip()} is not a directory")
        repo_path = repo_relative(path, repo_root, f"--extra-app {name}")
        if at:
            namespace = check_dns_label(namespace.strip(), f"--extra-app {name} namespace")
        elif len(releases) == 1:
            namespace = releases[0].namespace
        else:
            raise ArgoCDGenError(
                f"--extra-app {name}: {len(releases)} Slurm clusters, so say which namespace: "
                f"--extra-app {name}=PATH@NAMESPACE"
            )
        out.append(ExtraApp(name=name, path=repo_path, namespace=namespace))
    return tuple(out)
