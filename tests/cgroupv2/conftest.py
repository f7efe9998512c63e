"""The ``cgroupv2`` tier: slurmd on a cgroup v2 kernel. These machines boot cgroup v1 and
cannot nest virtual machines, so each v2 node is a user-mode Linux kernel
(``sunk.devenv.uml``) booted from the slurm tier's Slurm root, on the slurm tier's controller
(``SlurmRuntime.add_uml_node``). The nodes get the ``cgroup.conf`` our renderer writes for
every cluster, and ``JobAcctGatherType`` as the operator sets it."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest

from sunk.devenv import slurm_rootfs, uml
from sunk.devenv.slurm_runtime import SlurmRuntime
from sunk.slurmconf.cgroup import render_cgroup_conf
from tests.slurm.conftest import render_test_config

# What the operator's slurm.conf sets (sunk.slurmconf.slurm_conf): MaxRSS from the cgroup files.
JOB_ACCT = "JobAcctGatherType=jobacct_gather/cgroup"
# The v2 nodes: one CPU each (user-mode Linux has one), in the test config's two partitions;
# gpu-0 has two stand-in GPUs (/dev/nvidia0, /dev/nvidia1), as the slurm tier's gpu-0 has.
NODES = {
    "cpu-0": ("Features=cpu CPUs=1 RealMemory=400", 0),
    "cpu-1": ("Features=cpu CPUs=1 RealMemory=400", 0),
    "gpu-0": ("Features=gpu CPUs=1 RealMemory=400 Gres=gpu:h100:2", 2),
}


def skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "the cgroupv2 tier needs root (mounts, namespaces, TAP devices)"
    if slurm_rootfs.installed() is None:
        return "Slurm root not built: run `python -m sunk.devenv.toolchain install slurm`"
    if uml.installed() is None:
        return f"user-mode Linux not unpacked: run `{uml.INSTALL_HINT}`"
    return None


@pytest.fixture(scope="module")
def v2() -> Iterator[SlurmRuntime]:
    """A controller with accounting on the host and the three v2 nodes of ``NODES``, idle."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    rt = SlurmRuntime(subnet="10.79.0.0/24")
    try:
        files = render_test_config(rt, accounting=True)
        files["slurm.conf"] = files["slurm.conf"].replace(
            "JobAcctGatherType=jobacct_gather/linux", JOB_ACCT
        )
        files["cgroup.conf"] = render_cgroup_conf({})
        rt.start(files, munge_key=secrets.token_bytes(128))
        for name, (conf, gpus) in NODES.items():
            rt.add_uml_node(name, conf, gpus=gpus)
        rt.wait_nodes_idle(NODES, timeout=180)
        yield rt
    finally:
        rt.close()
