"""A worker machine fails under running jobs: its kubelet stops past the eviction timeout and
comes back, then it is lost for good. A third node joins the session's real nodes first
(``NodeCluster.add_node``), kept cordoned as a spare until the loss; the release's control
plane runs on the first node and its two slurmd Pods on the first two, so the machine that
fails holds slurmd alone.

Runs last in the tier: the lost node stays lost until the session cluster is torn down."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from sunk.devenv.controlplane import node_ready
from sunk.devenv.deploy import OPERATOR_NAMESPACE, SlurmDeployment
from sunk.devenv.nodes import NodeCluster
from tests.faults.conftest import (
    CLUSTER,
    EXAMPLE,
    TWO_CPUS,
    assert_no_job_lost,
    elapsed,
    get_pod,
    job_states,
    report,
    start_workload,
    submit,
    wait_step,
)

NAMESPACE = "faults-nodes"
PAUSE = "registry.k8s.io/pause:3.10.1"  # imported on every node (sunk.devenv.node_build)
# The canary's eviction timeout: Kubernetes gives a Pod without its own 300 s.
CANARY_TOLERATION = 10


@dataclass(frozen=True)
class Machines:
    slurm: SlurmDeployment
    first: str  # the control plane and one slurmd
    victim: str  # one slurmd; the machine that is lost
    spare: str  # joins cordoned; the NodeSet refills there


def _cordon(cluster: NodeCluster, node: str, on: bool) -> None:
    cluster.kubectl("cordon" if on else "uncordon", node)


def _compute_on(slurm: SlurmDeployment, node: str) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in slurm.running_pods("compute")
        if p["spec"].get("nodeName") == node
    ]


@pytest.fixture(scope="module")
def machines(real_nodes: NodeCluster, tmp_path_factory) -> Iterator[Machines]:
    first, victim = real_nodes.nodes[0].name, real_nodes.nodes[1].name
    spare = real_nodes.add_node().name
    slurm = SlurmDeployment(real_nodes, CLUSTER, namespace=NAMESPACE, release="faults-nodes")
    shape = tmp_path_factory.mktemp("faults-nodes") / "two-cpus.yaml"
    shape.write_text(TWO_CPUS)
    # Everything but slurmd on the first node: the others cordoned while the control plane
    # (and the operator, moved if it ran elsewhere) is placed.
    _cordon(real_nodes, victim, True)
    _cordon(real_nodes, spare, True)
    operator = "app.kubernetes.io/component=operator"
    real_nodes.kubectl("delete", "pod", "-n", OPERATOR_NAMESPACE, "-l", operator,
                       f"--field-selector=spec.nodeName!={first}", "--wait=true")  # fmt: skip
    slurm.install_operator()
    slurm.install_slurm(EXAMPLE, after_overlay=(shape,))
    slurm.wait_ready(nodes=1)
    _cordon(real_nodes, victim, False)
    slurm.wait_ready(nodes=2)
    assert _compute_on(slurm, victim), "no slurmd Pod on the node to lose"
    yield Machines(slurm, first, victim, spare)
    slurm.uninstall_slurm()


def _sacct_runs(slurm: SlurmDeployment, job: str) -> list[str]:
    """Every run of ``job`` in order (``--duplicates``: a requeued job's earlier runs too)."""
    out = slurm.login("sacct", "--duplicates", "--noheader", "--parsable2", "-X",
                      f"--jobs={job}", "--format=State")  # fmt: skip
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _slurm_nodes(slurm: SlurmDeployment) -> set[str]:
    out = slurm.login("sinfo", "--noheader", "--Node", "--format=%N")
    return set(out.split())


def _canary(cluster: NodeCluster, node: str) -> dict:
    """A Pod on ``node`` that tolerates its Node being not ready or unreachable for
    ``CANARY_TOLERATION`` seconds, as every Pod without tolerations of its own does for 300 s:
    its eviction shows that the eviction timeout has passed on that Node."""
    tolerations = [
        {"key": f"node.kubernetes.io/{taint}", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": CANARY_TOLERATION}
        for taint in ("not-ready", "unreachable")
    ]  # fmt: skip
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "eviction-canary", "namespace": NAMESPACE},
        "spec": {
            "nodeName": node,
            "tolerations": tolerations,
            "containers": [{"name": "pause", "image": PAUSE, "imagePullPolicy": "Never"}],
        },
    }
    return cluster.client.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod)


def _evicted(cluster: NodeCluster, pod: dict) -> bool:
    """Being deleted, or gone already (the Pod GC may force-delete it on a NotReady Node)."""
    path = f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}"
    now = cluster.client.get(path, missing_ok=True)
    return now is None or bool(now["metadata"].get("deletionTimestamp"))


def _node_ready(cluster: NodeCluster, node: str) -> bool:
    return node_ready(cluster.client.get(f"/api/v1/nodes/{node}"))


def test_fault_kubelet_stopped_past_the_eviction_timeout_then_back(machines: Machines):
    """The kubelet of a Node with a slurmd Pod stops (its containers run on) until Kubernetes
    evicts what does not tolerate a NotReady Node, then starts again. Kubernetes: the Node goes
    NotReady after the controller-manager's grace period and gets the `not-ready` NoExecute
    taint; a canary Pod that tolerates it 10 s is evicted, so the eviction timeout has passed
    (Pods without tolerations of their own get 300 s). slurmd Pods tolerate the taint with no
    limit: the Pod stays, and its Ready condition turns False. Syncer: drains the Slurm node
    (`k8s: Pod <name> not ready`); running jobs go on there, none starts. When the kubelet is
    back the Pod is Ready again and the drain is removed. Every job completes."""
    slurm, cluster = machines.slurm, machines.slurm.cluster
    (on_victim,) = _compute_on(slurm, machines.victim)
    uid = get_pod(slurm, on_victim)["metadata"]["uid"]
    canary = _canary(cluster, machines.victim)
    slurm.wait("the canary running", lambda: get_pod(slurm, "eviction-canary")["status"].get(
        "phase") == "Running", timeout=120)  # fmt: skip
    work = start_workload(slurm, 150)  # outlasts NotReady, the eviction and the return
    started = time.monotonic()
    cluster.stop_kubelet(machines.victim)
    try:
        slurm.wait(f"{machines.victim} NotReady", lambda: not _node_ready(cluster, machines.victim),
                   timeout=180, interval=5)  # fmt: skip
        slurm.wait(
            "the canary evicted",
            lambda: _evicted(cluster, canary),
            timeout=120,
            interval=2,
        )
        report("kubelet stopped (its Node NotReady, past the eviction timeout)", elapsed(started))
        slurm.wait(
            f"Slurm node {on_victim} drained by the Syncer",
            lambda: (
                "drain" in (now := slurm.slurm_node(on_victim))[0]
                and now[1].startswith(f"k8s: Pod {on_victim} not ready")
            ),
            timeout=60,
        )
        kept = get_pod(slurm, on_victim)
        assert kept["metadata"]["uid"] == uid and not kept["metadata"].get("deletionTimestamp")
    finally:
        cluster.start_kubelet(machines.victim)
    slurm.wait(
        f"{machines.victim} Ready", lambda: _node_ready(cluster, machines.victim), timeout=180
    )
    slurm.wait(
        f"Slurm node {on_victim} in service again",
        lambda: "drain" not in slurm.slurm_node(on_victim)[0],
        timeout=180,
    )
    report("kubelet stopped (back, its Slurm node in service)", elapsed(started))
    # the same Pod throughout; the evicted canary is gone once its kubelet confirms it
    assert get_pod(slurm, on_victim)["metadata"]["uid"] == uid
    slurm.wait(
        "the canary deleted",
        lambda: (
            not cluster.client.get(
                f"/api/v1/namespaces/{NAMESPACE}/pods/{canary['metadata']['name']}", missing_ok=True
            )
        ),
        timeout=120,
    )
    assert_no_job_lost(slurm, work)


def test_fault_node_never_comes_back(machines: Machines):
    """The machine under a slurmd Pod is gone for good, during a two-node job submitted with
    `--requeue` and a one-node job with `--no-requeue` on it, while a third job waits: it
    drops off the network and everything on it stops (``NodeCluster.lose_node``), and its
    Node object is deleted (as a cloud's node controller does for a terminated machine).
    Kubernetes: the Pod GC deletes the Pod of a Node that no longer exists. Syncer: a Slurm
    node whose Pod is gone while it still runs jobs is set DOWN (`k8s: Pod <name> is gone`),
    so Slurm acts now rather than after SlurmdTimeout (300 s): the `--requeue` job is
    requeued and runs again from the start, the `--no-requeue` one ends NODE_FAIL, as Slurm's
    semantics say; the record is then deleted.
    The NodeSet refills on the spare Node, where the requeued and the waiting jobs complete."""
    slurm, cluster = machines.slurm, machines.slurm.cluster
    (on_victim,) = _compute_on(slurm, machines.victim)
    # long on the first run, short once requeued (Slurm counts restarts for the job)
    two = submit(slurm, "-N2", "--ntasks-per-node=1", "--requeue", "--wrap",
                 'srun sleep $(( ${SLURM_RESTART_COUNT:-0} > 0 ? 5 : 600 ))')  # fmt: skip
    one = submit(slurm, "-N1", "-n1", "--no-requeue", f"--nodelist={on_victim}", "--wrap",
                 "sleep 600")  # fmt: skip
    pending = submit(slurm, "-N1", "-n2", "--wrap", "sleep 2")
    jobs = (two, one, pending)
    slurm.wait(
        "two jobs running, one pending",
        lambda: job_states(slurm, jobs) == {two: "RUNNING", one: "RUNNING", pending: "PENDING"},
        timeout=120,
        interval=2,
    )
    wait_step(slurm, two)
    _cordon(cluster, machines.spare, False)

    started = time.monotonic()
    cluster.lose_node(machines.victim)
    cluster.client.delete(f"/api/v1/nodes/{machines.victim}")

    slurm.wait(f"job {one} NODE_FAIL", lambda: _sacct_runs(slurm, one) == ["NODE_FAIL"],
               timeout=300, interval=5)  # fmt: skip
    report("node never comes back (its --no-requeue job ended)", elapsed(started))
    # shown with -s: the requeued job's state and reason at this moment
    print(slurm.login("squeue", f"--jobs={two}", "--noheader", "--format=job %i: %T %r, start %S"))
    slurm.wait(
        f"Slurm node {on_victim} deleted",
        lambda: on_victim not in _slurm_nodes(slurm),
        timeout=180,
        interval=5,
    )
    slurm.wait(
        f"a slurmd Pod on the spare Node {machines.spare}",
        lambda: _compute_on(slurm, machines.spare) and len(slurm.running_pods("compute")) == 2,
        timeout=300,
    )
    report("node never comes back (the NodeSet refilled on another Node)", elapsed(started))
    slurm.wait(
        "every other job COMPLETED",
        lambda: all(_sacct_runs(slurm, j)[-1:] == ["COMPLETED"] for j in (two, pending)),
        timeout=300,
        interval=5,
    )
    report("node never comes back (the requeued job completed)", elapsed(started))

    runs = _sacct_runs(slurm, two)
    assert len(runs) >= 2 and runs[-1] == "COMPLETED", runs  # requeued, then ran again
    assert _sacct_runs(slurm, one) == ["NODE_FAIL"]
    pods = slurm.pods("compute")
    assert on_victim not in {p["metadata"]["name"] for p in pods}
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted([machines.first, machines.spare])
    nodeset = json.loads(cluster.kubectl("get", "nodesets", "-n", NAMESPACE, "-o", "json"))
    status = nodeset["items"][0]["status"]
    assert status["numberReady"] == 2 and status["numberUnavailable"] == 0, status
    drained = slurm.login("sinfo", "--noheader", "--Node", "--format=%N|%T|%E")
    assert "|k8s:" not in drained, drained
