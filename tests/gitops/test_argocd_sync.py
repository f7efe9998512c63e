"""A real Argo CD syncs the generated app-of-apps; the tests run in file order on one
deployment (``deployed``, see conftest)."""

from __future__ import annotations

import copy
import time

from sunk.argocd import healthchecks
from tests.argocd.luarun import run_check
from tests.gitops.conftest import SLURM, VALUES, GitOps

GROUP = "sunk.coreweave.com"


def test_sync_waves_sunk_healthy_before_slurm_syncs(deployed: GitOps):
    """The root syncs wave 5 (the slurm child) only once wave 3 (the sunk child) is Healthy.
    The order is checked, not that Healthy stays: the sunk child has been seen Degraded for a
    moment during the bootstrap (a CRD not yet Established)."""
    sunk, slurm = deployed.apps[1], deployed.apps[2]
    timeline = "\n".join(
        f"{t:6.1f}s {app} {sync} {health}" for t, app, sync, health in deployed.timeline
    )
    first_slurm = next(t for t, app, *_ in deployed.timeline if app == slurm)
    sunk_healthy = [
        t for t, app, _, health in deployed.timeline if app == sunk and health == "Healthy"
    ]
    assert sunk_healthy and sunk_healthy[0] < first_slurm, timeline


def test_every_child_synced_and_healthy(deployed: GitOps):
    for name in deployed.apps:
        assert deployed.state(name) == ("Synced", "Healthy"), name


def _resource(app: dict, kind: str, name: str) -> dict:
    return next(
        r
        for r in app["status"]["resources"]
        if r.get("group") == GROUP and r["kind"] == kind and r["name"] == name
    )


def test_persisted_health_is_what_the_scripts_say_of_the_operators_status(deployed: GitOps):
    """status.resources carries NodeSet and SlurmCluster health (persisted), equal to what the
    shipped Lua scripts compute from the live objects the operator wrote."""
    app = deployed.argocd.app(deployed.apps[2])
    assert app is not None
    for kind, plural, name, key in (
        ("NodeSet", "nodesets", "cpu", healthchecks.NODESET_KEY),
        ("SlurmCluster", "slurmclusters", SLURM, healthchecks.SLURMCLUSTER_KEY),
    ):
        live = deployed.slurm_object(plural, name)
        assert live.get("status", {}).get("conditions"), f"{kind} {name} has no status"
        expected = run_check(key, live)
        reported = _resource(app, kind, name).get("health")
        assert reported is not None, f"{kind} {name}: health not persisted"
        assert reported["status"] == expected["status"] == "Healthy", (kind, reported, expected)


def _operation(deployed: GitOps, name: str) -> str:
    """The phase of the Application's last sync operation ('' if none)."""
    status = (deployed.argocd.app(name) or {}).get("status") or {}
    return (status.get("operationState") or {}).get("phase", "")


def _stays_synced(deployed: GitOps, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for name in deployed.apps:
            deployed.argocd.refresh(name, "normal")
        time.sleep(3)
        for name in deployed.apps:
            assert deployed.state(name)[0] == "Synced", f"{name} OutOfSync\n{deployed.debug()}"


def test_status_writes_and_a_replicas_change_leave_every_application_synced(deployed: GitOps):
    """The operator keeps writing status; a live spec.replicas change (an autoscaler's) is in
    ignoreDifferences: neither makes an Application OutOfSync across several refreshes."""
    writes = deployed.operator.writes() if deployed.operator else 0
    deployed.kube.patch(
        f"/apis/{GROUP}/v1alpha1/namespaces/{SLURM}/nodesets/cpu", {"spec": {"replicas": 2}}
    )
    _stays_synced(deployed, 20)
    assert deployed.slurm_object("nodesets", "cpu")["spec"]["replicas"] == 2
    assert deployed.operator and deployed.operator.writes() > writes
    deployed.kube.patch(
        f"/apis/{GROUP}/v1alpha1/namespaces/{SLURM}/nodesets/cpu", {"spec": {"replicas": 1}}
    )


def test_values_change_committed_is_synced_and_applied(deployed: GitOps):
    values = copy.deepcopy(VALUES)
    values["slurmConfig"] = {"MaxJobCount": 20000}
    sha = deployed.commit_values(values, "alpha: MaxJobCount 20000")
    slurm = deployed.apps[2]

    def synced_at_commit() -> bool:
        app = deployed.argocd.app(slurm) or {}
        sync = (app.get("status") or {}).get("sync") or {}
        return sync.get("revision") == sha and sync.get("status") == "Synced"

    deployed.wait(synced_at_commit, 90, f"{slurm} Synced at {sha[:8]}")

    def applied() -> bool:
        config = deployed.kube.get(f"/api/v1/namespaces/{SLURM}/configmaps/{SLURM}-slurm-config")
        return "MaxJobCount=20000" in config["data"]["slurm.conf"]

    deployed.wait(applied, 60, "the operator renders MaxJobCount=20000 into slurm.conf")
    deployed.wait(lambda: deployed.state(slurm) == ("Synced", "Healthy"), 90, f"{slurm} Healthy")


def test_invalid_nodeset_committed_is_degraded(deployed: GitOps):
    """A group mount naming no volume: the operator refuses the NodeSet (ConfigInvalid) and
    Argo CD shows the NodeSet, and so the Application, Degraded."""
    values = copy.deepcopy(VALUES)
    values["compute"]["nodes"]["cpu"]["volumeMounts"] = [{"name": "nope", "mountPath": "/nope"}]
    deployed.commit_values(values, "alpha: a mount naming no volume")
    slurm = deployed.apps[2]

    def degraded() -> dict | None:
        app = deployed.argocd.app(slurm) or {}
        if ((app.get("status") or {}).get("health") or {}).get("status") != "Degraded":
            return None
        return _resource(app, "NodeSet", "cpu").get("health")

    health = deployed.wait(degraded, 120, f"{slurm} Degraded")
    assert health["status"] == "Degraded"
    assert "nope" in health.get("message", ""), health


def test_pod_template_written_another_way_stays_synced(deployed: GitOps):
    """knownTypeFields: Argo CD diffs the NodeSet pod template as a PodSpec, so a live template
    that says the same in other words (1000m for 1, 8192Mi for 8Gi, as a mutating webhook
    might write it) is Synced, and self-heal leaves it alone. It runs last: the edit leaves a
    second field manager co-owning the containers list, which no later test should meet."""
    path = f"/apis/{GROUP}/v1alpha1/namespaces/{SLURM}/nodesets/cpu"
    # A sync still running (an earlier test's) would apply the template over the edit.
    deadline = time.monotonic() + 120
    while any(_operation(deployed, name) == "Running" for name in deployed.apps):
        assert time.monotonic() < deadline, f"a sync still running\n{deployed.debug()}"
        time.sleep(2)
    container = deployed.slurm_object("nodesets", "cpu")["spec"]["template"]["spec"]["containers"]
    assert container[0]["resources"]["requests"] == {"cpu": "1", "memory": "8Gi"}
    same = [{**container[0], "resources": {"requests": {"cpu": "1000m", "memory": "8192Mi"}}}]
    deployed.kube.patch(path, {"spec": {"template": {"spec": {"containers": same}}}})
    _stays_synced(deployed, 15)
    live = deployed.slurm_object("nodesets", "cpu")["spec"]["template"]["spec"]["containers"]
    assert live[0]["resources"]["requests"] == {"cpu": "1000m", "memory": "8192Mi"}
