"""Health checks on real Slurm 24.11: the rendered HealthCheckProgram and prolog run our runner
(sunk.health.runner, installed into the root as the slurmd image installs it), which drains
and undrains through scontrol (`pytest -k "health_check or verify_undrain"`)."""

from __future__ import annotations

import json
import re
import secrets
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.slurm.test_rendered import inputs_for

from sunk.devenv.slurm_runtime import SlurmRuntime
from sunk.health import record, runner
from sunk.slurmconf import health, render_all
from sunk.syncer.slurm_metrics import snapshot

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
NODES = {"cpu-000-001": ("cpu", 0), "cpu-000-002": ("cpu", 0), "gpu-000-001": ("gpu", 2)}
ONE, TWO = "cpu-000-001", "cpu-000-002"
# The runner's modules as images/slurmd/Dockerfile copies them.
IMAGE_FILES = ("__init__.py", "reasons.py", "runner.py", "active.py", "allreduce.py", "record.py")


def install_runner(rt: SlurmRuntime, checks: str) -> None:
    """The runner where the slurmd image puts it (images/slurmd/Dockerfile), and the checks
    where the operator mounts them."""
    assert rt.root is not None
    lib = rt.root / "usr/local/lib/sunk/python/sunk/health"
    lib.mkdir(parents=True, exist_ok=True)
    for name in IMAGE_FILES:
        shutil.copy(REPO / "tools/sunk/health" / name, lib / name)
    program = rt.root / runner.PROGRAM.lstrip("/")
    shutil.copy(REPO / "images/slurmd/sunk-health", program)
    program.chmod(0o755)
    config = rt.root / runner.CONFIG.lstrip("/")
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(checks)


@pytest.fixture(scope="module")
def cluster(slurm_rootfs_path, helm) -> Iterator[SlurmRuntime]:
    rt = SlurmRuntime(slurm_rootfs_path)
    try:
        rendered = render_all(
            inputs_for([DATA / "values-two-groups.yaml", DATA / "values-health.yaml"], rt)
        )
        assert "HealthCheckProgram=/usr/local/bin/sunk-health" in rendered.files["slurm.conf"]
        rt.start(rendered.files, munge_key=secrets.token_bytes(128))
        install_runner(rt, rendered.files[health.FILE])
        for name, (group, gpus) in NODES.items():
            rt.add_node(name, rendered.registrations[group], gpus=gpus)
        rt.wait_nodes_idle(NODES, timeout=180)
        yield rt
    finally:
        rt.close()


def node_state(rt: SlurmRuntime, name: str) -> tuple[str, str]:
    out = rt.run("sinfo", "-h", "-N", "-n", name, "-o", "%T|%E", check=True).stdout
    state, _, reason = out.splitlines()[0].partition("|")
    return state, reason


def wait_for(rt: SlurmRuntime, name: str, ok, what: str, timeout: float = 60) -> tuple[str, str]:
    deadline = time.monotonic() + timeout
    seen = node_state(rt, name)
    while time.monotonic() < deadline:
        seen = node_state(rt, name)
        if ok(*seen):
            return seen
        time.sleep(1)
    raise AssertionError(f"{name}: {what} not within {timeout}s; last {seen}\n{rt.logs(30)}")


def drained_with(prefix: str):
    return lambda state, reason: "drain" in state and reason.startswith(prefix)


def in_service(state: str, reason: str) -> bool:
    return "drain" not in state and state in {"idle", "mixed", "allocated"}


def marker(rt: SlurmRuntime, kind: str, node: str, text: str | None) -> None:
    assert rt.root is not None
    path = rt.root / f"tmp/{kind}-fail-{node}"
    if text is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(text + "\n")


def scontrol(rt: SlurmRuntime, *args: str) -> None:
    rt.run("scontrol", *args, check=True)


def submit_cpu_job(rt: SlurmRuntime, *args: str) -> str:
    """A `hostname` job for one of the two cpu nodes; its id."""
    argv = ["sbatch", "--parsable", *args, "-N1", "-p", "all", "-x", "gpu-000-001"]
    return rt.run(*argv, "--wrap", "hostname", check=True).stdout.strip()


def ended(rt: SlurmRuntime, job: str, timeout: float = 90) -> dict[str, str]:
    """The job's fields (``scontrol show job``) once it has ended."""
    rt.wait_job(job, timeout)
    out = rt.run("scontrol", "show", "job", "-o", job, check=True).stdout
    return dict(f.split("=", 1) for f in out.split() if "=" in f)


def test_health_check_drains_keeps_jobs_off_and_undrains_after_a_pass(cluster):
    rt = cluster
    marker(rt, "health", ONE, "fabric slow: 3 GB/s")
    wait_for(rt, ONE, drained_with("health: marker: fabric slow: 3 GB/s"), "health drain")
    job = ended(rt, submit_cpu_job(rt))
    assert (job["JobState"], job["NodeList"]) == ("COMPLETED", TWO)  # not on the drained node
    marker(rt, "health", ONE, None)
    wait_for(rt, ONE, in_service, "undrain after the check passed")


def test_health_check_never_touches_an_admins_drain(cluster):
    rt = cluster
    scontrol(rt, "update", f"NodeName={TWO}", "State=DRAIN", "Reason=admin: bad DIMM")
    marker(rt, "health", TWO, "disk gone")
    time.sleep(12)  # two periodic runs
    assert node_state(rt, TWO) == ("drained", "admin: bad DIMM")
    marker(rt, "health", TWO, None)
    time.sleep(12)
    assert node_state(rt, TWO) == ("drained", "admin: bad DIMM")
    scontrol(rt, "update", f"NodeName={TWO}", "State=RESUME")
    wait_for(rt, TWO, in_service, "admin's resume")


def test_verify_undrain_waits_for_the_next_passing_check(cluster):
    rt = cluster
    marker(rt, "health", ONE, "xid 79")
    wait_for(rt, ONE, drained_with("health: marker: xid 79"), "health drain")
    reason = "alice: GPU replaced sunk:verify-undrain"
    scontrol(rt, "update", f"NodeName={ONE}", "State=DRAIN", f"Reason={reason}")
    time.sleep(12)  # the check still fails: the request waits
    assert node_state(rt, ONE) == ("drained", reason)
    marker(rt, "health", ONE, None)
    wait_for(rt, ONE, in_service, "undrain on the verify request")


def test_health_check_in_prolog_requeues_the_job_and_drains_the_node(cluster):
    rt = cluster
    # Only TWO can take the job; its prolog check fails.
    scontrol(rt, "update", f"NodeName={ONE}", "State=DRAIN", "Reason=hold for the test")
    marker(rt, "prolog", TWO, "nccl allreduce 0.1x")
    job_id = submit_cpu_job(rt, "--requeue")
    state = wait_for(rt, TWO, lambda s, r: "drain" in s, "prolog drain")
    assert state[1].startswith("health: prolog-only: nccl allreduce 0.1x"), state
    scontrol(rt, "update", f"NodeName={ONE}", "State=RESUME")
    # Slurm delays a requeued job's start by about two minutes (its BeginTime)
    job = ended(rt, job_id, timeout=240)
    assert (job["JobState"], job["NodeList"]) == ("COMPLETED", ONE), f"{job}\n{rt.logs(30)}"
    assert job["Restarts"] != "0", job
    marker(rt, "prolog", TWO, None)
    wait_for(rt, TWO, in_service, "undrain once the check passes again")


def run_active(rt: SlurmRuntime, name: str) -> tuple[int, dict[str, str]]:
    """An active check's job on both cpu nodes, as an admin runs one by hand: its exit status
    and its fields (its comment holds the result)."""
    out = rt.run(
        "sbatch", "--parsable", "--wait", "--exclusive", "-N2", "-w", f"{ONE},{TWO}",
        "-o", "/tmp/active-%j.out", "--wrap", f"{runner.PROGRAM} --active {name}", timeout=180,
    )  # fmt: skip
    job = out.stdout.strip().splitlines()[0]
    shown = rt.run("scontrol", "show", "job", job, check=True).stdout
    comment = re.search(r"^\s*Comment=(.*)$", shown, re.M)
    return out.returncode, {"Comment": comment.group(1).strip() if comment else "", "JobId": job}


def test_health_check_active_failure_drains_its_nodes_until_verified(cluster):
    rt = cluster
    assert rt.root is not None
    (rt.root / "tmp/active-fail").write_text("fabric slow: 3 GB/s\n")
    try:
        code, job = run_active(rt, "site-fabric")
        assert code == 1, (job, rt.logs(30))
        assert job["Comment"] == f"sunk-health check=site-fabric result=fail nodes={ONE},{TWO}"
        reason = "health: site-fabric: fabric slow: 3 GB/s"
        for name in (ONE, TWO):
            wait_for(rt, name, drained_with(reason), "active check drain")
        time.sleep(12)  # periodic runs pass their own checks; the active one did not run
        assert node_state(rt, ONE) == ("drained", reason)
    finally:
        (rt.root / "tmp/active-fail").unlink(missing_ok=True)
    # an admin asks for the nodes back once their checks pass
    for name in (ONE, TWO):
        scontrol(rt, "update", f"NodeName={name}", "State=DRAIN",
                 "Reason=fabric reseated sunk:verify-undrain")  # fmt: skip
    for name in (ONE, TWO):
        wait_for(rt, name, in_service, "undrain on the verify request")
    code, job = run_active(rt, "site-fabric")
    assert code == 0 and "result=pass" in job["Comment"], job


def shown_nodes(rt: SlurmRuntime) -> list[dict]:
    return json.loads(rt.run("scontrol", "show", "node", "--json", check=True).stdout)["nodes"]


def test_health_check_passive_results_reach_the_metrics_and_leave_a_sites_extra(cluster):
    """Each periodic run records its results in the node's Extra; the operator's metrics read
    them from the same node JSON slurmrestd serves. A site's own Extra text is never touched."""
    rt = cluster
    scontrol(rt, "update", f"NodeName={TWO}", "Extra=rack7")
    marker(rt, "health", ONE, "stuck process")
    try:
        wait_for(rt, ONE, drained_with("health: marker: stuck process"), "health drain")
        deadline = time.monotonic() + 30
        while True:
            nodes = {n["name"]: n for n in shown_nodes(rt)}
            kept = record.parse(nodes[ONE].get("extra"))
            if kept and kept.checks.get("marker") and not kept.checks["marker"].ok:
                break
            assert time.monotonic() < deadline, (nodes[ONE].get("extra"), rt.logs(30))
            time.sleep(1)
        assert nodes[TWO]["extra"] == "rack7"
        assert set(kept.checks) == {"gpu-count", "marker", "prolog-only"}
        samples = snapshot(nodes.values(), [], [], None)
        by_check = dict(samples["slurm_health_check_passive_nodes"])
        # ONE failed its marker; the gpu node passed it; TWO keeps the site's text (no record)
        assert (by_check[("marker", "failed")], by_check[("marker", "passed")]) == (1.0, 1.0)
        assert by_check[("gpu-count", "passed")] == 2.0
        assert time.time() - 60 < min(
            at for _, at in samples["slurm_health_check_passive_oldest_run_timestamp_seconds"]
        )
    finally:
        marker(rt, "health", ONE, None)
        scontrol(rt, "update", f"NodeName={TWO}", "Extra=")
    wait_for(rt, ONE, in_service, "undrain once the check passes again")
