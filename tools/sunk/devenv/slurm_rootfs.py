"""The ``slurm`` toolchain components: Debian roots with Slurm's daemons, one per release we
run: trixie's Slurm 24.11 (``slurm``, what the images ship) and forky's 26.05 (``slurm-26.05``,
the release the slurm tier upgrades to).

The root is built once with ``debootstrap`` into ``cache_dir()/slurm-rootfs/<key>/root`` where the
key is the suite plus a hash of the pinned package list; ``<key>/stamp.json`` is written last, so a
root without a stamp is a half-built one and is rebuilt from scratch.  The cached root is never
modified by tests: :mod:`sunk.devenv.slurm_runtime` mounts an overlay over it per run.

The Debian mirror is read from the host's apt sources at run time (``$SUNK_DEBIAN_MIRROR``
overrides it), so no registry host is named here.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sunk.devenv import debian
from sunk.devenv.paths import cache_dir

SUITE = "trixie"
VARIANT = "minbase"
# The package set the root is built from (names only; debootstrap resolves the suite's versions).
# slurm-wlm pulls slurmctld, slurmd and the client commands; the rest are the daemons and tools the
# runtime starts or needs inside the root.
PACKAGES: tuple[str, ...] = (
    "slurm-wlm",
    "slurmrestd",
    "slurmdbd",
    "slurm-wlm-jwt-plugin",  # auth/jwt (AuthAltTypes), as in our images
    "munge",
    "mariadb-server",
    "iproute2",
    "procps",
    "python3",  # the health check runner (sunk.health.runner), as in the slurmd image
)
SLURM_SERIES = "24.11"
STAMP = "stamp.json"


@dataclass(frozen=True)
class Release:
    """A Slurm release series and the Debian suite that carries it; ``script`` is the
    debootstrap script to use where the host's debootstrap predates the suite."""

    series: str
    suite: str
    script: str | None = None


RELEASES = {
    "24.11": Release("24.11", "trixie"),
    "26.05": Release("26.05", "forky", script="sid"),  # bookworm's debootstrap has no forky
}
NEXT_SERIES = "26.05"


def release_of(suite: str) -> Release:
    for release in RELEASES.values():
        if release.suite == suite:
            return release
    raise SlurmRootfsError(f"no Slurm release is built from Debian {suite}")


# trixie's libmariadb3 (1:11.8.x, MariaDB Connector/C 3.4.10) breaks slurmdbd 24.11.5: its first
# query fails with "mysql_query failed: 5027 Number of columns in result (=1) set execeeds
# maxmimum allowed number of columns (=0)" and slurmdbd exits with "fatal:
# _check_mysql_concat_is_sane: null result from query `select @var := concat('');`".  The
# bookworm connector (3.3.x) works; it is unpacked beside the system one and only slurmdbd is
# pointed at it (LD_LIBRARY_PATH=MARIADB_COMPAT_DIR, see slurm_runtime).
MARIADB_COMPAT_SUITE = "bookworm"
MARIADB_COMPAT_PACKAGE = "libmariadb3"
MARIADB_COMPAT_DIR = "/opt/sunk/mariadb-compat/lib"


class SlurmRootfsError(RuntimeError):
    """The Slurm root could not be built or is unusable; the message says why."""


@dataclass(frozen=True)
class SlurmRootfs:
    """A completed root: its directory and what was recorded when it was built."""

    root: Path
    slurm_version: str
    suite: str
    packages: tuple[str, ...]


def rootfs_key(suite: str = SUITE, packages: tuple[str, ...] = PACKAGES) -> str:
    parts = [VARIANT, *sorted(packages), f"compat:{MARIADB_COMPAT_PACKAGE}/{MARIADB_COMPAT_SUITE}"]
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]
    return f"{suite}-{digest}"


def rootfs_dir(suite: str = SUITE, packages: tuple[str, ...] = PACKAGES) -> Path:
    return cache_dir() / "slurm-rootfs" / rootfs_key(suite, packages)


def installed(suite: str = SUITE, packages: tuple[str, ...] = PACKAGES) -> SlurmRootfs | None:
    """The completed root for this package set, or None if it is missing or half-built."""
    base = rootfs_dir(suite, packages)
    stamp = base / STAMP
    if not stamp.is_file():
        return None
    try:
        data = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return None
    root = base / "root"
    # Absolute symlinks (Debian alternatives) inside the root: check the link, not its target.
    if not os.path.lexists(root / "usr/sbin/slurmctld"):
        return None
    return SlurmRootfs(
        root=root,
        slurm_version=data.get("slurm_version", ""),
        suite=data.get("suite", suite),
        packages=tuple(data.get("packages", packages)),
    )


# --- the Debian mirror, from the host's apt configuration -----------------------------------


def debian_mirror(etc: Path = debian.APT) -> str:
    """The Debian archive URI the host's apt uses for its main suites."""
    try:
        return debian.debian_mirror(etc)
    except debian.NoMirrorError as exc:
        raise SlurmRootfsError(str(exc)) from exc


# --- building ---------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[toolchain] slurm: {message}", file=sys.stderr, flush=True)


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path.resolve())
    found = []
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            mnt = line.split()[4].replace("\\040", " ")
            if mnt == prefix or mnt.startswith(prefix + "/"):
                found.append(mnt)
    return found


def _remove_tree(path: Path) -> None:
    """Remove a (half-built) root, first unmounting anything a killed debootstrap left there."""
    if not path.exists():
        return
    for mnt in sorted(_mounts_under(path), key=len, reverse=True):
        subprocess.run(["umount", "-l", mnt], check=False)
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=True)


def _ensure_debootstrap() -> str:
    found = shutil.which("debootstrap")
    if found:
        return found
    if os.geteuid() != 0:
        raise SlurmRootfsError(
            "debootstrap is not installed (apt-get install debootstrap, as root)"
        )
    log("installing debootstrap on the host (apt-get)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "debootstrap"]):
        if subprocess.run(cmd, env=env, check=False).returncode != 0:
            raise SlurmRootfsError(f"command failed: {' '.join(cmd)}")
    found = shutil.which("debootstrap")
    if not found:
        raise SlurmRootfsError("debootstrap still not found after apt-get install")
    return found


def dpkg_version(root: Path, package: str) -> str | None:
    proc = subprocess.run(
        ["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W", "-f=${Version}", package],
        capture_output=True,
        text=True,
        check=False,
    )
    return proc.stdout.strip() or None if proc.returncode == 0 else None


def _check_version(version: str | None, release: Release = RELEASES[SLURM_SERIES]) -> str:
    if not version:
        raise SlurmRootfsError("slurm-wlm is not installed in the built root (dpkg-query)")
    upstream = version.split(":", 1)[-1]
    if not upstream.startswith(release.series + "."):
        raise SlurmRootfsError(
            f"the {release.suite} root has Slurm {version}; this runtime needs {release.series}.x"
        )
    return version


def _install_mariadb_compat(root: Path, mirror: str, base: Path) -> str:
    """Unpack the bookworm MariaDB client library into MARIADB_COMPAT_DIR; returns its version."""
    scratch = root / "tmp/sunk-compat"
    shutil.rmtree(scratch, ignore_errors=True)
    (scratch / "lists/partial").mkdir(parents=True)
    (scratch / "sources.list").write_text(f"deb {mirror} {MARIADB_COMPAT_SUITE} main\n")
    inside = "/tmp/sunk-compat"
    apt_opts = [
        f"-oDir::Etc::SourceList={inside}/sources.list",
        "-oDir::Etc::SourceParts=-",
        f"-oDir::State::Lists={inside}/lists",
        f"-oDir::Cache={inside}/cache",
        "-oAPT::Sandbox::User=root",
        "-qq",
    ]
    with (base / "compat.log").open("w") as fh:
        for cmd in (
            ["apt-get", *apt_opts, "update"],
            ["sh", "-c", f"cd {inside} && apt-get {' '.join(apt_opts)} download "
             f"{MARIADB_COMPAT_PACKAGE}/{MARIADB_COMPAT_SUITE}"],
        ):  # fmt: skip
            proc = subprocess.run(
                ["chroot", str(root), *cmd], stdout=fh, stderr=subprocess.STDOUT, check=False
            )
            if proc.returncode != 0:
                raise SlurmRootfsError(
                    f"fetching {MARIADB_COMPAT_PACKAGE} from {MARIADB_COMPAT_SUITE} failed; "
                    f"log {base / 'compat.log'}"
                )
    debs = sorted(scratch.glob(f"{MARIADB_COMPAT_PACKAGE}_*.deb"))
    if not debs:
        raise SlurmRootfsError(f"{MARIADB_COMPAT_PACKAGE} .deb not downloaded")
    unpacked = scratch / "x"
    subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(unpacked)], check=True)
    version = subprocess.run(
        ["dpkg-deb", "-f", str(debs[0]), "Version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    libs = list(unpacked.glob("usr/lib/*/libmariadb.so.3"))
    if not libs:
        raise SlurmRootfsError(f"libmariadb.so.3 not found in {debs[0].name}")
    target = root / MARIADB_COMPAT_DIR.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(libs[0], target / "libmariadb.so.3")
    shutil.rmtree(scratch, ignore_errors=True)
    return version


def install(suite: str = SUITE, packages: tuple[str, ...] = PACKAGES) -> SlurmRootfs:
    """Build the root unless a completed one is cached; idempotent."""
    release = release_of(suite)
    done = installed(suite, packages)
    if done is not None:
        _check_version(done.slurm_version, release)
        log(f"cached root {done.root} (Slurm {done.slurm_version})")
        return done
    if os.geteuid() != 0:
        raise SlurmRootfsError("building the Slurm root needs root (debootstrap, chroot)")
    debootstrap = _ensure_debootstrap()
    base = rootfs_dir(suite, packages)
    _remove_tree(base)
    base.mkdir(parents=True)
    root = base / "root"
    mirror = debian_mirror()
    log(f"debootstrap {suite} ({len(packages)} packages) into {root}")
    cmd = [
        debootstrap,
        f"--variant={VARIANT}",
        f"--include={','.join(packages)}",
        suite,
        str(root),
        mirror,
        *([f"/usr/share/debootstrap/scripts/{release.script}"] if release.script else []),
    ]
    with (base / "debootstrap.log").open("w") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, check=False)
    # debootstrap mounts /proc and /sys in the target; make sure none survives a failure.
    for mnt in sorted(_mounts_under(root), key=len, reverse=True):
        subprocess.run(["umount", "-l", mnt], check=False)
    if proc.returncode != 0:
        tail = (base / "debootstrap.log").read_text(errors="replace").splitlines()[-15:]
        raise SlurmRootfsError(
            f"debootstrap failed ({proc.returncode}); log {base / 'debootstrap.log'}:\n"
            + "\n".join(tail)
        )
    version = _check_version(dpkg_version(root, "slurm-wlm"), release)
    compat_version = _install_mariadb_compat(root, mirror, base)
    # Nothing in the root should start services or keep state from the build.
    for leftover in ("etc/munge/munge.key",):
        (root / leftover).unlink(missing_ok=True)
    versions = {p: dpkg_version(root, p) for p in (*packages, "slurmctld", "slurmd", "munge")}
    stamp = {
        "suite": suite,
        "variant": VARIANT,
        "packages": list(packages),
        "slurm_version": version,
        "versions": versions,
        "mariadb_compat": {
            "package": MARIADB_COMPAT_PACKAGE,
            "suite": MARIADB_COMPAT_SUITE,
            "version": compat_version,
            "dir": MARIADB_COMPAT_DIR,
        },
    }
    tmp = base / (STAMP + ".tmp")
    tmp.write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n")
    tmp.replace(base / STAMP)
    log(f"built {root} (Slurm {version})")
    done = installed(suite, packages)
    assert done is not None
    return done
