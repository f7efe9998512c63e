"""A Node that never comes back, under running jobs. A third node joins the session's real
nodes first (``NodeCluster.add_node``), kept cordoned as a spare until the fault; the
release's control plane runs on the first node and its two slurmd Pods on the first two, so
the machine that is lost holds slurmd alone.

Runs last in the tier: the lost node stays lost until the session cluster is torn down."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from sunk.devenv.deploy import OPERATOR_NAMESPACE, SlurmDeployment
from sunk.devenv.nodes import NodeCluster
from tests.faults.conftest import (
    CLUSTER,
    EXAMPLE,
    TWO_CPUS,
    elapsed,
    job_states,
    report,
    submit,
    wait_step,
)

NAMESPACE = "faults-lost"


@dataclass(frozen=True)
class Lost:
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
def lost(real_nodes: NodeCluster, tmp_path_factory) -> Iterator[Lost]:
    first, victim = real_nodes.nodes[0].name, real_nodes.nodes[1].name
    spare = real_nodes.add_node().name
    slurm = SlurmDeployment(real_nodes, CLUSTER, namespace=NAMESPACE, release="faults-lost")
    shape = tmp_path_factory.mktemp("faults-lost") / "two-cpus.yaml"
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
    yield Lost(slurm, first, victim, spare)
    slurm.uninstall_slurm()


def _sacct_runs(slurm: SlurmDeployment, job: str) -> list[str]:
    """Every run of ``job`` in order (``--duplicates``: a requeued job's earlier runs too)."""
    out = slurm.login("sacct", "--duplicates", "--noheader", "--parsable2", "-X",
                      f"--jobs={job}", "--format=State")  # fmt: skip
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _slurm_nodes(slurm: SlurmDeployment) -> set[str]:
    out = slurm.login("sinfo", "--noheader", "--Node", "--format=%N")
    return set(out.split())


def test_fault_node_never_comes_back(lost: Lost):
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
    slurm, cluster = lost.slurm, lost.slurm.cluster
    (on_victim,) = _compute_on(slurm, lost.victim)
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
    _cordon(cluster, lost.spare, False)

    started = time.monotonic()
    cluster.lose_node(lost.victim)
    cluster.client.delete(f"/api/v1/nodes/{lost.victim}")

    slurm.wait(f"job {one} NODE_FAIL", lambda: _sacct_runs(slurm, one) == ["NODE_FAIL"],
               timeout=300, interval=5)  # fmt: skip
    report("node never comes back (its --no-requeue job ended)", elapsed(started))
    # shown with -s: why the requeued job waits (Slurm holds a requeued job a while)
    print(slurm.login("squeue", f"--jobs={two}", "--noheader", "--format=job %i: %T %r, start %S"))
    slurm.wait(
        f"Slurm node {on_victim} deleted",
        lambda: on_victim not in _slurm_nodes(slurm),
        timeout=180,
        interval=5,
    )
    slurm.wait(
        f"a slurmd Pod on the spare Node {lost.spare}",
        lambda: _compute_on(slurm, lost.spare) and len(slurm.running_pods("compute")) == 2,
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
    assert sorted(p["spec"]["nodeName"] for p in pods) == sorted([lost.first, lost.spare])
    nodeset = json.loads(cluster.kubectl("get", "nodesets", "-n", NAMESPACE, "-o", "json"))
    status = nodeset["items"][0]["status"]
    assert status["numberReady"] == 2 and status["numberUnavailable"] == 0, status
    drained = slurm.login("sinfo", "--noheader", "--Node", "--format=%N|%T|%E")
    assert "|k8s:" not in drained, drained
