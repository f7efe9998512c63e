"""The health check runner: ``sunk-health [--from periodic|prolog|epilog]`` in the slurmd image.

slurmd starts it as ``HealthCheckProgram`` (every ``HealthCheckInterval``), and the prolog and
epilog dispatchers start it when the values ask. It runs the checks the cluster's
``healthCheck`` enables (the renderer writes them to ``checks.json``), then drains or resumes
this node through ``scontrol`` as ``sunk.health.reasons.decide`` says: a failing check drains
with ``health: <check>: <detail>``, and only a later passing run of that check lifts it.

Checks that look for leftovers of finished jobs (user processes, memory in use) run only while
the node runs no job. Exit status: 0 when every check that ran passed, 1 otherwise (a failing
prolog makes Slurm requeue the job), 2 when the runner itself could not work (no config, no
``scontrol``): it then drains nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sunk.health import reasons, record
from sunk.health.reasons import Result

CONFIG = "/etc/sunk/health/checks.json"
PROGRAM = "/usr/local/bin/sunk-health"  # where the slurmd image installs this runner
SCONTROL_TIMEOUT = 30
# Busy base states: a job holds the node (leftover checks would see its processes).
BUSY = {"ALLOCATED", "MIXED", "COMPLETING"}
GPU_DEVICE = re.compile(r"^nvidia[0-9]+$")


class RunnerError(Exception):
    """The runner cannot judge this node (its config or scontrol is missing or broken)."""


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n:.1f}TiB"


@dataclass
class Node:
    """What the checks may look at: this node as Slurm and the system show it. Every path is
    read under ``root`` (tests point it at a directory)."""

    name: str
    states: frozenset[str] = frozenset()
    reason: str = ""
    gres: str = ""
    extra: str = ""
    root: Path = Path("/")

    @property
    def drained(self) -> bool:
        return bool(self.states & {"DRAIN", "DOWN", "FAIL"})

    @property
    def idle(self) -> bool:
        return not self.states & BUSY

    def path(self, p: str) -> Path:
        return self.root / p.lstrip("/")


# ----------------------------------------------------------------------------- the checks


def check_disk_free(node: Node, spec: Mapping[str, int | str]) -> Result:
    """Each path has at least its minimum free: bytes, or a percentage of the filesystem
    (``"5%"``)."""
    problems = []
    for path, minimum in sorted(spec.items()):
        try:
            st = os.statvfs(node.path(path))
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
            continue
        free, total = st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
        if isinstance(minimum, str) and minimum.endswith("%"):
            pct = 100.0 * free / total if total else 0.0
            if pct < float(minimum[:-1]):
                problems.append(f"{path} has {pct:.1f}% free, needs {minimum}")
        elif free < int(minimum):
            problems.append(f"{path} has {_human(free)} free, needs {_human(int(minimum))}")
    return Result(not problems, "; ".join(problems))


def mount_points(node: Node) -> set[str]:
    points = set()
    text = node.path("/proc/self/mountinfo").read_text()
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 4:  # the 5th field, with octal escapes for blanks
            points.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return points


def check_mounts(node: Node, paths: list[str]) -> Result:
    """Each path is a mount point (a lost network filesystem leaves an empty directory)."""
    points = mount_points(node)
    missing = [p for p in paths if (p.rstrip("/") or "/") not in points]
    return Result(not missing, f"not mounted: {', '.join(missing)}" if missing else "")


def check_idle_processes(node: Node, min_uid: int) -> Result:
    """No process of a user (uid >= ``min_uid``) is left while the node runs no job."""
    left: dict[int, list[str]] = {}
    for entry in node.path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue  # it ended
        m = re.search(r"^Uid:\s+(\d+)", status, re.M)
        name = re.search(r"^Name:\s+(.*)$", status, re.M)
        if m and int(m.group(1)) >= min_uid:
            left.setdefault(int(m.group(1)), []).append(name.group(1) if name else entry.name)
    if not left:
        return Result(True)
    shown = ", ".join(
        f"uid {uid}: {', '.join(sorted(set(names))[:3])}" for uid, names in sorted(left.items())
    )
    count = sum(len(v) for v in left.values())
    return Result(False, f"{count} user process(es) left on an idle node ({shown})")


def cgroup_memory_in_use(node: Node) -> int:
    """Anonymous and shared memory (page cache left out) charged to this container's cgroup:
    what finished jobs' processes and /dev/shm files still hold."""
    v2 = node.path("/sys/fs/cgroup/memory.stat")
    if v2.exists():
        stat = _stat(v2.read_text())
        return stat.get("anon", 0) + stat.get("shmem", 0)
    v1 = node.path("/sys/fs/cgroup/memory/memory.stat")
    if v1.exists():
        stat = _stat(v1.read_text())
        return stat.get("total_rss", 0) + stat.get("total_shmem", 0)
    raise RunnerError("no cgroup memory.stat (v1 or v2) under /sys/fs/cgroup")


def _stat(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[key] = int(value)
    return out


def check_idle_memory(node: Node, limit: int) -> Result:
    used = cgroup_memory_in_use(node)
    if used > int(limit):
        return Result(False, f"{_human(used)} in use on an idle node, more than {_human(limit)}")
    return Result(True)


def _top_level_items(text: str) -> Iterator[str]:
    """Comma-separated items, ignoring commas inside parentheses (``gpu:2(IDX:0,2)``)."""
    depth, start = 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            yield text[start:i]
            start = i + 1
    yield text[start:]


_COUNT = re.compile(r"^(\d+)([KMGTP]?)$", re.IGNORECASE)
_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}


def gres_gpus(gres: Any) -> int:
    """GPUs in a node's ``gres`` or ``gres_used`` string: ``gpu:h100:8(S:0-1)``,
    ``gpu:h100:3(IDX:0,2-3),gpu:a100:0(IDX:N/A)``, ``gpu:2``; other GRES are ignored."""
    if not isinstance(gres, str):
        return 0
    total = 0
    for item in _top_level_items(gres):
        parts = item.split("(", 1)[0].strip().split(":")
        if parts[0].strip().lower() != "gpu":
            continue
        if len(parts) == 1:
            total += 1  # `Gres=gpu`: one
            continue
        match = _COUNT.match(parts[-1].strip())
        if match:
            total += int(match.group(1)) * _SUFFIX[match.group(2).upper()]
        else:
            total += 1  # `gpu:<type>` without a count: one
    return total


def check_gpu_count(node: Node, _: object) -> Result:
    """The GPU devices the container sees (and nvidia-smi, where it is) match the GRES."""
    wanted = gres_gpus(node.gres)
    dev = node.path("/dev")
    devices = sorted(p.name for p in dev.iterdir() if GPU_DEVICE.match(p.name))
    problems = []
    if len(devices) != wanted:
        problems.append(f"{len(devices)} GPU device(s) in /dev, GRES says {wanted}")
    smi = shutil.which("nvidia-smi")
    if smi and wanted:
        proc = subprocess.run(
            [smi, "--query-gpu=index", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        seen = len([line for line in proc.stdout.splitlines() if line.strip()])
        if proc.returncode != 0:
            problems.append(f"nvidia-smi failed: {(proc.stderr or proc.stdout).strip()[:80]}")
        elif seen != wanted:
            problems.append(f"nvidia-smi lists {seen} GPU(s), GRES says {wanted}")
    return Result(not problems, "; ".join(problems))


def run_script(name: str, script: str, timeout: int, env: Mapping[str, str]) -> Result:
    """A site check: it passes by exiting 0; its first line of output says why it failed."""
    with tempfile.TemporaryDirectory(prefix="sunk-health-") as tmp:
        path = Path(tmp) / name
        path.write_text(script)
        path.chmod(0o700)
        argv = [str(path)] if script.startswith("#!") else ["/bin/sh", str(path)]
        try:
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=timeout, check=False,
                env={**os.environ, **env}, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return Result(False, f"no answer within {timeout}s")
    if proc.returncode == 0:
        return Result(True)
    said = next((ln.strip() for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()), "")
    return Result(False, said or f"exit status {proc.returncode}")


@dataclass(frozen=True)
class Check:
    run: Callable[[Node, Any], Result]
    idle_only: bool = False


STOCK = {
    "disk-free": Check(check_disk_free),
    "mounts": Check(check_mounts),
    "idle-processes": Check(check_idle_processes, idle_only=True),
    "idle-memory": Check(check_idle_memory, idle_only=True),
    "gpu-count": Check(check_gpu_count),
}


# ----------------------------------------------------------------------------- one run


@dataclass
class Config:
    """``checks.json``: ``stock`` (check name → its setting), ``scripts`` (name → text),
    ``timeout`` (seconds a site script may take), ``active`` (the active checks, run as jobs by
    ``sunk.health.active``: a periodic run never lifts their drains)."""

    stock: dict[str, Any] = field(default_factory=dict)
    scripts: dict[str, str] = field(default_factory=dict)
    timeout: int = 60
    active: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> Config:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise RunnerError(f"cannot read {path}: {exc}") from exc
        unknown = set(data.get("stock") or {}) - set(STOCK)
        if unknown:
            raise RunnerError(f"{path}: unknown checks {sorted(unknown)}")
        return cls(
            stock=dict(data.get("stock") or {}),
            scripts=dict(data.get("scripts") or {}),
            timeout=int(data.get("timeout") or 60),
            active=dict(data.get("active") or {}),
        )

    @property
    def names(self) -> set[str]:
        return set(self.stock) | set(self.scripts) | set(self.active)


def _timed(run: Callable[[], Result]) -> Result:
    start = time.monotonic()
    result = run()
    return Result(result.ok, result.detail, seconds=time.monotonic() - start)


def _stock(check: Check, node: Node, setting: Any) -> Result:
    try:
        return check.run(node, setting)
    except (OSError, RunnerError, subprocess.SubprocessError) as exc:
        return Result(False, f"could not check: {exc}")


def run_checks(config: Config, node: Node, origin: str) -> dict[str, Result]:
    """The results of the checks that ran, each with its duration; a check that raised counts
    as failed with its error (a check that cannot look has not passed)."""
    results: dict[str, Result] = {}
    for name, setting in sorted(config.stock.items()):
        check = STOCK[name]
        if check.idle_only and (origin != "periodic" or not node.idle):
            continue
        results[name] = _timed(lambda c=check, s=setting: _stock(c, node, s))
    env = {"SUNK_HEALTH_FROM": origin, "SLURMD_NODENAME": node.name}
    for name, script in sorted(config.scripts.items()):
        results[name] = _timed(lambda n=name, s=script: run_script(n, s, config.timeout, env))
    return results


def without_raced_idle_checks(
    results: dict[str, Result], read_again: Callable[[], Node]
) -> dict[str, Result]:
    """The results, less the failed idle checks when the node, read again after they failed,
    is no longer idle: a job that started while they looked made what they saw."""
    raced = {n for n, r in results.items() if not r.ok and n in STOCK and STOCK[n].idle_only}
    if not raced or read_again().idle:
        return results
    return {name: result for name, result in results.items() if name not in raced}


def scontrol(*args: str) -> str:
    try:
        proc = subprocess.run(
            ["scontrol", *args], capture_output=True, text=True,
            timeout=SCONTROL_TIMEOUT, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RunnerError(f"scontrol {args[0]}: {exc}") from exc
    if proc.returncode != 0:
        raise RunnerError(f"scontrol {' '.join(args[:2])}: {proc.stderr.strip() or proc.stdout}")
    return proc.stdout


def read_node(name: str) -> Node:
    data = json.loads(scontrol("show", "node", name, "--json"))
    found = [n for n in data.get("nodes") or [] if n.get("name") == name]
    if not found:
        raise RunnerError(f"Slurm has no node {name}")
    raw = found[0]
    state = raw.get("state") or []
    return Node(
        name=name,
        states=frozenset(s.upper() for s in ([state] if isinstance(state, str) else state)),
        reason=raw.get("reason") or "",
        gres=raw.get("gres") or "",
        extra=raw.get("extra") or "",
    )


def apply(node: Node, decision: reasons.Decision) -> None:
    if decision.action == "drain":
        scontrol("update", f"NodeName={node.name}", "State=DRAIN", f"Reason={decision.reason}")
    elif decision.action == "resume":
        scontrol("update", f"NodeName={node.name}", "State=RESUME")


def keep_record(node: Node, results: Mapping[str, Result], names: set[str]) -> None:
    """Record this run's results in the node's Extra for the operator's metrics
    (sunk.health.record). A configured check that did not run this time (an idle check on a
    busy node) keeps its last result; a site's own non-JSON Extra is left alone."""
    before = record.parse(node.extra)
    kept = {n: c for n, c in (before.checks if before else {}).items() if n in names}
    checks = kept | {name: record.CheckRecord(r.ok, r.seconds) for name, r in results.items()}
    extra = record.merged(node.extra, time.time(), checks)
    if extra is not None and extra != node.extra:
        scontrol("update", f"NodeName={node.name}", f"Extra={extra}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sunk-health", description=__doc__.split("\n")[0])
    parser.add_argument("--from", dest="origin", default="periodic",
                        choices=("periodic", "prolog", "epilog"))  # fmt: skip
    parser.add_argument("--config", default=os.environ.get("SUNK_HEALTH_CONFIG", CONFIG))
    parser.add_argument("--active", metavar="NAME", help="run this active check (in its job)")
    args = parser.parse_args(argv)
    if args.active:
        from sunk.health import active  # it imports this module

        return active.run(args.active, Path(args.config))
    name = os.environ.get("SLURMD_NODENAME") or os.uname().nodename
    try:
        config = Config.load(Path(args.config))
        node = read_node(name)
        results = run_checks(config, node, args.origin)
        results = without_raced_idle_checks(results, lambda: read_node(name))
        decision = reasons.decide(node.drained, node.reason, results, config.names)
        apply(node, decision)
        if args.origin == "periodic":  # not per job: a prolog's RPCs delay every job start
            keep_record(node, results, config.names - set(config.active))
    except RunnerError as exc:
        print(f"sunk-health: {exc}", file=sys.stderr)
        return 2
    for check, result in sorted(results.items()):
        print(f"sunk-health: {name}: {check}: {'ok' if result.ok else 'FAILED: ' + result.detail}")
    if decision.action:
        print(f"sunk-health: {name}: {decision.action} {decision.reason or ''}".rstrip())
    return 0 if all(r.ok for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
