"""Operator metrics in the Prometheus text format (no client library needed)."""

from __future__ import annotations

from collections import Counter

GAUGES = {
    "desired": "desiredNumberScheduled",
    "feasible": "numberFeasible",
    "current": "currentNumberScheduled",
    "ready": "numberReady",
    "drained": "numberDrain",
    "misscheduled": "numberMisscheduled",
    "unavailable": "numberUnavailable",
}


class Metrics:
    def __init__(self) -> None:
        self.reconciles: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.leader = 0
        self.api_writes = 0
        self.nodesets: dict[tuple[str, str], dict] = {}

    def render(self) -> str:
        lines = [
            "# TYPE sunk_operator_leader gauge",
            f"sunk_operator_leader {self.leader}",
            "# TYPE sunk_operator_api_writes_total counter",
            f"sunk_operator_api_writes_total {self.api_writes}",
            "# TYPE sunk_operator_reconciles_total counter",
        ]
        lines += [
            f'sunk_operator_reconciles_total{{kind="{k}"}} {v}'
            for k, v in sorted(self.reconciles.items())
        ]
        lines.append("# TYPE sunk_operator_reconcile_errors_total counter")
        lines += [
            f'sunk_operator_reconcile_errors_total{{kind="{k}"}} {v}'
            for k, v in sorted(self.errors.items())
        ]
        for short, field in GAUGES.items():
            lines.append(f"# TYPE kube_sunk_nodeset_{short} gauge")
            for (ns, name), status in sorted(self.nodesets.items()):
                lines.append(
                    f'kube_sunk_nodeset_{short}{{namespace="{ns}",nodeset="{name}"}} '
                    f"{status.get(field, 0)}"
                )
        return "\n".join(lines) + "\n"
