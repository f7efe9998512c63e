"""kubelet on a cgroup v2 node, with Kubernetes' defaults: containerd, runc and kubelet in a
user-mode Linux machine (``sunk.devenv.uml_kubelet``) joined to a real control plane. No
``failCgroupV1`` is set, so kubelet would refuse a v1 host: the Node being Ready is the proof
that it found v2. Its Pods get their limits, their own cgroup namespace and containerd's
seccomp profile from the v2 files, and a Pod past its memory limit is OOM-killed by the kernel.

The Pods run the pause image (the only image the machine imports: importing ours into a
user-mode Linux machine is slow) with the host's /usr mounted for a shell."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sunk.devenv import node_build
from sunk.devenv.controlplane import wait_for
from sunk.devenv.nodes import INSTALL_HINT, NodeCluster, missing_prerequisites
from sunk.devenv.uml_kubelet import UmlKubeletNode
from tests.cgroupv2.conftest import skip_reason

NS = "default"


@pytest.fixture(scope="module")
def v2_node() -> Iterator[UmlKubeletNode]:
    reason = skip_reason()
    missing = missing_prerequisites()
    if reason or missing:
        pytest.skip(reason or f"missing {', '.join(missing)}: run `{INSTALL_HINT}`")
    cluster = NodeCluster(nodes=0, volumes=0, progress=True)
    node = UmlKubeletNode(cluster)
    try:
        cluster.start()
        node.start()
        yield node
    finally:
        node.stop()
        cluster.stop()


def _shell_pod(name: str, script: str, *, memory: str, cpu: str) -> dict:
    """A Pod on the v2 node running ``script`` in the host's shell, with these limits."""
    mounts = {"usr": "/usr", "bin": "/usr/bin", "lib": "/usr/lib", "lib64": "/usr/lib64"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "nodeName": "uml-0",
            "restartPolicy": "Never",
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "main",
                    "image": node_build.PAUSE_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["/bin/sh", "-c", script],
                    "resources": {"limits": {"memory": memory, "cpu": cpu}},
                    "volumeMounts": [
                        {"name": v, "mountPath": f"/{v}", "readOnly": True} for v in mounts
                    ],
                }
            ],
            "volumes": [
                {"name": v, "hostPath": {"path": path, "type": "Directory"}}
                for v, path in mounts.items()
            ],
        },
    }


def _run_pod(node: UmlKubeletNode, pod: dict) -> tuple[dict, str]:
    """Create the Pod, wait for it to end; its final object and its log."""
    client = node.cluster.client
    path = f"/api/v1/namespaces/{NS}/pods"
    client.create(path, pod)
    name = pod["metadata"]["name"]

    def ended() -> dict | None:
        obj = client.get(f"{path}/{name}")
        return obj if obj["status"].get("phase") in {"Succeeded", "Failed"} else None

    try:
        obj = wait_for(ended, 180, f"Pod {name} to end", interval=1)
    except TimeoutError as exc:
        raise AssertionError(f"{exc}\n{node.logs()}") from None
    log = client.request("GET", f"{path}/{name}/log", raw=True)
    return obj, log


def test_cgroupv2_kubelet_node_is_ready_with_kubernetes_defaults(v2_node: UmlKubeletNode):
    node = v2_node.cluster.client.get("/api/v1/nodes/uml-0")
    assert node["status"]["nodeInfo"]["kernelVersion"].startswith("6.1."), node["status"]
    # what kubelet runs with, as it reports it: the default that refuses cgroup v1 holds
    assert "failCgroupV1" not in v2_node.kubelet_config()
    live = v2_node.cluster.client.get("/api/v1/nodes/uml-0/proxy/configz")["kubeletconfig"]
    assert live["failCgroupV1"] is True, live
    assert live["cgroupDriver"] == "cgroupfs"
    # the machine mounted cgroup2 only, with these controllers (init prints them)
    init = (v2_node.dir / "logs" / "init.log").read_text()
    assert "cpu io memory pids" in init, init[-2000:]


def test_cgroupv2_kubelet_pod_gets_its_limits_in_a_cgroup_namespace(v2_node: UmlKubeletNode):
    script = (
        "cat /proc/self/cgroup /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max;"
        " stat -f -c %T /sys/fs/cgroup; grep ^Seccomp: /proc/self/status"
    )
    obj, log = _run_pod(v2_node, _shell_pod("limits", script, memory="64Mi", cpu="500m"))
    assert obj["status"]["phase"] == "Succeeded", (obj["status"], log)
    assert log.split("\n") == [
        "0::/",  # the Pod's own cgroup is the root of its namespace
        str(64 * 2**20),
        "50000 100000",  # 500m: half of each 100 ms period
        "cgroup2fs",
        "Seccomp:\t2",  # containerd's RuntimeDefault profile, in filter mode
        "",
    ], log


def test_cgroupv2_kubelet_pod_past_its_memory_limit_is_oom_killed(v2_node: UmlKubeletNode):
    hog = "python3 -c 'x = b\"a\" * (200 * 2**20)'"
    obj, _ = _run_pod(v2_node, _shell_pod("hog", hog, memory="64Mi", cpu="500m"))
    state = obj["status"]["containerStatuses"][0]["state"]
    assert obj["status"]["phase"] == "Failed", obj["status"]
    assert state["terminated"]["reason"] == "OOMKilled", state
    assert state["terminated"]["exitCode"] == 137, state
    # the node runs on: the next Pod starts and ends well
    ok, _ = _run_pod(v2_node, _shell_pod("after", "true", memory="64Mi", cpu="500m"))
    assert ok["status"]["phase"] == "Succeeded", ok["status"]
