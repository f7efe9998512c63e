"""Build the project's container images with a local Docker engine (``make images``).

Nothing is pulled: the base image is a debootstrapped Debian root imported into Docker
(``opensunk/base:trixie``), built once and remembered by a stamp; every image is built from it
with ``docker build --network host`` so apt reaches the host's Debian mirror. Tags come from
:mod:`sunk.models.values`, so they are the charts' defaults.

    python -m sunk.devenv.images build [NAME ...]   # base + images (all by default)
    python -m sunk.devenv.images build --slurm 26.05  # controller, slurmd, login of a release
    python -m sunk.devenv.images tags [--slurm 26.05]  # the image references, one a line
    python -m sunk.devenv.images engine             # install/start dockerd if needed

The engine, when this module starts it, runs with ``--bridge=none --iptables=false``: no
bridge address is created and the host firewall is untouched; containers use host networking.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sunk.devenv import debian
from sunk.devenv.paths import cache_dir, repo_root
from sunk.devenv.slurm_rootfs import RELEASES
from sunk.errors import ToolError
from sunk.models.values import IMAGE_PREFIX, IMAGE_TAG, SLURM_VERSION

SUITE = "trixie"
BASE_IMAGE = f"{IMAGE_PREFIX}/base:{SUITE}"
# Python of the operator image (Debian trixie's python3); the wheelhouse is fetched for it.
OPERATOR_PYTHON = "3.13"
DOCKERD_ARGS = ("--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false")


class ImageBuildError(ToolError):  # a RuntimeError; sunkctl dev exits 3
    """An image could not be built; the message says which and why."""


@dataclass(frozen=True)
class ImageSpec:
    name: str  # folder under images/
    repository: str
    tag: str
    build_args: dict[str, str] = field(default_factory=dict)
    # A build context of its own (a folder of the checkout holding its Dockerfile, as a user
    # builds an example); None: the checkout with images/<name>/Dockerfile.
    context: str | None = None

    @property
    def ref(self) -> str:
        return f"{self.repository}:{self.tag}"


def image_ref(name: str, tag: str = IMAGE_TAG) -> str:
    return f"{IMAGE_PREFIX}/{name}:{tag}"


def images() -> list[ImageSpec]:
    """Every image `make images` builds, with the tags the charts default to."""
    common = {"BASE_IMAGE": BASE_IMAGE, "SLURM_VERSION": SLURM_VERSION}
    return [
        ImageSpec(name, f"{IMAGE_PREFIX}/{name}", IMAGE_TAG, dict(common))
        for name in ("controller", "slurmd", "login", "operator")
    ]


def release_images(series: str) -> list[ImageSpec]:
    """The Slurm images (controller, slurmd, login) for another Slurm release, from the Debian
    suite that carries it over our trixie base, tagged by that release as the defaults are
    (``<version>-slurm<series>``): what a user sets in values to change the cluster's Slurm."""
    if series not in RELEASES:
        raise ImageBuildError(f"no images for Slurm {series}; known: {sorted(RELEASES)}")
    suite = RELEASES[series].suite
    args = {"BASE_IMAGE": BASE_IMAGE, "SLURM_VERSION": series}
    if suite != SUITE:
        args["SLURM_SUITE"] = suite
    tag = IMAGE_TAG.replace(f"-slurm{SLURM_VERSION}", f"-slurm{series}")
    return [
        ImageSpec(name, f"{IMAGE_PREFIX}/{name}", tag, dict(args))
        for name in ("controller", "slurmd", "login")
    ]


# Images the development cluster needs besides the product's: MariaDB from Debian for the
# operator's in-cluster accounting database (no registry to pull `mariadb` from), and an
# OpenLDAP server for `directoryService` (the directory users of the e2e tier).
DEV_IMAGE_TAG = SUITE


def dev_images() -> list[ImageSpec]:
    return [
        ImageSpec(name, f"{IMAGE_PREFIX}/{name}", DEV_IMAGE_TAG, {"BASE_IMAGE": BASE_IMAGE})
        for name in ("mariadb", "ldap")
    ]


# Examples users build themselves, built here for the tests that run them: the training job of
# docs/tutorials/train-on-sunk.md. Not imported into the nodes (deploy.image_archives): jobs
# pull it from a registry with `srun --container-image`.
def example_images() -> list[ImageSpec]:
    return [
        ImageSpec(
            "train",
            f"{IMAGE_PREFIX}/train",
            DEV_IMAGE_TAG,
            {"BASE_IMAGE": BASE_IMAGE},
            context="examples/train-on-sunk",
        )
    ]


def cuda_variant(cuda: str, base_image: str) -> ImageSpec:
    """slurmd on another base (e.g. an NVIDIA CUDA runtime image): tag `<tag>-cuda<cuda>`."""
    return ImageSpec(
        "slurmd",
        f"{IMAGE_PREFIX}/slurmd",
        f"{IMAGE_TAG}-cuda{cuda}",
        {"BASE_IMAGE": base_image, "SLURM_VERSION": SLURM_VERSION},
    )


def variants_from_env() -> list[ImageSpec]:
    """`SUNK_SLURMD_CUDA="12.8=<cuda base image> 13.0=<…>"` adds CUDA variants of slurmd."""
    out = []
    for item in os.environ.get("SUNK_SLURMD_CUDA", "").split():
        cuda, sep, base = item.partition("=")
        if not sep or not cuda or not base:
            raise ImageBuildError(f"SUNK_SLURMD_CUDA: expected VERSION=IMAGE, got {item!r}")
        out.append(cuda_variant(cuda, base))
    return out


def log(message: str) -> None:
    print(f"[images] {message}", file=sys.stderr, flush=True)


# --- the engine -------------------------------------------------------------------------------


def engine_running() -> bool:
    if shutil.which("docker") is None:
        return False
    proc = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    return proc.returncode == 0 and bool(proc.stdout.strip())


def engine_problem() -> str | None:
    """Why containers cannot run here (None when the engine answers)."""
    if shutil.which("docker") is None:
        return "docker CLI not installed (run `make images`, which installs docker.io as root)"
    if not engine_running():
        return "the Docker engine is not running (run `make images`, which starts dockerd)"
    return None


def apt_install(*packages: str) -> None:
    if os.geteuid() != 0:
        raise ImageBuildError(f"{', '.join(packages)} not installed and not root: apt-get install")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        if subprocess.run(cmd, env=env, check=False).returncode != 0:
            raise ImageBuildError(f"command failed: {' '.join(cmd)}")


def ensure_engine(timeout: float = 90.0) -> None:
    """Install (docker.io) and start dockerd when no engine answers; idempotent."""
    if engine_running():
        return
    if shutil.which("dockerd") is None:
        log("installing the Docker engine (apt-get install docker.io)")
        apt_install("docker.io")
    if engine_running():  # the package's service may have started it
        return
    if os.geteuid() != 0:
        raise ImageBuildError("the Docker engine is not running and starting it needs root")
    logfile = cache_dir() / "docker" / "dockerd.log"
    logfile.parent.mkdir(parents=True, exist_ok=True)
    log(f"starting dockerd {' '.join(DOCKERD_ARGS)} (log {logfile})")
    with logfile.open("ab") as fh:
        subprocess.Popen(["dockerd", *DOCKERD_ARGS], stdout=fh, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if engine_running():
            return
        time.sleep(1)
    tail = logfile.read_text(errors="replace").splitlines()[-10:]
    raise ImageBuildError("dockerd did not come up; last log lines:\n" + "\n".join(tail))


def image_id(ref: str) -> str | None:
    proc = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref],
                          capture_output=True, text=True, check=False)  # fmt: skip
    return proc.stdout.strip() or None if proc.returncode == 0 else None


# --- the base image ---------------------------------------------------------------------------


def saved_archive(ref: str) -> Path:
    """``docker save`` of ``ref`` for a containerd to import, cached by image id (the newest
    one kept per repository)."""
    image = image_id(ref)
    if image is None:
        raise ImageBuildError(f"{ref} is not built: run `make images`")
    folder = cache_dir() / "images" / "archives"
    stem = ref.replace("/", "_").replace(":", "_")
    target = folder / f"{stem}-{image.removeprefix('sha256:')[:16]}.tar"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(f"{stem}-*.tar"):
        old.unlink()
    tmp = target.with_name(f".{target.name}.{os.getpid()}.partial")
    log(f"docker save {ref}")
    subprocess.run(["docker", "save", "-o", str(tmp), ref], check=True)
    tmp.replace(target)
    return target


def debian_mirror(etc: Path = debian.APT) -> str:
    try:
        return debian.debian_mirror(etc)
    except debian.NoMirrorError as exc:
        raise ImageBuildError(str(exc)) from exc


def base_stamp() -> Path:
    return cache_dir() / "images" / f"base-{SUITE}.json"


def base_key(mirror: str) -> str:
    return hashlib.sha256(f"{SUITE}\nminbase\n{mirror}".encode()).hexdigest()[:12]


def base_ready(mirror: str) -> bool:
    stamp = base_stamp()
    try:
        data = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return False
    return data.get("key") == base_key(mirror) and data.get("id") == image_id(BASE_IMAGE)


def build_base(force: bool = False) -> float:
    """debootstrap a minbase trixie root and import it as BASE_IMAGE; returns seconds spent."""
    mirror = debian_mirror()
    if not force and base_ready(mirror):
        log(f"{BASE_IMAGE}: cached ({base_stamp()})")
        return 0.0
    if shutil.which("debootstrap") is None:
        apt_install("debootstrap")
    start = time.monotonic()
    work = cache_dir() / "images"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work, prefix="base-") as tmp:
        root = Path(tmp) / "root"
        logfile = work / "debootstrap.log"
        log(f"{BASE_IMAGE}: debootstrap --variant=minbase {SUITE} (log {logfile})")
        with logfile.open("w") as fh:
            proc = subprocess.run(
                ["debootstrap", "--variant=minbase", SUITE, str(root), mirror],
                stdout=fh, stderr=subprocess.STDOUT, check=False,
            )  # fmt: skip
        _umount_under(root)
        if proc.returncode != 0:
            tail = logfile.read_text(errors="replace").splitlines()[-10:]
            raise ImageBuildError("debootstrap failed:\n" + "\n".join(tail))
        # Image hygiene: no apt lists or caches in the layer, no policy to start services.
        for sub in ("var/lib/apt/lists", "var/cache/apt/archives"):
            for entry in (root / sub).glob("*"):
                if entry.is_file():
                    entry.unlink()
        log(f"{BASE_IMAGE}: docker import")
        tar = subprocess.Popen(["tar", "-C", str(root), "--numeric-owner", "-c", "."],
                               stdout=subprocess.PIPE)  # fmt: skip
        imp = subprocess.run(
            ["docker", "import", "--change", 'CMD ["/bin/bash"]',
             "--change", "ENV LANG=C.UTF-8", "-", BASE_IMAGE],
            stdin=tar.stdout, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert tar.stdout is not None
        tar.stdout.close()
        if tar.wait() != 0 or imp.returncode != 0:
            raise ImageBuildError(f"docker import failed: {imp.stderr.strip()}")
        subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=False)
    stamp = {"key": base_key(mirror), "id": image_id(BASE_IMAGE), "suite": SUITE}
    base_stamp().write_text(json.dumps(stamp, indent=2) + "\n")
    return time.monotonic() - start


def _umount_under(path: Path) -> None:
    prefix = str(path.resolve())
    with open("/proc/self/mountinfo") as fh:
        mounts = [line.split()[4] for line in fh]
    for mnt in sorted((m for m in mounts if m == prefix or m.startswith(prefix + "/")),
                      key=len, reverse=True):  # fmt: skip
        subprocess.run(["umount", "-l", mnt], check=False)


# --- the operator's wheelhouse ----------------------------------------------------------------


def wheelhouse_key(repo: Path) -> str:
    """Hash of everything the wheelhouse is made from: unchanged sources reuse it, so the
    operator image's COPY layer (and everything after it) stays cached."""
    digest = hashlib.sha256(f"python{OPERATOR_PYTHON}\n".encode())
    files = [repo / "pyproject.toml", repo / "tools" / "constraints.txt"]
    files += sorted(
        p for p in (repo / "tools" / "sunk").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )  # fmt: skip
    for path in files:
        digest.update(str(path.relative_to(repo)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def wheelhouse(repo: Path) -> Path:
    """Wheels of the project and its dependencies for the operator image's Python, fetched on
    the host (through the host's pip configuration) so the image build needs no index."""
    out = repo / "build" / "images" / "wheelhouse"
    key = wheelhouse_key(repo)
    stamp = out.parent / "wheelhouse.key"
    if out.is_dir() and stamp.is_file() and stamp.read_text().strip() == key:
        log(f"operator wheelhouse: cached ({out})")
        return out
    shutil.rmtree(out, ignore_errors=True)
    stamp.unlink(missing_ok=True)
    out.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip"]
    log(f"operator wheelhouse for Python {OPERATOR_PYTHON} in {out}")
    subprocess.run([*pip, "wheel", "--quiet", "--no-deps", "-w", str(out), str(repo)],
                   check=True)  # fmt: skip
    wheel = next(out.glob("sunk-*.whl"))
    subprocess.run(
        [*pip, "download", "--quiet", "--only-binary=:all:", "--implementation", "cp",
         "--python-version", OPERATOR_PYTHON, "--platform", "manylinux_2_17_x86_64",
         "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64",
         "-c", str(repo / "tools" / "constraints.txt"), "-d", str(out),
         f"sunk[operator] @ {wheel.resolve().as_uri()}"],
        check=True,
    )  # fmt: skip
    stamp.write_text(key + "\n")
    return out


# --- building ---------------------------------------------------------------------------------


def build_command(spec: ImageSpec, repo: Path, no_cache: bool = False) -> list[str]:
    context = repo / spec.context if spec.context else repo
    dockerfile = context / "Dockerfile" if spec.context else f"images/{spec.name}/Dockerfile"
    cmd = [
        "docker",
        "build",
        "--network",
        "host",
        "--force-rm",
        "-f",
        str(dockerfile),
    ]
    cmd += ["-t", spec.ref]
    for key, value in sorted(spec.build_args.items()):
        cmd += ["--build-arg", f"{key}={value}"]
    if no_cache:
        cmd.append("--no-cache")
    return [*cmd, str(context)]


def build(names: list[str] | None = None, no_cache: bool = False) -> dict[str, float]:
    """Build the base and the named images (all by default); returns seconds per step."""
    specs = images() + variants_from_env()
    if names:
        known = specs + dev_images() + example_images()
        unknown = set(names) - {s.name for s in known}
        if unknown:
            raise ImageBuildError(
                f"unknown image(s) {sorted(unknown)}; known: images/*, "
                + ", ".join(s.name for s in example_images())
            )
        specs = [s for s in known if s.name in names]
    return build_specs(specs, no_cache)


def build_specs(specs: list[ImageSpec], no_cache: bool = False) -> dict[str, float]:
    """Build the base, then each of ``specs``; returns seconds per step."""
    repo = repo_root()
    ensure_engine()
    times = {"base": build_base()}
    for spec in specs:
        if spec.name == "operator":
            wheelhouse(repo)
        log(f"building {spec.ref}")
        start = time.monotonic()
        env = dict(os.environ, DOCKER_BUILDKIT="0")
        proc = subprocess.run(build_command(spec, repo, no_cache), env=env, check=False)
        if proc.returncode != 0:
            raise ImageBuildError(f"docker build of {spec.ref} failed ({proc.returncode})")
        times[spec.ref] = time.monotonic() - start
    return times


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    series = None
    if "--slurm" in args:
        at = args.index("--slurm")
        series = args[at + 1] if at + 1 < len(args) else ""
        del args[at : at + 2]
    if not args or args[0] not in {"build", "tags", "engine"}:
        print("usage: python -m sunk.devenv.images build [--no-cache] [--slurm SERIES] [NAME ...]"
              " | tags [--slurm SERIES] | engine", file=sys.stderr)  # fmt: skip
        return 2
    try:
        release = release_images(series) if series is not None else None
        if args[0] == "tags":
            for spec in release or images() + variants_from_env():
                print(spec.ref)
            return 0
        if args[0] == "engine":
            ensure_engine()
            return 0
        rest = args[1:]
        no_cache = "--no-cache" in rest
        names = [a for a in rest if a != "--no-cache"]
        start = time.monotonic()
        if release is not None:
            times = build_specs([s for s in release if not names or s.name in names], no_cache)
        else:
            times = build(names or None, no_cache=no_cache)
    except (ImageBuildError, subprocess.CalledProcessError) as exc:
        print(f"images: error: {exc}", file=sys.stderr)
        return 3
    for step, seconds in times.items():
        log(f"{seconds:7.1f}s  {step}")
    log(f"{time.monotonic() - start:7.1f}s  total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
