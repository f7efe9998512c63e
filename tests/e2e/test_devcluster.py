"""`sunkctl dev`'s lifecycle on a real node: a detached cluster is found again, a broken one is
torn down and rebuilt, and `down` leaves nothing behind, run twice or not."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from sunk.devenv import devcluster
from sunk.devenv.nodes import NodeCluster, missing_prerequisites


@pytest.fixture
def workdir(tmp_path: Path):
    missing = missing_prerequisites()
    if missing:
        pytest.skip(f"real nodes need {', '.join(missing)}")
    yield tmp_path / "dev"
    devcluster.down(tmp_path / "dev")


def test_detached_cluster_is_reused_and_a_broken_one_rebuilt(workdir: Path):
    cluster = NodeCluster(1, workdir=workdir)
    cluster.start()
    cluster.detach()

    said: list[str] = []
    again = devcluster._running_cluster(workdir, said.append)
    assert again is not None and again.healthy(), said
    assert "reusing" in said[-1]

    # a crash: the API server dies under the detached cluster
    apiserver = next(
        int(pid)
        for pid in os.listdir("/proc")
        if pid.isdigit()
        and str(workdir) in _cmdline(pid)
        and "kube-apiserver" in _cmdline(pid).split(" ", 1)[0]
    )
    os.kill(apiserver, signal.SIGKILL)
    said.clear()
    assert devcluster._running_cluster(workdir, said.append) is None
    assert "not healthy" in said[-1]
    assert again.leftovers() == []
    assert not (workdir / "nodes.json").exists()
    assert "no development cluster" in devcluster.status(workdir)


def test_down_twice_is_harmless(workdir: Path):
    cluster = NodeCluster(1, workdir=workdir)
    cluster.start()
    cluster.detach()
    assert ": healthy;" in devcluster.status(workdir)
    devcluster.down(workdir)
    devcluster.down(workdir)
    assert cluster.leftovers() == []


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
