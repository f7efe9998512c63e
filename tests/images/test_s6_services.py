"""s6 services in the slurmd and login entrypoints (images/common/sunk-lib.sh), run with bash
on the host in dry-run mode: the oneshots run for real, s6-svscan is only printed (the e2e
tier runs it in the images on real nodes)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.images.test_entrypoints import conf_of, slurmd_env

READY = Path(__file__).resolve().parents[2] / "images" / "common" / "sunk-ready"


def write_services(base_env: dict[str, str], *services: tuple[str, str, int, int, str]) -> Path:
    """(name, type, timeoutUp, timeoutDown, script) as the operator's ConfigMap holds them."""
    root = Path(base_env["SUNK_S6_DIR"])
    root.mkdir()
    lines = []
    for name, kind, up, down, script in services:
        lines.append(f"{name} {kind} {up} {down}\n")
        (root / f"{name}.script").write_text(script)
    (root / "services").write_text("".join(lines))
    return root


def test_oneshots_run_in_order_before_slurmd_which_registers_as_usual(
    entrypoint, tcp_listener, base_env, tmp_path
):
    log = tmp_path / "order"
    write_services(
        base_env,
        ("a-first", "oneshot", 0, 0, f'#!/bin/bash\necho "a $SUNK_NODE_NAME" >> {log}\n'),
        ("b-second", "oneshot", 5000, 0, f"echo b >> {log}\n"),  # no #!: run with sh
    )
    conf = "CPUs=2 RealMemory=1000"
    res = entrypoint(
        "slurmd", env=slurmd_env(tcp_listener, SUNK_SLURMD_CONF=conf, SUNK_NODE_NAME="cpu-0")
    )
    assert res.rc == 0, res.stderr
    assert log.read_text() == "a cpu-0\nb\n"
    assert conf_of(res.exec_argv) == conf
    assert Path(base_env["SUNK_STARTED"]).exists()
    assert not Path(base_env["SUNK_STARTUP_FAILED"]).exists()


def test_a_failing_oneshot_registers_the_node_drained_with_its_reason(
    entrypoint, tcp_listener, base_env, tmp_path
):
    marker = tmp_path / "never"
    write_services(
        base_env,
        ("a-setup", "oneshot", 0, 0, "#!/bin/sh\necho installing; exit 3\n"),
        ("b-after", "oneshot", 0, 0, f"touch {marker}\n"),
        ("c-exporter", "longrun", 0, 0, "exec sleep 100\n"),
    )
    Path(base_env["SUNK_TERMINATION_LOG"]).write_text("")  # kubelet creates it
    res = entrypoint(
        "slurmd",
        env=slurmd_env(tcp_listener, SUNK_SLURMD_CONF="CPUs=2", SUNK_NODE_NAME="cpu-0"),
    )
    assert res.rc == 0, res.stderr
    reason = "s6 oneshot a-setup failed (exit 3)"
    assert conf_of(res.exec_argv) == (
        f'CPUs=2 State=DRAIN Reason="k8s: Pod cpu-0 not ready: {reason}"'
    )
    assert Path(base_env["SUNK_STARTUP_FAILED"]).read_text() == reason + "\n"
    assert Path(base_env["SUNK_TERMINATION_LOG"]).read_text() == reason + "\n"
    assert not marker.exists()  # nothing after the failed oneshot runs
    assert "s6-svscan" not in res.stdout  # nor do the longruns
    assert f"error: {reason}" in res.stderr


def test_a_oneshot_past_its_timeout_is_killed_and_counts_as_failed(
    entrypoint, tcp_listener, base_env
):
    write_services(base_env, ("slow", "oneshot", 300, 0, "#!/bin/sh\nsleep 30\n"))
    started = time.monotonic()
    res = entrypoint(
        "slurmd", env=slurmd_env(tcp_listener, SUNK_SLURMD_CONF="CPUs=2", SUNK_NODE_NAME="n")
    )
    assert time.monotonic() - started < 15
    assert res.rc == 0, res.stderr
    assert conf_of(res.exec_argv).endswith(
        'Reason="k8s: Pod n not ready: s6 oneshot slow timed out after 300ms"'
    )


def test_longruns_get_a_service_directory_under_s6_svscan(entrypoint, tcp_listener, base_env):
    write_services(
        base_env,
        ("exporter", "longrun", 0, 2500, "#!/bin/bash\nexec sleep infinity\n"),
        ("plain", "longrun", 0, 0, "sleep 1\n"),
    )
    res = entrypoint("slurmd", env=slurmd_env(tcp_listener, SUNK_SLURMD_CONF="CPUs=2"))
    assert res.rc == 0, res.stderr
    run = Path(base_env["SUNK_S6_RUN"])
    assert f"s6-svscan {run / 'service'}" in res.actions
    exporter = run / "service" / "exporter"
    assert (exporter / "run").read_text() == (
        f"#!/bin/sh\nexec {run / 'scripts' / 'exporter'} </dev/null\n"
    )
    assert os.access(exporter / "run", os.X_OK)
    assert (exporter / "timeout-kill").read_text() == "2500\n"
    assert not (run / "service" / "plain" / "timeout-kill").exists()
    assert (run / "service" / "plain" / "run").read_text().startswith("#!/bin/sh\nexec /bin/sh ")


def test_a_failing_login_oneshot_ends_the_container_before_sshd(
    entrypoint,
    base_env,
    login_env,
):
    write_services(base_env, ("motd", "oneshot", 0, 0, "exit 7\n"))
    res = entrypoint("login", env=login_env)
    assert res.rc == 1
    assert "exec:" not in res.stdout
    assert "s6 oneshot motd failed (exit 7): sshd not started" in res.stderr


def test_login_runs_its_oneshots_then_sshd(entrypoint, base_env, login_env, tmp_path):
    marker = tmp_path / "motd-extra"
    write_services(base_env, ("motd", "oneshot", 0, 0, f"echo hi > {marker}\n"))
    res = entrypoint("login", env=login_env)
    assert res.rc == 0, res.stderr
    assert marker.read_text() == "hi\n"
    assert res.exec_argv[0] == "/usr/sbin/sshd"


@pytest.mark.parametrize(
    ("files", "rc", "says"),
    [
        ({}, 1, "s6 oneshots still running"),
        ({"started": ""}, 0, ""),
        ({"started": "", "startup-failed": "s6 oneshot x failed (exit 1)\n"}, 1, "exit 1"),
    ],
)
def test_sunk_ready_reports_the_oneshots(tmp_path, files, rc, says):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    env = {
        "PATH": os.environ["PATH"],
        "SUNK_STARTED": str(tmp_path / "started"),
        "SUNK_STARTUP_FAILED": str(tmp_path / "startup-failed"),
    }
    proc = subprocess.run([str(READY)], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == rc
    assert says in proc.stdout
