"""The Syncer's decisions on plain dicts: k8s: drains, resumes, and Slurm drains mirrored."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from sunk.syncer.plan import DRAIN_ANNOTATION, POD_CONDITION, SlurmNode, drain_cause, plan
from sunk.syncer.restd import mint_token


def pod(name: str, node: str = "n1", ready: bool = True, deleting: bool = False, mark=None):
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if mark is not None:
        conditions.append({"type": POD_CONDITION, "status": "True", "message": mark})
    meta = {"name": name, "namespace": "ns"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"conditions": conditions}}


def node(name: str = "n1", cordoned: bool = False, reason: str = "", mark=None):
    annotations = {}
    if reason:
        annotations["node.coreweave.cloud/cordonReason"] = reason
    if mark is not None:
        annotations[DRAIN_ANNOTATION] = mark
    return {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"unschedulable": True} if cordoned else {},
    }


def slurm(name: str, *states: str, reason: str = "") -> dict[str, SlurmNode]:
    return {name: SlurmNode(name, frozenset(states or ("IDLE",)), reason)}


def test_each_kubernetes_cause_drains_with_a_k8s_reason():
    assert drain_cause(pod("p", ready=False), node()) == "k8s: Pod p not ready"
    assert drain_cause(pod("p", deleting=True), node()) == "k8s: Pod p is being deleted"
    assert drain_cause(pod("p"), node(cordoned=True)) == "k8s: Node n1 cordoned"
    assert drain_cause(pod("p"), node(cordoned=True, reason="bad DIMM")) == (
        "k8s: Node n1 cordoned: bad DIMM"
    )
    assert drain_cause(pod("p"), node()) is None
    actions = plan([pod("p", ready=False)], {"n1": node()}, slurm("p"))
    assert actions.drain == {"p": "k8s: Pod p not ready"}


def test_cleared_cause_resumes_and_an_undrain_under_a_cause_drains_again():
    drained = slurm("p", "IDLE", "DRAIN", reason="k8s: Node n1 cordoned")
    assert plan([pod("p")], {"n1": node()}, drained).resume == ["p"]
    # someone resumed it in Slurm while the Node is still cordoned
    assert plan([pod("p")], {"n1": node(cordoned=True)}, slurm("p")).drain == {
        "p": "k8s: Node n1 cordoned"
    }
    # steady: drained for the right reason, nothing to do
    assert plan([pod("p")], {"n1": node(cordoned=True)}, drained).empty()


def test_a_reason_that_details_the_cause_is_kept_and_a_stale_one_replaced():
    """A slurmd whose s6 oneshot failed registers drained with the cause and its detail."""
    detailed = "k8s: Pod p not ready: s6 oneshot setup failed (exit 3)"
    drained = slurm("p", "IDLE", "DRAIN", reason=detailed)
    assert plan([pod("p", ready=False)], {"n1": node()}, drained).empty()
    # the cause changed: the detail of the old one goes
    assert plan([pod("p", ready=False)], {"n1": node(cordoned=True)}, drained).drain == {
        "p": "k8s: Node n1 cordoned"
    }
    # the Pod became ready (a new one, fixed): the drain is lifted
    assert plan([pod("p")], {"n1": node()}, drained).resume == ["p"]
    # a reason that merely starts with the same words is not a detail of the cause
    lookalike = slurm("p", "IDLE", "DRAIN", reason="k8s: Pod p not ready yet")
    assert plan([pod("p", ready=False)], {"n1": node()}, lookalike).drain == {
        "p": "k8s: Pod p not ready"
    }


def test_a_drain_that_started_in_slurm_is_never_touched_and_is_mirrored():
    admin = slurm("p", "IDLE", "DRAIN", reason="bad GPU")
    actions = plan([pod("p")], {"n1": node()}, admin)
    assert not actions.resume and not actions.drain
    assert actions.node_marks == {"n1": "bad GPU"}
    assert actions.pod_marks == {("ns", "p"): "bad GPU"}
    # also under a Kubernetes cause: the Slurm drain stays as it is
    assert not plan([pod("p", ready=False)], {"n1": node()}, admin).drain
    # mirrored already: steady
    assert plan([pod("p", mark="bad GPU")], {"n1": node(mark="bad GPU")}, admin).empty()
    # Slurm resumed it: the marks go
    cleared = plan([pod("p", mark="bad GPU")], {"n1": node(mark="bad GPU")}, slurm("p"))
    assert cleared.node_marks == {"n1": None} and cleared.pod_marks == {("ns", "p"): None}


def test_our_own_drain_is_not_mirrored_and_unregistered_pods_are_skipped():
    ours = slurm("p", "IDLE", "DRAIN", reason="k8s: Pod p not ready")
    actions = plan([pod("p", ready=False)], {"n1": node()}, ours)
    assert actions.empty()
    assert plan([pod("q", ready=False)], {"n1": node()}, ours).empty()


def test_restd_states_parse_and_down_nodes_are_not_resumed():
    parsed = SlurmNode.from_restd({"name": "p", "state": ["down", "DRAIN"], "reason": "k8s: x"})
    assert parsed.states == frozenset({"DOWN", "DRAIN"}) and parsed.drained_by_us
    assert plan([pod("p")], {"n1": node()}, {"p": parsed}).resume == []


def test_minted_token_is_an_hs256_jwt_slurm_verifies():
    key = b"k" * 32
    header, claims, signature = mint_token(key, "slurm", 600).split(".")
    expected = hmac.new(key, f"{header}.{claims}".encode(), hashlib.sha256).digest()
    assert base64.urlsafe_b64decode(signature + "==") == expected
    body = json.loads(base64.urlsafe_b64decode(claims + "=="))
    assert body["sun"] == "slurm" and body["exp"] - body["iat"] == 600


def test_a_pod_marked_for_removal_is_drained_with_its_reason():
    marked = pod("p")
    marked["metadata"]["annotations"] = {"sunk.coreweave.com/removal": "scaled down"}
    assert drain_cause(marked, node()) == "k8s: Pod p is being removed: scaled down"
    assert plan([marked], {"n1": node()}, slurm("p", "ALLOCATED")).drain == {
        "p": "k8s: Pod p is being removed: scaled down"
    }


def test_dynamic_nodes_without_a_pod_are_forgotten_and_static_ones_kept():
    view = {
        **slurm("gone", "IDLE", "DRAIN", "DYNAMIC_NORM", reason="k8s: Pod gone is being removed"),
        **slurm("static", "IDLE"),
        **slurm("p", "IDLE", "DYNAMIC_NORM"),
    }
    actions = plan([pod("p")], {"n1": node()}, view)
    assert actions.forget == ["gone"]
    assert not actions.drain and not actions.resume


def test_a_busy_dynamic_node_whose_pod_is_gone_goes_down_before_it_is_forgotten():
    # Its Node was deleted under a running job: set DOWN so Slurm requeues or ends the job now
    # (not after SlurmdTimeout), then forget the record once no job holds it.
    view = {
        **slurm("lost", "ALLOCATED", "DYNAMIC_NORM"),
        **slurm("static", "ALLOCATED"),
        **slurm("p", "MIXED", "DYNAMIC_NORM"),
    }
    actions = plan([pod("p")], {"n1": node()}, view)
    assert actions.down == {"lost": "k8s: Pod lost is gone"}
    assert actions.forget == [] and not actions.empty()
    # Slurm took it down: its jobs are being ended, so the record may go
    down = slurm("lost", "ALLOCATED", "DOWN", "DYNAMIC_NORM", reason="k8s: Pod lost is gone")
    again = plan([pod("p")], {"n1": node()}, {**view, **down})
    assert again.down == {} and again.forget == ["lost"]
    # an idle one is forgotten straight away
    idle = plan([pod("p")], {"n1": node()}, slurm("lost", "IDLE", "DYNAMIC_NORM"))
    assert idle.down == {} and idle.forget == ["lost"]


def test_slurm_state_classes_for_scale_down():
    def cls(*states):
        return SlurmNode("x", frozenset(states), "").activity

    assert cls("IDLE") == "idle" and cls("IDLE", "DRAIN") == "idle"
    assert cls("ALLOCATED") == "running" and cls("MIXED", "DRAIN") == "draining"
    assert cls("IDLE", "NOT_RESPONDING") == "not-ready" and cls("DOWN") == "not-ready"
    assert SlurmNode("x", frozenset({"IDLE", "DRAIN"}), "").removable
    assert not SlurmNode("x", frozenset({"COMPLETING", "DRAIN"}), "").removable
