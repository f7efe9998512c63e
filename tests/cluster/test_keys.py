"""Keys are never silently replaced, on the real API server with the operator as a process.

A deleted key Secret that the SlurmCluster's status recorded makes the cluster Ready=False
KeyMissing with one Event, and stays deleted over many reconciles; the regenerate-keys
annotation makes it again, records the new fingerprint and is removed.

This test runs an operator of its own on a fresh namespace with a 2-second resync: nothing
watches Secrets, so a deletion is noticed at the next resync (60 s by default)."""

from __future__ import annotations

import hashlib
import json
import signal
from collections.abc import Iterator

import pytest

from tests.cluster.operator_process import OperatorProcess

API = "/apis/sunk.coreweave.com/v1alpha1"
ANNOTATION = "sunk.coreweave.com/regenerate-keys"


@pytest.fixture
def fast_operator(crds, control_plane, namespace, tmp_path) -> Iterator[OperatorProcess]:
    proc = OperatorProcess(
        control_plane.kubeconfig,
        [namespace],
        tmp_path,
        namespace,
        extra_args=("--resync-seconds", "2"),
    ).start()
    proc.wait_leader()
    yield proc
    proc.kill(signal.SIGTERM)


def fingerprint(secret: dict) -> str:
    """As the README documents it: sha256 of the data as compact JSON with sorted keys."""
    text = json.dumps(secret["data"], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_a_deleted_key_is_reported_not_regenerated_until_asked(
    fast_operator, kube, control_plane, namespace
):
    ns = namespace
    cluster_path = f"{API}/namespaces/{ns}/slurmclusters/kappa"
    secrets = f"/api/v1/namespaces/{ns}/secrets"
    kube.create(
        f"{API}/namespaces/{ns}/slurmclusters",
        {
            "apiVersion": "sunk.coreweave.com/v1alpha1",
            "kind": "SlurmCluster",
            "metadata": {"name": "kappa"},
            "spec": {
                "clusterName": "kappa",
                "syncer": {"enabled": False},
                "login": {"service": {"type": "ClusterIP"}},
            },
        },
    )

    def keys():
        return (kube.get(cluster_path).get("status") or {}).get("keys") or {}

    recorded = control_plane.wait_for(
        lambda: keys() if {"munge", "jwt"} <= set(keys()) else None, 60, "status.keys"
    )
    for field, name in (("munge", "kappa-munge"), ("jwt", "kappa-jwt")):
        secret = kube.get(f"{secrets}/{name}")
        assert recorded[field] == {"secretName": name, "fingerprint": fingerprint(secret)}
        assert secret["immutable"] is True

    def ready():
        conds = (kube.get(cluster_path).get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "Ready"), {})

    def events(reason):
        return [
            e
            for e in kube.list(
                f"/api/v1/namespaces/{ns}/events", field_selector="involvedObject.name=kappa"
            )
            if e["reason"] == reason
        ]

    kube.delete(f"{secrets}/kappa-munge")
    cond = control_plane.wait_for(
        lambda: ready() if ready().get("reason") == "KeyMissing" else None, 60, "KeyMissing"
    )
    assert cond["status"] == "False"
    old = recorded["munge"]["fingerprint"]
    assert f"Secret kappa-munge (fingerprint {old})" in cond["message"]
    assert ANNOTATION in cond["message"]
    # Several more reconciles (the resync runs every 2 s): still gone, still one Event.
    seen = fast_operator.reconciles("SlurmCluster")
    control_plane.wait_for(
        lambda: fast_operator.reconciles("SlurmCluster") >= seen + 4 or None, 60, "4 reconciles"
    )
    assert kube.get(f"{secrets}/kappa-munge", missing_ok=True) is None
    (event,) = events("KeyMissing")
    assert event["type"] == "Warning" and event["message"] == cond["message"]
    assert keys()["munge"] == recorded["munge"]

    # Asked for: a new key, its fingerprint recorded, the annotation spent.
    kube.patch(cluster_path, {"metadata": {"annotations": {ANNOTATION: "true"}}})
    new = control_plane.wait_for(
        lambda: kube.get(f"{secrets}/kappa-munge", missing_ok=True), 30, "a new munge Secret"
    )
    assert new["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "sunk-operator"
    control_plane.wait_for(
        lambda: keys()["munge"]["fingerprint"] == fingerprint(new) or None, 30, "new record"
    )
    assert fingerprint(new) != old
    assert keys()["jwt"] == recorded["jwt"]

    def annotations():
        return kube.get(cluster_path)["metadata"].get("annotations") or {}

    control_plane.wait_for(lambda: ANNOTATION not in annotations() or None, 30, "annotation gone")
    control_plane.wait_for(
        lambda: ready().get("reason") not in (None, "KeyMissing") or None, 30, "KeyMissing gone"
    )
    (regenerated,) = events("KeysRegenerated")
    assert "kappa-munge" in regenerated["message"] and fingerprint(new) in regenerated["message"]
    # The spent annotation makes nothing more: the Secret stays the one just recorded.
    seen = fast_operator.reconciles("SlurmCluster")
    control_plane.wait_for(
        lambda: fast_operator.reconciles("SlurmCluster") >= seen + 2 or None, 60, "2 reconciles"
    )
    assert kube.get(f"{secrets}/kappa-munge")["metadata"]["uid"] == new["metadata"]["uid"]
    assert len(events("KeyMissing")) == 1
