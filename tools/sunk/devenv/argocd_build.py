"""Build Argo CD from its pinned Go module, for the ``gitops`` test tier.

``github.com/argoproj/argo-cd/v3`` pins its ``k8s.io/*`` modules with ``replace`` directives,
which Go honours only in the main module, so (as for Kubernetes, see ``kube_build``) a wrapper
module requires it and copies that ``replace`` block; the block's local ``./gitops-engine``
entry is dropped and ``github.com/argoproj/gitops-engine`` comes at the version argo-cd's
``require`` names. ``cmd`` builds Argo CD's multi-call binary: it runs the component its
``argv[0]`` or ``$ARGOCD_BINARY_NAME`` names (``argocd-repo-server``,
``argocd-application-controller``, ...). The Application, ApplicationSet and AppProject CRDs
are copied from the same module's ``manifests/crds``. Everything lives under
``cache_dir()/argocd/<version>/`` and is linked into ``.tools``; a second run only re-links.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from sunk.devenv import kube_build
from sunk.devenv.paths import cache_dir, tools_dir

ARGOCD_MODULE = "github.com/argoproj/argo-cd/v3"
# The Argo CD release whose gopher-lua the argocd-lua runner pins (argocd_lua.py).
ARGOCD_VERSION = "v3.3.9"
BINARY = "argocd"
CRD_FILES = ("application-crd.yaml", "applicationset-crd.yaml", "appproject-crd.yaml")
CRDS_NAME = "argocd-crds.yaml"
# Debian packages (package, command) the gitops tier runs beside Argo CD.
DEBIAN_PACKAGES = (("redis-server", "redis-server"), ("git", "git"))


def build() -> kube_build.Build:
    pkg = "github.com/argoproj/argo-cd/v3/common"
    ldflags = (
        f"-X {pkg}.version={ARGOCD_VERSION.lstrip('v')}",
        f"-X {pkg}.gitTag={ARGOCD_VERSION}",
        f"-X {pkg}.gitTreeState=clean",
    )
    return kube_build.Build(
        BINARY,
        ARGOCD_VERSION,
        ARGOCD_MODULE,
        f"{ARGOCD_MODULE}/cmd",
        ldflags,
        copy_replaces=True,
    )


def cached_binary() -> Path:
    return kube_build.cached_binary(BINARY, ARGOCD_VERSION)


def cached_crds() -> Path:
    return cache_dir() / BINARY / ARGOCD_VERSION / CRDS_NAME


def crds_link() -> Path:
    """Where the CRDs are linked (``.tools/share/argocd-crds.yaml``)."""
    return tools_dir() / "share" / CRDS_NAME


def installed() -> tuple[Path, Path] | None:
    """The cached binary and CRDs of the pinned version, or None when not built yet."""
    binary, crds = cached_binary(), cached_crds()
    return (binary, crds) if binary.exists() and crds.exists() else None


def build_crds() -> Path:
    target = cached_crds()
    if target.exists():
        return target
    work = kube_build.prepare_wrapper(build())
    info = json.loads(
        kube_build.go(["mod", "download", "-json", f"{ARGOCD_MODULE}@{ARGOCD_VERSION}"], work)
    )
    source = Path(info["Dir"]) / "manifests" / "crds"
    docs = [
        f"# from {ARGOCD_MODULE}@{ARGOCD_VERSION}/manifests/crds/{name}\n"
        + (source / name).read_text()
        for name in CRD_FILES
    ]
    tmp = target.with_name(f".{target.name}.{os.getpid()}.partial")
    tmp.write_text("---\n".join(doc if doc.endswith("\n") else doc + "\n" for doc in docs))
    tmp.replace(target)
    return target


def install() -> None:
    """The ``argocd`` toolchain component: the Argo CD binary and its CRDs."""
    from sunk.devenv.toolchain import ToolchainError, link_into, link_into_bin

    if not cached_binary().exists() and shutil.which("go") is None:
        raise ToolchainError(f"{BINARY}: the Go toolchain is needed to build it (go not on PATH)")
    link_into_bin(kube_build.build_one(build()), BINARY)
    link_into(build_crds(), crds_link().parent, CRDS_NAME)


def description() -> str:
    return f"Argo CD {ARGOCD_VERSION} (repo-server, application-controller; go build) and CRDs"
