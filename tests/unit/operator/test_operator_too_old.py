"""A slurm chart upgraded before the sunk chart: its objects carry the operator version they
need (``sunk.coreweave.com/requires-operator``, from the chart's Chart.yaml), and an older
operator changes nothing and says why, instead of acting on fields it may not know."""

from __future__ import annotations

import pytest

from sunk import __version__
from sunk.models.compat import REQUIRES_OPERATOR, operator_too_old, requirement_problem
from tests.argocd.operator_status import (
    NS,
    cluster_operator_too_old,
    nodeset_operator_too_old,
    reconcile,
    slurm_cluster,
)
from tests.fakes.kube import FakeKube


@pytest.mark.parametrize(
    ("requirement", "version", "met"),
    [
        (">= 0.1.0", "0.1.0", True),
        (">= 0.2.0", "0.1.0", False),
        (">= 0.1.0, < 1.0.0", "0.9.3", True),
        (">= 0.1.0, < 1.0.0", "1.0.0", False),
        (">0.1.0", "0.1.1-rc.1", True),
        ("== 0.1.0", "0.1.0+build.7", True),
        ("!= 0.1.0", "0.1.0", False),
        (">= 0.2.0", "dev", True),  # a development build names no version
    ],
)
def test_requirement_against_the_operator_version(requirement, version, met):
    assert (requirement_problem(requirement, version) is None) is met


@pytest.mark.parametrize("bad", ["0.1.0", ">= 1", "~> 1.0.0", ">= 0.1.0; rm -rf /", 7, "x" * 300])
def test_a_requirement_that_is_not_one_is_said_so(bad):
    problem = requirement_problem(bad, "0.1.0")
    assert problem is not None and REQUIRES_OPERATOR in problem


def test_objects_without_the_annotation_and_the_charts_own_requirement_are_ours():
    assert operator_too_old({"annotations": {}}) is None
    assert operator_too_old({"annotations": {REQUIRES_OPERATOR: ">= 0.1.0"}}) is None
    assert __version__.startswith("0.")


def test_a_cluster_from_a_newer_chart_is_left_alone_with_operator_too_old():
    status = cluster_operator_too_old()["status"]
    (ready,) = status["conditions"]
    assert (ready["status"], ready["reason"]) == ("False", "OperatorTooOld")
    assert "upgrade the sunk chart first" in ready["message"], ready


def test_nothing_is_made_for_a_cluster_the_operator_is_too_old_for():
    kube = FakeKube()
    obj = slurm_cluster()
    obj["metadata"]["annotations"] = {REQUIRES_OPERATOR: ">= 99.0.0"}
    kube.put(obj)
    reconcile(kube, "SlurmCluster", "slurm")
    made = [o["kind"] for o in kube.objects.values() if o["kind"] not in ("SlurmCluster", "Event")]
    assert made == [], made
    events = [e for e in kube.of_kind("Event") if e["reason"] == "OperatorTooOld"]
    assert events and events[0]["involvedObject"]["namespace"] == NS


def test_a_nodeset_from_a_newer_chart_makes_no_pods():
    status = nodeset_operator_too_old()["status"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "OperatorTooOld", status
