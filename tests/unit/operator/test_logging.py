"""`sunk-operator --log-format json`: one parseable object per record."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

from sunk.operator.main import JsonFormatter


def test_a_record_with_an_exception_is_one_json_line() -> None:
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        record = logging.getLogger("sunk.test").makeRecord(
            "sunk.test", logging.ERROR, __file__, 1, "failed %s", ("x",), sys.exc_info()
        )
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "error" and entry["logger"] == "sunk.test"
    assert entry["message"] == "failed x"
    assert entry["exception"].endswith("ValueError: bad\nvalue")
    assert entry["time"].endswith("+00:00")


def test_the_operator_logs_json_when_asked() -> None:
    """The real entry point, with a kubeconfig that does not exist: its error is logged as JSON."""
    out = subprocess.run(
        [sys.executable, "-m", "sunk.operator.main", "--log-format", "json", "check",
         "--kubeconfig", "/nonexistent/kubeconfig", "--timeout", "1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode != 0
    assert "Traceback" not in out.stderr, out.stderr
    entry = json.loads(out.stderr.strip().splitlines()[-1])
    assert entry["level"] == "error"
    assert "/nonexistent/kubeconfig: no such kubeconfig file" in entry["message"]
