"""Safe removal decisions: mark, wait for Slurm, delete; unmark when the plan keeps a Pod."""

from __future__ import annotations

from sunk.operator import names
from sunk.operator.nodeset.removal import decide, stamp
from sunk.syncer.plan import SlurmNode

NOW = 1_800_000_000.0


def pod(name, ready=True, reason=None, since=NOW - 30, deleting=False):
    meta = {"name": name, "annotations": {}}
    if reason is not None:
        meta["annotations"] = {names.ANN_REMOVAL: reason, names.ANN_REMOVAL_SINCE: stamp(since)}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status = "True" if ready else "False"
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": status}]}}


def view(**states):
    return {
        k: SlurmNode(k, frozenset(v), "k8s: x" if "DRAIN" in v else "") for k, v in states.items()
    }


def test_a_removal_first_marks_then_waits_for_the_drain_and_the_jobs():
    wanted = {"a": "scaled down"}
    first = decide([pod("a")], wanted, view(a=("ALLOCATED",)), True, 0, NOW)
    assert first.mark == {"a": "scaled down"} and first.delete == []
    # drained, job still running: wait (no grace limit)
    busy = decide([pod("a", reason="scaled down", since=NOW - 10**6)], wanted,
                  view(a=("MIXED", "DRAIN")), True, 0, NOW)  # fmt: skip
    assert busy.waiting == ["a"] and busy.delete == []
    # not drained yet (the Syncer has not run): wait even when idle
    assert decide([pod("a", reason="x")], wanted, view(a=("IDLE",)), True, 0, NOW).waiting == ["a"]
    # drained and idle: delete
    done = decide([pod("a", reason="x")], wanted, view(a=("IDLE", "DRAIN")), True, 0, NOW)
    assert done.delete == ["a"] and done.expired == []


def test_no_fresh_slurm_state_means_no_deletion_until_the_grace_period_ends():
    marked = [pod("a", reason="x", since=NOW - 100)]
    assert decide(marked, {"a": "x"}, None, True, 0, NOW).waiting == ["a"]
    assert decide(marked, {"a": "x"}, None, True, 101, NOW).waiting == ["a"]
    late = decide(marked, {"a": "x"}, view(a=("ALLOCATED", "DRAIN")), True, 100, NOW)
    assert late.delete == ["a"] and late.expired == ["a"]


def test_a_pod_slurm_never_saw_goes_at_once_and_without_a_syncer_everything_does():
    unready = decide([pod("a", ready=False)], {"a": "x"}, {}, True, 0, NOW)
    assert unready.delete == ["a"] and unready.mark == {}
    # ready but not in the view yet: it may just have registered; mark and wait
    assert decide([pod("a")], {"a": "x"}, {}, True, 0, NOW).mark == {"a": "x"}
    assert decide([pod("a")], {"a": "x"}, None, False, 0, NOW).delete == ["a"]


def test_kept_pods_are_unmarked_and_deleting_pods_left_alone():
    steps = decide(
        [pod("a", reason="scaled down"), pod("b", deleting=True, reason="x")],
        {"b": "x"},
        view(a=("IDLE", "DRAIN")),
        True,
        0,
        NOW,
    )
    assert steps.unmark == ["a"] and steps.delete == [] and steps.mark == {}


def test_an_edited_away_time_is_stamped_again():
    broken = pod("a", reason="x")
    del broken["metadata"]["annotations"][names.ANN_REMOVAL_SINCE]
    steps = decide([broken], {"a": "x"}, view(a=("ALLOCATED", "DRAIN")), True, 5, NOW)
    assert steps.mark == {"a": "x"} and steps.expired == [] and steps.waiting == ["a"]
