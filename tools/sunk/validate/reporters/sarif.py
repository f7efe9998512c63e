"""SARIF 2.1.0, hand-rolled."""

from __future__ import annotations

import json
from typing import Any

from sunk.validate.findings import CHECKS, Report, Severity
from sunk.validate.reporters.common import TOOL, ordered
from sunk.validate.rules import all_rules

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_STEP_RULES = {
    "YAML": "YAML parsing: syntax errors, duplicate keys, keys YAML 1.1 does not read as text.",
    "SCHEMA": "The coalesced values against the chart's values.schema.json.",
    "RENDER": "helm template and the Slurm configuration renderer.",
    "K8S": "Rendered objects against the Kubernetes / custom resource schemas.",
}


def _rules() -> list[dict[str, Any]]:
    out = [
        {
            "id": rule_id,
            "name": CHECKS[rule_id],
            "shortDescription": {"text": text},
            "defaultConfiguration": {"level": "error"},
        }
        for rule_id, text in _STEP_RULES.items()
    ]
    for rule in all_rules():
        out.append(
            {
                "id": rule.id,
                "name": rule.name,
                "shortDescription": {"text": rule.summary},
                "help": {"text": rule.hint},
                "defaultConfiguration": {
                    "level": "error" if rule.severity == Severity.ERROR else "warning"
                },
            }
        )
    return out


def render_sarif(report: Report) -> str:
    rules = _rules()
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = []
    for f in ordered(report):
        location: dict[str, Any] = {"artifactLocation": {"uri": f.file or "-"}}
        if f.line is not None:
            region = {"startLine": f.line}
            if f.column is not None:
                region["startColumn"] = f.column
            location["region"] = region
        result: dict[str, Any] = {
            "ruleId": f.rule_id,
            "level": "error" if f.severity == Severity.ERROR else "warning",
            "message": {"text": f.message + (f" ({f.hint})" if f.hint else "")},
            "locations": [{"physicalLocation": location}],
        }
        if f.rule_id in index:
            result["ruleIndex"] = index[f.rule_id]
        props = {k: v for k, v in (("keyPath", f.key_path), ("resource", f.resource)) if v}
        if props:
            result["properties"] = props
        results.append(result)
    sarif = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": TOOL["name"],
                        "version": TOOL["version"],
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }
    return json.dumps(sarif, indent=2) + "\n"
