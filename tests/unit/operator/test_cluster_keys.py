"""The SlurmCluster reconcile and its key Secrets, on the in-memory API
(``tests.fakes.kube.FakeKube``) with the Argo CD tests' scenario objects: fingerprints in
status.keys, KeyMissing with one Event, regeneration only on request, user-provided keys never
made. The cluster tier proves the same on a real API server."""

from __future__ import annotations

import pytest

from sunk.operator import names
from sunk.operator.cluster import keyguard
from tests.argocd import operator_status as op
from tests.fakes.kube import FakeKube

KEY_SECRETS = {
    "munge": "slurm-munge",
    "jwt": "slurm-jwt",
    "sshHostKeys": "slurm-login-hostkeys",
    "databasePassword": "slurm-db",
    "databaseRootPassword": "slurm-db-root",
}


def reconcile(kube: FakeKube) -> dict:
    return op.reconcile(kube, "SlurmCluster", "slurm")


def secret_data(kube: FakeKube, name: str) -> dict | None:
    obj = kube.objects.get(("v1", "secrets", op.NS, name))
    return None if obj is None else obj["data"]


def delete_secret(kube: FakeKube, name: str) -> None:
    del kube.objects[("v1", "secrets", op.NS, name)]


def events(kube: FakeKube, reason: str) -> list[dict]:
    return [e for e in kube.of_kind("Event") if e["reason"] == reason]


def ready(cluster: dict) -> dict:
    return next(c for c in cluster["status"]["conditions"] if c["type"] == "Ready")


def annotate(kube: FakeKube, value: str = "true") -> None:
    cluster = kube.read("SlurmCluster", "slurm", op.NS)
    cluster["metadata"].setdefault("annotations", {})[names.ANN_REGENERATE_KEYS] = value
    kube.put(cluster)


@pytest.fixture
def kube() -> FakeKube:
    kube = FakeKube()
    kube.put(op.slurm_cluster())
    reconcile(kube)
    op.workloads_ready(kube)
    return kube


def test_status_records_a_fingerprint_of_every_key_the_operator_created(kube):
    cluster = reconcile(kube)
    assert cluster["status"]["keys"] == {
        field: keyguard.record(secret, secret_data(kube, secret))
        for field, secret in KEY_SECRETS.items()
    }
    assert ready(cluster)["reason"] == "AllComponentsReady"
    writes = kube.writes
    reconcile(kube)
    assert kube.writes == writes  # steady state: the records cause no write


def test_a_deleted_key_is_reported_once_and_not_regenerated(kube):
    recorded = reconcile(kube)["status"]["keys"]["munge"]
    delete_secret(kube, "slurm-munge")
    for _ in range(3):
        cluster = reconcile(kube)
    assert secret_data(kube, "slurm-munge") is None
    cond = ready(cluster)
    assert (cond["status"], cond["reason"]) == ("False", "KeyMissing")
    assert f"Secret slurm-munge (fingerprint {recorded['fingerprint']})" in cond["message"]
    assert cluster["status"]["keys"]["munge"] == recorded
    (event,) = events(kube, "KeyMissing")
    assert event["message"] == cond["message"] and event["type"] == "Warning"
    writes = kube.writes
    reconcile(kube)
    assert kube.writes == writes


def test_the_annotation_regenerates_records_and_is_removed(kube):
    old = reconcile(kube)["status"]["keys"]
    delete_secret(kube, "slurm-munge")
    delete_secret(kube, "slurm-jwt")
    reconcile(kube)
    annotate(kube)
    cluster = reconcile(kube)
    keys = cluster["status"]["keys"]
    for field, secret in (("munge", "slurm-munge"), ("jwt", "slurm-jwt")):
        assert keys[field] == keyguard.record(secret, secret_data(kube, secret))
        assert keys[field]["fingerprint"] != old[field]["fingerprint"]
    assert keys["sshHostKeys"] == old["sshHostKeys"]
    assert names.ANN_REGENERATE_KEYS not in (cluster["metadata"].get("annotations") or {})
    (event,) = events(kube, "KeysRegenerated")
    assert "slurm-munge" in event["message"] and "slurm-jwt" in event["message"]
    assert keys["munge"]["fingerprint"] in event["message"]
    assert ready(reconcile(kube))["reason"] == "AllComponentsReady"


def test_the_annotation_alone_replaces_nothing_and_is_removed(kube):
    before = reconcile(kube)["status"]["keys"]
    annotate(kube)
    cluster = reconcile(kube)
    assert cluster["status"]["keys"] == before
    assert names.ANN_REGENERATE_KEYS not in cluster["metadata"]["annotations"]
    (event,) = events(kube, "KeysRegenerated")
    assert event["type"] == "Normal" and "none was replaced" in event["message"]
    # The spent annotation does not remake a key that disappears afterwards.
    delete_secret(kube, "slurm-jwt")
    assert ready(reconcile(kube))["reason"] == "KeyMissing"
    assert secret_data(kube, "slurm-jwt") is None


def test_a_restored_secret_clears_key_missing(kube):
    reconcile(kube)
    saved = kube.read("Secret", "slurm-munge", op.NS)
    delete_secret(kube, "slurm-munge")
    assert ready(reconcile(kube))["reason"] == "KeyMissing"
    kube.put(saved)
    assert ready(reconcile(kube))["reason"] == "AllComponentsReady"
    assert events(kube, "KeyChanged") == []


def test_a_secret_replaced_by_hand_is_recorded_with_an_event(kube):
    reconcile(kube)
    replaced = kube.read("Secret", "slurm-jwt", op.NS)
    replaced["data"] = {"jwt.key": "b3RoZXI="}
    kube.put(replaced)
    cluster = reconcile(kube)
    assert cluster["status"]["keys"]["jwt"] == keyguard.record("slurm-jwt", replaced["data"])
    (event,) = events(kube, "KeyChanged")
    assert "slurm-jwt" in event["message"]
    reconcile(kube)
    assert len(events(kube, "KeyChanged")) == 1


def test_user_provided_keys_are_neither_recorded_nor_made():
    kube = FakeKube()
    kube.put(
        op.slurm_cluster(
            {"munge": {"existingSecret": "my-munge"}, "jwt": {"existingSecret": "my-jwt"}}
        )
    )
    cluster = reconcile(kube)
    assert "munge" not in cluster["status"]["keys"] and "jwt" not in cluster["status"]["keys"]
    for name in ("my-munge", "my-jwt", "slurm-munge", "slurm-jwt"):
        assert secret_data(kube, name) is None
    annotate(kube)
    reconcile(kube)
    for name in ("my-munge", "my-jwt", "slurm-munge", "slurm-jwt"):
        assert secret_data(kube, name) is None
    controller = kube.read("StatefulSet", "slurm-controller", op.NS)
    volumes = controller["spec"]["template"]["spec"]["volumes"]
    assert {"secretName": "my-munge", "defaultMode": 0o400} in [v.get("secret") for v in volumes]
