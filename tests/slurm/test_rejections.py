"""Configurations Slurm 24.11 rejects, and how the renderer keeps us from producing them.

Each case first shows the real daemon refusing the bad form, then the renderer's output for
the same intent being accepted (or the renderer refusing the input with a message).
"""

from __future__ import annotations

import secrets

import pytest

from sunk.devenv.slurm_runtime import SlurmRuntime, SlurmRuntimeError
from sunk.models.crds import NodeSetSpec, SlurmClusterSpec
from sunk.slurmconf import (
    ClusterInputs,
    Endpoints,
    NodeSetInput,
    Placement,
    RenderError,
    render_all,
)
from sunk.slurmconf.topology import tree_lines

LEVELS = ["fabric", "superpod", "leaf"]


def test_switch_lists_with_named_members_in_brackets(slurm_runtime: SlurmRuntime, slurm_config):
    # Slurm only expands numeric ranges: `leaf-[cpu,gpu]` is fatal for slurmctld.
    bad = (
        "SwitchName=leaf-cpu Nodes=cpu-0\nSwitchName=leaf-gpu Nodes=gpu-0\n"
        "SwitchName=spine Switches=leaf-[cpu,gpu]\n"
    )
    files = slurm_config(slurm_runtime, topology_plugin="topology/tree", topology=bad)
    with pytest.raises(SlurmRuntimeError, match="Invalid switches"):
        slurm_runtime.start(files, munge_key=secrets.token_bytes(128))


def test_renderer_writes_named_switches_as_plain_lists(slurm_rootfs_path, slurm_config):
    placements = (
        Placement("cpu-0", {"fabric": "f", "superpod": "s", "leaf": "cpu"}),
        Placement("gpu-0", {"fabric": "f", "superpod": "s", "leaf": "gpu"}),
    )
    lines = tree_lines(placements, LEVELS)
    assert "SwitchName=f-s Switches=f-s-cpu,f-s-gpu" in lines
    rt = SlurmRuntime(slurm_rootfs_path)
    try:
        files = slurm_config(rt, topology_plugin="topology/tree", topology="\n".join(lines) + "\n")
        rt.start(files, munge_key=secrets.token_bytes(128))
        shown = rt.run("scontrol", "show", "topology", check=True).stdout
        assert "SwitchName=f-s " in shown and "f-s-cpu" in shown
    finally:
        rt.close()


def test_reserved_memory_over_the_limit_never_reaches_slurmd():
    # slurmd would register RealMemory<=0 and the partition's DefMemPerCPU would be negative
    # ("Requested node configuration is not available"); the renderer refuses instead.
    spec = SlurmClusterSpec(clusterName="c")
    template = {
        "spec": {
            "containers": [
                {"name": "slurmd", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}
            ]
        }
    }
    nodeset = NodeSetInput("cpu", NodeSetSpec(clusterName="c", template=template))
    endpoints = Endpoints("ctl", "127.0.0.1", "ctl", "127.0.0.1")
    with pytest.raises(RenderError, match="reservedMemory 4Gi leaves no memory for Slurm"):
        render_all(ClusterInputs(spec, (nodeset,), endpoints))


JOB_SUBMIT_LUA_53 = """\
function slurm_job_submit(job_desc, part_list, submit_uid)
  if job_desc.min_nodes // 2 > 8 then
    return slurm.ERROR
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
"""


def test_job_submit_lua_that_lua_51_refuses(slurm_runtime: SlurmRuntime, slurm_config):
    # Debian's Slurm embeds Lua 5.1: `//` does not load, and slurmctld exits at start (and at
    # every `scontrol reconfigure`, which restarts it in 24.11).
    files = slurm_config(slurm_runtime)
    files["slurm.conf"] += "JobSubmitPlugins=lua\n"
    files["job_submit.lua"] = JOB_SUBMIT_LUA_53
    with pytest.raises(SlurmRuntimeError, match="failed to initialize job_submit plugin"):
        slurm_runtime.start(files, munge_key=secrets.token_bytes(128))


def test_renderer_refuses_a_job_submit_lua_that_would_not_load():
    spec = SlurmClusterSpec.model_validate(
        {"clusterName": "c", "slurmConfig": {"jobSubmitLua": {"script": JOB_SUBMIT_LUA_53}}}
    )
    endpoints = Endpoints("ctl", "127.0.0.1", "ctl", "127.0.0.1")
    with pytest.raises(RenderError, match=r"jobSubmitLua\.script: line 2, column 25: `//`"):
        render_all(ClusterInputs(spec, (), endpoints))
