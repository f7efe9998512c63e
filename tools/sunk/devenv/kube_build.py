"""Build a real Kubernetes control plane (and kwok) from pinned, published Go modules.

``k8s.io/kubernetes`` cannot be ``go install``-ed: its ``go.mod`` points every ``k8s.io/*``
staging module at a local ``./staging/src/...`` directory. We therefore generate a small
wrapper module that requires ``k8s.io/kubernetes`` at the pinned version and replaces each
staging module (the list is read from that version's own ``go.mod``, not typed by hand) with
its published ``v0.X.Y`` release, then ``go build`` the ``cmd/*`` packages from it. etcd's
server module has relative ``replace`` directives as well, so it gets the same treatment; kwok
has none, but uses the same path for uniform flags (``-p 2``, ``-trimpath``).

All modules come through the Go module proxy and are verified by the Go checksum database.
The installed Go (``GOTOOLCHAIN=local``) must satisfy each module's ``go`` directive; the
versions below ask for ``go 1.26.0``. Binaries are cached under
``cache_dir()/<tool>/<version>/<tool>`` and linked into ``.tools/bin``; a second run only
re-links them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from sunk.devenv.paths import cache_dir, tools_dir

KUBERNETES_VERSION = "v1.37.2"
# etcd 3.6 is the server line Kubernetes 1.37 is tested against; its client (v3.7) is compatible.
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"

KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
KUBE_TOOLS = (*KUBE_COMMANDS, "etcd", "kwok")

# Linking kube-apiserver takes a few GiB; two parallel compile jobs keep peak memory bounded.
GO_BUILD_PARALLELISM = "2"
# kwok's controller needs Stage objects (it has no built-in defaults; kwokctl writes them into
# its config). We assemble the same default set kwokctl uses -- node-initialize,
# node-heartbeat-with-lease, pod-ready/complete/delete -- from the pinned kwok module's source.
KWOK_STAGE_FILES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)
KWOK_STAGES_NAME = "kwok-stages.yaml"
_STAGING_REPLACE = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/src/", re.MULTILINE)


@dataclass(frozen=True)
class Build:
    tool: str
    version: str
    module: str  # the module the wrapper requires
    package: str  # the main package to build
    ldflags: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    cgo: bool = False  # runc needs cgo (libseccomp); everything else links statically
    go: str = "1.26.0"  # the wrapper's go directive: at least the module's own
    # Copy the module's own versioned ``replace`` directives into the wrapper (replace only
    # applies in the main module); local-path ones are dropped, so their require line wins.
    copy_replaces: bool = False


def kube_ldflags(version: str) -> tuple[str, ...]:
    major, minor = version.lstrip("v").split(".")[:2]
    fields = {
        "gitVersion": version,
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "gitCommit": "",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    flags = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [f"-X {pkg}.{key}={value}" for key, value in fields.items() if value]
    return tuple(flags)


def kubernetes_build(cmd: str) -> Build:
    """``k8s.io/kubernetes/cmd/<cmd>`` at the pinned version (one wrapper module for all)."""
    return Build(
        cmd,
        KUBERNETES_VERSION,
        "k8s.io/kubernetes",
        f"k8s.io/kubernetes/cmd/{cmd}",
        kube_ldflags(KUBERNETES_VERSION),
    )


def builds() -> list[Build]:
    kube = [kubernetes_build(cmd) for cmd in KUBE_COMMANDS]
    return [
        *kube,
        Build("etcd", ETCD_VERSION, "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/server/v3"),
        Build("kwok", KWOK_VERSION, "sigs.k8s.io/kwok", "sigs.k8s.io/kwok/cmd/kwok"),
    ]


def cached_binary(tool: str, version: str) -> Path:
    return cache_dir() / tool / version / tool


def _go_env(cgo: bool = False) -> dict[str, str]:
    return dict(
        os.environ,
        CGO_ENABLED="1" if cgo else "0",
        GOFLAGS="-mod=mod",
        GOWORK="off",
        GOTOOLCHAIN=os.environ.get("GOTOOLCHAIN", "local"),
    )


def go(args: list[str], work: Path, *, cgo: bool = False) -> str:
    from sunk.devenv.toolchain import ToolchainError

    try:
        proc = subprocess.run(
            ["go", *args], cwd=work, env=_go_env(cgo), check=True, capture_output=True, text=True
        )
    except subprocess.CalledProcessError as exc:
        raise ToolchainError(
            f"go {' '.join(args)} failed ({exc.returncode}) in {work}:\n{exc.stderr[-4000:]}"
        ) from exc
    return proc.stdout


def _module_gomod(module: str, version: str, work: Path) -> str:
    """The published ``go.mod`` of ``module@version`` (downloaded and checksum-verified)."""
    info = json.loads(go(["mod", "download", "-json", f"{module}@{version}"], work))
    return Path(info["GoMod"]).read_text()


def staging_replaces(kubernetes_gomod: str, version: str) -> list[tuple[str, str]]:
    """Map each ``k8s.io/*`` staging module in kubernetes' go.mod to its published v0.X.Y."""
    staging_version = "v0." + version.lstrip("v").split(".", 1)[1]
    return [(mod, staging_version) for mod in _STAGING_REPLACE.findall(kubernetes_gomod)]


def module_replaces(scratch: Path, build: Build, work: Path) -> list[tuple[str, str]]:
    """The versioned ``replace`` directives of ``build.module``'s published go.mod, parsed by
    ``go mod edit -json`` from a copy at ``scratch``."""
    scratch.write_text(_module_gomod(build.module, build.version, work))
    parsed = json.loads(go(["mod", "edit", "-json", str(scratch)], work))
    return versioned_replaces(parsed, f"{build.module}@{build.version}")


def versioned_replaces(parsed: dict, origin: str) -> list[tuple[str, str]]:
    """``(module, version)`` for each same-path version pin of a ``go mod edit -json`` result;
    local-directory replaces are dropped (their module's ``require`` line then applies)."""
    out: list[tuple[str, str]] = []
    for rep in parsed.get("Replace") or []:
        old, new = rep["Old"], rep["New"]
        if not new.get("Version"):
            continue
        if old.get("Version") or new["Path"] != old["Path"]:
            from sunk.devenv.toolchain import ToolchainError

            raise ToolchainError(
                f"{origin} go.mod: replace {old['Path']} => {new['Path']} is not a same-path "
                "version pin; the wrapper cannot copy it"
            )
        out.append((old["Path"], new["Version"]))
    return out


def wrapper_gomod(build: Build, replaces: list[tuple[str, str]]) -> str:
    lines = [
        "module sunk.local/toolbuild",
        "",
        f"go {build.go}",
        "",
        f"require {build.module} {build.version}",
        "",
    ]
    if replaces:
        lines.append("replace (")
        lines += [f"\t{mod} => {mod} {ver}" for mod, ver in replaces]
        lines.append(")")
    return "\n".join(lines) + "\n"


def prepare_wrapper(build: Build) -> Path:
    """A persistent wrapper module per (module, version); its go.sum is reused by later runs.
    Builds of one module (kube-apiserver and kubelet, containerd and its shim) share it."""
    work = cache_dir() / "gobuild" / build.module.replace("/", "_") / build.version
    work.mkdir(parents=True, exist_ok=True)
    gomod = work / "go.mod"
    if not gomod.exists():
        (work / "go.mod").write_text(wrapper_gomod(build, []))
        replaces: list[tuple[str, str]] = []
        if build.module == "k8s.io/kubernetes":
            replaces = staging_replaces(
                _module_gomod(build.module, build.version, work), build.version
            )
            if len(replaces) < 20:
                from sunk.devenv.toolchain import ToolchainError

                raise ToolchainError(
                    f"only {len(replaces)} staging replaces found in "
                    f"k8s.io/kubernetes@{build.version} go.mod"
                )
        elif build.copy_replaces:
            replaces = module_replaces(work / "upstream.go.mod", build, work)
        tmp = gomod.with_suffix(".tmp")
        tmp.write_text(wrapper_gomod(build, replaces))
        tmp.replace(gomod)
    return work


def build_one(build: Build) -> Path:
    from sunk.devenv.toolchain import log

    target = cached_binary(build.tool, build.version)
    if target.exists():
        return target
    work = prepare_wrapper(build)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.partial")
    ldflags = " ".join(("-s", "-w", *build.ldflags))
    log(f"{build.tool} {build.version}: go build {build.package} (first build takes minutes)")
    started = time.monotonic()
    tags = ["-tags", ",".join(build.tags)] if build.tags else []
    go(
        [
            "build",
            "-p",
            GO_BUILD_PARALLELISM,
            "-trimpath",
            *tags,
            "-ldflags",
            ldflags,
            "-o",
            str(tmp),
            build.package,
        ],
        work,
        cgo=build.cgo,
    )
    tmp.chmod(0o755)
    tmp.replace(target)
    log(f"{build.tool} {build.version}: built in {time.monotonic() - started:.0f}s")
    return target


def kwok_stages_link() -> Path:
    """Where the kwok default stages are linked (``.tools/share/kwok-stages.yaml``)."""
    return tools_dir() / "share" / KWOK_STAGES_NAME


def build_kwok_stages() -> Path:
    target = cache_dir() / "kwok" / KWOK_VERSION / KWOK_STAGES_NAME
    if target.exists():
        return target
    work = prepare_wrapper(next(b for b in builds() if b.tool == "kwok"))
    info = json.loads(go(["mod", "download", "-json", f"sigs.k8s.io/kwok@{KWOK_VERSION}"], work))
    source = Path(info["Dir"])
    docs = [
        f"# from sigs.k8s.io/kwok@{KWOK_VERSION}/{name}\n" + (source / name).read_text()
        for name in KWOK_STAGE_FILES
    ]
    tmp = target.with_name(f".{target.name}.{os.getpid()}.partial")
    tmp.write_text("---\n".join(doc if doc.endswith("\n") else doc + "\n" for doc in docs))
    tmp.replace(target)
    return target


def install_kube() -> None:
    """The ``kube`` toolchain component: etcd, kube-apiserver, kube-controller-manager,
    kube-scheduler and kwok."""
    from sunk.devenv.toolchain import ToolchainError, link_into_bin

    pending = [b for b in builds() if not cached_binary(b.tool, b.version).exists()]
    if pending and shutil.which("go") is None:
        raise ToolchainError(
            "kube: the Go toolchain is needed to build "
            f"{', '.join(b.tool for b in pending)} (go not on PATH)"
        )
    for build in builds():
        link_into_bin(build_one(build), build.tool)
    stages = build_kwok_stages()
    link = kwok_stages_link()
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(stages)


def description() -> str:
    return (
        f"kube-apiserver/controller-manager/scheduler {KUBERNETES_VERSION}, "
        f"etcd {ETCD_VERSION}, kwok {KWOK_VERSION} (go build)"
    )
