"""The operator, run as the chart runs it by default (every namespace, the chart's
ServiceAccount), against an API server that misbehaves: it answers 429 whenever more than two
requests are in flight, and it is restarted in the middle of a reconcile after etcd was
compacted. Here the API server takes longer to come back than the leader's 10 s renew
deadline, so the leader exits on purpose (as client-go's does) and the test restarts it as the
kubelet would; the restarted process lists afresh. (A watch resumed across the compaction by
a process that stayed up would meet 410 Gone, which kopf answers by listing again; this test
does not reach that path.)

Each new Node is untainted by the controller-manager before the restart: a removal of the
not-ready taint that meets the API server down is lost (seen here), and the operator rightly
gives a tainted Node no slurmd Pod.

The control plane is this module's own: restarting the session's would disturb other tests.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sunk.devenv.controlplane import ControlPlane, KubeAPIError
from tests.cluster.conftest import CRDS, Helm, _established
from tests.cluster.operator_process import OperatorProcess
from tests.cluster.test_operator import API, NO_SYNCER, cluster_body, nodeset_body

CHART = Path(__file__).resolve().parents[2] / "charts" / "sunk"
RELEASE_NS = "sunk"
NS = "faults"


@pytest.fixture(scope="module")
def plane(control_plane_available: None, tmp_path_factory) -> Iterator[ControlPlane]:
    with ControlPlane(
        tmp_path_factory.mktemp("faults"),
        apiserver_args=[
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=2",
            "--max-mutating-requests-inflight=1",
        ],
    ) as cp:
        yield cp


def live_pods(cp: ControlPlane, nodeset: str) -> list[str]:
    pods = cp.client.list(
        f"/api/v1/namespaces/{NS}/pods", label_selector=f"sunk.coreweave.com/nodeset={nodeset}"
    )
    return sorted(p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp"))


def node(cp: ControlPlane, i: int) -> None:
    cp.create_node(
        f"fa-{i}",
        labels={"pool": "fa"},
        capacity={"cpu": 4, "memory": "16Gi"},
        address=f"127.77.31.{i + 1}",
    )


def untainted(cp: ControlPlane, i: int) -> bool:
    """The Node has lost the not-ready taint the API server puts on every new Node. The
    controller-manager removes it once kwok reports Ready; a removal that meets the API server
    down is lost until the controller-manager's next resync (hours), and the operator rightly
    leaves a tainted Node without a slurmd Pod."""
    taints = cp.client.get(f"/api/v1/nodes/fa-{i}").get("spec", {}).get("taints") or []
    return not any(t["key"] == "node.kubernetes.io/not-ready" for t in taints)


def supervise(
    cp: ControlPlane, operator: OperatorProcess, done: Callable[[], bool], timeout: float
) -> list[str]:
    """Wait for ``done`` while restarting the operator whenever it exits, as the kubelet
    restarts the Deployment's container; returns the last log line of each exit."""
    exits: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if done():
                return exits
        except (OSError, KubeAPIError):
            pass  # the API server is still starting
        if operator.proc is not None and operator.proc.poll() is not None:
            exits.append(operator.last_log().strip().splitlines()[-1])
            operator.proc = None
            operator.start()
        time.sleep(1)
    raise TimeoutError(
        f"no convergence in {timeout:.0f}s; exits {exits}\n{state(cp)}\n{operator.last_log()}"
    )


def state(cp: ControlPlane) -> str:
    """What the API server holds, for a failure message: the NodeSet's status, its Pods and
    the Nodes with their labels."""
    status = cp.client.get(f"{API}/namespaces/{NS}/nodesets/fa").get("status")
    pods = cp.client.list(f"/api/v1/namespaces/{NS}/pods")
    nodes = cp.client.list("/api/v1/nodes")
    return "\n".join(
        [
            f"NodeSet status: {status}",
            *(
                f"Pod {p['metadata']['name']} on {p['spec'].get('nodeName')} "
                f"deleting={bool(p['metadata'].get('deletionTimestamp'))}"
                for p in pods
            ),
            *(
                f"Node {n['metadata']['name']} {n['metadata'].get('labels')} "
                f"taints={n['spec'].get('taints')}"
                for n in nodes
            ),
        ]
    )


@contextlib.contextmanager
def crowded(cp: ControlPlane, readers: int = 3) -> Iterator[None]:
    """Other clients holding the API server's two request slots: without them the operator
    could finish a small reconcile between 429s (seen once), and the 429 path would go
    untested."""
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            with contextlib.suppress(Exception):  # their own 429s are the point
                cp.client.list("/api/v1/nodes")

    threads = [threading.Thread(target=read, daemon=True) for _ in range(readers)]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)


def scheduled(cp: ControlPlane, nodeset: str) -> int | None:
    status = cp.client.get(f"{API}/namespaces/{NS}/nodesets/{nodeset}").get("status") or {}
    return status.get("currentNumberScheduled")


def test_429s_a_restart_and_a_compaction_end_in_convergence(
    plane: ControlPlane, helm: str, tmp_path: Path
) -> None:
    cp = plane
    Helm(helm, cp.kubeconfig)(
        "upgrade", "--install", "sunk", str(CHART), "-n", RELEASE_NS, "--create-namespace"
    )
    for crd in CRDS:
        cp.wait_for(lambda c=crd: _established(cp.client, c), 60, f"{crd} Established")
    kubeconfig = cp.token_kubeconfig(RELEASE_NS, "sunk-operator", tmp_path / "kubeconfig")
    cp.create_namespace(NS)
    for i in range(3):
        node(cp, i)
    cp.client.create(f"{API}/namespaces/{NS}/slurmclusters", cluster_body("fa", **NO_SYNCER))
    cp.client.create(f"{API}/namespaces/{NS}/nodesets", nodeset_body("fa", "fa", "fa"))
    # No --namespace: the chart's default, watching every namespace.
    operator = OperatorProcess(kubeconfig, [], tmp_path, RELEASE_NS).start()
    try:
        operator.wait_leader(timeout=120)
        with crowded(cp):
            cp.wait_for(lambda: scheduled(cp, "fa") == 3 or None, 120, "3 Pods under 429s")
        refused = sum(
            operator.sample("sunk_operator_api_requests_total", verb=verb, code="429") or 0
            for verb in ("GET", "POST", "PATCH", "PUT", "DELETE")
        )
        assert refused > 0, "the API server refused nothing: the 429 path went untested"
        # Mid-reconcile: three more Nodes arrive, then etcd is compacted and the API server
        # restarted while the operator works on them; one more Node comes after.
        for i in range(3, 6):
            node(cp, i)
        for i in range(3, 6):
            cp.wait_for(lambda i=i: untainted(cp, i), 60, f"fa-{i} without the not-ready taint")
        cp.compact_etcd()
        cp.restart("kube-apiserver", down_seconds=2)
        node(cp, 6)
        cp.wait_for(lambda: untainted(cp, 6), 60, "fa-6 without the not-ready taint")
        exits = supervise(cp, operator, lambda: scheduled(cp, "fa") == 7, 180)
        assert live_pods(cp, "fa") == [f"fa-031-{i:03d}" for i in range(1, 8)]
        # The only exits allowed are the leader's own: an API server down longer than the
        # renew deadline makes it stop before its lease could lapse (client-go does the same).
        leader_exits = ("leader election: not renewed", "the leader lease is not fresh")
        assert all(any(reason in why for reason in leader_exits) for why in exits), exits
    finally:
        operator.kill(signal.SIGTERM)
