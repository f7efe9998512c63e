"""`make test`'s two lanes (sunk.devenv.test_lanes), run on a throwaway test suite: each lane
runs only its tiers, the other lane's output is printed, and the exit status is the worst."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sunk.devenv import test_lanes

SUITE = """
import pytest

@pytest.mark.e2e
def test_on_real_nodes():
    print("REAL-NODE-TEST-RAN")

@pytest.mark.faults
def test_a_fault():
    pass

def test_elsewhere():
    assert {outcome!r} == "pass", "OTHER-LANE-FAILED"
"""


def _suite(tmp_path: Path, outcome: str) -> list[str]:
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n  e2e\n  faults\n")
    (tmp_path / "test_suite.py").write_text(SUITE.format(outcome=outcome))
    return ["-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), "-p",
            "no:cacheprovider", "-p", "no:randomly", "-rA", str(tmp_path)]  # fmt: skip


@pytest.fixture(autouse=True)
def _no_images(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUNK_TEST_IMAGES", "0")  # nothing to build for this suite


def test_lanes_split_the_tiers_and_pass(tmp_path: Path, capfd: pytest.CaptureFixture[str]):
    logs = tmp_path / "logs"
    logs.mkdir()
    assert test_lanes.run(_suite(tmp_path, "pass"), logs) == 0
    out = capfd.readouterr().out
    # the real-node lane ran the e2e and faults tests, the other lane the rest
    assert "2 passed, 1 deselected" in out, out
    assert "1 passed, 2 deselected" in out, out
    assert "test_suite.py::test_elsewhere\n" in out  # the other lane's log, printed
    assert out.count(" passed\n") == 2 and "real nodes" in out and "others" in out, out


def test_lanes_exit_with_the_failing_lane(tmp_path: Path, capfd: pytest.CaptureFixture[str]):
    logs = tmp_path / "logs"
    logs.mkdir()
    assert test_lanes.run(_suite(tmp_path, "fail"), logs) == 1
    out = capfd.readouterr().out
    assert "OTHER-LANE-FAILED" in out and "failed (1)" in out, out


def test_lanes_selecting_nothing_is_no_pass(tmp_path: Path):
    logs = tmp_path / "logs"
    logs.mkdir()
    args = [*_suite(tmp_path, "pass"), "-k", "no_such_test"]
    assert test_lanes.run(args, logs) == test_lanes.NO_TESTS_COLLECTED
    assert os.listdir(logs) == ["others.log"]
