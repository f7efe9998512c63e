"""slurmd on cgroup v2 nodes with the cgroup.conf we render for every cluster
(``CgroupPlugin=autodetect``, ``IgnoreSystemd=yes``, ``Constrain{Cores,RAMSpace,Devices}``):
the plugin finds v2 by itself, puts every step in a cgroup of its own, and constrains memory
and devices there. User-mode Linux has one CPU and no ``cpuset`` controller, so
``ConstrainCores`` cannot be shown here (slurmd logs that and runs on)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sunk.devenv.slurm_runtime import SlurmRuntime, cleanup_stale
from sunk.slurmconf.cgroup import render_cgroup_conf
from tests.cgroupv2.conftest import NODES, skip_reason
from tests.slurm.conftest import render_test_config

# A v2 step's one line in /proc/self/cgroup: slurmd's own scope, then the job, step and task
STEP_CGROUP = re.compile(
    r"^0::/system\.slice/(?P<node>[a-z0-9-]+)_slurmstepd\.scope/job_(?P<job>\d+)"
    r"/step_0/user/task_(?P<task>\d+)$"
)


def test_cgroupv2_nodes_register_with_the_rendered_cgroup_conf(v2: SlurmRuntime):
    assert {n: s for n, s in v2.node_states().items() if n in NODES} == dict.fromkeys(NODES, "idle")
    config = v2.run("scontrol", "show", "config", check=True).stdout
    assert re.search(r"CgroupPlugin\s*=\s*autodetect", config), config
    assert re.search(r"IgnoreSystemd\s*=\s*yes", config), config
    for name in NODES:
        log = v2.read_file(f"/var/log/slurm/slurmd-{name}.log")
        assert "slurmd started" in log, log[-2000:]


def test_cgroupv2_two_node_job_runs_each_task_in_a_step_cgroup_of_its_own(v2: SlurmRuntime):
    out = v2.run(
        "srun", "-p", "cpu", "-N2", "--ntasks-per-node=1", "cat", "/proc/self/cgroup", check=True
    ).stdout
    lines = out.split()
    matches = [STEP_CGROUP.match(line) for line in lines]
    assert len(lines) == 2 and all(matches), out  # one unified-hierarchy line per task: v2
    assert {m["node"] for m in matches if m} == {"cpu-0", "cpu-1"}, out


def test_cgroupv2_job_past_its_memory_is_oom_killed_in_its_own_cgroup(v2: SlurmRuntime):
    """ConstrainRAMSpace: the step's cgroup has memory.max = --mem; a task that allocates more
    is killed by the kernel's OOM killer in that cgroup, slurmd reports it, and the node runs
    the next job."""
    hog = "$x = 'a' x (150 * 1024 * 1024)"
    proc = v2.run("srun", "-w", "cpu-0", "--mem=50M", "perl", "-e", hog, timeout=120)
    assert proc.returncode != 0, proc.stdout
    assert "Out Of Memory" in proc.stderr, proc.stderr
    assert "oom_kill event" in proc.stderr, proc.stderr
    # memory.max of the task's cgroup and up: the step's `user` cgroup and the job's carry --mem
    levels = 'd="/sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)"; cat $d/memory.max'
    levels += " $d/../memory.max $d/../../memory.max $d/../../../memory.max"
    limits = v2.run(
        "srun", "-w", "cpu-0", "--mem=50M", "sh", "-c", levels, check=True
    ).stdout.split()
    mem = str(50 * 1024 * 1024)
    assert limits == ["max", mem, "max", mem], limits  # task, step/user, step, job
    # the OOM kill is the job's alone: the node is neither drained nor down
    assert v2.node_states()["cpu-0"] in {"idle", "completing"}, v2.node_states()
    assert v2.run("srun", "-w", "cpu-0", "hostname", check=True).stdout.strip() == "cpu-0"


def test_cgroupv2_slurm_sets_no_pids_limit_or_cpu_weight(v2: SlurmRuntime):
    """What the README says of Slurm's cgroup/v2 plugin: it constrains cores (cpuset), memory
    and devices. A job's cgroup gets the ``cpu`` and ``memory`` controllers (``cpuset`` where
    the kernel has it) but not ``pids``, so no pids limit can apply, and it leaves
    ``cpu.weight`` at the kernel's default for the job and the step. A site that wants either
    sets it on the Pod (Kubernetes makes the Pod's CPU limit its ``cpu.max``)."""
    show = 'd="/sys/fs/cgroup$(cut -d: -f3 /proc/self/cgroup)"; cd "$d/../../.."; '
    show += "cat cgroup.controllers cpu.weight step_0/cpu.weight; ls"
    out = v2.run("srun", "-w", "cpu-1", "sh", "-c", show, check=True).stdout.splitlines()
    assert out[0].split() == ["cpu", "memory"], out  # the job's: no pids, no cpuset here
    assert out[1:3] == ["100", "100"], out  # job, then step: the kernel's default
    assert "pids.max" not in out[3:], out


def test_cgroupv2_devices_not_granted_to_the_job_cannot_be_opened(v2: SlurmRuntime):
    """ConstrainDevices on v2 is an eBPF program on the step's cgroup: of the node's two
    stand-in GPUs, the one the job was given opens as far as a device without a driver can
    (ENXIO), the other is refused by the cgroup (EPERM)."""
    probe = 'for d in /dev/nvidia0 /dev/nvidia1; do (exec 3<"$d") 2>&1 | sed "s|^|$d: |"; done'
    out = v2.run("srun", "-p", "gpu", "--gres=gpu:h100:1", "sh", "-c", probe, check=True).stdout
    denied = [line for line in out.splitlines() if "Operation not permitted" in line]
    allowed = [line for line in out.splitlines() if "No such device or address" in line]
    assert len(denied) == 1 and len(allowed) == 1, out
    both = v2.run("srun", "-p", "gpu", "--gres=gpu:h100:2", "sh", "-c", probe, check=True).stdout
    assert "Operation not permitted" not in both, both
    assert both.count("No such device or address") == 2, both


def test_cgroupv2_sacct_reports_the_steps_max_rss(v2: SlurmRuntime):
    """jobacct_gather/cgroup (what the operator configures) reads the step's memory use from
    the v2 files; sacct shows it once slurmdbd has the record."""
    grow = """srun perl -e '$x = "a" x (60 * 1024 * 1024); sleep 2'"""
    out = v2.run("sbatch", "--parsable", "-w", "cpu-1", "--mem=200M", "--wrap", grow,
                 check=True).stdout  # fmt: skip
    job = out.strip().split(";")[0]
    assert v2.wait_job(job, timeout=180) == "COMPLETED"

    def max_rss() -> int:
        rows = v2.run("sacct", "-j", f"{job}.0", "--noheader", "--parsable2", "--noconvert",
                      "--format=MaxRSS", check=True).stdout.split()  # fmt: skip
        return int(rows[0]) if rows and rows[0].isdigit() else 0

    rss = 0
    for _ in range(30):
        rss = max_rss()
        if rss:
            break
        time.sleep(2)
    assert 60 * 1024 * 1024 <= rss < 200 * 1024 * 1024, rss


def _job_cgroups(v2: SlurmRuntime, node: str) -> tuple[str, list[str]]:
    """(this probe's own job cgroup, every job cgroup under slurmd's scope) on ``node``."""
    scope = "/sys/fs/cgroup/system.slice/$(hostname)_slurmstepd.scope"
    probe = f'cut -d/ -f4 /proc/self/cgroup; ls "{scope}"'
    own, *entries = v2.run("srun", "-w", node, "sh", "-c", probe, check=True).stdout.split()
    return own, sorted(e for e in entries if e.startswith("job_"))


def test_cgroupv2_slurmd_restart_keeps_the_running_job_and_leaks_no_cgroups(v2: SlurmRuntime):
    """slurmd stopped (SIGTERM) and started again while a job runs on its node: the job's
    slurmstepd and cgroups live on, the new slurmd takes the node back, the job completes,
    and afterwards no cgroup of a finished job is left under slurmd's scope."""
    out = v2.run(
        "sbatch", "--parsable", "-w", "cpu-1", "--wrap", "srun sleep 15", check=True
    ).stdout
    job = out.strip().split(";")[0]
    for _ in range(60):
        if (
            f"{job}.0"
            in v2.run("squeue", "--steps", "--noheader", "--format=%i", check=True).stdout.split()
        ):
            break
        time.sleep(1)
    pidfile = "/run/slurm/slurmd-cpu-1.pid"
    v2.run("srun", f"--jobid={job}", "--overlap", "-w", "cpu-1", "sh", "-c",
           f'kill -TERM "$(cat {pidfile})"', check=True)  # fmt: skip
    log = "/var/log/slurm/slurmd-cpu-1.log"
    for _ in range(60):
        if v2.read_file(log).count("slurmd started") >= 2:
            break
        time.sleep(1)
    assert v2.read_file(log).count("slurmd started") >= 2, v2.read_file(log)[-3000:]
    assert v2.wait_job(job, timeout=120) == "COMPLETED"
    own, jobs = _job_cgroups(v2, "cpu-1")
    assert jobs == [own], jobs


def test_cgroupv2_killed_run_leaves_no_machine_behind(tmp_path):
    """A run killed without close() leaves its user-mode Linux node running (its own session);
    the next runtime's cleanup_stale ends it with the rest of that run."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    script = """
import time
from sunk.devenv.slurm_runtime import SlurmRuntime
from sunk.slurmconf.cgroup import render_cgroup_conf
from tests.slurm.conftest import render_test_config
rt = SlurmRuntime(subnet="10.80.0.0/24")
rt.start({**render_test_config(rt), "cgroup.conf": render_cgroup_conf({})})
rt.add_uml_node("cpu-0", "Features=cpu CPUs=1 RealMemory=300")
rt.wait_nodes_idle(["cpu-0"], timeout=120)
print(rt.workdir, flush=True)
time.sleep(600)
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parents[2])  # fmt: skip
    try:
        assert proc.stdout is not None
        workdir = proc.stdout.readline().strip()
    finally:
        proc.kill()
        proc.wait()
    assert workdir, "the run did not start"

    def machines() -> list[str]:
        found = subprocess.run(["pgrep", "-f", f"hostfs={workdir}/root"], capture_output=True,
                               text=True, check=False).stdout.split()  # fmt: skip
        return [pid for pid in found if pid != str(os.getpid())]

    assert machines(), "the user-mode Linux node died with its runtime"
    assert Path(workdir) in cleanup_stale()
    assert not machines()
    assert not Path(workdir).exists()


def test_cgroupv2_without_ignore_systemd_slurmd_cannot_start():
    """Why the rendered cgroup.conf says `IgnoreSystemd=yes`: without it, slurmd on v2 asks
    systemd over D-Bus for a scope for slurmstepd, and a node without systemd (a container,
    this machine) has none: slurmd exits at start, again and again (the crash loop peers'
    users report as `cgroup_dbus_attach_to_scope`)."""
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    with SlurmRuntime(subnet="10.81.0.0/24") as rt:
        cgroup = render_cgroup_conf({"IgnoreSystemd": "no"})
        rt.start({**render_test_config(rt), "cgroup.conf": cgroup})
        rt.add_uml_node("cpu-0", "Features=cpu CPUs=1 RealMemory=300")
        log = "/var/log/slurm/slurmd-cpu-0.log"
        fatal = "fatal: systemd scope for slurmstepd could not be set"
        for _ in range(120):
            with contextlib.suppress(OSError):
                if rt.read_file(log).count(fatal) >= 2:  # exited, restarted, exited again
                    break
            time.sleep(1)
        text = rt.read_file(log)
        assert text.count(fatal) >= 2, text[-2000:]
        assert "cgroup_dbus_attach_to_scope" in text
        assert "cpu-0" not in rt.node_states()
