"""Build what a real Kubernetes worker node runs, from pinned, published Go modules.

The ``nodes`` toolchain component: kubelet, kube-proxy and kubectl (the same wrapper module as
kube-apiserver, see ``kube_build``), containerd with its runc shim and ``ctr``, runc (cgo and
``-tags seccomp``: without seccomp support every sandbox fails with "seccomp not supported"),
the CNI plugins the nodes use (bridge, host-local, loopback, portmap), CoreDNS,
kube-router's NetworkPolicy controller (enforcement, which the bridge plugin lacks), and the pause
image every Pod sandbox starts from. No registry is reachable here, so the pause image is built
locally: ``build/pause/linux/pause.c`` from the pinned ``k8s.io/kubernetes`` module compiled
with ``gcc -static`` and wrapped as an OCI image archive that each node's containerd imports and
pins as its sandbox image.

Binaries are cached under ``cache_dir()/<tool>/<version>/<tool>`` and linked into
``.tools/bin`` (the CNI plugins into ``.tools/libexec/cni``, the pause image into
``.tools/share``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from sunk.devenv import kube_build
from sunk.devenv.kube_build import KUBERNETES_VERSION, Build
from sunk.devenv.paths import cache_dir, tools_dir

CONTAINERD_VERSION = "v2.4.2"
RUNC_VERSION = "v1.5.3"
CNI_PLUGINS_VERSION = "v1.10.0"
COREDNS_VERSION = "v1.15.0"
KUBE_ROUTER_VERSION = "v2.1.0"

CONTAINERD = "github.com/containerd/containerd/v2"
RUNC = "github.com/opencontainers/runc"
CNI_PLUGINS = "github.com/containernetworking/plugins"
COREDNS = "github.com/coredns/coredns"
KUBE_ROUTER = "github.com/cloudnativelabs/kube-router/v2"

NODE_KUBE_COMMANDS = ("kubelet", "kube-proxy", "kubectl")
CNI_PLUGIN_PACKAGES = {
    "bridge": "plugins/main/bridge",
    "loopback": "plugins/main/loopback",
    "host-local": "plugins/ipam/host-local",
    "portmap": "plugins/meta/portmap",
}
# The sandbox image's name: the one kubelet and containerd use by default for this release,
# so nothing else has to be told about it.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"
PAUSE_ARCHIVE = "pause.oci.tar"
# Debian packages the nodes need at run time: iptables for kube-proxy and the CNI plugins,
# conntrack for kube-proxy's cleanup, libseccomp for runc, socat for the API forwarder, ipset
# for kube-router's NetworkPolicy sets.
DEBIAN_PACKAGES = (
    "iptables", "conntrack", "libseccomp-dev", "socat", "gcc", "libc6-dev", "ipset"
)  # fmt: skip


def builds() -> list[Build]:
    kube = [kube_build.kubernetes_build(cmd) for cmd in NODE_KUBE_COMMANDS]
    containerd_version = f"-X {CONTAINERD}/version.Version={CONTAINERD_VERSION.lstrip('v')}"
    containerd = [
        Build(
            name,
            CONTAINERD_VERSION,
            CONTAINERD,
            f"{CONTAINERD}/cmd/{name}",
            (containerd_version,),
            go="1.26.6",
        )
        for name in ("containerd", "containerd-shim-runc-v2", "ctr")
    ]
    runc = Build(
        "runc",
        RUNC_VERSION,
        RUNC,
        RUNC,
        (f"-X main.version={RUNC_VERSION.lstrip('v')}",),
        tags=("seccomp", "urfave_cli_no_docs"),
        cgo=True,
    )
    cni_version = f"-X {CNI_PLUGINS}/pkg/utils/buildversion.BuildVersion={CNI_PLUGINS_VERSION}"
    cni = [
        Build(
            name,
            CNI_PLUGINS_VERSION,
            CNI_PLUGINS,
            f"{CNI_PLUGINS}/{package}",
            (cni_version,),
            go="1.26.8",
        )
        for name, package in CNI_PLUGIN_PACKAGES.items()
    ]
    coredns = Build("coredns", COREDNS_VERSION, COREDNS, COREDNS)
    # NetworkPolicy enforcement, which the bridge plugin lacks: kube-router's firewall only.
    # v2.1.0 is the one version served here; advisories are reported against it, which a
    # test-only enforcer inside the nodes' network namespaces accepts (docs/dev-nodes.md).
    netpol = Build(
        "kube-router", KUBE_ROUTER_VERSION, KUBE_ROUTER, f"{KUBE_ROUTER}/cmd/kube-router"
    )
    return [*kube, *containerd, runc, *cni, coredns, netpol]


def cni_bin_dir() -> Path:
    return tools_dir() / "libexec" / "cni"


def pause_archive_link() -> Path:
    return tools_dir() / "share" / PAUSE_ARCHIVE


def _deterministic_tar(files: dict[str, tuple[bytes, int]]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, (data, mode) in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def oci_image_archive(binary: bytes, *, name: str, entrypoint: list[str]) -> bytes:
    """A one-layer OCI image archive (``ctr images import`` reads it) holding ``binary`` at
    ``/<basename of entrypoint[0]>``; byte-identical for the same input."""
    layer = _deterministic_tar({entrypoint[0].lstrip("/"): (binary, 0o755)})
    blobs: dict[str, bytes] = {}

    def blob(data: bytes, media_type: str) -> dict:
        digest = hashlib.sha256(data).hexdigest()
        blobs[f"blobs/sha256/{digest}"] = data
        return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}

    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": entrypoint, "User": "65535:65535"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]},
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": blob(json.dumps(config).encode(), "application/vnd.oci.image.config.v1+json"),
        "layers": [blob(layer, "application/vnd.oci.image.layer.v1.tar")],
    }
    manifest_desc = blob(json.dumps(manifest).encode(), manifest["mediaType"])
    manifest_desc["annotations"] = {"org.opencontainers.image.ref.name": name}
    index = {"schemaVersion": 2, "manifests": [manifest_desc]}
    files = {name: (data, 0o644) for name, data in blobs.items()}
    files["oci-layout"] = (b'{"imageLayoutVersion":"1.0.0"}', 0o644)
    files["index.json"] = (json.dumps(index).encode(), 0o644)
    return _deterministic_tar(files)


def build_pause() -> Path:
    """The sandbox image: kubernetes' own pause.c, statically linked, as an OCI archive."""
    from sunk.devenv.toolchain import ToolchainError, log

    target = cache_dir() / "pause" / KUBERNETES_VERSION / PAUSE_ARCHIVE
    if target.exists():
        return target
    work = kube_build.prepare_wrapper(kube_build.kubernetes_build("kubelet"))
    info = json.loads(
        kube_build.go(["mod", "download", "-json", f"k8s.io/kubernetes@{KUBERNETES_VERSION}"], work)
    )
    source = Path(info["Dir"]) / "build" / "pause" / "linux" / "pause.c"
    if shutil.which("gcc") is None:
        raise ToolchainError("pause image: gcc is needed to compile pause.c (apt-get install gcc)")
    with tempfile.TemporaryDirectory() as tmp:
        binary = Path(tmp) / "pause"
        proc = subprocess.run(
            ["gcc", "-Os", "-static", f'-DVERSION="{KUBERNETES_VERSION}"', "-o", str(binary),
             str(source)],
            capture_output=True,
            text=True,
        )  # fmt: skip
        if proc.returncode != 0:
            raise ToolchainError(f"pause image: gcc -static pause.c failed:\n{proc.stderr}")
        subprocess.run(["strip", str(binary)], check=False)
        archive = oci_image_archive(binary.read_bytes(), name=PAUSE_IMAGE, entrypoint=["/pause"])
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_target = target.with_name(f".{target.name}.{os.getpid()}.partial")
    tmp_target.write_bytes(archive)
    tmp_target.replace(target)
    log(f"pause image {PAUSE_IMAGE}: built from pause.c ({len(archive)} bytes)")
    return target


def install_debian_packages() -> None:
    from sunk.devenv.toolchain import apt_install

    missing = [p for p in DEBIAN_PACKAGES if not _dpkg_installed(p)]
    if missing:
        apt_install(missing)


def _dpkg_installed(package: str) -> bool:
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True
    )
    return proc.returncode == 0 and proc.stdout.endswith("installed")


def install_nodes() -> None:
    """The ``nodes`` toolchain component (see the module docstring)."""
    from sunk.devenv.toolchain import ToolchainError, link_into, link_into_bin, log

    if os.geteuid() != 0:
        raise ToolchainError("nodes: installing the node runtime's packages needs root")
    install_debian_packages()
    if shutil.which("go") is None:
        raise ToolchainError("nodes: the Go toolchain is needed (go not on PATH)")
    started = time.monotonic()
    for build in builds():
        binary = kube_build.build_one(build)
        if build.module == CNI_PLUGINS:
            link_into(binary, cni_bin_dir(), build.tool)
        else:
            link_into_bin(binary, build.tool)
    link_into(build_pause(), pause_archive_link().parent, PAUSE_ARCHIVE)
    log(f"nodes: ready in {time.monotonic() - started:.0f}s")


def description() -> str:
    return (
        f"kubelet/kube-proxy/kubectl {KUBERNETES_VERSION}, containerd {CONTAINERD_VERSION}, "
        f"runc {RUNC_VERSION}, CNI plugins {CNI_PLUGINS_VERSION}, CoreDNS {COREDNS_VERSION}, "
        f"kube-router {KUBE_ROUTER_VERSION} (NetworkPolicies), pause image (go build, gcc)"
    )
