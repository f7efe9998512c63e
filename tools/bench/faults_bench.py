"""Benchmark: how long each fault of the ``faults`` tier takes to recover from, one run.

    sudo .venv/bin/python tools/bench/faults_bench.py [-k SELECTOR]

Runs ``tests/faults`` (real nodes, the e2e tier's cluster; needs root and ``make setup``) and
prints each scenario's recovery time as the tests measured it (the ``FAULT <scenario>:
recovered in <s> s`` lines they print), then whether every scenario passed. A scenario's time
runs from the fault (a signal, a chart upgrade that fixes a value) until what it broke answers
again; the tests then also wait for every job to complete. The HA scenarios
(``test_faults_ha.py``) report the takeover as users feel it: from losing the primary slurmctld
until `srun` starts a job step through the standby.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINE = re.compile(r"FAULT (?P<scenario>.+): recovered in (?P<seconds>[\d.]+) s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="pytest -k selector (default: every scenario)")
    args = parser.parse_args()
    argv = [sys.executable, "-m", "pytest", "tests/faults", "-s", "-q", "-p", "no:cacheprovider"]
    if args.k:
        argv += ["-k", args.k]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    found = [m.groupdict() for m in LINE.finditer(proc.stdout)]
    width = max((len(f["scenario"]) for f in found), default=10)
    print(f"{'scenario':{width}}  recovery")
    for f in found:
        print(f"{f['scenario']:{width}}  {float(f['seconds']):7.1f} s")
    summary = [line for line in proc.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    print(summary[-1] if summary else proc.stdout[-2000:])
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
