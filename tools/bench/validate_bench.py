"""Time `sunkctl validate` on a values file next to bare `helm template` on the same values.

    .venv/bin/python tools/bench/validate_bench.py [-n 7] [VALUES]

Both are measured in this one run as whole processes (the CLI's Python start-up included),
N times each, interleaved; prints the medians and their ratio. Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("values", nargs="?", default=str(repo_root() / "examples/stress-64.yaml"))
    parser.add_argument("-n", "--runs", type=int, default=7)
    args = parser.parse_args()
    values = Path(args.values)
    sunkctl = str(Path(sys.executable).with_name("sunkctl"))
    pinned = tool_path("helm")
    helm = helm_binary(str(pinned) if pinned else None)
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
