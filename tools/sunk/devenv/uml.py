"""User-mode Linux: a cgroup v2 kernel that runs as an ordinary process.

These machines boot cgroup v1 and have no nested virtualization, yet every current Kubernetes
node runs cgroup v2. Debian's ``user-mode-linux`` kernel (6.1) boots from a host directory
(``rootfstype=hostfs``) in about two seconds and mounts ``cgroup2`` with the controllers
``cpu io memory pids`` (one CPU, so no ``cpuset``). The package is unpacked into the cache,
pinned, never installed system-wide.

``UmlMachine`` boots one such kernel on a root directory with an init script of the caller's,
its ``eth0`` a TAP device in a network namespace the caller owns; its console goes to a log
file. Its helper processes are one process group: ``stop`` ends them all. Found here:
- glibc's ``getaddrinfo`` (AI_ADDRCONFIG) ignores loopback: a machine without another IPv4
  address cannot bind Slurm's ports, so ``eth0`` always gets one;
- files that a non-root user creates on hostfs belong to root on the host: daemons that check
  their files' owner (munged) keep them on a tmpfs inside the machine;
- fork+exec and page faults are 30 to 50 times slower than on the host: what runs inside must
  be small.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sunk.devenv.paths import cache_dir

PACKAGE = "user-mode-linux"
VERSION = "6.1um4+b13"  # Debian bookworm's; the kernel is 6.1
INSTALL_HINT = "python -m sunk.devenv.toolchain install uml"


class UmlError(RuntimeError):
    pass


def kernel_path() -> Path:
    return cache_dir() / "uml" / VERSION / "usr" / "bin" / "linux.uml"


def installed() -> Path | None:
    kernel = kernel_path()
    return kernel if kernel.is_file() and os.access(kernel, os.X_OK) else None


def description() -> str:
    return f"user-mode Linux {VERSION} (Debian's {PACKAGE}, unpacked): the cgroupv2 tier's kernel"


def install() -> Path:
    """Download the pinned package with apt and unpack it into the cache; idempotent."""
    found = installed()
    if found is not None:
        return found
    target = kernel_path().parents[2]
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        download = _download(tmp)
        if download.returncode != 0 and os.geteuid() == 0:
            # a fresh machine's package lists may not name it yet
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, check=False)
            download = _download(tmp)
        debs = list(Path(tmp).glob("*.deb"))
        if download.returncode != 0 or not debs:
            raise UmlError(
                f"apt-get download {PACKAGE}={VERSION} failed: "
                f"{(download.stderr or download.stdout).strip()[-500:]}"
            )
        staging = Path(tmp) / "root"
        unpack = subprocess.run(
            ["dpkg-deb", "-x", str(debs[0]), str(staging)], capture_output=True, text=True,
            check=False,
        )  # fmt: skip
        if unpack.returncode != 0:
            raise UmlError(f"dpkg-deb -x {debs[0].name} failed: {unpack.stderr.strip()}")
        staging.rename(target)
    if installed() is None:
        raise UmlError(f"{kernel_path()} missing after unpacking {PACKAGE} {VERSION}")
    return kernel_path()


def _download(directory: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["apt-get", "download", f"{PACKAGE}={VERSION}"],
        cwd=directory, capture_output=True, text=True, check=False,
    )  # fmt: skip


@dataclass
class UmlMachine:
    """One user-mode Linux kernel on ``root`` (a host directory), running ``init`` (a path
    inside ``root``) as PID 1, its ``eth0`` the TAP device ``tap`` of network namespace
    ``netns``; console output to ``console``."""

    name: str
    root: Path
    init: str
    netns: str
    tap: str
    console: Path
    state_dir: Path  # UML's own files (its umid directory)
    mem_mib: int = 512
    kernel: Path = field(default_factory=kernel_path)
    proc: subprocess.Popen | None = None

    def argv(self) -> list[str]:
        return [
            "ip", "netns", "exec", self.netns,
            str(self.kernel), f"mem={self.mem_mib}M", "root=/dev/root", "rootfstype=hostfs",
            f"hostfs={self.root}", "rw", f"init={self.init}", f"umid={self.name}",
            f"uml_dir={self.state_dir}", "con=null", "con0=fd:0,fd:1", "quiet",
            f"eth0=tuntap,{self.tap}",
        ]  # fmt: skip

    def start(self) -> None:
        if self.proc is not None:
            raise UmlError(f"{self.name}: already started")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        # UML backs the machine's memory with a file in TMPDIR: keep it with the run
        env = dict(os.environ, TMPDIR=str(self.state_dir))
        with self.console.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, env=env,
            )  # fmt: skip

    def stop(self) -> None:
        """End the kernel and its helper processes (one process group)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        self.proc = None


def unpack_image(archive: Path, rootfs: Path) -> None:
    """A ``docker save`` archive's layers, in order, into ``rootfs`` (OCI whiteouts applied):
    a container's root filesystem for runc."""
    rootfs.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as outer:
        manifest = json.load(outer.extractfile("manifest.json"))  # type: ignore[arg-type]
        for layer_name in manifest[0]["Layers"]:
            with tarfile.open(fileobj=outer.extractfile(layer_name)) as layer:
                keep = []
                for member in layer:
                    parent, base = os.path.split(member.name)
                    if base == ".wh..wh..opq":  # opaque: the lower layers' entries go
                        directory = rootfs / parent
                        for entry in directory.iterdir() if directory.is_dir() else ():
                            _remove(entry)
                        continue
                    if base.startswith(".wh."):
                        _remove(rootfs / parent / base[4:])
                        continue
                    path = rootfs / member.name
                    if path.is_symlink() or (
                        path.exists() and not (member.isdir() and path.is_dir())
                    ):
                        _remove(path)
                    keep.append(member)
                layer.extractall(rootfs, members=keep, numeric_owner=True, filter="fully_trusted")


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def pod_container_spec(
    args: list[str],
    env: dict[str, str],
    capabilities: list[str],
    *,
    hostname: str,
    cgroups_path: str,
    memory: int,
    cpus: int,
    hosts: str,
    gpus: int = 0,
) -> dict:
    """An OCI runtime spec for one container of a Pod, as containerd writes it on a cgroup v2
    node for a container that is not privileged: its own pid, ipc, uts, mount and cgroup
    namespaces, the cgroup filesystem and /sys mounted read-only, only ``capabilities``, the
    limits in ``cgroups_path``, /proc paths masked. It shares the machine's network (the
    Pod's network namespace is not what is tested). tmpfs stands in for the container's
    writable layer where slurmd keeps sockets (hostfs cannot hold them); /run/munge is the
    machine's, as the Pod's volume shared with its munge sidecar. ``gpus`` stand-in GPUs
    (/dev/nvidia<i>, major 195) are passed in as a device plugin has containerd do: the node
    and a cgroup rule allowing it."""
    caps = [f"CAP_{c}" for c in capabilities]
    tmpfs = ["nosuid", "nodev"]
    return {
        "ociVersion": "1.1.0",
        "process": {
            "terminal": False,
            "user": {"uid": 0, "gid": 0},
            "args": args,
            "env": [f"{k}={v}" for k, v in env.items()],
            "cwd": "/",
            "capabilities": {"bounding": caps, "effective": caps, "permitted": caps},
            "noNewPrivileges": False,
        },
        "root": {"path": "rootfs", "readonly": False},
        "hostname": hostname,
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc",
             "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
             "options": [*tmpfs, "mode=1777", "size=65536k"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs",
             "options": ["nosuid", "noexec", "nodev", "ro"]},
            {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
             "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]},
            {"destination": "/run", "type": "tmpfs", "source": "tmpfs",
             "options": [*tmpfs, "mode=755"]},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
             "options": [*tmpfs, "mode=1777"]},
            {"destination": "/var/spool/slurmd", "type": "tmpfs", "source": "tmpfs",
             "options": [*tmpfs, "mode=755"]},
            {"destination": "/run/munge", "type": "bind", "source": "/run/munge",
             "options": ["rbind", "rprivate", "rw"]},
            {"destination": "/etc/hosts", "type": "bind", "source": hosts,
             "options": ["rbind", "rprivate", "ro"]},
        ],
        "linux": {
            "cgroupsPath": cgroups_path,
            "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount", "cgroup")],
            "devices": [
                {"path": f"/dev/nvidia{i}", "type": "c", "major": 195, "minor": i,
                 "fileMode": 0o666, "uid": 0, "gid": 0}
                for i in range(gpus)
            ],
            "resources": {
                "devices": [
                    {"allow": False, "access": "rwm"},
                    *({"allow": True, "type": "c", "major": 195, "minor": i, "access": "rwm"}
                      for i in range(gpus)),
                ],
                "memory": {"limit": memory, "swap": memory},
                "cpu": {"shares": 1024 * cpus, "quota": 100000 * cpus, "period": 100000},
            },
            "maskedPaths": ["/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                            "/proc/timer_list", "/proc/sched_debug", "/sys/firmware"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
                              "/proc/sysrq-trigger"],
        },
    }  # fmt: skip
