from __future__ import annotations

import json

from sunk.validate.findings import Report
from sunk.validate.reporters.common import TOOL, ordered


def render_json(report: Report) -> str:
    data = {
        "schemaVersion": 1,
        "tool": TOOL,
        "findings": [f.to_json() for f in ordered(report)],
        "summary": report.summary(),
        "files": [
            {"file": r.file, "chart": r.chart, "checks": r.checks, "rendered": r.rendered}
            for r in report.files
        ],
        "notes": report.notes,
    }
    if report.chart_source:
        data["chartSource"] = report.chart_source
    return json.dumps(data, indent=2) + "\n"
