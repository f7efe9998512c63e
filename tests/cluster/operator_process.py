"""Running `sunk-operator` as a real process against the test control plane."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from sunk.devenv.controlplane import free_port


class OperatorProcess:
    """One operator replica: a Pod whose container may be restarted (``start`` after ``kill``).
    Like the chart's Deployment it sets ``POD_NAME``, the leader-election identity, and keeps
    it across restarts, as the kubelet restarting a container does."""

    def __init__(
        self,
        kubeconfig: Path,
        namespaces: list[str],
        log_dir: Path,
        lease_namespace: str,
        extra_args: tuple[str, ...] | list[str] | None = (),
    ):
        self.kubeconfig, self.namespaces = kubeconfig, namespaces
        self.log_dir, self.lease_namespace = log_dir, lease_namespace
        self.extra_args = tuple(extra_args or ())
        self.port = free_port()
        self.hook_port = free_port()
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.pod_name = f"sunk-operator-{uuid.uuid4().hex[:6]}"

    def start(self) -> OperatorProcess:
        self.starts += 1
        log = (self.log_dir / f"operator-{self.starts}.log").open("w")
        args = [
            sys.executable,
            "-m",
            "sunk.operator.main",
            "run",
            "--kubeconfig",
            str(self.kubeconfig),
            "--health-host",
            "127.0.0.1",
            "--health-port",
            str(self.port),
            "--metrics-port",
            str(self.port),
            "--hook-port",
            str(self.hook_port),
            "--hook-url",
            f"http://127.0.0.1:{self.hook_port}",
            "--leader-election-namespace",
            self.lease_namespace,
            "--log-level",
            "info",
        ]
        for ns in self.namespaces:
            args += ["--namespace", ns]
        args += self.extra_args
        self.proc = subprocess.Popen(
            args,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "POD_NAME": self.pod_name},
        )
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        self.proc.wait(timeout=30)
        self.proc = None

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            return r.read().decode()

    def sample(self, name: str, **labels: str) -> float | None:
        """One sample of the operator's /metrics, parsed as Prometheus does."""
        for family in text_string_to_metric_families(self.metrics()):
            for sample in family.samples:
                if sample.name == name and sample.labels == labels:
                    return sample.value
        return None

    def writes(self) -> int:
        value = self.sample("sunk_operator_api_writes_total")
        assert value is not None, "operator metrics lack sunk_operator_api_writes_total"
        return int(value)

    def reconciles(self, kind: str) -> int:
        return int(self.sample("sunk_operator_reconciles_total", kind=kind) or 0)

    def wait_leader(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None and self.proc.poll() is None, self.last_log()
            try:
                if self.sample("sunk_operator_leader") == 1:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"operator did not become leader\n{self.last_log()}")

    def last_log(self) -> str:
        logs = sorted(self.log_dir.glob("operator-*.log"))
        return logs[-1].read_text()[-4000:] if logs else ""
