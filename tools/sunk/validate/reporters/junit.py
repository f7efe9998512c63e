"""JUnit XML: one test suite per file, one test case per file × check."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from sunk.validate.findings import Report, Severity
from sunk.validate.reporters.common import ordered


def render_junit(report: Report) -> str:
    root = ET.Element("testsuites", name="sunkctl validate")
    total = failures = 0
    by_file: dict[str, list] = {}
    for finding in ordered(report):
        by_file.setdefault(finding.file or "-", []).append(finding)
    for result in report.files:
        suite = ET.SubElement(root, "testsuite", name=result.file)
        found = by_file.get(result.file, [])
        suite_failures = 0
        for check in result.checks:
            case = ET.SubElement(suite, "testcase", name=check, classname=result.file)
            mine = [f for f in found if f.check == check]
            # Findings in other files (a -f base layer) count against this release too.
            errors = [f for f in mine if f.severity == Severity.ERROR]
            if errors:
                failure = ET.SubElement(
                    case, "failure", message=errors[0].message, type=errors[0].rule_id
                )
                failure.text = "\n".join(
                    f"{f.location()} {f.rule_id} {f.severity}: {f.message}" for f in mine
                )
                suite_failures += 1
            elif mine:
                out = ET.SubElement(case, "system-out")
                out.text = "\n".join(
                    f"{f.location()} {f.rule_id} {f.severity}: {f.message}" for f in mine
                )
        suite.set("tests", str(len(result.checks)))
        suite.set("failures", str(suite_failures))
        suite.set("errors", "0")
        total += len(result.checks)
        failures += suite_failures
    others = [f for f in ordered(report) if f.file not in {r.file for r in report.files}]
    if others:
        suite = ET.SubElement(root, "testsuite", name="other files", tests="1", errors="0")
        case = ET.SubElement(suite, "testcase", name="findings", classname="other files")
        errors = [f for f in others if f.severity == Severity.ERROR]
        suite.set("failures", "1" if errors else "0")
        if errors:
            failure = ET.SubElement(
                case, "failure", message=errors[0].message, type=errors[0].rule_id
            )
            failure.text = "\n".join(f"{f.location()} {f.rule_id}: {f.message}" for f in others)
            failures += 1
        total += 1
    root.set("tests", str(total))
    root.set("failures", str(failures))
    root.set("errors", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
