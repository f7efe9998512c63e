"""The prolog/epilog dispatcher rendered by sunk.slurmconf.scripts, executed with sh."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sunk.slurmconf.scripts import dispatcher


def run(kind: str, tmp_path: Path, scripts: dict[str, tuple[str, bool]]):
    """Write scripts (name → (body, executable)) into a <kind>.d and run the dispatcher."""
    d = tmp_path / f"{kind}.d"
    d.mkdir()
    for name, (body, executable) in scripts.items():
        path = d / name
        path.write_text(body)
        path.chmod(0o755 if executable else 0o644)
    script = tmp_path / f"{kind}.sh"
    script.write_text(dispatcher(kind))
    log = tmp_path / "log"
    env = {"PATH": "/usr/bin:/bin", "SUNK_SCRIPTS_DIR": str(d), "LOG": str(log)}
    proc = subprocess.run(["sh", str(script)], env=env, capture_output=True, text=True)
    return proc, (log.read_text().split() if log.exists() else [])


def step(name: str, rc: int = 0) -> str:
    return f'#!/bin/sh\necho {name} >> "$LOG"\nexit {rc}\n'


@pytest.mark.parametrize("kind", ["prolog", "epilog"])
def test_runs_every_script_in_name_order(tmp_path, kind):
    scripts = {n: (step(n), True) for n in ("20-b", "10-a", "30-c", "05-first")}
    proc, log = run(kind, tmp_path, scripts)
    assert proc.returncode == 0, proc.stderr
    assert log == ["05-first", "10-a", "20-b", "30-c"]


def test_stops_at_the_first_failure_and_returns_its_status(tmp_path):
    scripts = {"10-a": (step("10-a"), True), "20-b": (step("20-b", 3), True)}
    scripts["30-c"] = (step("30-c"), True)
    proc, log = run("prolog", tmp_path, scripts)
    assert proc.returncode == 3
    assert log == ["10-a", "20-b"]
    assert proc.stderr.strip().endswith("20-b exited 3")
    assert proc.stderr.startswith("prolog: ")


def test_runs_non_executable_scripts_with_sh_and_skips_directories(tmp_path):
    proc, log = run("epilog", tmp_path, {"10-plain": (step("10-plain"), False)})
    (tmp_path / "epilog.d" / "20-dir").mkdir()
    assert proc.returncode == 0, proc.stderr
    assert log == ["10-plain"]


def test_an_empty_or_missing_directory_succeeds(tmp_path):
    proc, log = run("prolog", tmp_path, {})
    assert proc.returncode == 0 and log == []
    script = tmp_path / "p.sh"
    script.write_text(dispatcher("prolog"))
    missing = {"PATH": "/usr/bin:/bin", "SUNK_SCRIPTS_DIR": str(tmp_path / "absent")}
    assert subprocess.run(["sh", str(script)], env=missing).returncode == 0


def test_defaults_to_the_directory_in_etc_slurm():
    assert 'dir="${SUNK_SCRIPTS_DIR:-/etc/slurm/prolog.d}"' in dispatcher("prolog")
    assert "/etc/slurm/epilog.d" in dispatcher("epilog")
