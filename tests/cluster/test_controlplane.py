"""The control plane itself: API health, kwok Nodes, scheduling, taints, clean teardown."""

from __future__ import annotations

from pathlib import Path

import pytest

from sunk.devenv.controlplane import ControlPlane, KubeAPIError, KubeClient
from sunk.devenv.kube_build import KUBERNETES_VERSION

pytestmark = pytest.mark.cluster


def _pod(name: str, node_selector: dict[str, str], tolerations: list[dict] | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": node_selector,
            "tolerations": tolerations or [],
            "containers": [{"name": "c", "image": "registry.invalid/never-pulled:1"}],
        },
    }


def test_api_server_healthy(control_plane: ControlPlane, kube: KubeClient) -> None:
    assert kube.request("GET", "/readyz", raw=True).strip() == "ok"
    assert kube.request("GET", "/livez", raw=True).strip() == "ok"
    assert kube.get("/version")["gitVersion"] == KUBERNETES_VERSION
    assert control_plane.server.startswith("https://127.0.0.1:")
    assert control_plane.kubeconfig.is_file()
    # RBAC is on: an authenticated user outside system:masters is refused
    sched = KubeClient(
        control_plane.server,
        control_plane.pki / "ca.crt",
        control_plane.pki / "scheduler.crt",
        control_plane.pki / "scheduler.key",
    )
    with pytest.raises(KubeAPIError) as exc:
        sched.get("/api/v1/namespaces/kube-system/secrets")
    assert exc.value.status == 403


def test_kwok_nodes_are_stored_and_become_ready(
    control_plane: ControlPlane, kube: KubeClient, unique: str
) -> None:
    name = f"gpu-{unique}"
    control_plane.create_node(
        name,
        labels={"sunk.coreweave.com/pool": "gpu", "nvidia.com/gpu.product": "H100"},
        taints=[
            "nvidia.com/gpu=present:NoSchedule",
            {"key": "sunk.coreweave.com/lock", "effect": "NoExecute"},
        ],
        capacity={"cpu": 128, "memory": "2Ti", "nvidia.com/gpu": 8},
        address="10.1.2.3",
    )
    stored = kube.get(f"/api/v1/nodes/{name}")
    assert stored["metadata"]["labels"]["sunk.coreweave.com/pool"] == "gpu"
    assert stored["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    ours = {
        ("nvidia.com/gpu", "present", "NoSchedule"),
        ("sunk.coreweave.com/lock", None, "NoExecute"),
    }

    def taints(node: dict) -> set[tuple[str, str | None, str]]:
        return {(t["key"], t.get("value"), t["effect"]) for t in node["spec"].get("taints", [])}

    # admission adds node.kubernetes.io/not-ready until the node reports Ready
    assert ours <= taints(stored)

    node = control_plane.wait_node_ready(name, timeout=60)
    status = node["status"]
    assert status["capacity"]["nvidia.com/gpu"] == "8"
    assert status["capacity"]["cpu"] == "128"
    assert status["allocatable"]["memory"] == "2Ti"
    assert {"type": "InternalIP", "address": "10.1.2.3"} in status["addresses"]
    assert status["nodeInfo"]["kubeletVersion"].startswith("kwok-")
    # the node lifecycle controller (kube-controller-manager) lifts the not-ready taint
    control_plane.wait_for(
        lambda: taints(kube.get(f"/api/v1/nodes/{name}")) == ours, 60, "not-ready taint removed"
    )


def test_statefulset_pods_scheduled_on_kwok_nodes_and_running(
    control_plane: ControlPlane, kube: KubeClient, namespace: str, unique: str
) -> None:
    pool = f"sts-{unique}"
    nodes = {f"{pool}-{i}" for i in range(2)}
    for i, node in enumerate(sorted(nodes)):
        control_plane.create_node(
            node,
            labels={"pool": pool},
            address=f"10.2.0.{i + 1}",
            capacity={"cpu": 8, "memory": "32Gi"},
        )
    for node in nodes:
        control_plane.wait_node_ready(node)

    labels = {"app": "slurmd"}
    kube.create(
        f"/api/v1/namespaces/{namespace}/services",
        {
            "metadata": {"name": "slurmd"},
            "spec": {"clusterIP": "None", "selector": labels, "ports": [{"port": 6818}]},
        },
    )
    kube.create(
        f"/apis/apps/v1/namespaces/{namespace}/statefulsets",
        {
            "metadata": {"name": "slurmd"},
            "spec": {
                "serviceName": "slurmd",
                "replicas": 3,
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": {"pool": pool},
                        "containers": [
                            {
                                "name": "slurmd",
                                "image": "registry.invalid/slurmd:1",
                                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                            }
                        ],
                    },
                },
            },
        },
    )

    def all_running() -> list[dict] | None:
        pods = kube.list(f"/api/v1/namespaces/{namespace}/pods", label_selector="app=slurmd")
        running = [p for p in pods if p["status"].get("phase") == "Running"]
        return pods if len(pods) == 3 and len(running) == 3 else None

    pods = control_plane.wait_for(all_running, 120, "3 slurmd pods Running")
    assert sorted(p["metadata"]["name"] for p in pods) == ["slurmd-0", "slurmd-1", "slurmd-2"]
    for pod in pods:
        assert pod["spec"]["nodeName"] in nodes  # bound by kube-scheduler
        assert pod["status"]["podIP"]  # assigned by kwok
    sts = control_plane.wait_for(
        lambda: (
            (s := kube.get(f"/apis/apps/v1/namespaces/{namespace}/statefulsets/slurmd"))
            and s["status"].get("readyReplicas") == 3
            and s
        ),
        60,
        "StatefulSet readyReplicas=3",
    )
    assert sts["status"]["replicas"] == 3


def test_pod_without_toleration_is_not_scheduled_on_tainted_node(
    control_plane: ControlPlane, kube: KubeClient, namespace: str, unique: str
) -> None:
    node = f"tainted-{unique}"
    control_plane.create_node(
        node, labels={"pool": node}, taints=["sunk.coreweave.com/drain=true:NoSchedule"]
    )
    control_plane.wait_node_ready(node)
    pods = f"/api/v1/namespaces/{namespace}/pods"
    kube.create(pods, _pod("intolerant", {"pool": node}))
    kube.create(
        pods,
        _pod(
            "tolerant",
            {"pool": node},
            tolerations=[
                {"key": "sunk.coreweave.com/drain", "operator": "Exists", "effect": "NoSchedule"}
            ],
        ),
    )

    # the tolerating pod lands and runs: the scheduler has seen the node
    control_plane.wait_for(
        lambda: kube.get(f"{pods}/tolerant")["status"].get("phase") == "Running",
        60,
        "tolerant pod Running",
    )

    def unschedulable() -> dict | None:
        pod = kube.get(f"{pods}/intolerant")
        for cond in pod["status"].get("conditions") or []:
            if cond["type"] == "PodScheduled" and cond["reason"] == "Unschedulable":
                return pod
        return None

    pod = control_plane.wait_for(unschedulable, 60, "intolerant pod marked Unschedulable")
    assert not pod["spec"].get("nodeName")
    assert pod["status"]["phase"] == "Pending"
    message = next(c["message"] for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert "untolerated taint" in message


def _leftovers(pgids: set[int], workdir: Path) -> list[tuple[int, str]]:
    """Processes (zombies included) in one of ``pgids``, or running from ``workdir``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        pgid = int(stat[stat.rindex(")") + 2 :].split()[2])
        if int(entry.name) in pgids or pgid in pgids or str(workdir) in cmdline:
            found.append((int(entry.name), comm))
    return found


def test_stop_leaves_no_process_behind(control_plane_available: None) -> None:
    cp = ControlPlane()
    cp.start()
    pids = set(cp.pids)
    workdir = cp.workdir
    assert len(pids) == 5
    assert workdir is not None and workdir.is_dir()
    assert len(_leftovers(pids, workdir)) == 5
    cp.stop()
    assert _leftovers(pids, workdir) == []
    assert not workdir.exists()
    cp.stop()  # idempotent
