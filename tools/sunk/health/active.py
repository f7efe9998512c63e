"""An active check's run: ``sunk-health --active NAME``, the batch step of the Slurm job the
operator submits for ``healthCheck.active.<name>`` (or an admin runs by hand with
``sbatch -N2 --exclusive --wrap 'sunk-health --active NAME'``).

It runs the check across the job's nodes: the stock ``allreduce`` (``sunk.health.allreduce``
with ``srun``, one rank per node, judged by its bus bandwidth) or the site's script. Then, for
each node, ``sunk.health.reasons.decide`` says what to do, as after a passive run: a failed run
drains every node of the job with ``health: <name>: <detail>``. The outcome goes into the job's
comment (``RESULT_PREFIX``), where the operator reads it for its metrics.

Exit status: 0 passed, 1 failed, 2 the run could not judge (no such check, MPI did not
complete or started fewer ranks than nodes): nothing is drained, and the result is ``error``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sunk.health import reasons, runner
from sunk.health.reasons import Result
from sunk.health.runner import Config, RunnerError

JOB_PREFIX = "sunk-health-"  # the operator's jobs: sunk-health-<check>
RESULT_PREFIX = "sunk-health"  # the job comment: sunk-health check=… result=pass|fail|error …
ALLREDUCE = Path(__file__).with_name("allreduce.py")
# A check added a moment ago may not be in this Pod's ConfigMap volume yet (the kubelet
# refreshes it within about a minute).
CONFIG_WAIT = 90
ALLREDUCE_LINE = re.compile(r"^sunk-allreduce ranks=(\d+) size=(\d+) seconds=([\d.]+) busbw=(\d+)")


def _rate(n: float) -> str:
    for unit in ("B/s", "KB/s", "MB/s", "GB/s"):
        if n < 1000:
            return f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB/s"


def load(path: Path, name: str, wait: float = CONFIG_WAIT) -> tuple[Config, dict[str, Any]]:
    deadline = time.monotonic() + wait
    while True:
        config = Config.load(path)
        if name in config.active:
            return config, config.active[name]
        if time.monotonic() >= deadline:
            raise RunnerError(f"{path} has no active check {name!r}")
        time.sleep(5)


def job_nodes() -> list[str]:
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or ""
    if not nodelist:
        raise RunnerError("not in a Slurm job (no SLURM_JOB_NODELIST)")
    return sorted(runner.scontrol("show", "hostnames", nodelist).split())


def run_allreduce(spec: dict[str, Any], nodes: list[str], timeout: int) -> tuple[Result, float]:
    argv = ["srun", f"--nodes={len(nodes)}", f"--ntasks={len(nodes)}", "--ntasks-per-node=1",
            "python3", "-I", str(ALLREDUCE), f"--size={int(spec['size'])}",
            f"--iterations={int(spec.get('iterations') or 20)}"]  # fmt: skip
    # Open MPI will not start without a home directory; a job submitted through slurmrestd
    # has only the environment it was given.
    env = {**os.environ, "HOME": os.environ.get("HOME") or "/tmp"}
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, env=env
        )
    except subprocess.TimeoutExpired as exc:
        raise RunnerError(f"allreduce gave no answer within {timeout}s") from exc
    except OSError as exc:
        raise RunnerError(f"srun: {exc}") from exc
    if proc.returncode != 0:
        # MPI did not complete: a broken fabric, or an MPI the nodes cannot start (a missing
        # PMI, a bad environment). Only a measurement drains: this run judged nothing.
        said = [ln.strip() for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        shown = " / ".join(said[:3])[:300] if said else f"exit status {proc.returncode}"
        raise RunnerError(f"allreduce did not complete: {shown}")
    found = next(filter(None, map(ALLREDUCE_LINE.match, proc.stdout.splitlines())), None)
    if found is None:
        raise RunnerError(f"allreduce printed no result: {proc.stdout.strip()[-200:]}")
    ranks, busbw = int(found.group(1)), float(found.group(4))
    if ranks != len(nodes):
        # MPI did not wire the ranks together (no PMI for this MPI): nothing was measured
        raise RunnerError(f"allreduce ran {ranks} rank(s) for {len(nodes)} nodes")
    minimum = float(spec["minBusBandwidth"])
    if busbw < minimum:
        return Result(False, f"bus bandwidth {_rate(busbw)} below {_rate(minimum)}"), busbw
    return Result(True), busbw


def run(name: str, config_path: Path) -> int:
    outcome, value, nodes = "error", None, []
    try:
        config, spec = load(config_path, name)
        nodes = job_nodes()
        timeout = int(spec.get("timeLimit") or 10) * 60
        if "allreduce" in spec:
            result, value = run_allreduce(spec["allreduce"], nodes, timeout)
        else:
            env = {"SUNK_HEALTH_FROM": "active", "SUNK_HEALTH_NODES": ",".join(nodes)}
            result = runner.run_script(name, spec["script"], timeout, env)
        outcome = "pass" if result.ok else "fail"
        for node_name in nodes:
            node = runner.read_node(node_name)
            decision = reasons.decide(node.drained, node.reason, {name: result}, config.names)
            runner.apply(node, decision)
            if decision.action:
                print(f"sunk-health: {node_name}: {decision.action} {decision.reason or ''}")
    except RunnerError as exc:
        print(f"sunk-health: {name}: {exc}", file=sys.stderr)
        result = None
    finally:
        _record(name, outcome, value, nodes)
    if result is None:
        return 2
    print(f"sunk-health: {name}: {'ok' if result.ok else 'FAILED: ' + result.detail}")
    return 0 if result.ok else 1


def _record(name: str, outcome: str, value: float | None, nodes: list[str]) -> None:
    """The job's comment, for the operator's metrics (best effort: a run by hand may be
    outside a job, or its user may not update it)."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return
    words = [RESULT_PREFIX, f"check={name}", f"result={outcome}"]
    if value is not None:
        words.append(f"value={value:.0f}")
    words.append(f"nodes={','.join(nodes)}")
    try:
        runner.scontrol("update", f"JobId={job}", f"Comment={' '.join(words)}")
    except RunnerError as exc:
        print(f"sunk-health: could not record the result on job {job}: {exc}", file=sys.stderr)


def parse_result(comment: str) -> dict[str, str] | None:
    """The fields of a result comment (``_record``), or None for any other comment."""
    words = comment.split()
    if not words or words[0] != RESULT_PREFIX:
        return None
    fields = dict(w.split("=", 1) for w in words[1:] if "=" in w)
    return fields if fields.get("check") and fields.get("result") else None
