"""tools/bench/syncer_bench.py at a tiny size, so the benchmark cannot rot: it runs against the
real slurmctld + slurmrestd and kube-apiserver, prints its tables, and the drains it times
really happened. Figures are checked for what they count, never against a time limit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.slurm.conftest import run_bench

NUMBER = r"(\d+(?:\.\d+)?)"


@pytest.fixture(scope="module")
def output(slurm_rootfs_path: Path) -> str:
    # A 1 s tick and metrics every 3 s instead of 5 s and 30 s: the same passes, windows and
    # flips in a third of the time (the waits for whole metrics periods dominated the run).
    return run_bench(
        "syncer_bench.py", "--nodes", "4", "--small", "2", "--steady", "3", "--flips", "3",
        "--interval", "1", "--metrics", "3",
    )  # fmt: skip


def test_steady_state_rows_count_requests_and_no_writes(output: str) -> None:
    rows = re.findall(r"^\s+(\d+)" + rf"\s+{NUMBER}" * 6 + r"\s*$", output, re.MULTILINE)
    assert [int(r[0]) for r in rows] == [2, 4]
    for _, window, rpcs, writes, passes, pass_ms, _cpu in rows:
        assert float(window) > 0 and float(passes) > 0 and float(pass_ms) > 0
        assert float(writes) == 0  # nothing changed: the Syncer wrote nothing to Kubernetes
        # one read of the Slurm nodes per pass, plus the metrics reads
        assert float(rpcs) > float(passes)
    assert re.search(rf"^ratio 4/2 nodes: slurm_rpcs/min {NUMBER}, ", output, re.MULTILINE)


def test_drains_and_resumes_were_timed(output: str) -> None:
    assert "latency with 4 nodes (seconds, n=3 each)" in output
    for label in ("Pod NotReady -> Slurm DRAIN (k8s:)", "Pod Ready -> Slurm drain removed"):
        m = re.search(rf"^{re.escape(label)}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}$", output, re.M)
        assert m, output
        p50, p95, worst = map(float, m.groups())
        assert 0 < p50 <= p95 <= worst
    m = re.search(
        r"during the flips: 6 changes, (\d+) Syncer passes, (\d+) Slurm RPCs, "
        r"(\d+) Kubernetes writes in [0-9.]+s; (\d+) Pod events woke the Syncer",
        output,
    )
    assert m, output
    passes, rpcs, writes, wakes = map(int, m.groups())
    # Each change reached the Syncer through the Pod watch (the operator's informer), not
    # only through its tick: once the harness's watch died unnoticed and every figure was
    # the tick's.
    assert wakes >= 6, output
    # Every change took a pass that read the nodes and wrote one drain or resume.
    assert passes >= 6 and rpcs >= passes + 6
    assert writes == 0  # Syncer drains of its own make no Pod or Node marks
