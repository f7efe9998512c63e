"""Our slurmd image in a Pod on a cgroup v2 node: runc (the toolchain's, as containerd runs it)
starts the image's entrypoint in a user-mode Linux node the way containerd does for a slurmd
Pod with the chart's default security context: its own cgroup namespace under a `kubepods`
Pod cgroup with the Pod's limits, the cgroup filesystem mounted read-only, only the chart's
capabilities (`sunk.operator.nodeset.pod.SLURMD_SECURITY_CONTEXT`), the munge socket shared
as with the Pod's sidecar. The cluster's cgroup.conf is the one we render.

The controller runs from the slurm tier's root as root: that root's slurm user is not the
images' uid 401, and slurmd trusts only root and SlurmUser."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator

import pytest

from sunk.devenv import images
from sunk.devenv.slurm_runtime import SlurmRuntime
from sunk.operator.nodeset.pod import SLURMD_SECURITY_CONTEXT
from sunk.slurmconf.cgroup import render_cgroup_conf
from tests.cgroupv2.conftest import skip_reason
from tests.slurm.conftest import render_test_config

NODE = "pod-0"
GPU_NODE = "gpu-1"  # the test gres.conf's gpu-[0-9]: two stand-in GPUs
# capability numbers (linux/capability.h) of what the chart's slurmd may hold
CAP_NUMBERS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FOWNER": 3, "KILL": 5, "SETGID": 6, "SETUID": 7,
               "SYS_CHROOT": 18, "SYS_ADMIN": 21, "SYS_NICE": 23}  # fmt: skip


@pytest.fixture(scope="module")
def pod_v2() -> Iterator[SlurmRuntime]:
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    images.build(["slurmd"])
    archive = images.saved_archive(images.image_ref("slurmd"))
    rt = SlurmRuntime(subnet="10.82.0.0/24")
    try:
        files = render_test_config(rt)
        files["slurm.conf"] = files["slurm.conf"].replace("SlurmUser=slurm", "SlurmUser=root")
        files["cgroup.conf"] = render_cgroup_conf({})
        rt.start(files, munge_key=secrets.token_bytes(128))
        rt.add_uml_node(NODE, "Features=cpu CPUs=1 RealMemory=300", mem_mib=640, image=archive)
        rt.add_uml_node(GPU_NODE, "Features=gpu CPUs=1 RealMemory=300 Gres=gpu:h100:2", gpus=2,
                        mem_mib=640, image=archive)  # fmt: skip
        rt.wait_nodes_idle([NODE, GPU_NODE], timeout=240)
        yield rt
    finally:
        rt.close()


def test_cgroupv2_pod_slurmd_registers_through_the_images_entrypoint(pod_v2: SlurmRuntime):
    console = pod_v2.node_log(NODE)
    assert "registering with --conf" in console, console[-3000:]
    assert pod_v2.node_states()[NODE] == "idle"
    # the job runs in the container, with the chart's capabilities and no more
    proc = pod_v2.run("srun", "-w", NODE, "grep", "^CapBnd:", "/proc/self/status", timeout=120)
    caps = SLURMD_SECURITY_CONTEXT["capabilities"]["add"]
    assert proc.stdout.split() == ["CapBnd:", f"{sum(1 << CAP_NUMBERS[c] for c in caps):016x}"]


def test_cgroupv2_pod_steps_get_cgroups_of_their_own_inside_the_pods(pod_v2: SlurmRuntime):
    """The step's path is relative to the container's cgroup namespace: the Pod's cgroup is
    its root, and slurm moved every process out of it so it could delegate."""
    proc = pod_v2.run("srun", "-w", NODE, "cat", "/proc/self/cgroup", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert re.fullmatch(
        rf"0::/system\.slice/{NODE}_slurmstepd\.scope/job_\d+/step_0/user/task_0\n", proc.stdout
    ), proc.stdout


def test_cgroupv2_pod_job_past_its_memory_is_oom_killed_and_slurmd_lives(pod_v2: SlurmRuntime):
    hog = "$x = 'a' x (150 * 1024 * 1024)"
    proc = pod_v2.run("srun", "-w", NODE, "--mem=50M", "perl", "-e", hog, timeout=180)
    assert proc.returncode != 0 and "Out Of Memory" in proc.stderr, proc.stderr
    assert pod_v2.node_states()[NODE] in {"idle", "completing"}
    again = pod_v2.run("srun", "-w", NODE, "hostname", timeout=120)
    assert again.returncode == 0 and again.stdout.strip() == NODE, again.stderr


def test_cgroupv2_pod_devices_not_granted_to_the_job_cannot_be_opened(pod_v2: SlurmRuntime):
    """The Pod holds both stand-in GPUs (as a device plugin gives them); ConstrainDevices lets
    a job open only those it was given, through the eBPF program slurmstepd attaches below the
    Pod's cgroup with the chart's capabilities (runc here applies no seccomp profile)."""
    probe = 'for d in /dev/nvidia0 /dev/nvidia1; do (exec 3<"$d") 2>&1 | sed "s|^|$d: |"; done'
    one = pod_v2.run("srun", "-p", "gpu", "--gres=gpu:h100:1", "sh", "-c", probe, timeout=120)
    assert one.returncode == 0, one.stderr
    assert one.stdout.count("Operation not permitted") == 1, one.stdout
    assert one.stdout.count("No such device or address") == 1, one.stdout
    both = pod_v2.run("srun", "-p", "gpu", "--gres=gpu:h100:2", "sh", "-c", probe, timeout=120)
    assert both.stdout.count("No such device or address") == 2, both.stdout
