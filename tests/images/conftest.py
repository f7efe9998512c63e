"""Fixtures of the `images` tier: entrypoint scripts run with bash directly (dry-run mode, paths
under tmp_path), a munge socket stand-in and a TCP listener on loopback."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "images"


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str

    @property
    def exec_argv(self) -> list[str]:
        """The final command the entrypoint would exec (its `exec:` dry-run line)."""
        lines = [ln for ln in self.stdout.splitlines() if ln.startswith("exec:")]
        assert len(lines) == 1, (self.stdout, self.stderr)
        # printf %q quoting is bash's; shlex reads the forms it produces for these arguments.
        return shlex.split(lines[0][len("exec:") :])

    @property
    def actions(self) -> list[str]:
        return [ln[2:] for ln in self.stdout.splitlines() if ln.startswith("+ ")]


@pytest.fixture
def munge_socket(tmp_path: Path):
    """A listening unix socket where the entrypoint waits for munged's."""
    path = tmp_path / "munge" / "munge.socket.2"
    path.parent.mkdir()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(1)
    yield path
    sock.close()


@pytest.fixture
def tcp_listener():
    """A TCP listener on 127.0.0.1 (an ephemeral port) standing in for slurmctld."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield sock.getsockname()[1]
    sock.close()


def closed_port() -> int:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.fixture
def base_env(tmp_path: Path, munge_socket: Path) -> dict[str, str]:
    key = tmp_path / "munge-secret" / "munge.key"
    key.parent.mkdir()
    key.write_bytes(b"k" * 64)
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "SUNK_DRY_RUN": "1",
        "SUNK_LIB": str(IMAGES / "common" / "sunk-lib.sh"),
        "SUNK_MUNGE_KEY_SOURCE": str(key),
        "SUNK_MUNGE_KEY": str(tmp_path / "etc-munge" / "munge.key"),
        "SUNK_MUNGE_SOCKET": str(munge_socket),
        "SUNK_MUNGE_TIMEOUT": "2",
        # s6 services: never the host's paths
        "SUNK_S6_DIR": str(tmp_path / "s6"),
        "SUNK_S6_RUN": str(tmp_path / "run-s6"),
        "SUNK_STARTED": str(tmp_path / "run-sunk" / "started"),
        "SUNK_STARTUP_FAILED": str(tmp_path / "run-sunk" / "startup-failed"),
        "SUNK_TERMINATION_LOG": str(tmp_path / "termination-log"),
        "SUNK_MOUNTS": "/dev/null",  # slurmd: never the host's mounts
    }


@pytest.fixture
def entrypoint(base_env):
    def _run(image: str, *args: str, env: dict[str, str] | None = None, timeout=30) -> Result:
        proc = subprocess.run(
            ["bash", str(IMAGES / image / "entrypoint.sh"), *args],
            env={**base_env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return _run


@pytest.fixture
def etc(tmp_path: Path) -> Path:
    path = tmp_path / "etc-slurm"
    path.mkdir()
    (path / "slurm.conf").write_text("ClusterName=test\n")
    return path


@pytest.fixture
def login_env(tmp_path: Path, etc: Path) -> dict[str, str]:
    ssh = tmp_path / "ssh"
    ssh.mkdir()
    nsswitch = tmp_path / "nsswitch.conf"  # never the host's
    nsswitch.write_text("passwd: files\n")
    return {
        "SUNK_NSSWITCH": str(nsswitch),
        "SUNK_ETC": str(etc),
        "SUNK_SSH_DIR": str(ssh),
        "SUNK_SSH_HOST_KEYS_SOURCE": str(tmp_path / "no-secret"),
        "SUNK_MOTD": str(tmp_path / "motd"),
        "SUNK_NSSCACHE_CONF": str(tmp_path / "no-nsscache.conf"),
        "SUNK_RUN_SSHD_DIR": str(tmp_path / "run-sshd"),
    }
