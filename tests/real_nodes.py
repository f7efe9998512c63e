"""Real nodes for the ``e2e`` and ``faults`` tiers: kubelet + containerd + runc + CNI +
kube-proxy + CoreDNS from the toolchain (``sunk.devenv.nodes``), our images from
``make images``. One cluster for the whole session, shared by both tiers (``tests/conftest.py``
registers the fixture); its teardown is checked to leave nothing behind."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sunk.devenv import deploy
from sunk.devenv.nodes import INSTALL_HINT, NodeCluster, missing_prerequisites

NODES = 2


def _skip_reason() -> str | None:
    missing = missing_prerequisites()
    if missing:
        return f"real nodes need {', '.join(missing)}: run `{INSTALL_HINT}` as root"
    return None


def _host_iptables() -> str:
    proc = subprocess.run(["iptables-save"], capture_output=True, text=True, check=False)
    # counters change with traffic; the rules are what must not change
    return "\n".join(line for line in proc.stdout.splitlines() if not line.startswith(("#", ":")))


@pytest.fixture(scope="session")
def real_nodes() -> Iterator[NodeCluster]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    archives = deploy.image_archives()
    rules_before = _host_iptables()
    # each release keeps its controller state volume (Retain): room for every tier's releases
    cluster = NodeCluster(nodes=NODES, images=archives, progress=True, volumes=12)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
    left = cluster.leftovers()
    assert not left, f"teardown left: {left}"
    assert _host_iptables() == rules_before, "the host's iptables rules changed"


def host_pid(pod: dict, process: str) -> int:
    """The host pid of ``process`` in ``pod`` (kubelet's cgroupfs paths name the Pod's uid)."""
    uid = pod["metadata"]["uid"]
    marks = (f"pod{uid}", f"pod{uid.replace('-', '_')}")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            cgroup = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            continue
        if comm == process and any(m in cgroup for m in marks):
            return int(pid)
    raise AssertionError(f"no {process} process in Pod {pod['metadata']['name']}")
