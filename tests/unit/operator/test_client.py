"""The pure parts of the operator's API client: the rate limit, Retry-After and the backoff.
(Its requests are tested against a real API server in tests/cluster/test_kube_client.py.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from sunk.operator.client import Backoff, RateLimit, path_for, retry_after


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_rate_limit_lets_a_burst_through_then_spaces_requests_at_qps() -> None:
    clock = Clock()
    limit = RateLimit(qps=10, burst=3, clock=clock)
    assert [limit.delay() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limit.delay() == pytest.approx(0.1)  # the 4th waits one token's time
    assert limit.delay() == pytest.approx(0.2)
    clock.now += 10  # idle: the bucket refills, but never beyond the burst
    assert [limit.delay() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limit.delay() > 0


@pytest.mark.parametrize(
    ("header", "expected"),
    [(None, None), ("", None), ("3", 3.0), ("0", 0.0), ("-5", 0.0), ("soon", None)],
)
def test_retry_after_in_seconds(header: str | None, expected: float | None) -> None:
    assert retry_after(header) == expected


def test_retry_after_as_an_http_date() -> None:
    later = datetime.now(UTC) + timedelta(seconds=30)
    assert 25 < (retry_after(format_datetime(later, usegmt=True)) or 0) <= 30


def test_backoff_waits_at_least_retry_after_and_grows_within_its_cap() -> None:
    backoff = Backoff(attempts=10, base=0.2, cap=2.0)
    for attempt in range(10):
        wait = backoff.seconds(attempt, None)
        assert 0 <= wait <= min(2.0, 0.2 * 2**attempt)
    assert all(1.0 <= backoff.seconds(a, 1.0) <= 3.0 for a in range(10))
    assert backoff.seconds(0, 3600) <= 2.0 + 0.2  # a huge Retry-After is capped


def test_paths() -> None:
    assert path_for("v1", "pods", "ns", "a b") == "/api/v1/namespaces/ns/pods/a%20b"
    assert path_for("apps/v1", "deployments") == "/apis/apps/v1/deployments"
    assert path_for("v1", "nodes", None, "n", "status") == "/api/v1/nodes/n/status"
