"""tools/bench/scheduler_bench.py at a tiny size, so the benchmark cannot rot: both schedulers
really bind every Pod and the table and ratio are printed. Figures are checked for what they
count, never against a time limit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.slurm.conftest import run_bench


def test_both_schedulers_bind_every_pod_and_the_ratio_is_printed(slurm_rootfs_path: Path):
    out = run_bench("scheduler_bench.py", "--pods", "6", "--nodes", "2")
    assert "6 Pending Pods of 1 CPU on 2 Nodes" in out, out
    rows = dict(re.findall(r"^(Pod Scheduler|kube-scheduler)\s+[\d.]+s\s+([\d.]+)s$", out, re.M))
    assert set(rows) == {"Pod Scheduler", "kube-scheduler"}, out
    ratio = float(re.search(r"ratio .*: ([\d.]+)$", out, re.M).group(1))
    assert ratio == pytest.approx(
        float(rows["Pod Scheduler"]) / float(rows["kube-scheduler"]), rel=0.1
    )
    requests = int(re.search(r"Slurm requests .*: (\d+)$", out, re.M).group(1))
    assert requests >= 6 + 1, out  # a submit per Pod, and at least one read of the jobs
