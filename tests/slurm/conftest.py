"""Fixtures for the ``slurm`` tier: real Slurm 24.11 daemons from the debootstrapped trixie root.

Every test in this directory gets the ``slurm`` marker.  Without root or without the built root
the tests skip, naming the install command.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sunk.devenv import slurm_rootfs
from sunk.devenv.controlplane import INSTALL_HINT as CP_HINT
from sunk.devenv.controlplane import missing_binaries
from sunk.devenv.slurm_runtime import SlurmRuntime

DATA = Path(__file__).resolve().parent / "data"
INSTALL_HINT = "python -m sunk.devenv.toolchain install slurm"

# The hand-written test cluster: three dynamic nodes in two node groups (features).
NODES = {
    "cpu-0": ("Features=cpu CPUs=2 RealMemory=1000", 0),
    "cpu-1": ("Features=cpu CPUs=2 RealMemory=1000", 0),
    "gpu-0": ("Features=gpu CPUs=2 RealMemory=1000 Gres=gpu:h100:2", 2),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.slurm)


@pytest.fixture(scope="session")
def slurm_rootfs_path() -> Path:
    """The cached trixie root with Slurm 24.11 (skips without root or without the root)."""
    if os.geteuid() != 0:
        pytest.skip(
            f"the slurm tier needs root (mounts, namespaces, chroot); then `{INSTALL_HINT}`"
        )
    found = slurm_rootfs.installed()
    if found is None:
        pytest.skip(f"Slurm root not built: run `{INSTALL_HINT}` (or `make setup`)")
    return found.root


@pytest.fixture(scope="session")
def slurm_nodes() -> dict[str, tuple[str, int]]:
    """The test cluster's nodes: name -> (slurmd --conf string, GPU count)."""
    return dict(NODES)


@pytest.fixture(scope="session")
def slurm_data() -> Path:
    """Directory of the hand-written test configs (slurm.conf with @PLACEHOLDERS@)."""
    return DATA


def render_test_config(
    rt: SlurmRuntime,
    *,
    accounting: bool = False,
    topology_plugin: str | None = None,
    topology: str | None = None,
) -> dict[str, str]:
    """The test cluster's config files, filled in with the runtime's controller address."""

    def fill(text: str) -> str:
        return text.replace("@CONTROLLER_HOST@", rt.controller_host).replace(
            "@CONTROLLER_ADDR@", rt.controller_addr
        )

    extra = []
    if accounting:
        extra += [
            "AccountingStorageType=accounting_storage/slurmdbd",
            f"AccountingStorageHost={rt.accounting_host}",
            "JobAcctGatherType=jobacct_gather/linux",
        ]
    if topology_plugin:
        extra.append(f"TopologyPlugin={topology_plugin}")
    slurm_conf = (DATA / "slurm.conf").read_text()
    if accounting:
        slurm_conf = slurm_conf.replace("JobAcctGatherType=jobacct_gather/none\n", "")
    files = {
        "slurm.conf": fill(slurm_conf.replace("@ACCOUNTING@", "\n".join(extra))),
        "cgroup.conf": (DATA / "cgroup.conf").read_text(),
        "gres.conf": (DATA / "gres.conf").read_text(),
    }
    if accounting:
        files["slurmdbd.conf"] = fill((DATA / "slurmdbd.conf").read_text())
    if topology is not None:
        files["topology.conf"] = topology
    return files


@pytest.fixture(scope="session")
def slurm_config() -> Callable[..., dict[str, str]]:
    """``slurm_config(rt, accounting=..., topology_plugin=..., topology=...)`` -> files."""
    return render_test_config


@pytest.fixture
def slurm_runtime(slurm_rootfs_path: Path) -> Iterator[SlurmRuntime]:
    """A fresh, not yet started runtime; closed (daemons, namespaces, mounts) after the test."""
    rt = SlurmRuntime(slurm_rootfs_path)
    try:
        yield rt
    finally:
        rt.close()


@pytest.fixture(scope="module")
def slurm_cluster(slurm_rootfs_path: Path) -> Iterator[SlurmRuntime]:
    """One started cluster per module: accounting (MariaDB + slurmdbd), topology/tree with
    ``data/topology.conf`` and the three dynamic nodes of ``NODES``, all idle."""
    rt = SlurmRuntime(slurm_rootfs_path)
    try:
        files = render_test_config(
            rt,
            accounting=True,
            topology_plugin="topology/tree",
            topology=(DATA / "topology.conf").read_text(),
        )
        rt.start(files, munge_key=secrets.token_bytes(128))
        for name, (conf, gpus) in NODES.items():
            rt.add_node(name, conf, gpus=gpus)
        rt.wait_nodes_idle(NODES, timeout=180)
        # topology/tree resolves switch node lists when it loads topology.conf; dynamic nodes
        # that register later are not in it ("Requested topology configuration is not
        # available" for every job) until the next reconfigure.
        rt.reconfigure()
        rt.wait_nodes_idle(NODES, timeout=180)
        yield rt
    finally:
        rt.close()


BENCH_DIR = Path(__file__).resolve().parents[2] / "tools/bench"


def run_bench(script: str, *args: str) -> str:
    """``tools/bench/<script>`` with ``args`` (a real control plane and Slurm): its stdout, or
    a skip naming what is missing here."""
    missing = missing_binaries()
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: run `{CP_HINT}`")
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI is needed for the control plane's certificates")
    proc = subprocess.run(
        [sys.executable, str(BENCH_DIR / script), *args],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout
