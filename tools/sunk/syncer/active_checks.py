"""When the Syncer submits the jobs of ``healthCheck.active``, and what they ask Slurm for.

Each check runs every ``every`` seconds as a job named ``sunk-health-<check>``: whole nodes
(so only idle ones), the lowest priority (``nice``), never requeued, its batch step
``sunk-health --active <check>`` (``sunk.health.active``). The first run comes one interval
after the Syncer first sees the check; a run is skipped while the check's previous job is
still pending or running. The schedule lives in the Syncer's memory: an operator restart
pushes the next run back by at most one interval.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sunk.health.active import JOB_PREFIX
from sunk.health.runner import PROGRAM
from sunk.syncer.plan import job_in_flight

LOWEST_PRIORITY = 2147483645  # Slurm's largest nice value (NICE_OFFSET - 3)


@dataclass(frozen=True)
class CheckJob:
    """What one active check asks of Slurm (values ``healthCheck.active.<name>``)."""

    name: str
    every: int
    nodes: int = 2
    partition: str | None = None
    qos: str | None = None
    time_limit: int = 10  # minutes

    @property
    def job_name(self) -> str:
        return JOB_PREFIX + self.name

    def script(self) -> str:
        return (
            "#!/bin/sh\n"
            f"# SUNK active health check {self.name} (healthCheck.active)\n"
            f"exec {PROGRAM} --active {self.name}\n"
        )

    def job(self) -> dict[str, Any]:
        """The ``job`` of slurmrestd's ``POST /job/submit`` (data_parser v0.0.41 to v0.0.45)."""
        job: dict[str, Any] = {
            "name": self.job_name,
            "nodes": str(self.nodes),
            "tasks": self.nodes,
            "shared": ["none"],  # whole nodes: the check measures them alone
            "nice": LOWEST_PRIORITY,
            "requeue": False,
            "time_limit": {"set": True, "number": self.time_limit},
            "current_working_directory": "/tmp",
            "environment": ["PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "standard_output": f"/tmp/{self.job_name}-%j.out",
        }
        for key in ("partition", "qos"):
            if getattr(self, key):
                job[key] = getattr(self, key)
        return job


def in_flight(jobs: Iterable[dict[str, Any]]) -> set[str]:
    """Names of the jobs that are pending or running (not ended, or still completing)."""
    return {str(job.get("name") or "") for job in jobs if job_in_flight(job)}


@dataclass
class Schedule:
    """The next run of each check, in the Syncer's clock (monotonic seconds)."""

    checks: tuple[CheckJob, ...] = ()
    next_run: dict[str, float] = field(default_factory=dict)

    def due(self, now: float, jobs: Iterable[dict[str, Any]]) -> list[CheckJob]:
        """The checks to submit now; a check seen for the first time is scheduled."""
        busy = in_flight(jobs)
        out = []
        for check in self.checks:
            at = self.next_run.setdefault(check.name, now + check.every)
            if now >= at and check.job_name not in busy:
                out.append(check)
        return out

    def submitted(self, check: CheckJob, now: float) -> None:
        self.next_run[check.name] = now + check.every
