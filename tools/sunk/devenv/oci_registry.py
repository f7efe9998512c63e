"""A throwaway OCI registry on loopback for the chart publishing tests.

The ``registry`` toolchain component (go-containerregistry's ``cmd/registry``) keeps
everything in memory and listens on ``localhost:<port>``. Started with port 0 it picks a free
port itself and logs it, so there is no race between choosing a port and binding it. We then
check that it listens on 127.0.0.1 only (``/proc/net/tcp``): a registry that anyone on the
network could push to must never be left running.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from sunk.devenv.paths import tool_path

INSTALL_HINT = "python -m sunk.devenv.toolchain install registry"
HOST = "127.0.0.1"
_SERVING = re.compile(rb"serving on port (\d+)")


class RegistryError(RuntimeError):
    """The registry did not start, or listens where it must not."""


def listen_addresses(port: int) -> set[str]:
    """Local addresses (hex, as in /proc/net/tcp*) of the sockets listening on ``port``."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            address, hex_port = fields[1].rsplit(":", 1)
            if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


LOOPBACK_V4 = "0100007F"  # 127.0.0.1, little-endian hex


class OciRegistry:
    """``with OciRegistry() as reg:`` serves ``reg.host`` (``127.0.0.1:PORT``) until exit."""

    def __init__(self, binary: Path | None = None, log_path: Path | None = None) -> None:
        found = binary or tool_path("registry")
        if found is None:
            raise RegistryError(f"registry not installed: run `{INSTALL_HINT}`")
        self.binary = Path(found)
        self.log_path = log_path
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"{HOST}:{self.port}"

    def __enter__(self) -> OciRegistry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 20.0) -> OciRegistry:
        self._proc = subprocess.Popen(
            [str(self.binary), "-port", "0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            self.port = self._read_port(timeout)
            addresses = listen_addresses(self.port)
            if addresses != {LOOPBACK_V4}:
                raise RegistryError(
                    f"registry on port {self.port} listens on {sorted(addresses)}, "
                    f"not on {HOST} only"
                )
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _read_port(self, timeout: float) -> int:
        """The port from the registry's first log line ("serving on port N")."""
        assert self._proc is not None and self._proc.stderr is not None
        fd = self._proc.stderr.fileno()
        deadline = time.monotonic() + timeout
        head = b""
        while b"\n" not in head:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RegistryError(f"registry: no port logged within {timeout:.0f} s")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RegistryError(f"registry exited before serving (rc {self._proc.wait()})")
            head += chunk
        match = _SERVING.search(head)
        if match is None:
            raise RegistryError(f"registry: unexpected first log line {head!r}")
        self._keep_log(head, fd)
        return int(match.group(1))

    def _keep_log(self, head: bytes, fd: int) -> None:
        """Copy the registry's log to ``log_path`` (or discard it) in a thread, so a full pipe
        never blocks the registry."""
        log_path = self.log_path

        def copy() -> None:
            out = log_path.open("ab") if log_path else None
            try:
                if out:
                    out.write(head)
                while chunk := os.read(fd, 1 << 16):
                    if out:
                        out.write(chunk)
                        out.flush()
            except OSError:
                pass
            finally:
                if out:
                    out.close()

        threading.Thread(target=copy, name="oci-registry-log", daemon=True).start()

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://{self.host}/v2/"
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError) as exc:
                if time.monotonic() > deadline:
                    raise RegistryError(f"registry at {url} not answering: {exc}") from exc
            time.sleep(0.1)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
