"""Node locking's pure part: holders, states, the Node patch, who must leave, stale locks."""

from __future__ import annotations

import calendar
import time

import pytest

from sunk.syncer import lock


def node(annotations=None, taints=None, rv="7"):
    return {
        "metadata": {"name": "n0", "resourceVersion": rv, "annotations": annotations or {}},
        "spec": {"taints": taints or []},
    }


def pod(name, tolerations=None, phase="Running"):
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"tolerations": tolerations or []},
        "status": {"phase": phase},
    }


def test_holders_round_trip_sorted_by_job_and_strict_wins():
    h = lock.Holders().add("15", False).add("3", True).add("15", True)
    assert str(h) == "3:strict,15:strict"
    assert lock.Holders.parse(str(h)) == h
    assert str(h.remove("3")) == "15:strict"
    assert not h.remove("3").remove("15")


def test_holders_ignore_what_we_did_not_write():
    assert str(lock.Holders.parse("12, x, 4:strict,,;rm")) == "4:strict,12"


@pytest.mark.parametrize(
    ("holders", "left", "state"),
    [
        ("", False, "false"),
        ("", True, "false"),
        ("4", True, "pending"),
        ("4", False, "locked"),
        ("4,5:strict", False, "locked_strict"),
    ],
)
def test_state(holders, left, state):
    assert lock.locked_state(lock.Holders.parse(holders), left) == state
    assert state in lock.STATES


def test_node_patch_adds_the_taint_once_and_keeps_other_taints():
    other = {"key": "gpu", "value": "x", "effect": "NoSchedule"}
    n = node(taints=[other, dict(lock.TAINT)])
    patch = lock.node_patch(n, lock.Holders.parse("4"), "locked", "2026-01-01T00:00:00Z")
    assert patch["spec"]["taints"] == [other, lock.TAINT]
    assert patch["metadata"]["resourceVersion"] == "7"  # a concurrent writer gets 409
    assert patch["metadata"]["annotations"] == {
        lock.ANN_STATE: "locked",
        lock.ANN_JOBS: "4",
        lock.ANN_SINCE: "2026-01-01T00:00:00Z",
    }


def test_node_patch_without_holders_removes_taint_and_annotations():
    n = node({lock.ANN_JOBS: "4"}, [dict(lock.TAINT)])
    patch = lock.node_patch(n, lock.Holders(), "false", "now")
    assert patch["spec"]["taints"] == []
    assert patch["metadata"]["annotations"] == {
        lock.ANN_STATE: "false",
        lock.ANN_JOBS: None,
        lock.ANN_SINCE: None,
    }
    assert not lock.has_taint({"spec": patch["spec"]})
    assert lock.has_taint(n)


@pytest.mark.parametrize(
    ("toleration", "tolerates"),
    [
        ({"key": "sunk.coreweave.com/lock", "operator": "Exists", "effect": "NoExecute"}, True),
        ({"key": "sunk.coreweave.com/lock", "operator": "Exists"}, True),
        ({"operator": "Exists"}, True),  # tolerates everything
        ({"key": "sunk.coreweave.com/lock", "value": "true", "effect": "NoExecute"}, True),
        ({"key": "sunk.coreweave.com/lock", "value": "false", "effect": "NoExecute"}, False),
        ({"key": "sunk.coreweave.com/lock", "operator": "Exists", "effect": "NoSchedule"}, False),
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_tolerates_as_the_taint_manager_judges(toleration, tolerates):
    assert lock.tolerates(pod("p", [toleration])) is tolerates


def test_victims_are_running_pods_that_do_not_tolerate():
    tolerant = pod("slurmd", [{"key": "sunk.coreweave.com/lock", "operator": "Exists"}])
    pods = [tolerant, pod("web"), pod("done", phase="Succeeded"), pod("failed", phase="Failed")]
    assert [p["metadata"]["name"] for p in lock.victims(pods)] == ["web"]


def test_stale_only_when_held_idle_and_old():
    now = time.time()
    old = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 60))
    fresh = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 5))
    held = lock.Holders.parse("4")
    assert lock.stale(held, old, now, busy=False)
    assert not lock.stale(held, fresh, now, busy=False)  # the job may not show yet
    assert not lock.stale(held, old, now, busy=True)
    assert not lock.stale(held, old, now, busy=None)  # no Slurm record: no verdict
    assert not lock.stale(lock.Holders(), old, now, busy=False)
    assert lock.stale(held, "garbage", now, busy=False)  # no readable time: idle decides
    assert calendar.timegm(time.strptime(old, "%Y-%m-%dT%H:%M:%SZ")) < now
