"""tools/bench/scheduler_bench.py at a tiny size, so the benchmark cannot rot: both schedulers
really bind every Pod and the table and ratio are printed. Figures are checked for what they
count, never against a time limit."""

from __future__ import annotations

import re
from pathlib import Path

from tests.slurm.conftest import run_bench


def test_both_schedulers_bind_every_pod_and_the_ratio_is_printed(slurm_rootfs_path: Path):
    out = run_bench("scheduler_bench.py", "--pods", "6", "--nodes", "2")
    assert "6 Pending Pods of 1 CPU on 2 Nodes" in out, out
    rows = dict(re.findall(r"^(Pod Scheduler|kube-scheduler)\s+[\d.]+s\s+([\d.]+)s$", out, re.M))
    assert set(rows) == {"Pod Scheduler", "kube-scheduler"}, out
    ratio = float(re.search(r"ratio .*: ([\d.]+)$", out, re.M).group(1))
    # The times are printed to the millisecond and the ratio to 0.1, and kube-scheduler binds six
    # Pods in a few milliseconds: the ratio must lie within what the printed times allow.
    ours, theirs, half_ms = float(rows["Pod Scheduler"]), float(rows["kube-scheduler"]), 0.0005
    low = (ours - half_ms) / (theirs + half_ms) - 0.05
    high = (ours + half_ms) / max(theirs - half_ms, 1e-6) + 0.05
    assert low <= ratio <= high, out
    requests = int(re.search(r"Slurm requests .*: (\d+)$", out, re.M).group(1))
    assert requests >= 6 + 1, out  # a submit per Pod, and at least one read of the jobs
