"""controller.ha: the controller objects and slurm.conf for a primary and its standbys, and
the model's refusal of HA without a shared claim (validate says the same; the CRD too, in the
cluster tier)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sunk.models.crds import SlurmClusterSpec
from sunk.operator.cluster.objects import desired_objects
from tests.unit.operator.test_cluster_objects import context

SHARED = {"accessModes": ["ReadWriteMany"], "storageClassName": "nfs", "size": "5Gi"}


def ha_context(backups: int = 1, **controller):
    return context(
        controller={
            "ha": {"enabled": True, "backups": backups},
            "stateVolume": SHARED,
            **controller,
        }
    )


def of(objects, kind: str, name: str) -> dict:
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def conf_lines(ctx, key: str) -> list[str]:
    text = ctx.rendered.files["slurm.conf"]
    return [line for line in text.splitlines() if line.startswith(f"{key}=")]


def test_ha_controllers_mount_one_shared_claim_on_different_nodes():
    objects = desired_objects(ha_context(backups=2))
    sts = of(objects, "StatefulSet", "c-controller")
    assert sts["spec"]["replicas"] == 3
    assert "volumeClaimTemplates" not in sts["spec"]
    pod = sts["spec"]["template"]["spec"]
    state = next(v for v in pod["volumes"] if v["name"] == "state")
    assert state == {"name": "state", "persistentVolumeClaim": {"claimName": "c-controller-state"}}
    (apart,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert apart == {
        "labelSelector": {"matchLabels": sts["spec"]["selector"]["matchLabels"]},
        "topologyKey": "kubernetes.io/hostname",
    }
    claim = of(objects, "PersistentVolumeClaim", "c-controller-state")
    assert claim["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "5Gi"}},
        "storageClassName": "nfs",
    }
    assert "ownerReferences" not in claim["metadata"]  # keepStateOnDelete (the default)
    gone = of(desired_objects(ha_context(keepStateOnDelete=False)), "PersistentVolumeClaim",
              "c-controller-state")  # fmt: skip
    assert gone["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


def test_ha_keeps_a_users_affinity_and_budgets_one_controller_at_a_time():
    user = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["cpu"]}]}]}}}  # fmt: skip
    ctx = ha_context(affinity=user, podDisruptionBudget={"enabled": True})
    objects = desired_objects(ctx)
    pod = of(objects, "StatefulSet", "c-controller")["spec"]["template"]["spec"]
    assert pod["affinity"]["nodeAffinity"] == user["nodeAffinity"]
    assert "podAntiAffinity" in pod["affinity"]
    assert of(objects, "PodDisruptionBudget", "c-controller")["spec"]["maxUnavailable"] == 1
    single = desired_objects(context(controller={"podDisruptionBudget": {"enabled": True}}))
    assert of(single, "PodDisruptionBudget", "c-controller")["spec"]["maxUnavailable"] == 0


def test_ha_slurm_conf_lists_every_controller_primary_first_with_a_short_takeover():
    ctx = ha_context(backups=2)
    svc = "c-controller.ns.svc.cluster.local"
    assert conf_lines(ctx, "SlurmctldHost") == [
        f"SlurmctldHost=c-controller-{i}(c-controller-{i}.{svc})" for i in range(3)
    ]
    assert conf_lines(ctx, "SlurmctldTimeout") == ["SlurmctldTimeout=10"]
    # a user's timeout wins over ours
    mine = context(
        controller={"ha": {"enabled": True}, "stateVolume": SHARED},
        slurmConfig={"SlurmctldTimeout": 30},
    )
    assert conf_lines(mine, "SlurmctldTimeout") == ["SlurmctldTimeout=30"]


def test_one_controller_is_unchanged():
    ctx = context()
    assert conf_lines(ctx, "SlurmctldHost") == [
        "SlurmctldHost=c-controller-0(c-controller.ns.svc.cluster.local)"
    ]
    assert conf_lines(ctx, "SlurmctldTimeout") == []
    sts = of(desired_objects(ctx), "StatefulSet", "c-controller")
    assert sts["spec"]["replicas"] == 1
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["accessModes"] == ["ReadWriteOnce"]
    pod = sts["spec"]["template"]["spec"]
    probe = next(c for c in pod["containers"] if c["name"] == "slurmctld")["livenessProbe"]
    # the Pod's own controller must answer (with HA, a standby answers for the hung primary)
    assert '" at $(hostname) is UP"' in probe["exec"]["command"][-1]


@pytest.mark.parametrize(
    "controller",
    [
        {"ha": {"enabled": True}},
        {"ha": {"enabled": True}, "stateVolume": {"accessModes": ["ReadWriteOnce"]}},
    ],
)
def test_ha_without_a_shared_claim_is_refused(controller):
    with pytest.raises(ValidationError, match="ha needs ReadWriteMany"):
        SlurmClusterSpec.model_validate({"clusterName": "c", "controller": controller})


@pytest.mark.parametrize("backups", [0, 4])
def test_backups_are_one_to_three(backups):
    with pytest.raises(ValidationError):
        SlurmClusterSpec.model_validate(
            {
                "clusterName": "c",
                "controller": {"ha": {"enabled": True, "backups": backups}, "stateVolume": SHARED},
            }
        )


def probe_of(ctx) -> dict:
    sts = of(desired_objects(ctx), "StatefulSet", "c-controller")
    slurmctld = next(
        c for c in sts["spec"]["template"]["spec"]["containers"] if c["name"] == "slurmctld"
    )
    assert slurmctld["startupProbe"]["exec"] == slurmctld["livenessProbe"]["exec"]
    return slurmctld["livenessProbe"]


@pytest.mark.parametrize(
    ("ctx", "seconds"),
    [
        (context(), 12),
        (ha_context(backups=1), 22),
        (ha_context(backups=2), 32),
        (context(slurmConfig={"messagetimeout": 30}), 32),
    ],
)
def test_a_probe_waits_out_every_other_controllers_timeout(ctx, seconds):
    """`scontrol ping` pings each controller in turn, up to MessageTimeout each: a standby's
    probe must not fail while the primary hangs, so its bound covers every controller."""
    probe = probe_of(ctx)
    assert probe["exec"]["command"][-1].startswith(f"timeout {seconds} scontrol ping")
    assert probe["timeoutSeconds"] == seconds + 2
