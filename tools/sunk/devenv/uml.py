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
import os
import signal
import subprocess
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
    mem: str = "512M"
    kernel: Path = field(default_factory=kernel_path)
    proc: subprocess.Popen | None = None

    def argv(self) -> list[str]:
        return [
            "ip", "netns", "exec", self.netns,
            str(self.kernel), f"mem={self.mem}", "root=/dev/root", "rootfstype=hostfs",
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

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self, tail: int = 60) -> str:
        try:
            lines = self.console.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-tail:])

    def stop(self) -> None:
        """End the kernel and its helper processes (one process group)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        self.proc = None
