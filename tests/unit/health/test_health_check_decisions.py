"""The health check runner's decisions, and the Syncer's, on one shared drain reason
(`pytest -k "health_check or verify_undrain"`)."""

from __future__ import annotations

import pytest

from sunk.health.reasons import Decision, Result, after_k8s, decide, health_reason, parse
from sunk.syncer.plan import ConditionRule, SlurmNode, drain_cause, plan
from tests.unit.syncer.test_plan import node, pod, slurm

OK, BAD = Result(True), Result(False, "/scratch has 1.0% free, needs 5%")
ALL = {"disk-free", "mounts"}
DISK = "health: disk-free: /scratch has 1.0% free, needs 5%"


def test_health_check_failure_drains_a_node_in_service_with_the_checks_reason():
    assert decide(False, "", {"disk-free": BAD, "mounts": OK}, ALL) == Decision("drain", DISK)
    assert decide(False, "", {"disk-free": OK}, ALL) == Decision()


def test_health_check_drain_is_lifted_only_by_a_passing_run_of_the_same_check():
    assert decide(True, DISK, {"disk-free": OK, "mounts": OK}, ALL) == Decision("resume")
    # the check did not run (an idle-only check on a busy node): not passed yet
    assert decide(True, DISK, {"mounts": OK}, ALL) == Decision()
    # still failing: the first detail stays
    assert decide(True, DISK, {"disk-free": Result(False, "other")}, ALL) == Decision()
    # the check passes, another fails: the reason moves to the other
    moved = decide(True, DISK, {"disk-free": OK, "mounts": Result(False, "not mounted: /x")}, ALL)
    assert moved == Decision("drain", "health: mounts: not mounted: /x")
    # a check no longer configured: lifted once every check that ran passed
    assert decide(True, "health: gone: x", {"mounts": OK}, ALL) == Decision("resume")


def test_health_check_never_touches_an_admins_reason():
    for reason in ("bad DIMM, ticket 42", "Prolog error", "Not responding"):
        assert decide(True, reason, {"disk-free": BAD}, ALL) == Decision()
        assert decide(True, reason, {"disk-free": OK}, ALL) == Decision()


def test_verify_undrain_waits_for_a_run_where_every_check_passes():
    reason = "alice: replaced GPU sunk:verify-undrain"
    assert decide(True, reason, {"disk-free": BAD, "mounts": OK}, ALL) == Decision()
    assert decide(True, reason, {}, ALL) == Decision()  # nothing ran: nothing verified
    assert decide(True, reason, {"disk-free": OK, "mounts": OK}, ALL) == Decision("resume")


def test_health_check_and_k8s_reasons_keep_each_others_part():
    k8s = "k8s: Node n1 cordoned: bad DIMM"
    both = f"{k8s} | {DISK}"
    assert parse(both).k8s == k8s and parse(both).check == "disk-free"
    # a failing check on a node the Syncer drained: both parts, the Syncer's first
    assert decide(True, k8s, {"disk-free": BAD}, ALL) == Decision("drain", both)
    # the check passes: the Syncer's part stays, drained
    assert decide(True, both, {"disk-free": OK}, ALL) == Decision("drain", k8s)
    # the cause clears: the check's part stays, drained
    assert after_k8s(both, None) == Decision("drain", DISK)
    assert after_k8s(k8s, None) == Decision("resume")
    # a new cause on a health drain goes in front; an unchanged one is left alone
    assert after_k8s(DISK, "k8s: Pod p not ready") == Decision(
        "drain", f"k8s: Pod p not ready | {DISK}"
    )
    assert after_k8s(both, "k8s: Node n1 cordoned") == Decision()


def test_health_check_reason_is_one_line_without_our_separator():
    text = health_reason("script", "line one | two\nline three" + "x" * 400)
    assert "\n" not in text and " | " not in text and len(text) <= 230
    assert text.startswith("health: script: line one / two line three")


@pytest.mark.parametrize(
    ("reason", "ready", "cordoned", "drain", "resume"),
    [
        # health alone, Pod fine: the Syncer leaves it to the runner
        (DISK, True, False, {}, []),
        # health alone, Node cordoned: the cause goes in front
        (DISK, True, True, {"p": f"k8s: Node n1 cordoned | {DISK}"}, []),
        # both, the cordon lifted: the check's part stays
        (f"k8s: Node n1 cordoned | {DISK}", True, False, {"p": DISK}, []),
        # both, cause unchanged: nothing
        (f"k8s: Node n1 cordoned | {DISK}", True, True, {}, []),
        # the Syncer's alone, cleared: resumed as before
        ("k8s: Node n1 cordoned", True, False, {}, ["p"]),
    ],
)
def test_health_check_part_survives_the_syncers_plan(reason, ready, cordoned, drain, resume):
    actions = plan(
        [pod("p", ready=ready)],
        {"n1": node(cordoned=cordoned)},
        {"p": SlurmNode("p", frozenset({"IDLE", "DRAIN"}), reason)},
    )
    assert actions.drain == drain
    assert actions.resume == resume


def test_health_check_drain_shows_on_the_node_as_a_slurm_drain():
    actions = plan([pod("p")], {"n1": node()}, slurm("p", "IDLE", "DRAIN", reason=DISK))
    assert actions.node_marks == {"n1": DISK}


XID = ConditionRule("GpuXidError")
XID_VERIFY = ConditionRule("GpuXidError", verify=True)


def with_condition(status: str, message: str = "XID 79 on GPU 3") -> dict:
    n = node()
    n["status"] = {"conditions": [{"type": "GpuXidError", "status": status, "message": message}]}
    return n


def test_health_check_node_condition_drains_and_clears():
    drained = slurm("p", "IDLE", "DRAIN", reason="k8s: GpuXidError: XID 79 on GPU 3")
    actions = plan([pod("p")], {"n1": with_condition("True")}, slurm("p"), (XID,))
    assert actions.drain == {"p": "k8s: GpuXidError: XID 79 on GPU 3"}
    assert plan([pod("p")], {"n1": with_condition("True")}, drained, (XID,)).empty()
    # cleared, or no longer listed: resumed
    assert plan([pod("p")], {"n1": with_condition("False")}, drained, (XID,)).resume == ["p"]
    assert plan([pod("p")], {"n1": with_condition("True")}, drained).resume == ["p"]
    # a rule for another status, and a message made one line without our separator
    unknown = ConditionRule("GpuXidError", status="Unknown")
    assert plan([pod("p")], {"n1": with_condition("True")}, slurm("p"), (unknown,)).empty()
    odd = plan([pod("p")], {"n1": with_condition("True", "a | b\nc")}, slurm("p"), (XID,))
    assert odd.drain == {"p": "k8s: GpuXidError: a / b c"}
    # no message: the type alone
    assert drain_cause(pod("p"), with_condition("True", ""), (XID,)) == "k8s: GpuXidError"


def test_verify_undrain_after_a_node_condition_clears_waits_for_a_passing_check():
    k8s = "k8s: GpuXidError: XID 79 on GPU 3"
    drained = slurm("p", "IDLE", "DRAIN", reason=k8s)
    pending = f"{k8s} (cleared; sunk:verify-undrain)"
    actions = plan([pod("p")], {"n1": with_condition("False")}, drained, (XID_VERIFY,))
    assert actions.drain == {"p": pending} and not actions.resume
    # the Syncer leaves the pending reason to the runner, and it is not a Slurm drain
    waiting = slurm("p", "IDLE", "DRAIN", reason=pending)
    steady = plan([pod("p")], {"n1": with_condition("False")}, waiting, (XID_VERIFY,))
    assert steady.empty()
    # the condition comes back: the plain cause again
    back = plan([pod("p")], {"n1": with_condition("True")}, waiting, (XID_VERIFY,))
    assert back.drain == {"p": k8s}
    # the runner: a failing check keeps it (and adds its part), a passing run lifts it
    both = f"{pending} | {DISK}"
    assert decide(True, pending, {"disk-free": BAD}, ALL) == Decision("drain", both)
    assert decide(True, pending, {}, ALL) == Decision()  # nothing ran: nothing verified
    assert decide(True, pending, {"disk-free": OK}, ALL) == Decision("resume")
    assert decide(True, both, {"disk-free": OK}, ALL) == Decision("resume")
    # a cause without verify clears at once, and the runner never lifts a live cause
    assert after_k8s(k8s, None, ()) == Decision("resume")
    assert decide(True, k8s, {"disk-free": OK}, ALL) == Decision()
