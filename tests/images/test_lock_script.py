"""The rendered lock script and dispatchers, run with sh and curl against a real HTTP server on
loopback that stands in for the operator's hook (the hook itself is tested in the cluster and
e2e tiers): what they send, and which failures stop a job."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from sunk.slurmconf.scripts import dispatcher, lock_script

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")


class Hook:
    def __init__(self, status: int = 200):
        self.status, self.requests = status, []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.requests.append((self.path, self.headers["Authorization"], json.loads(body)))
                self.send_response(hook.status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"state": "locked"}')

            def log_message(self, *_):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def hook():
    h = Hook()
    yield h
    h.server.shutdown()


def setup_dir(tmp_path: Path, url: str) -> dict[str, str]:
    hook_dir = tmp_path / "hook"
    hook_dir.mkdir()
    (hook_dir / "url").write_text(url)
    (hook_dir / "token").write_text("tok.en-value")
    script = tmp_path / "sunk-lock.sh"
    script.write_text(lock_script())
    script.chmod(0o755)
    return {
        "PATH": "/usr/bin:/bin",
        "SUNK_HOOK_DIR": str(hook_dir),
        "SUNK_LOCK_SCRIPT": str(script),
        "SLURM_JOB_ID": "42",
    }


def run(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["sh", str(tmp_path / "sunk-lock.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_lock_sends_the_job_and_the_token(tmp_path, hook):
    env = setup_dir(tmp_path, hook.url)
    proc = run(tmp_path, env, "lock")
    assert proc.returncode == 0, proc.stderr
    assert hook.requests == [
        ("/hook/v1/lock", "Bearer tok.en-value", {"job": "42", "strict": False})
    ]


def test_strict_comes_from_the_jobs_extra_field(tmp_path, hook):
    env = setup_dir(tmp_path, hook.url) | {"SLURM_JOB_EXTRA": "a=b,sunk.coreweave.com/lock=strict"}
    assert run(tmp_path, env, "lock").returncode == 0
    assert hook.requests[0][2] == {"job": "42", "strict": True}


def test_a_refused_strict_lock_fails_a_normal_one_does_not(tmp_path, hook):
    hook.status = 503
    env = setup_dir(tmp_path, hook.url)
    normal = run(tmp_path, env, "lock")
    assert normal.returncode == 0
    assert "lock of job 42 failed" in normal.stderr
    strict = run(tmp_path, env | {"SLURM_JOB_EXTRA": "sunk.coreweave.com/lock=strict"}, "lock")
    assert strict.returncode == 1
    assert len(hook.requests) == 2  # an HTTP error is an answer: no retry


def test_an_unreachable_hook_is_retried_then_a_normal_job_runs_unlocked(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once we leave: connection refused
    env = setup_dir(tmp_path, f"http://127.0.0.1:{port}")
    proc = run(tmp_path, env, "lock")
    assert proc.returncode == 0
    assert "curl exit 7" in proc.stderr


def test_a_pod_without_a_hook_runs_unlocked(tmp_path, hook):
    env = setup_dir(tmp_path, hook.url)
    (Path(env["SUNK_HOOK_DIR"]) / "url").write_text("")
    proc = run(tmp_path, env, "lock")
    assert proc.returncode == 0
    assert "no lock hook" in proc.stderr
    assert hook.requests == []


def marking_prolog(tmp_path: Path) -> tuple[Path, str]:
    """The locking prolog and a prolog.d whose one script writes ``tmp_path/ran``."""
    d = tmp_path / "prolog.d"
    d.mkdir()
    (d / "10-mark").write_text(f'#!/bin/sh\necho ran > "{tmp_path}/ran"\n')
    (d / "10-mark").chmod(0o755)
    prolog = tmp_path / "prolog.sh"
    prolog.write_text(dispatcher("prolog", lock=True))
    return prolog, str(d)


def test_the_prolog_locks_before_its_scripts_and_stops_on_a_failed_strict_lock(tmp_path, hook):
    env = setup_dir(tmp_path, hook.url)
    prolog, env["SUNK_SCRIPTS_DIR"] = marking_prolog(tmp_path)
    assert subprocess.run(["sh", str(prolog)], env=env, timeout=60).returncode == 0
    assert (tmp_path / "ran").exists()
    assert hook.requests[0][0] == "/hook/v1/lock"
    (tmp_path / "ran").unlink()
    hook.status = 503
    env["SLURM_JOB_EXTRA"] = "sunk.coreweave.com/lock=strict"
    assert subprocess.run(["sh", str(prolog)], env=env, timeout=60).returncode == 1
    assert not (tmp_path / "ran").exists()  # the job's prolog scripts never ran


def test_the_epilog_unlocks_even_when_a_script_failed(tmp_path, hook):
    env = setup_dir(tmp_path, hook.url)
    d = tmp_path / "epilog.d"
    d.mkdir()
    (d / "10-fail").write_text("#!/bin/sh\nexit 3\n")
    (d / "10-fail").chmod(0o755)
    epilog = tmp_path / "epilog.sh"
    epilog.write_text(dispatcher("epilog", lock=True))
    env["SUNK_SCRIPTS_DIR"] = str(d)
    proc = subprocess.run(["sh", str(epilog)], env=env, capture_output=True, timeout=60)
    assert proc.returncode == 3  # the script's failure is still the epilog's
    assert [r[0] for r in hook.requests] == ["/hook/v1/unlock"]


def test_rendered_scripts_pass_shellcheck(tmp_path):
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (make setup installs it)")
    for name, text in {
        "lock.sh": lock_script(),
        "prolog.sh": dispatcher("prolog", lock=True),
        "epilog.sh": dispatcher("epilog", lock=True),
    }.items():
        (tmp_path / name).write_text(text)
        proc = subprocess.run(["shellcheck", "-s", "sh", str(tmp_path / name)], capture_output=True)
        assert proc.returncode == 0, proc.stdout


def test_a_prolog_without_the_lock_script_runs_its_scripts(tmp_path):
    prolog, scripts = marking_prolog(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "SUNK_SCRIPTS_DIR": scripts}
    env["SUNK_LOCK_SCRIPT"] = str(tmp_path / "absent.sh")
    assert subprocess.run(["sh", str(prolog)], env=env, timeout=60).returncode == 0
    assert (tmp_path / "ran").exists()
