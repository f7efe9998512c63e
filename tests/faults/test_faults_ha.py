"""slurmctld HA under faults (``controller.ha``): a primary and a standby, one on each real
node, sharing one ReadWriteMany state claim, while a two-node job and a one-node job run and a
third waits (``conftest.start_workload``). Each scenario measures the takeover as users feel
it, the time from the fault to a job step that `srun` starts (``FAULT ...`` lines, collected by
`tools/bench/faults_bench.py`), then asserts that no job was lost.

Runs after ``test_faults.py`` (whose release is gone by then), on its own release."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from sunk.devenv.deploy import DeployError, SlurmDeployment
from sunk.devenv.nodes import NodeCluster
from tests.faults.conftest import (
    CLUSTER,
    EXAMPLE,
    STATE_SAVED,
    TWO_CPUS,
    Workload,
    assert_no_job_lost,
    elapsed,
    get_pod,
    host_pid,
    in_pod,
    report,
    restarts,
    start_workload,
)

NAMESPACE = "faults-ha"
HA = """
controller:
  ha: {enabled: true, backups: 1}
  stateVolume: {accessModes: [ReadWriteMany]}
"""
PRIMARY, STANDBY = f"{CLUSTER}-controller-0", f"{CLUSTER}-controller-1"
# The goal the issue set: a working srun within 30 s of losing the primary. Asserted with room
# for a busy two-core machine; the benchmark prints the figure.
TAKEOVER_BOUND = 60


@pytest.fixture(scope="module")
def ha(real_nodes: NodeCluster, tmp_path_factory) -> Iterator[SlurmDeployment]:
    deployment = SlurmDeployment(real_nodes, CLUSTER, namespace=NAMESPACE, release="faults-ha")
    here = tmp_path_factory.mktemp("faults-ha")
    shape, ha_values = here / "two-cpus.yaml", here / "ha.yaml"
    shape.write_text(TWO_CPUS)
    ha_values.write_text(HA)
    deployment.install_operator()
    deployment.install_slurm(EXAMPLE, after_overlay=(shape, ha_values))
    deployment.wait_ready(nodes=len(real_nodes.nodes))
    deployment.wait(
        "the primary and the standby running",
        lambda: (
            {p["metadata"]["name"] for p in deployment.running_pods("controller")}
            == {PRIMARY, STANDBY}
        ),
        timeout=300,
    )
    yield deployment
    deployment.uninstall_slurm()


def _login_pod(slurm: SlurmDeployment) -> dict:
    """The running login Pod; a DeployError (which ``slurm.wait`` retries) while there is none,
    as right after the kubelet of its Node comes back."""
    pods = slurm.running_pods("login")
    if not pods:
        raise DeployError("no login Pod running")
    return pods[0]


def _ping(login: dict) -> str:
    return in_pod(login, "sshd", "scontrol", "ping", timeout=60)[1]


def _until_srun_runs(login: dict, work: Workload, since: float) -> float:
    """Seconds from ``since`` until a job step starts in the running one-node job: a
    controller in control answered (a standby refuses everything but pings).

    Each try is given 15 s, then a new one starts, as a user would retry: a client that asks
    a standby before it has taken control sleeps 30 s before asking again (Slurm's client
    library, on ESLURM_IN_STANDBY_MODE). One try without a limit measured about 60 s in a CI
    run, against 15 s in another run: that sleep is the likely difference, not the takeover."""
    step = ["timeout", "15", "srun", f"--jobid={work.one_node}", "--overlap", "-N1", "-n1", "true"]
    while True:
        status, out = in_pod(login, "sshd", *step, timeout=60)
        if status == 0:
            return elapsed(since)
        assert time.monotonic() - since < 300, f"no job step ran: {out}"
        time.sleep(1)


def test_fault_ha_primary_killed_on_a_node_gone_not_ready(ha: SlurmDeployment):
    """The primary slurmctld SIGKILLed while its Node's kubelet is stopped, so nothing restarts
    it and its Node goes NotReady (a lost machine, as far as Kubernetes knows). Slurm: the
    standby sees no heartbeat from the primary for SlurmctldTimeout (10 s), takes control
    from the shared StateSaveLocation, and answers srun, sbatch and the slurmds; running jobs
    keep running. When the kubelet is back it restarts the primary, which asks the standby for
    control back. Every job completes. (Commands run in the login Pod through nsenter: `kubectl
    exec` goes through a kubelet, and this one may be the stopped one.)"""
    work = start_workload(ha, 240)
    time.sleep(STATE_SAVED)
    primary, login = get_pod(ha, PRIMARY), _login_pod(ha)
    node = primary["spec"]["nodeName"]
    ha.cluster.stop_kubelet(node)
    try:
        started = time.monotonic()
        os.kill(host_pid(primary, "slurmctld"), signal.SIGKILL)
        took = _until_srun_runs(login, work, started)
        report("HA: primary SIGKILL, its kubelet stopped (srun through the standby)", took)
        assert took < TAKEOVER_BOUND, took
        ping = _ping(login)
        assert f"at {PRIMARY} is DOWN" in ping and f"at {STANDBY} is UP" in ping, ping
        ha.wait(
            f"{node} NotReady",
            lambda: any(
                c["type"] == "Ready" and c["status"] != "True"
                for c in ha.cluster.client.get(f"/api/v1/nodes/{node}")["status"]["conditions"]
            ),
            timeout=180,
            interval=5,
        )
        # the cluster keeps working on the standby alone: a new job is accepted
        status, out = in_pod(login, "sshd", "sbatch", "--parsable", "--wrap", "true")
        assert status == 0, out
    finally:
        ha.cluster.start_kubelet(node)
    ha.wait(
        "the primary back and answering",
        lambda: f"at {PRIMARY} is UP" in _ping(_login_pod(ha)),
        timeout=300,
        interval=5,
    )
    report("HA: primary SIGKILL, its kubelet stopped (primary back)", elapsed(started))
    assert_no_job_lost(ha, work)


def test_fault_ha_primary_hung(ha: SlurmDeployment):
    """The primary slurmctld SIGSTOPped (hung; its port still accepts connections). Slurm's
    clients move to a standby only when the primary refuses or cannot be reached: a hung one
    accepts, and they wait out their message timeout on it and fail (measured: the first run
    of this test saw srun work again only after kubelet had restarted the primary, 129 s in).
    So HA does not shorten a hang: the primary's liveness probe ends it, as without HA (its own
    `scontrol ping` line, not the standby's; the standby's probe passes meanwhile, so only the
    primary restarts). The primary comes back in control; every job completes."""
    work = start_workload(ha, 240)
    time.sleep(STATE_SAVED)
    primary, login = get_pod(ha, PRIMARY), _login_pod(ha)
    before = restarts(primary, "slurmctld")
    standby_before = restarts(get_pod(ha, STANDBY), "slurmctld")
    started = time.monotonic()
    os.kill(host_pid(primary, "slurmctld"), signal.SIGSTOP)
    took = _until_srun_runs(login, work, started)
    report("HA: primary SIGSTOP (srun again)", took)
    # the liveness bound (4 x 15 s) and the grace period (30 s), with room for a busy machine
    assert took < 60 + 30 + 90, took
    ha.wait(
        "kubelet restarted the hung primary",
        lambda: restarts(get_pod(ha, PRIMARY), "slurmctld") > before,
        timeout=240,
    )
    ha.wait(
        "the primary back and answering",
        lambda: f"at {PRIMARY} is UP" in _ping(_login_pod(ha)),
        timeout=300,
        interval=5,
    )
    assert restarts(get_pod(ha, STANDBY), "slurmctld") == standby_before, "the standby restarted"
    assert_no_job_lost(ha, work)
