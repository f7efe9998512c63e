"""No job lost when parts fail: each scenario breaks one part of a running cluster while a
two-node job and a one-node job run and a third job waits (``conftest.start_workload``), then
asserts that every job ended COMPLETED with its record in sacct and that no Slurm node is left
drained with a `k8s:` reason (``conftest.assert_no_job_lost``). Each prints how long recovery
took (``-s`` shows it; `tools/bench/faults.py` collects the figures).

The faults are real: signals to the daemons' own processes on the host, a chart upgrade with an
image no registry has, a spec patched straight into the API server. They run in file order on
one release of the slurm chart (``conftest.faulty``)."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable

from sunk.devenv.deploy import OPERATOR_NAMESPACE, SlurmDeployment
from sunk.operator import names
from tests.faults.conftest import (
    CLUSTER,
    EXAMPLE,
    STATE_SAVED,
    Workload,
    assert_no_job_lost,
    elapsed,
    get_pod,
    host_pid,
    job_states,
    report,
    restarts,
    start_workload,
)


def _controller_pod(slurm: SlurmDeployment) -> dict:
    pods = slurm.running_pods("controller")
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return pods[0]


def _cluster_condition(slurm: SlurmDeployment, ctype: str) -> dict:
    status = (
        slurm.cluster.client.get(
            f"/apis/sunk.coreweave.com/v1alpha1/namespaces/{slurm.namespace}/slurmclusters/{CLUSTER}"
        ).get("status")
        or {}
    )
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), {})


def _fault_slurmctld(
    slurm: SlurmDeployment, seconds: int, signum: int
) -> tuple[Workload, Callable[[], bool], float]:
    """Start the workload (jobs of ``seconds``), wait out Slurm's state save, then send
    ``signum`` to slurmctld. Returns the workload, whether its container has restarted since,
    and when the signal went."""
    work = start_workload(slurm, seconds)
    time.sleep(STATE_SAVED)
    pod = _controller_pod(slurm)
    before = restarts(pod, "slurmctld")
    started = time.monotonic()
    os.kill(host_pid(pod, "slurmctld"), signum)
    return (
        work,
        lambda: restarts(get_pod(slurm, pod["metadata"]["name"]), "slurmctld") > before,
        started,
    )


def _patch_cluster(slurm: SlurmDeployment, slurm_config: dict) -> None:
    """A merge patch of the SlurmCluster's slurmConfig, as `kubectl patch` sends it."""
    patch = json.dumps({"spec": {"slurmConfig": slurm_config}})
    slurm.cluster.kubectl(
        "patch", "slurmcluster", CLUSTER, "-n", slurm.namespace, "--type=merge", "-p", patch
    )


def test_fault_slurmctld_killed(faulty: SlurmDeployment):
    """slurmctld SIGKILLed while jobs run. Slurm: the daemon restarts from StateSaveLocation
    (its container restarts in place); running jobs keep running on their nodes, the pending
    one is still queued, and all complete.

    Slurm writes its state asynchronously, a moment after each change: a first run of this
    test killed slurmctld 2-3 s after the jobs started and lost two of them (they had not
    reached job_state) and their accounting records (slurmctld queues those in memory and
    writes the queue to disk only on a clean stop). So the kill waits until the state on disk
    has the running jobs: the fault is a crash, not a crash inside Slurm's save window."""
    work, restarted, started = _fault_slurmctld(faulty, 60, signal.SIGKILL)
    faulty.wait(
        "slurmctld restarted and answering",
        lambda: restarted() and "UP" in faulty.login("scontrol", "ping"),
        timeout=180,
        interval=3,
    )
    report("slurmctld SIGKILL", elapsed(started))
    assert_no_job_lost(faulty, work)


def test_fault_slurmctld_hung(faulty: SlurmDeployment):
    """slurmctld stopped (SIGSTOP: a deadlock; its port still accepts connections). Before,
    its Pod stayed Running and Ready forever. Now the liveness probe (an answer to `scontrol
    ping`) fails 4 times 15 s apart and kubelet restarts the container (after the Pod's
    termination grace period: a stopped process ignores SIGTERM). Slurm: jobs keep running on
    their nodes; slurmd and slurmstepd retry their messages; all complete. (kubelet's
    SIGTERM stays pending on a stopped process, so what slurmctld had not saved before it hung
    is lost, as with SIGKILL: the hang comes after the save, see the test above.)"""
    work, restarted, started = _fault_slurmctld(faulty, 150, signal.SIGSTOP)
    faulty.wait(
        "kubelet restarts the hung slurmctld",
        restarted,
        timeout=240,
        interval=3,
    )
    detected = elapsed(started)
    # the probe's bound (4 × 15 s, 12 s timeout) plus the termination grace period (30 s)
    assert detected < 60 + 12 + 30 + 30, detected
    faulty.wait("slurmctld answering", lambda: "UP" in faulty.login("scontrol", "ping"), 180)
    report("slurmctld SIGSTOP (restarted by its liveness probe)", elapsed(started))
    assert_no_job_lost(faulty, work)


def test_fault_slurmrestd_hung_fails_closed(faulty: SlurmDeployment):
    """slurmrestd stopped for 2 minutes. The Syncer and the Pod Scheduler cannot read Slurm:
    they fail closed, draining nothing and removing no Pod; when slurmrestd resumes, nothing
    was lost. Slurm itself does not use slurmrestd: jobs run and complete."""
    work = start_workload(faulty, 150)
    rest = faulty.running_pods("rest")
    assert len(rest) == 1
    pods_before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in faulty.pods("compute")}
    pid = host_pid(rest[0], "slurmrestd")
    started = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            pods = faulty.pods("compute")
            assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods} == pods_before
            for p in pods:
                assert names.ANN_REMOVAL not in (p["metadata"].get("annotations") or {}), p
            time.sleep(10)
    finally:
        os.kill(pid, signal.SIGCONT)
    report("slurmrestd SIGSTOP for 120 s", elapsed(started))
    assert_no_job_lost(faulty, work)


def test_fault_mariadb_stopped_while_jobs_finish(faulty: SlurmDeployment):
    """MariaDB stopped (SIGSTOP) for 2 minutes while the jobs finish: slurmdbd cannot write,
    so slurmctld keeps the jobs' accounting records queued (its agent queue); Slurm itself
    needs no database to run jobs. Once MariaDB resumes, every record reaches sacct."""
    work = start_workload(faulty, 30)
    database = faulty.running_pods("database")
    assert len(database) == 1
    pid = host_pid(database[0], "mariadbd")
    started = time.monotonic()
    os.kill(pid, signal.SIGSTOP)
    try:
        # the jobs end (and the pending one runs) while the database is stopped
        faulty.wait(
            "every job COMPLETED in squeue",
            lambda: all(state == "COMPLETED" for state in job_states(faulty, work.jobs).values()),
            timeout=180,
            interval=5,
        )
        time.sleep(max(0.0, 120 - (time.monotonic() - started)))
    finally:
        os.kill(pid, signal.SIGCONT)
    assert_no_job_lost(faulty, work, timeout=300)
    report("MariaDB SIGSTOP for 120 s (records in sacct after)", elapsed(started))


def test_fault_kube_apiserver_restarted(faulty: SlurmDeployment):
    """kube-apiserver stopped for 30 s, then started again, while jobs run. Slurm does not
    need Kubernetes to run jobs. The operator's watches, its lease renewals and the Syncer's
    Kubernetes reads fail meanwhile and resume (a leader past its lease refuses writes);
    kubelet's Node leases are late but within the grace period. Nothing is drained or
    removed; every job completes. The time reported runs until the API server answers again
    and the operator's Deployment reports a ready replica."""
    work = start_workload(faulty, 90)
    pods_before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in faulty.pods("compute")}
    started = time.monotonic()
    faulty.cluster.control_plane.restart("kube-apiserver", down_seconds=30)
    operator = f"/apis/apps/v1/namespaces/{OPERATOR_NAMESPACE}/deployments/sunk-operator"
    faulty.wait(
        "the operator ready again",
        lambda: (faulty.cluster.client.get(operator).get("status") or {}).get("readyReplicas"),
        timeout=300,
    )
    report("kube-apiserver down for 30 s (API and operator answering)", elapsed(started))
    pods = faulty.pods("compute")
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods} == pods_before
    assert all(names.ANN_REMOVAL not in (p["metadata"].get("annotations") or {}) for p in pods)
    assert_no_job_lost(faulty, work)


def test_fault_controller_node_cut_off_for_30s(faulty: SlurmDeployment):
    """The Node hosting slurmctld cut off from the other Node and the control plane for 30 s,
    by a firewall rule inside its network namespace, while the two-node job's step spans both.
    Slurm: messages between slurmctld and the other node's slurmd fail and are retried; 30 s
    is far below SlurmdTimeout (300 s), so no node is set DOWN and no job is killed.
    Kubernetes: the kubelet's Node lease is late, within the grace period. Once the rule goes,
    everything answers again; every job completes and no node is left drained.

    A step launch that meets the cut fails its job instead (Slurm does not retry it): a CI run
    cut the Node while the two-node job's `srun` was starting, its launch failed and
    slurmctld could not reach the other node to signal the step ("agent waited too long for
    nodes to respond"), and the job ended FAILED. So the workload waits for the step to run
    before any fault (``conftest.start_workload``)."""
    work = start_workload(faulty, 120)
    node = _controller_pod(faulty)["spec"]["nodeName"]
    started = time.monotonic()
    faulty.cluster.cut_off(node)
    try:
        time.sleep(30)
    finally:
        faulty.cluster.cut_off(node, on=False)
    faulty.wait(
        "slurmctld answering the login Pod",
        lambda: "UP" in faulty.login("scontrol", "ping", timeout=60),
        timeout=180,
        interval=3,
    )
    report("the controller's Node cut off for 30 s (slurmctld answering)", elapsed(started))
    assert_no_job_lost(faulty, work)


def test_fault_bad_mariadb_image_heals_once_fixed(faulty: SlurmDeployment):
    """A `helm upgrade` sets MariaDB to an image no registry has. Its Pod cannot start:
    AccountingReady names it and quotes the kubelet. The next upgrade fixes the value, and the
    operator replaces the stuck Pod (the StatefulSet controller would wait for it forever);
    accounting works again, jobs run meanwhile reach sacct."""
    shape = faulty.shape  # type: ignore[attr-defined]
    bad = shape.with_name("bad-mariadb.yaml")
    bad.write_text("accounting:\n  database:\n    mariadb:\n      image: {tag: no-such-tag}\n")
    faulty.install_slurm(EXAMPLE, after_overlay=(shape, bad))
    message = faulty.wait(
        "AccountingReady naming the stuck MariaDB Pod",
        lambda: (
            (c := _cluster_condition(faulty, "AccountingReady"))
            and c.get("status") == "False"
            and f"{CLUSTER}-mariadb-0" in c.get("message", "")
            and ("ImagePullBackOff" in c["message"] or "ErrImagePull" in c["message"])
            and c["message"]
        ),
        timeout=300,
    )
    assert "StatefulSet minimal-mariadb" in message, message
    job = faulty.login("sbatch", "--parsable", "--output=/dev/null", "--wrap", "true").strip()
    started = time.monotonic()
    faulty.install_slurm(EXAMPLE, after_overlay=(shape,))
    faulty.wait(
        "AccountingReady again",
        lambda: _cluster_condition(faulty, "AccountingReady").get("status") == "True",
        timeout=420,
    )
    report("MariaDB image that cannot be pulled, then fixed", elapsed(started))
    events = faulty.cluster.kubectl(
        "get", "events", "-n", faulty.namespace, "-o", "json",
        "--field-selector", "reason=StuckPodReplaced",
    )  # fmt: skip
    assert any(
        f"{CLUSTER}-mariadb-0" in e.get("message", "") for e in json.loads(events)["items"]
    ), events
    faulty.wait(
        "the job run while accounting was down in sacct",
        lambda: faulty.sacct_jobs().get(job.split(";")[0]) == "COMPLETED",
        timeout=300,
    )


def test_fault_update_that_does_not_fit_keeps_the_pods(faulty: SlurmDeployment):
    """An upgrade whose slurmd requests no Node can hold: the operator keeps every old Pod
    (no capacity lost) and the NodeSet says UpdateBlocked, naming each Node and the resource.
    Reverting the value ends it."""
    shape = faulty.shape  # type: ignore[attr-defined]
    pods_before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in faulty.pods("compute")}
    huge = shape.with_name("huge.yaml")
    huge.write_text(
        "compute:\n  nodes:\n    cpu:\n      resources:\n"
        "        requests: {cpu: 100m, memory: 512Gi}\n        limits: {cpu: '2', memory: 512Gi}\n"
    )
    faulty.install_slurm(EXAMPLE, after_overlay=(shape, huge))
    nodeset = f"/apis/sunk.coreweave.com/v1alpha1/namespaces/{faulty.namespace}/nodesets/cpu"

    def blocked() -> str:
        conds = faulty.cluster.client.get(nodeset).get("status", {}).get("conditions") or []
        cond = next((c for c in conds if c["type"] == "RollingUpdate"), {})
        return cond.get("message", "") if cond.get("reason") == "UpdateBlocked" else ""

    message = faulty.wait("RollingUpdate=UpdateBlocked", blocked, timeout=120)
    for node in faulty.cluster.nodes:
        assert f"{node.name}: memory: requests" in message, message
    time.sleep(20)  # a few more reconciles: still nothing removed
    pods = faulty.pods("compute")
    assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods} == pods_before
    assert all(names.ANN_REMOVAL not in (p["metadata"].get("annotations") or {}) for p in pods)
    faulty.install_slurm(EXAMPLE, after_overlay=(shape,))
    faulty.wait("the block lifted", lambda: not blocked(), timeout=120)


def test_fault_bad_extra_config_patched_into_the_api_server(faulty: SlurmDeployment):
    """`kubectl patch` (no `sunkctl validate` in between) puts `Prolog=/tmp/evil.sh` into
    extraConfig: Slurm takes the last value of a key, so it would replace the lock prolog. The
    operator refuses it (Ready=False ConfigInvalid naming the line), slurm.conf as it runs stays,
    and removing the line restores Ready."""
    config_map = f"/api/v1/namespaces/{faulty.namespace}/configmaps/{names.config_map(CLUSTER)}"
    before = faulty.cluster.client.get(config_map)["data"]["slurm.conf"]
    _patch_cluster(faulty, {"extraConfig": "Prolog=/tmp/evil.sh"})
    ready = faulty.wait(
        "Ready=False ConfigInvalid",
        lambda: (c := _cluster_condition(faulty, "Ready")).get("reason") == "ConfigInvalid" and c,
        timeout=60,
    )
    assert "line 1: `Prolog` is managed by the operator" in ready["message"], ready
    assert faulty.cluster.client.get(config_map)["data"]["slurm.conf"] == before
    _patch_cluster(faulty, {"extraConfig": None})
    faulty.wait(
        "Ready again", lambda: _cluster_condition(faulty, "Ready").get("status") == "True", 180
    )
