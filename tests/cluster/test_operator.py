"""The operator on the real API server with kwok Nodes."""

from __future__ import annotations

import base64
import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from sunk.devenv.controlplane import KubeAPIError
from sunk.operator.names import LABEL_CLUSTER
from tests.cluster.operator_process import OperatorProcess

REPO = Path(__file__).resolve().parents[2]
API = "/apis/sunk.coreweave.com/v1alpha1"


@pytest.fixture(scope="module")
def op_namespaces(kube, control_plane) -> Iterator[list[str]]:
    names = [f"op-{uuid.uuid4().hex[:6]}", f"op-{uuid.uuid4().hex[:6]}"]
    for name in names:
        kube.create("/api/v1/namespaces", {"metadata": {"name": name}})
        control_plane.wait_for(
            lambda n=name: kube.get(f"/api/v1/namespaces/{n}/serviceaccounts/default"), 30, name
        )
    yield names
    for name in names:
        kube.delete(f"/api/v1/namespaces/{name}", missing_ok=True)


@pytest.fixture(scope="module")
def operator(chart_operator, op_namespaces, tmp_path_factory) -> Iterator[OperatorProcess]:
    """The operator as the chart's ServiceAccount, with the chart's Roles in both namespaces."""
    proc = chart_operator(op_namespaces, tmp_path_factory.mktemp("operator"))
    proc.wait_leader()
    yield proc
    proc.kill(signal.SIGTERM)


# Without a Syncer, removals are immediate (kwok runs no slurmd, so there is no Slurm state to
# wait on); `test_without_slurm_state_a_removal_waits_for_the_grace_period` covers the Syncer.
NO_SYNCER = {"syncer": {"enabled": False}}


def cluster_body(name: str, **spec) -> dict:
    return {
        "apiVersion": "sunk.coreweave.com/v1alpha1",
        "kind": "SlurmCluster",
        "metadata": {"name": name},
        "spec": {"clusterName": name, "login": {"service": {"type": "ClusterIP"}}, **spec},
    }


def nodeset_body(
    name: str,
    cluster: str,
    pool: str,
    replicas: int | None = None,
    tolerations: list | None = None,
    prefix: str | None = None,
) -> dict:
    pod = {
        "containers": [
            {
                "name": "slurmd",
                "image": "opensunk/slurmd:test",
                "resources": {
                    "requests": {"cpu": "1", "memory": "2Gi"},
                    "limits": {"memory": "6Gi"},
                },
            }
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "pool", "operator": "In", "values": [pool]}]}
                    ]
                }
            }
        },
    }
    if tolerations:
        pod["tolerations"] = tolerations
    spec = {"clusterName": cluster, "podNamePrefix": prefix or name, "template": {"spec": pod}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "sunk.coreweave.com/v1alpha1",
        "kind": "NodeSet",
        "metadata": {"name": name},
        "spec": spec,
    }


def make_nodes(control_plane, pool: str, count: int, third: int, labels=None, taints=()):
    names = []
    for i in range(count):
        name = f"{pool}-{i}"
        control_plane.create_node(
            name,
            labels={"pool": pool, **(labels or {})},
            taints=taints,
            capacity={"cpu": 4, "memory": "16Gi"},
            address=f"127.77.{third}.{i + 1}",
        )
        names.append(name)
    return names


def pods_of(kube, ns: str, nodeset: str) -> list[dict]:
    return kube.list(
        f"/api/v1/namespaces/{ns}/pods", label_selector=f"sunk.coreweave.com/nodeset={nodeset}"
    )


def _nodeset_view(kube, ns: str, nodeset: str) -> str:
    """A NodeSet's status, spec.replicas and its Pods by state, for a failure message."""
    body = kube.get(f"{API}/namespaces/{ns}/nodesets/{nodeset}")
    states: dict[str, int] = {}
    for pod in pods_of(kube, ns, nodeset):
        meta = pod["metadata"]
        state = "deleting" if meta.get("deletionTimestamp") else pod["status"].get("phase", "-")
        if "sunk.coreweave.com/removal" in (meta.get("annotations") or {}):
            state += " (marked for removal)"
        states[state] = states.get(state, 0) + 1
    return f"replicas {body['spec'].get('replicas')}, status {body.get('status')}, Pods {states}"


def status(kube, ns: str, kind: str, name: str) -> dict:
    return kube.get(f"{API}/namespaces/{ns}/{kind}/{name}").get("status") or {}


def test_slurmcluster_objects_and_keys_survive_updates(
    operator, kube, control_plane, op_namespaces
):
    ns = op_namespaces[0]
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster_body("alpha"))
    get = kube.get
    control_plane.wait_for(
        lambda: get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/alpha-controller"),
        60,
        "controller StatefulSet",
    )
    for kind, name in [
        ("secrets", "alpha-munge"),
        ("secrets", "alpha-jwt"),
        ("secrets", "alpha-db"),
        ("secrets", "alpha-login-hostkeys"),
        ("secrets", "alpha-slurmdbd-conf"),
        ("configmaps", "alpha-slurm-config"),
        ("configmaps", "alpha-topology"),
        ("services", "alpha-controller"),
        ("services", "alpha-login"),
    ]:
        control_plane.wait_for(
            lambda k=kind, n=name: get(f"/api/v1/namespaces/{ns}/{k}/{n}"), 30, f"{kind}/{name}"
        )
    for kind, name in [
        ("statefulsets", "alpha-mariadb"),
        ("statefulsets", "alpha-login"),
        ("deployments", "alpha-accounting"),
        ("deployments", "alpha-rest"),
    ]:
        control_plane.wait_for(
            lambda k=kind, n=name: get(f"/apis/apps/v1/namespaces/{ns}/{k}/{n}"),
            30,
            f"{kind}/{name}",
        )
    config = get(f"/api/v1/namespaces/{ns}/configmaps/alpha-slurm-config")
    assert "ClusterName=alpha" in config["data"]["slurm.conf"]
    ctl = get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/alpha-controller")
    owner = ctl["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("SlurmCluster", "alpha")
    first_hash = control_plane.wait_for(
        lambda: status(kube, ns, "slurmclusters", "alpha").get("configHash"), 30, "configHash"
    )
    assert (
        ctl["spec"]["template"]["metadata"]["annotations"]["sunk.coreweave.com/config-hash"]
        == first_hash
    )
    cluster_status = status(kube, ns, "slurmclusters", "alpha")
    assert cluster_status["observedGeneration"] == 1
    assert {c["type"] for c in cluster_status["conditions"]} >= {"Ready", "ControllerReady"}
    munge = get(f"/api/v1/namespaces/{ns}/secrets/alpha-munge")["data"]

    # An update re-renders the configuration but never the keys.
    kube.patch(
        f"{API}/namespaces/{ns}/slurmclusters/alpha",
        {"spec": {"slurmConfig": {"MaxJobCount": 20000}}},
    )
    control_plane.wait_for(
        lambda: (
            status(kube, ns, "slurmclusters", "alpha").get("configHash") not in (None, first_hash)
        ),
        30,
        "new configHash",
    )
    assert (
        "MaxJobCount=20000"
        in get(f"/api/v1/namespaces/{ns}/configmaps/alpha-slurm-config")["data"]["slurm.conf"]
    )
    assert get(f"/api/v1/namespaces/{ns}/secrets/alpha-munge")["data"] == munge


def test_fifty_nodes_fifty_pods_scale_down_and_up(operator, kube, control_plane, op_namespaces):
    ns = op_namespaces[0]
    pool = f"p{uuid.uuid4().hex[:5]}"
    make_nodes(control_plane, pool, 50, third=1)
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster_body("beta", **NO_SYNCER))
    kube.create(f"{API}/namespaces/{ns}/nodesets", nodeset_body("cpu", "beta", pool))
    control_plane.wait_for(lambda: len(pods_of(kube, ns, "cpu")) == 50 or None, 120, "50 pods")
    names = sorted(p["metadata"]["name"] for p in pods_of(kube, ns, "cpu"))
    assert names == sorted(f"cpu-001-{i:03d}" for i in range(1, 51))
    pod = pods_of(kube, ns, "cpu")[0]
    assert pod["spec"]["hostname"] == pod["metadata"]["name"]
    assert {"key": "sunk.coreweave.com/lock", "operator": "Exists", "effect": "NoExecute"} in pod[
        "spec"
    ]["tolerations"]
    node = kube.get(f"/api/v1/nodes/{pod['spec']['nodeName']}")
    assert node["metadata"]["labels"]["sunk.coreweave.com/nodeset"] == "cpu"
    # Every Pod runs as its component's own ServiceAccount, which mounts no token; the slurmd
    # one exists before the NodeSet's first Pod (the API server refuses a Pod naming none).
    assert pod["spec"]["serviceAccountName"] == "beta-slurmd"
    for component in ("controller", "accounting", "rest", "login", "database", "slurmd"):
        account = control_plane.wait_for(
            lambda c=component: kube.get(
                f"/api/v1/namespaces/{ns}/serviceaccounts/beta-{c}", missing_ok=True
            ),
            60,
            f"ServiceAccount beta-{component}",
        )
        assert account["automountServiceAccountToken"] is False
        assert account["metadata"]["ownerReferences"][0]["name"] == "beta"
    for kind, workload, component in [
        ("statefulsets", "beta-controller", "controller"),
        ("deployments", "beta-accounting", "accounting"),
        ("deployments", "beta-rest", "rest"),
        ("statefulsets", "beta-login", "login"),
        ("statefulsets", "beta-mariadb", "database"),
    ]:
        template = control_plane.wait_for(
            lambda k=kind, w=workload: kube.get(
                f"/apis/apps/v1/namespaces/{ns}/{k}/{w}", missing_ok=True
            ),
            60,
            f"{kind}/{workload}",
        )["spec"]["template"]
        assert template["spec"]["serviceAccountName"] == f"beta-{component}"
    made = control_plane.wait_for(
        lambda: kube.list(
            f"/api/v1/namespaces/{ns}/pods",
            label_selector="sunk.coreweave.com/cluster=beta,app.kubernetes.io/component=controller",
        ),
        60,
        "the controller Pod",
    )
    assert made[0]["spec"]["serviceAccountName"] == "beta-controller"
    control_plane.wait_for(
        lambda: status(kube, ns, "nodesets", "cpu").get("numberReady") == 50 or None,
        120,
        "50 ready",
    )
    st = status(kube, ns, "nodesets", "cpu")
    assert (
        st["desiredNumberScheduled"],
        st["numberFeasible"],
        st["currentNumberScheduled"],
        st["numberUnavailable"],
    ) == (50, 50, 50, 0)

    scale = f"{API}/namespaces/{ns}/nodesets/cpu/scale"
    kube.patch(scale, {"spec": {"replicas": 10}})
    control_plane.wait_for(
        lambda: (
            len([p for p in pods_of(kube, ns, "cpu") if not p["metadata"].get("deletionTimestamp")])
            == 10
            or None
        ),
        120,
        "10 pods",
    )
    assert kube.get(scale)["spec"]["replicas"] == 10
    kube.patch(scale, {"spec": {"replicas": 50}})
    try:
        control_plane.wait_for(
            lambda: status(kube, ns, "nodesets", "cpu").get("numberReady") == 50 or None,
            120,
            "back to 50",
        )
    except TimeoutError as exc:
        # once in CI and once in five runs here the scale-up never came: say what was left
        raise AssertionError(f"{exc}; {_nodeset_view(kube, ns, 'cpu')}") from exc


def test_tainted_node_without_toleration_is_infeasible(
    operator, kube, control_plane, op_namespaces
):
    ns = op_namespaces[1]
    pool = f"t{uuid.uuid4().hex[:5]}"
    make_nodes(control_plane, pool, 2, third=2)
    make_nodes(control_plane, f"{pool}x", 0, third=2)
    control_plane.create_node(
        f"{pool}-tainted",
        labels={"pool": pool},
        taints=["dedicated=infra:NoSchedule"],
        capacity={"cpu": 4, "memory": "16Gi"},
        address="127.77.2.50",
    )
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster_body("gamma"))
    kube.create(f"{API}/namespaces/{ns}/nodesets", nodeset_body("t", "gamma", pool))
    control_plane.wait_for(
        lambda: status(kube, ns, "nodesets", "t").get("numberFeasible") == 2 or None,
        60,
        "2 feasible",
    )
    time.sleep(2)
    assert sorted(p["metadata"]["name"] for p in pods_of(kube, ns, "t")) == [
        "t-002-001",
        "t-002-002",
    ]
    tolerant = nodeset_body(
        "tol", "gamma", pool, prefix="tol", tolerations=[{"key": "dedicated", "operator": "Exists"}]
    )
    tolerant["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"][0]["matchExpressions"].append(
        {"key": "kubernetes.io/hostname", "operator": "In", "values": [f"{pool}-tainted"]}
    )
    kube.create(f"{API}/namespaces/{ns}/nodesets", tolerant)
    control_plane.wait_for(
        lambda: (
            [p["metadata"]["name"] for p in pods_of(kube, ns, "tol")] == ["tol-002-050"] or None
        ),
        60,
        "pod on the tainted node",
    )


def test_two_nodesets_racing_for_one_node(operator, kube, control_plane, op_namespaces):
    ns = op_namespaces[1]
    pool = f"r{uuid.uuid4().hex[:5]}"
    make_nodes(control_plane, pool, 1, third=3)
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster_body("delta"))
    for name in ("left", "right"):
        kube.create(f"{API}/namespaces/{ns}/nodesets", nodeset_body(name, "delta", pool))

    def settled():
        pods = pods_of(kube, ns, "left") + pods_of(kube, ns, "right")
        conflicts = [
            n
            for n in ("left", "right")
            if any(
                c["type"] == "NodeConflict" and c["status"] == "True"
                for c in status(kube, ns, "nodesets", n).get("conditions", [])
            )
        ]
        return (pods, conflicts) if len(pods) == 1 and len(conflicts) == 1 else None

    pods, (loser,) = control_plane.wait_for(settled, 60, "one winner, one conflict")
    winner = pods[0]["metadata"]["labels"]["sunk.coreweave.com/nodeset"]
    assert loser != winner

    def conflict_event():
        events = kube.list(
            f"/api/v1/namespaces/{ns}/events", field_selector=f"involvedObject.name={loser}"
        )
        return [
            e
            for e in events
            if e["reason"] == "NodeClaimedElsewhere" and winner in e["message"]
            and e["type"] == "Normal"
        ]  # fmt: skip

    assert control_plane.wait_for(conflict_event, 30, "an Event naming the winner")


def test_node_label_change_rerenders_topology(operator, kube, control_plane, op_namespaces):
    ns = op_namespaces[1]
    pool = f"l{uuid.uuid4().hex[:5]}"
    labels = {
        "ib.coreweave.cloud/fabric": "fab1",
        "ib.coreweave.cloud/superpod": "sp1",
        "ib.coreweave.cloud/leafgroup": "leafA",
    }
    nodes = make_nodes(control_plane, pool, 2, third=4, labels=labels)
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster_body("eps"))
    kube.create(f"{API}/namespaces/{ns}/nodesets", nodeset_body("topo", "eps", pool))
    path = f"/api/v1/namespaces/{ns}/configmaps/eps-topology"

    def topology_has(text):
        def check():
            try:
                data = kube.get(path)["data"]["topology.conf"]
            except Exception:
                return None
            return data if text in data else None

        return check

    control_plane.wait_for(
        topology_has("SwitchName=fab1-sp1-leafA Nodes=topo-004-[001-002]"), 90, "tree topology"
    )
    kube.patch(
        f"/api/v1/nodes/{nodes[1]}",
        {"metadata": {"labels": {"ib.coreweave.cloud/leafgroup": "leafB"}}},
    )
    text = control_plane.wait_for(
        topology_has("SwitchName=fab1-sp1-leafB Nodes=topo-004-002"), 90, "re-rendered topology"
    )
    assert "SwitchName=fab1-sp1-leafA Nodes=topo-004-001" in text


def test_sigkill_mid_reconcile_converges_then_steady_state_makes_no_writes(
    operator, kube, control_plane, op_namespaces
):
    ns = op_namespaces[0]
    pool = f"k{uuid.uuid4().hex[:5]}"
    make_nodes(control_plane, pool, 30, third=5)
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster_body("zeta"))
    kube.create(f"{API}/namespaces/{ns}/nodesets", nodeset_body("kill", "zeta", pool))
    control_plane.wait_for(lambda: len(pods_of(kube, ns, "kill")) >= 3 or None, 60, "some pods")
    operator.kill(signal.SIGKILL)  # mid-reconcile: pods are still being created
    operator.start()
    # The restarted container keeps its Pod name, so it resumes its own lease at once (a new
    # replica waits for the old holder's lease to expire: the split-brain test below).
    operator.wait_leader(timeout=90)
    control_plane.wait_for(
        lambda: status(kube, ns, "nodesets", "kill").get("numberReady") == 30 or None,
        120,
        "30 ready after restart",
    )
    assert len(pods_of(kube, ns, "kill")) == 30

    def secrets() -> list[str]:
        items = kube.list(
            f"/api/v1/namespaces/{ns}/secrets", label_selector="sunk.coreweave.com/cluster=zeta"
        )
        return sorted(s["metadata"]["name"] for s in items)

    # The killed replica may have made some of the keys; the restarted one makes the rest (the
    # NodeSet can be complete first: its Pods were all created before the kill).
    wanted = ["zeta-db", "zeta-db-root", "zeta-jwt", "zeta-login-hostkeys", "zeta-munge",
              "zeta-slurmdbd-conf"]  # fmt: skip
    control_plane.wait_for(lambda: secrets() == wanted or None, 60, f"secrets {wanted}")

    # Steady state: let everything settle, then count the operator's API writes over 30 s.
    time.sleep(10)
    versions = {
        o["metadata"]["uid"]: o["metadata"]["resourceVersion"]
        for kind in ("pods", "secrets", "configmaps", "services")
        for o in kube.list(f"/api/v1/namespaces/{ns}/{kind}")
    }
    before = operator.writes()
    time.sleep(30)
    assert operator.writes() == before
    after = {
        o["metadata"]["uid"]: o["metadata"]["resourceVersion"]
        for kind in ("pods", "secrets", "configmaps", "services")
        for o in kube.list(f"/api/v1/namespaces/{ns}/{kind}")
    }
    assert after == versions


def test_keys_survive_operator_restart(operator, kube, op_namespaces):
    ns = op_namespaces[0]
    munge = kube.get(f"/api/v1/namespaces/{ns}/secrets/alpha-munge")["data"]["munge.key"]
    assert len(base64.b64decode(munge)) == 1024
    operator.kill(signal.SIGTERM)
    operator.start()
    operator.wait_leader(timeout=90)
    time.sleep(5)
    assert kube.get(f"/api/v1/namespaces/{ns}/secrets/alpha-munge")["data"]["munge.key"] == munge


def test_chart_rendered_cluster_is_accepted(operator, kube, control_plane, op_namespaces, helm):
    """The slurm chart's own output (not hand-made bodies) is what the operator consumes."""
    import subprocess

    ns = op_namespaces[1]
    out = subprocess.run(
        [
            helm,
            "template",
            "slurm",
            str(REPO / "charts/slurm"),
            "-n",
            ns,
            "-f",
            str(REPO / "examples/external-db.yaml"),
            "--set",
            "compute.nodes.cpu.affinity.nodeAffinity."
            "requiredDuringSchedulingIgnoredDuringExecution."
            "nodeSelectorTerms[0].matchExpressions[0].key=pool",
            "--set",
            "compute.nodes.cpu.affinity.nodeAffinity."
            "requiredDuringSchedulingIgnoredDuringExecution."
            "nodeSelectorTerms[0].matchExpressions[0].operator=DoesNotExist",
            "--set",
            "login.service.type=ClusterIP",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for doc in yaml.safe_load_all(out):
        if doc and doc["kind"] in ("SlurmCluster", "NodeSet"):
            plural = "slurmclusters" if doc["kind"] == "SlurmCluster" else "nodesets"
            kube.create(f"{API}/namespaces/{ns}/{plural}", doc)
    cond = control_plane.wait_for(
        lambda: next(
            (
                c
                for c in status(kube, ns, "slurmclusters", "extdb").get("conditions", [])
                if c["type"] == "AccountingReady"
            ),
            None,
        ),
        60,
        "AccountingReady condition",
    )
    # The external password Secret does not exist: the operator says so instead of guessing.
    assert cond["status"] == "False" and "slurm-db" in cond["message"]


def test_impossible_sizing_is_a_condition_and_an_event(
    operator, kube, control_plane, op_namespaces
):
    ns = op_namespaces[1]
    pool = f"s{uuid.uuid4().hex[:5]}"
    make_nodes(control_plane, pool, 1, third=6)
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster_body("sizing"))
    body = nodeset_body("small", "sizing", pool)
    body["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] = "1Gi"
    kube.create(f"{API}/namespaces/{ns}/nodesets", body)
    cond = control_plane.wait_for(
        lambda: next(
            (
                c
                for c in status(kube, ns, "nodesets", "small").get("conditions", [])
                if c["reason"] == "ConfigInvalid"
            ),
            None,
        ),
        60,
        "ConfigInvalid condition",
    )
    assert "reservedMemory 4Gi leaves no memory for Slurm" in cond["message"]
    assert pods_of(kube, ns, "small") == []
    events = kube.list(
        f"/api/v1/namespaces/{ns}/events", field_selector="involvedObject.name=small"
    )
    assert any(e["reason"] == "ConfigInvalid" for e in events)


def test_deleting_a_cluster_keeps_keys_and_controller_state(
    operator, kube, control_plane, op_namespaces
):
    ns = op_namespaces[0]
    pvcs = f"/api/v1/namespaces/{ns}/persistentvolumeclaims"
    control_plane.wait_for(
        lambda: (
            any(p["metadata"]["name"] == "state-alpha-controller-0" for p in kube.list(pvcs))
            or None
        ),
        90,
        "state PVC",
    )
    kube.delete(f"{API}/namespaces/{ns}/slurmclusters/alpha")

    def statefulset_gone():
        try:
            kube.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/alpha-controller")
        except Exception:
            return True
        return None

    control_plane.wait_for(statefulset_gone, 90, "owned objects garbage-collected")
    assert any(p["metadata"]["name"] == "state-alpha-controller-0" for p in kube.list(pvcs))
    for secret in ("alpha-munge", "alpha-jwt", "alpha-db"):
        assert kube.get(f"/api/v1/namespaces/{ns}/secrets/{secret}")["data"]


def _writes_of(control_plane, replica: OperatorProcess) -> list[dict]:
    """The replica's write requests in the API server's audit log (it names itself in its
    User-Agent; kopf's own watch requests are reads)."""
    events = [json.loads(line) for line in control_plane.audit_log.read_text().splitlines()]
    return [
        e
        for e in events
        if replica.pod_name in e.get("userAgent", "") and e["verb"] not in ("get", "list", "watch")
    ]


def _at(event: dict) -> datetime:
    return datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))


def test_a_leader_stopped_past_its_lease_writes_nothing_after_it_resumes(
    operator, control_plane, kube, op_namespaces, tmp_path
):
    """Split brain: the leader is frozen (SIGSTOP) past its lease; the standby takes over and
    does the work; when the old leader resumes (SIGCONT) it stops without one more write,
    as the API server's audit log shows."""
    old = operator
    standby = OperatorProcess(old.kubeconfig, op_namespaces, tmp_path, old.lease_namespace).start()
    try:
        time.sleep(8)
        assert old.sample("sunk_operator_leader") == 1
        assert standby.sample("sunk_operator_leader") == 0  # never both
        assert _writes_of(control_plane, old), "the audit log shows no write of the leader"
        assert old.proc is not None
        os.killpg(old.proc.pid, signal.SIGSTOP)
        standby.wait_leader(timeout=90)
        ns, pool = op_namespaces[1], f"s{uuid.uuid4().hex[:5]}"
        make_nodes(control_plane, pool, 1, third=8)
        kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster_body("brain", **NO_SYNCER))
        kube.create(f"{API}/namespaces/{ns}/nodesets", nodeset_body("brain", "brain", pool))
        control_plane.wait_for(
            lambda: pods_of(kube, ns, "brain") or None, 60, "the new leader's Pod"
        )
        resumed = datetime.now(UTC)
        os.killpg(old.proc.pid, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while old.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert old.proc.poll() is not None, "the resumed old leader kept running"
        time.sleep(2)  # the audit log is written after each response
        late = [e for e in _writes_of(control_plane, old) if _at(e) >= resumed]
        assert late == [], f"the old leader wrote after it resumed: {late}"
        assert _writes_of(control_plane, standby), "the new leader wrote nothing"
    finally:
        standby.kill(signal.SIGTERM)
        old.kill(signal.SIGKILL)
        old.start()
        old.wait_leader(timeout=90)


def test_node_added_gets_a_pod_and_node_gone_loses_it(operator, kube, control_plane, op_namespaces):
    ns = op_namespaces[1]
    pool = f"g{uuid.uuid4().hex[:5]}"
    first = make_nodes(control_plane, pool, 1, third=7)
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster_body("churn", **NO_SYNCER))
    kube.create(f"{API}/namespaces/{ns}/nodesets", nodeset_body("churn", "churn", pool))

    def names():
        return sorted(
            p["metadata"]["name"]
            for p in pods_of(kube, ns, "churn")
            if not p["metadata"].get("deletionTimestamp")
        )

    control_plane.wait_for(lambda: names() == ["churn-007-001"] or None, 60, "first pod")
    control_plane.create_node(
        f"{pool}-new",
        labels={"pool": pool},
        capacity={"cpu": 4, "memory": "16Gi"},
        address="127.77.7.9",
    )
    control_plane.wait_for(
        lambda: names() == ["churn-007-001", "churn-007-009"] or None,
        60,
        "a pod for the added Node",
    )
    kube.delete(f"/api/v1/nodes/{first[0]}")
    control_plane.wait_for(
        lambda: names() == ["churn-007-009"] or None, 60, "the gone Node's pod removed"
    )


def test_template_change_rolls_pods_within_max_unavailable(
    operator, kube, control_plane, op_namespaces
):
    ns = op_namespaces[1]
    pool = f"u{uuid.uuid4().hex[:5]}"
    make_nodes(control_plane, pool, 4, third=8)
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster_body("roll", **NO_SYNCER))
    body = nodeset_body("roll", "roll", pool)
    body["spec"]["maxUnavailable"] = 1
    kube.create(f"{API}/namespaces/{ns}/nodesets", body)
    control_plane.wait_for(
        lambda: status(kube, ns, "nodesets", "roll").get("numberReady") == 4 or None, 90, "4 ready"
    )
    old = {
        p["metadata"]["annotations"]["sunk.coreweave.com/template-hash"]
        for p in pods_of(kube, ns, "roll")
    }
    kube.patch(
        f"{API}/namespaces/{ns}/nodesets/roll",
        {"spec": {"features": {"staticFeatures": ["rolled"]}}},
    )

    def ready(pod):
        return not pod["metadata"].get("deletionTimestamp") and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in pod.get("status", {}).get("conditions", [])
        )

    worst, deadline = 0, time.monotonic() + 120
    while time.monotonic() < deadline:
        pods = pods_of(kube, ns, "roll")
        worst = max(worst, 4 - sum(1 for p in pods if ready(p)))
        hashes = {
            p["metadata"]["annotations"]["sunk.coreweave.com/template-hash"]
            for p in pods
            if ready(p)
        }
        if len([p for p in pods if ready(p)]) == 4 and not hashes & old:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("pods were not all replaced")
    assert worst <= 1, f"{worst} pods unavailable at once with maxUnavailable 1"
    env = {
        e["name"]: e["value"] for e in pods_of(kube, ns, "roll")[0]["spec"]["containers"][0]["env"]
    }
    assert "rolled" in env["SUNK_SLURMD_CONF"]


def test_a_reconcile_error_is_a_condition_and_an_event_not_a_silent_loop(
    operator, kube, control_plane, op_namespaces
):
    """A Node whose address the API server stored but the operator cannot use (10.0.0.300)
    makes the NodeSet's reconcile fail: the NodeSet shows Ready=False ReconcileFailed with the
    error and one Event, and the operator keeps running and backing off."""
    ns = op_namespaces[1]
    pool = f"e{uuid.uuid4().hex[:5]}"
    control_plane.create_node(
        f"{pool}-0", labels={"pool": pool}, capacity={"cpu": 4, "memory": "16Gi"},
        address="10.0.0.300",
    )  # fmt: skip
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster_body("broken"))
    kube.create(f"{API}/namespaces/{ns}/nodesets", nodeset_body("bad", "broken", pool))
    cond = control_plane.wait_for(
        lambda: next(
            (
                c
                for c in status(kube, ns, "nodesets", "bad").get("conditions", [])
                if c["type"] == "Ready" and c["reason"] == "ReconcileFailed"
            ),
            None,
        ),
        60,
        "ReconcileFailed condition",
    )
    assert cond["status"] == "False"
    assert "10.0.0.300" in cond["message"], cond
    time.sleep(5)  # retries back off; the Event is written once per distinct error
    events = [
        e
        for e in kube.list(
            f"/api/v1/namespaces/{ns}/events", field_selector="involvedObject.name=bad"
        )
        if e["reason"] == "ReconcileFailed"
    ]
    assert len(events) == 1, events
    assert operator.proc is not None and operator.proc.poll() is None


def test_a_pod_name_taken_by_another_owner_is_reported_not_skipped(
    operator, kube, control_plane, op_namespaces
):
    """A Pod of the name the NodeSet would create exists and is not the NodeSet's: the 409 is
    not swallowed. The NodeSet shows ReconcileFailed naming the Pod and its owner, and the
    stranger is left alone."""
    ns = op_namespaces[1]
    pool = f"t{uuid.uuid4().hex[:5]}"
    make_nodes(control_plane, pool, 1, third=41)
    stranger = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "taken-041-001", "labels": {"app": "stranger"}},
        "spec": {"containers": [{"name": "c", "image": "stranger:1"}]},
    }
    kube.create(f"/api/v1/namespaces/{ns}/pods", stranger)
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster_body("taken", **NO_SYNCER))
    kube.create(f"{API}/namespaces/{ns}/nodesets", nodeset_body("taken", "taken", pool))
    cond = control_plane.wait_for(
        lambda: next(
            (
                c
                for c in status(kube, ns, "nodesets", "taken").get("conditions", [])
                if c["type"] == "Ready" and c["reason"] == "ReconcileFailed"
            ),
            None,
        ),
        60,
        "ReconcileFailed condition",
    )
    assert "PodNameTaken" in cond["message"] and "taken-041-001" in cond["message"], cond
    assert "belongs to no owner" in cond["message"], cond
    pod = kube.get(f"/api/v1/namespaces/{ns}/pods/taken-041-001")
    assert pod["metadata"]["labels"] == {"app": "stranger"}
    assert not pod["metadata"].get("ownerReferences")


def test_without_slurm_state_a_removal_waits_for_the_grace_period(
    operator, kube, control_plane, op_namespaces
):
    """The Syncer is on (the default) but no slurmrestd answers (kwok runs no containers):
    nothing proves the Pods idle, so a scale-down marks them and waits. Scaling back up
    cancels the removal; a deleted NodeSet is held by its finalizer; the grace period ends
    the wait with an Event."""
    ns = op_namespaces[1]
    pool = f"w{uuid.uuid4().hex[:5]}"
    make_nodes(control_plane, pool, 2, third=9)
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster_body("wait"))
    kube.create(f"{API}/namespaces/{ns}/nodesets", nodeset_body("wait", "wait", pool))
    control_plane.wait_for(
        lambda: status(kube, ns, "nodesets", "wait").get("numberReady") == 2 or None, 90, "2 ready"
    )
    path = f"{API}/namespaces/{ns}/nodesets/wait"
    assert kube.get(path)["metadata"]["finalizers"] == ["sunk.coreweave.com/safe-removal"]

    def marked():
        return sorted(
            p["metadata"]["name"]
            for p in pods_of(kube, ns, "wait")
            if "sunk.coreweave.com/removal" in (p["metadata"].get("annotations") or {})
        )

    kube.patch(path, {"spec": {"replicas": 1}})
    control_plane.wait_for(lambda: marked() or None, 60, "a Pod marked for removal")
    (victim,) = marked()
    pod = kube.get(f"/api/v1/namespaces/{ns}/pods/{victim}")
    assert pod["metadata"]["annotations"]["sunk.coreweave.com/removal"] == "scaled down"
    time.sleep(8)  # several reconciles: still there, still not deleting
    pods = pods_of(kube, ns, "wait")
    assert len(pods) == 2 and not any(p["metadata"].get("deletionTimestamp") for p in pods)
    removing = next(
        c for c in status(kube, ns, "nodesets", "wait")["conditions"] if c["type"] == "Removing"
    )
    assert (removing["status"], removing["reason"]) == ("True", "WaitingForJobs")
    assert victim in removing["message"]

    kube.patch(path, {"spec": {"replicas": 2}})
    control_plane.wait_for(lambda: not marked() or None, 60, "the removal cancelled")
    assert len(pods_of(kube, ns, "wait")) == 2

    kube.delete(path)
    control_plane.wait_for(lambda: len(marked()) == 2 or None, 60, "both Pods marked")
    assert kube.get(path)["metadata"]["deletionTimestamp"]  # held by the finalizer
    kube.patch(
        f"{API}/namespaces/{ns}/slurmclusters/wait",
        {"spec": {"syncer": {"removalGracePeriodSeconds": 5}}},
    )
    control_plane.wait_for(
        lambda: kube.get(path, missing_ok=True) is None or None, 150, "NodeSet gone"
    )
    events = kube.list(f"/api/v1/namespaces/{ns}/events")
    expired = [e for e in events if e["reason"] == "RemovalGraceExpired"]
    assert {e["involvedObject"]["name"] for e in expired} == {"wait"}
    assert len(expired) == 2


def test_shared_volumes_reach_the_stored_login_and_slurmd_pods_and_a_change_rolls_them(
    operator, kube, control_plane, op_namespaces
):
    """global.volumes/volumeMounts as the API server stores them: on the login StatefulSet's
    `sshd` and on each slurmd Pod's `slurmd` (a group's own volume of the same name wins),
    munge.resources on the sidecars; a change to global.volumes rolls the slurmd Pods, and
    a mount naming no volume is ConfigInvalid on the NodeSet and LoginReady."""
    ns = op_namespaces[1]
    pool = f"v{uuid.uuid4().hex[:5]}"
    make_nodes(control_plane, pool, 2, third=10)
    home = {"name": "home", "hostPath": {"path": "/srv/home", "type": "DirectoryOrCreate"}}
    munge = {"requests": {"cpu": "20m", "memory": "24Mi"}, "limits": {"memory": "96Mi"}}
    body = cluster_body(
        "vol",
        **NO_SYNCER,
        munge={"resources": munge},
        **{"global": {"volumes": [home], "volumeMounts": [{"name": "home", "mountPath": "/home"}]}},
    )
    body["spec"]["login"]["volumes"] = [{"name": "tools", "emptyDir": {}}]
    body["spec"]["login"]["volumeMounts"] = [{"name": "tools", "mountPath": "/opt/tools"}]
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", body)
    nodeset = nodeset_body("vol", "vol", pool)
    scratch = {"name": "scratch", "emptyDir": {}}
    nodeset["spec"]["template"]["spec"]["volumes"] = [scratch]
    nodeset["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "scratch", "mountPath": "/scratch"}
    ]
    kube.create(f"{API}/namespaces/{ns}/nodesets", nodeset)

    login = control_plane.wait_for(
        lambda: kube.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/vol-login"), 60, "login"
    )
    spec = login["spec"]["template"]["spec"]
    sshd = next(c for c in spec["containers"] if c["name"] == "sshd")
    assert home in spec["volumes"] and {"name": "tools", "emptyDir": {}} in spec["volumes"]
    assert {"name": "home", "mountPath": "/home"} in sshd["volumeMounts"]
    assert {"name": "tools", "mountPath": "/opt/tools"} in sshd["volumeMounts"]
    assert next(c for c in spec["containers"] if c["name"] == "munge")["resources"] == munge
    for workload in ("statefulsets/vol-controller", "deployments/vol-rest"):
        other = kube.get(f"/apis/apps/v1/namespaces/{ns}/{workload}")["spec"]["template"]["spec"]
        assert "home" not in {v["name"] for v in other["volumes"]}, workload

    def two_pods():
        pods = pods_of(kube, ns, "vol")
        return pods if len(pods) == 2 else None

    pods = control_plane.wait_for(two_pods, 60, "2 slurmd pods")
    for pod in pods:
        slurmd = next(c for c in pod["spec"]["containers"] if c["name"] == "slurmd")
        assert [v for v in pod["spec"]["volumes"] if v["name"] in ("home", "scratch")] == [
            home,
            scratch,
        ]
        # (besides the operator's own /dev/shm and container cache volumes)
        assert [m for m in slurmd["volumeMounts"] if m["name"] in ("home", "scratch")] == [
            {"name": "home", "mountPath": "/home"},
            {"name": "scratch", "mountPath": "/scratch"},
        ]
        munged = next(c for c in pod["spec"]["containers"] if c["name"] == "munge")
        assert munged["resources"] == munge
    old = {p["metadata"]["annotations"]["sunk.coreweave.com/template-hash"] for p in pods}

    # A new global volume: every slurmd Pod is replaced by one that carries it.
    data = {"name": "data", "emptyDir": {}}
    kube.patch(
        f"{API}/namespaces/{ns}/slurmclusters/vol",
        {
            "spec": {
                "global": {
                    "volumes": [home, data],
                    "volumeMounts": [
                        {"name": "home", "mountPath": "/home"},
                        {"name": "data", "mountPath": "/data"},
                    ],
                }
            }
        },
    )

    def rolled():
        pods = [p for p in pods_of(kube, ns, "vol") if not p["metadata"].get("deletionTimestamp")]
        hashes = {p["metadata"]["annotations"]["sunk.coreweave.com/template-hash"] for p in pods}
        return pods if len(pods) == 2 and not hashes & old else None

    for pod in control_plane.wait_for(rolled, 120, "slurmd Pods replaced"):
        assert data in pod["spec"]["volumes"]
        slurmd = next(c for c in pod["spec"]["containers"] if c["name"] == "slurmd")
        assert {"name": "data", "mountPath": "/data"} in slurmd["volumeMounts"]

    # A global mount naming no volume: no Pod is built from it; both objects say where.
    kube.patch(
        f"{API}/namespaces/{ns}/slurmclusters/vol",
        {"spec": {"global": {"volumeMounts": [{"name": "nope", "mountPath": "/nope"}]}}},
    )

    def invalid(kind, name, type_):
        return next(
            (
                c
                for c in status(kube, ns, kind, name).get("conditions", [])
                if c["type"] == type_ and c["reason"] == "ConfigInvalid"
            ),
            None,
        )

    cond = control_plane.wait_for(lambda: invalid("nodesets", "vol", "Ready"), 60, "NodeSet")
    assert (
        "SlurmCluster vol spec.global.volumeMounts[0].name: mounts volume `nope`"
        in (cond["message"])
    )
    cond = control_plane.wait_for(
        lambda: invalid("slurmclusters", "vol", "LoginReady"), 60, "LoginReady"
    )
    assert "not declared in the login Pod" in cond["message"]
    # the running login StatefulSet was left as it was
    login = kube.get(f"/apis/apps/v1/namespaces/{ns}/statefulsets/vol-login")
    assert home in login["spec"]["template"]["spec"]["volumes"]
    assert (
        len([p for p in pods_of(kube, ns, "vol") if not p["metadata"].get("deletionTimestamp")])
        == 2
    )


def test_lua_scripts_reach_their_configmap_and_mounts(
    operator, kube, control_plane, op_namespaces, helm
):
    """examples/lua-plugins.yaml through the chart and the operator: the API server stores the
    scripts' ConfigMap and the Pods' projections; a script Lua 5.1 would not load is refused
    with its line, and what runs stays."""
    import subprocess

    ns = op_namespaces[1]
    example = REPO / "examples/lua-plugins.yaml"
    out = subprocess.run(
        [helm, "template", "slurm", str(REPO / "charts/slurm"), "-n", ns, "-f", str(example)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (cluster,) = [d for d in yaml.safe_load_all(out) if d and d["kind"] == "SlurmCluster"]
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster)
    scripts = yaml.safe_load(example.read_text())["slurmConfig"]
    lua = control_plane.wait_for(
        lambda: kube.get(f"/api/v1/namespaces/{ns}/configmaps/lua-lua"), 60, "lua ConfigMap"
    )
    assert lua["data"] == {
        "job_submit.lua": scripts["jobSubmitLua"]["script"],
        "cli_filter.lua": scripts["cliFilterLua"]["script"],
    }
    config = kube.get(f"/api/v1/namespaces/{ns}/configmaps/lua-slurm-config")["data"]
    assert "JobSubmitPlugins=lua\n" in config["slurm.conf"]

    def projected(kind: str, name: str) -> dict[str, str]:
        obj = control_plane.wait_for(
            lambda: kube.get(f"/apis/apps/v1/namespaces/{ns}/{kind}/{name}"), 60, name
        )
        volumes = obj["spec"]["template"]["spec"]["volumes"]
        (config_volume,) = [v for v in volumes if v["name"] == "slurm-config"]
        return {
            item["path"]: source["configMap"]["name"]
            for source in config_volume["projected"]["sources"]
            if "configMap" in source
            for item in source["configMap"].get("items", [])
        }

    assert projected("statefulsets", "lua-controller") == {
        "job_submit.lua": "lua-lua",
        "cli_filter.lua": "lua-lua",
    }
    assert projected("statefulsets", "lua-login") == {"cli_filter.lua": "lua-lua"}
    assert projected("deployments", "lua-rest") == {}

    bad = scripts["jobSubmitLua"]["script"].replace("slurm.NO_VAL", "7 // 2", 1)
    kube.patch(
        f"{API}/namespaces/{ns}/slurmclusters/lua",
        {"spec": {"slurmConfig": {"jobSubmitLua": {"script": bad}}}},
    )
    cond = control_plane.wait_for(
        lambda: next(
            (
                c
                for c in status(kube, ns, "slurmclusters", "lua").get("conditions", [])
                if c["type"] == "Ready" and c.get("reason") == "ConfigInvalid"
            ),
            None,
        ),
        60,
        "ConfigInvalid",
    )
    assert "job_submit.lua: slurmConfig.jobSubmitLua.script: line 2" in cond["message"]
    assert "is not Lua 5.1" in cond["message"]
    lua = kube.get(f"/api/v1/namespaces/{ns}/configmaps/lua-lua")
    assert lua["data"]["job_submit.lua"] == scripts["jobSubmitLua"]["script"]


def test_disruption_budgets_select_the_pods_switch_off_and_go_with_the_cluster(
    operator, kube, control_plane, op_namespaces
):
    """controller.podDisruptionBudget and login.podDisruptionBudget: the API server stores
    each budget with the selector of its component's Pods (the disruption controller counts
    them), owned by the SlurmCluster; switched off, or login down to one replica, the budget
    is deleted; with the SlurmCluster, the garbage collector removes it."""
    ns = op_namespaces[1]
    cluster = f"pdb{uuid.uuid4().hex[:4]}"
    pdbs = f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets"
    body = cluster_body(
        cluster,
        controller={"podDisruptionBudget": {"enabled": True}},
        login={"replicas": 2, "service": {"type": "ClusterIP"}},
        **NO_SYNCER,
    )
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", body)
    expected = {f"{cluster}-controller": (0, 1), f"{cluster}-login": (1, 2)}
    for name, (max_unavailable, replicas) in expected.items():
        budget = control_plane.wait_for(
            lambda n=name: kube.get(f"{pdbs}/{n}", missing_ok=True), 60, f"PDB {name}"
        )
        owner = budget["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("SlurmCluster", cluster)
        assert budget["spec"]["maxUnavailable"] == max_unavailable
        assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
        labels = budget["spec"]["selector"]["matchLabels"]
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        # The StatefulSet controller makes the Pods (one at a time: no Node makes them Ready
        # here), and the selector finds them and no other component's.
        pods = control_plane.wait_for(
            lambda s=selector: kube.list(f"/api/v1/namespaces/{ns}/pods", label_selector=s),
            60,
            f"Pods of {name}",
        )
        assert {p["metadata"]["ownerReferences"][0]["name"] for p in pods} == {name}
        control_plane.wait_for(
            lambda n=name, r=replicas: (
                (kube.get(f"{pdbs}/{n}").get("status") or {}).get("expectedPods") == r
            ),
            60,
            f"the disruption controller expects {replicas} Pods of {name} (from their owner)",
        )

    kube.patch(
        f"{API}/namespaces/{ns}/slurmclusters/{cluster}",
        {
            "spec": {
                "controller": {"podDisruptionBudget": {"enabled": False}},
                "login": {"replicas": 1},
            }
        },
    )
    for name in expected:
        control_plane.wait_for(
            lambda n=name: kube.get(f"{pdbs}/{n}", missing_ok=True) is None, 60, f"{name} deleted"
        )

    kube.patch(
        f"{API}/namespaces/{ns}/slurmclusters/{cluster}",
        {"spec": {"controller": {"podDisruptionBudget": {"enabled": True}}}},
    )
    control_plane.wait_for(
        lambda: kube.get(f"{pdbs}/{cluster}-controller", missing_ok=True), 60, "PDB again"
    )
    kube.delete(f"{API}/namespaces/{ns}/slurmclusters/{cluster}")
    control_plane.wait_for(
        lambda: kube.get(f"{pdbs}/{cluster}-controller", missing_ok=True) is None,
        60,
        "PDB garbage-collected with its SlurmCluster",
    )


def test_network_policies_are_stored_and_go_when_switched_off(
    operator, kube, control_plane, op_namespaces
):
    """networkPolicy: the API server takes each policy the operator builds (its own
    validation of selectors and peers), owned by the SlurmCluster; a component switched off
    loses its policy, and networkPolicy.enabled: false deletes the rest. (The e2e tier
    enforces them on real nodes.)"""
    ns = op_namespaces[1]
    cluster = f"np{uuid.uuid4().hex[:4]}"
    policies = f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"
    body = cluster_body(
        cluster,
        networkPolicy={
            "restFrom": [{"namespaceSelector": {"matchLabels": {"team": "ml"}}}],
            "sshFrom": [{"ipBlock": {"cidr": "192.0.2.0/24", "except": ["192.0.2.1/32"]}}],
        },
        **NO_SYNCER,
    )
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", body)

    def stored() -> dict[str, dict]:
        return {
            p["metadata"]["name"]: p
            for p in kube.list(policies, label_selector=f"{LABEL_CLUSTER}={cluster}")
        }

    expected = {f"{cluster}-{s}" for s in ("slurm", "login-ssh", "rest", "database")}
    found = control_plane.wait_for(
        lambda: (lambda got: got if set(got) == expected else None)(stored()), 60, "policies"
    )
    for policy in found.values():
        owner = policy["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("SlurmCluster", cluster)
    ssh = found[f"{cluster}-login-ssh"]["spec"]["ingress"]
    assert ssh == [
        {
            "ports": [{"protocol": "TCP", "port": 22}],
            "from": [{"ipBlock": {"cidr": "192.0.2.0/24", "except": ["192.0.2.1/32"]}}],
        }
    ]
    rest = found[f"{cluster}-rest"]["spec"]["ingress"][0]["from"]
    assert rest == [{"namespaceSelector": {"matchLabels": {"team": "ml"}}}]  # no operator Pod

    kube.patch(
        f"{API}/namespaces/{ns}/slurmclusters/{cluster}", {"spec": {"login": {"enabled": False}}}
    )
    control_plane.wait_for(
        lambda: set(stored()) == expected - {f"{cluster}-login-ssh"}, 60, "login-ssh deleted"
    )
    kube.patch(
        f"{API}/namespaces/{ns}/slurmclusters/{cluster}",
        {"spec": {"networkPolicy": {"enabled": False}}},
    )
    control_plane.wait_for(lambda: stored() == {}, 60, "every policy deleted")
    kube.delete(f"{API}/namespaces/{ns}/slurmclusters/{cluster}")


def test_ha_controllers_share_one_state_claim_and_the_api_server_refuses_a_switch(
    operator, kube, control_plane, op_namespaces
):
    """controller.ha: the API server stores a StatefulSet of a primary and its standby, kept
    on different Nodes, with one ReadWriteMany claim that both mount (kept with the cluster:
    no owner); slurm.conf lists both controllers by their Pods' names, primary first, with the
    short takeover; the slurmd Pods are told both. The CRD refuses HA without a shared claim,
    and a switch of HA on a stored cluster."""
    ns = op_namespaces[0]
    cluster = f"ha{uuid.uuid4().hex[:4]}"
    pool = f"h{uuid.uuid4().hex[:5]}"
    make_nodes(control_plane, pool, 1, third=51)
    shared = {"accessModes": ["ReadWriteMany"], "size": "1Gi"}
    controller = {
        "ha": {"enabled": True, "backups": 1},
        "stateVolume": shared,
        "podDisruptionBudget": {"enabled": True},
    }
    clusters = f"{API}/namespaces/{ns}/slurmclusters"
    kube.create(clusters, cluster_body(cluster, controller=controller, **NO_SYNCER))
    kube.create(f"{API}/namespaces/{ns}/nodesets", nodeset_body(cluster, cluster, pool))

    sts = control_plane.wait_for(
        lambda: kube.get(
            f"/apis/apps/v1/namespaces/{ns}/statefulsets/{cluster}-controller", missing_ok=True
        ),
        60,
        "controller StatefulSet",
    )
    assert sts["spec"]["replicas"] == 2
    assert "volumeClaimTemplates" not in sts["spec"]
    pod = sts["spec"]["template"]["spec"]
    state = next(v for v in pod["volumes"] if v["name"] == "state")
    assert state["persistentVolumeClaim"]["claimName"] == f"{cluster}-controller-state"
    (apart,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert apart["topologyKey"] == "kubernetes.io/hostname"
    assert apart["labelSelector"]["matchLabels"] == sts["spec"]["selector"]["matchLabels"]
    probe = next(c for c in pod["containers"] if c["name"] == "slurmctld")["livenessProbe"]
    assert "at $(hostname) is UP" in probe["exec"]["command"][-1]

    claim = control_plane.wait_for(
        lambda: kube.get(
            f"/api/v1/namespaces/{ns}/persistentvolumeclaims/{cluster}-controller-state",
            missing_ok=True,
        ),
        60,
        "the shared state claim",
    )
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert not claim["metadata"].get("ownerReferences")  # keepStateOnDelete
    budget = control_plane.wait_for(
        lambda: kube.get(
            f"/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets/{cluster}-controller",
            missing_ok=True,
        ),
        60,
        "controller PDB",
    )
    assert budget["spec"]["maxUnavailable"] == 1

    conf = kube.get(f"/api/v1/namespaces/{ns}/configmaps/{cluster}-slurm-config")["data"]
    hosts = [ln for ln in conf["slurm.conf"].splitlines() if ln.startswith("SlurmctldHost=")]
    svc = f"{cluster}-controller.{ns}.svc.cluster.local"
    assert hosts == [
        f"SlurmctldHost={cluster}-controller-{i}({cluster}-controller-{i}.{svc})" for i in (0, 1)
    ]
    assert "SlurmctldTimeout=10" in conf["slurm.conf"].splitlines()
    (slurmd,) = control_plane.wait_for(lambda: pods_of(kube, ns, cluster), 60, "a slurmd Pod")
    env = {e["name"]: e.get("value") for e in slurmd["spec"]["containers"][0]["env"]}
    assert env["SUNK_CONTROLLER"] == ",".join(
        f"{cluster}-controller-{i}.{svc}:6817" for i in (0, 1)
    )

    with pytest.raises(KubeAPIError) as caught:
        kube.patch(f"{clusters}/{cluster}", {"spec": {"controller": {"ha": {"enabled": False}}}})
    assert caught.value.status == 422 and "chosen when the cluster is created" in str(caught.value)
    single = cluster_body(f"{cluster}x", controller={"ha": {"enabled": True}}, **NO_SYNCER)
    with pytest.raises(KubeAPIError) as caught:
        kube.create(clusters, single)
    assert caught.value.status == 422 and "ha needs ReadWriteMany" in str(caught.value)

    kube.delete(f"{API}/namespaces/{ns}/nodesets/{cluster}")
    kube.delete(f"{clusters}/{cluster}")


def test_sigterm_stops_reconciling_at_once_and_the_operator_exits(operator, kube, op_namespaces):
    """kopf stops its own watchers at SIGTERM and waits for other tasks; the operator's
    cleanup handler stops its work queue, informers, Syncers and Pod Schedulers at once, so the
    process exits well inside a Pod's 30 s grace period and gives up its lease."""
    ns = op_namespaces[0]
    kube.create(f"{API}/namespaces/{ns}/slurmclusters", cluster_body("sigterm", **NO_SYNCER))
    try:
        time.sleep(3)  # reconciling
        log_file = sorted(operator.log_dir.glob("operator-*.log"))[-1]
        started = time.monotonic()
        operator.kill(signal.SIGTERM)
        took = time.monotonic() - started
        log = log_file.read_text()
        signal_at = log.index("Signal SIGTERM is received")
        assert log.find("stopping: no reconcile", signal_at) > signal_at, log[-3000:]
        assert " released " in log[signal_at:], log[-3000:]  # the lease, for the standby
        assert took < 15, f"the operator took {took:.1f}s to stop\n{log[-3000:]}"
    finally:
        kube.delete(f"{API}/namespaces/{ns}/slurmclusters/sigterm", missing_ok=True)
        operator.start()
        operator.wait_leader(timeout=90)
