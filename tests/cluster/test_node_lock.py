"""The lock hook on the real API server: real bound ServiceAccount tokens proved by a real
TokenReview, a real taint and eviction, kwok Pods. (The prolog calling it from a real slurmd
is in the e2e tier.)"""

from __future__ import annotations

import json
import signal
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.cluster.operator_process import OperatorProcess
from tests.cluster.test_operator import (
    API,
    cluster_body,
    make_nodes,
    nodeset_body,
    op_namespaces,  # noqa: F401 (fixture)
    pods_of,
)

AUDIENCE = "sunk.coreweave.com/hook"
LOCK_KEY = "sunk.coreweave.com/lock"


@pytest.fixture(scope="module")
def operator(chart_operator, op_namespaces, tmp_path_factory) -> Iterator[OperatorProcess]:  # noqa: F811
    """The operator as the chart's ServiceAccount, with the chart's Roles in both namespaces."""
    proc = chart_operator(
        op_namespaces,
        tmp_path_factory.mktemp("operator"),
        extra=["--hook-wait", "5"],  # the strict-timeout case waits this long, not 120 s
    )
    proc.wait_leader()
    yield proc
    proc.kill(signal.SIGTERM)


@pytest.fixture(scope="module")
def slurmd(operator, kube, control_plane, op_namespaces):  # noqa: F811
    """One kwok Node with one slurmd Pod of a cluster that locks nodes (the default)."""
    ns = op_namespaces[0]
    (node,) = make_nodes(control_plane, "lockpool", 1, 91)
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster_body("lk"))
    kube.create(f"{API}/namespaces/{ns}/nodesets", nodeset_body("lkn", "lk", "lockpool", 1))
    control_plane.wait_for(lambda: _running(pods_of(kube, ns, "lkn")), 90, "slurmd Pod")
    (pod,) = pods_of(kube, ns, "lkn")
    return ns, node, pod


def _running(pods):
    return len(pods) == 1 and pods[0].get("status", {}).get("phase") == "Running"


def token_for(kube, ns: str, pod: dict, audience: str = AUDIENCE) -> str:
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "audiences": [audience],
            "expirationSeconds": 600,
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"],
            },
        },
    }
    sa = pod["spec"].get("serviceAccountName") or "default"
    out = kube.create(f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token", request)
    return out["status"]["token"]


def call(operator, action: str, token: str | None, body) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        f"http://127.0.0.1:{operator.hook_port}/hook/v1/{action}",
        data=json.dumps(body).encode(),
        headers=headers,
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def bystander(kube, ns: str, node: str, name: str, finalizer: bool = False) -> dict:
    meta = {"name": name}
    if finalizer:
        meta["finalizers"] = ["test.sunk/hold"]  # eviction marks it; it cannot go
    return kube.create(
        f"/api/v1/namespaces/{ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]},
        },
    )


def node_lock(kube, node: str) -> tuple[str | None, str | None, bool]:
    n = kube.get(f"/api/v1/nodes/{node}")
    ann = n["metadata"].get("annotations") or {}
    tainted = any(t["key"] == LOCK_KEY for t in n["spec"].get("taints") or [])
    return ann.get(LOCK_KEY), ann.get("sunk.coreweave.com/lock-jobs"), tainted


def test_the_slurmd_pod_carries_the_hook(slurmd):
    _, _, pod = slurmd
    assert pod["metadata"]["annotations"]["sunk.coreweave.com/hook-url"].startswith("http://")
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    source = volumes["sunk-hook"]["projected"]["sources"][0]["serviceAccountToken"]
    assert source["audience"] == AUDIENCE


def test_lock_evicts_bystanders_and_concurrent_jobs_share_the_lock(
    slurmd, kube, operator, control_plane, namespace
):
    """Bystanders go whatever their namespace: ``namespace`` is one the operator does not
    watch (the chart's ClusterRole lets the hook list and evict Pods there, nothing more)."""
    ns, node, pod = slurmd
    web = bystander(kube, ns, node, "web-1")
    elsewhere = bystander(kube, namespace, node, "web-2")
    token = token_for(kube, ns, pod)
    results: dict[str, tuple[int, dict]] = {}

    def lock(job: str) -> None:
        results[job] = call(operator, "lock", token, {"job": job})

    threads = [threading.Thread(target=lock, args=(j,)) for j in ("7", "8")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["7"] == (200, {"node": node, "state": "locked"}), results
    assert results["8"][0] == 200, results
    assert node_lock(kube, node) == ("locked", "7,8", True)
    for before in (web, elsewhere):
        meta = before["metadata"]
        gone = kube.get(
            f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", missing_ok=True
        )
        assert gone is None or gone["metadata"]["uid"] != meta["uid"], meta
    events = kube.list(f"/api/v1/namespaces/{ns}/events")
    assert any(e["reason"] == "SlurmNodeLocked" for e in events)
    control_plane.wait_for(
        lambda: (
            kube.get(f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}")["metadata"][
                "annotations"
            ].get(LOCK_KEY)
            == "locked"
        ),
        10,
        "Pod annotation",
    )
    assert call(operator, "unlock", token, {"job": "7"}) == (200, {"node": node, "state": "locked"})
    assert node_lock(kube, node) == ("locked", "8", True)
    assert call(operator, "unlock", token, {"job": "8"}) == (200, {"node": node, "state": "false"})
    assert node_lock(kube, node) == ("false", None, False)


def test_a_strict_lock_fails_while_a_pod_cannot_leave(slurmd, kube, operator):
    ns, node, pod = slurmd
    bystander(kube, ns, node, "held-1", finalizer=True)
    token = token_for(kube, ns, pod)
    try:
        status, body = call(operator, "lock", token, {"job": "9", "strict": True})
        assert status == 503, body
        assert f"{ns}/held-1" in body["error"]
        assert node_lock(kube, node) == ("false", None, False)  # its hold is given back
        # A normal lock takes the Node all the same, pending until the Pod goes.
        status, body = call(operator, "lock", token, {"job": "10"})
        assert (status, body["state"]) == (200, "pending")
        assert node_lock(kube, node) == ("pending", "10", True)
    finally:
        kube.patch(f"/api/v1/namespaces/{ns}/pods/held-1", {"metadata": {"finalizers": None}})
        call(operator, "unlock", token, {"job": "10"})
    assert node_lock(kube, node) == ("false", None, False)


def test_the_hook_refuses_what_it_cannot_prove(slurmd, kube, operator, op_namespaces, namespace):  # noqa: F811
    ns, node, pod = slurmd
    # A Pod in a namespace the operator does not watch: refused before any read (the operator
    # has no right to read Pods there).
    outsider = bystander(kube, namespace, node, "outsider")
    status, body = call(operator, "lock", token_for(kube, namespace, outsider), {"job": "1"})
    assert status == 403 and "not watched" in body["error"], body
    assert call(operator, "lock", None, {"job": "1"})[0] == 401
    assert call(operator, "lock", "not-a-token", {"job": "1"})[0] == 401
    wrong_audience = token_for(kube, ns, pod, audience="https://kubernetes.default.svc")
    assert call(operator, "lock", wrong_audience, {"job": "1"})[0] == 401
    other = bystander(kube, ns, node, "not-slurmd")
    status, body = call(operator, "lock", token_for(kube, ns, other), {"job": "1"})
    assert status == 403, body
    token = token_for(kube, ns, pod)
    for bad in ({"job": "1; rm -rf /"}, {"job": ""}, ["1"], {"strict": True}):
        assert call(operator, "lock", token, bad)[0] == 400, bad
    assert node_lock(kube, node)[0] in (None, "false")
