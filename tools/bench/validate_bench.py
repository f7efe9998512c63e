"""Time `sunkctl validate` next to bare `helm template` on the same values.

    .venv/bin/python tools/bench/validate_bench.py [-n 7] [VALUES]
    .venv/bin/python tools/bench/validate_bench.py --repo 40 [-j JOBS]

One file: both are measured as whole processes (the CLI's Python start-up included), N times
each, interleaved; prints the medians and their ratio.

`--repo N`: a GitOps repository of N values files (the examples, round robin): one
`sunkctl validate DIR` against `helm template` of each file one after another (what a CI
script without sunkctl runs), and against the same helm runs JOBS at a time. Not a test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sunk.chartio.helm import chart_path, helm_binary
from sunk.devenv.paths import repo_root, tool_path


def timed(cmd: list[str], ok: tuple[int, ...]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in ok:
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr or proc.stdout}")
    return elapsed


def repo_bench(count: int, jobs: int, sunkctl: str, helm: str) -> None:
    examples = sorted((repo_root() / "examples").glob("*.yaml"))
    with tempfile.TemporaryDirectory(prefix="sunk-validate-bench-") as tmp:
        files = []
        for i in range(count):
            target = Path(tmp) / f"cluster-{i:03d}.yaml"
            shutil.copyfile(examples[i % len(examples)], target)
            files.append(target)
        chart = str(chart_path("slurm"))

        def helm_one(path: Path) -> float:
            return timed([helm, "template", "slurm", chart, "-f", str(path)], (0,))

        timed([sunkctl, "validate", "--helm", helm, "-j", str(jobs), tmp], (0, 1))  # warm-up
        start = time.perf_counter()
        for path in files:
            helm_one(path)
        sequential = time.perf_counter() - start
        start = time.perf_counter()
        with ThreadPoolExecutor(jobs) as pool:
            list(pool.map(helm_one, files))
        parallel = time.perf_counter() - start
        validate = timed([sunkctl, "validate", "--helm", helm, "-j", str(jobs), tmp], (0, 1))
    print(f"repository:        {count} values files (examples, round robin), -j {jobs}")
    print(f"helm template, one after another: {sequential:7.2f} s")
    print(f"helm template, {jobs} at a time:       {parallel:7.2f} s")
    print(f"sunkctl validate DIR:             {validate:7.2f} s")
    print(f"ratio to helm one after another:  {validate / sequential:7.2f}x")
    print(f"ratio to helm {jobs} at a time:        {validate / parallel:7.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("values", nargs="?", default=str(repo_root() / "examples/stress-64.yaml"))
    parser.add_argument("-n", "--runs", type=int, default=7)
    parser.add_argument("--repo", type=int, default=0, help="N values files in a directory")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    values = Path(args.values)
    sunkctl = str(Path(sys.executable).with_name("sunkctl"))
    pinned = tool_path("helm")
    helm = helm_binary(str(pinned) if pinned else None)
    if args.repo:
        repo_bench(args.repo, args.jobs, sunkctl, helm)
        return
    helm_cmd = [helm, "template", "slurm", str(chart_path("slurm")), "-f", str(values)]
    validate_cmd = [sunkctl, "validate", "--helm", helm, str(values)]
    # One warm-up each (page cache, the kubeconform schema cache).
    timed(helm_cmd, (0,))
    timed(validate_cmd, (0, 1))
    helm_times, validate_times = [], []
    for _ in range(args.runs):
        helm_times.append(timed(helm_cmd, (0,)))
        validate_times.append(timed(validate_cmd, (0, 1)))
    helm_median = statistics.median(helm_times)
    validate_median = statistics.median(validate_times)
    print(f"values:            {values}")
    print(f"runs:              {args.runs} each (median)")
    print(f"helm template:     {helm_median * 1000:8.0f} ms")
    print(f"sunkctl validate:  {validate_median * 1000:8.0f} ms")
    print(f"ratio:             {validate_median / helm_median:8.1f}x")


if __name__ == "__main__":
    main()
