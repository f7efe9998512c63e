"""Step 4: render with the real helm, then run the Slurm config renderer on the result."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from sunk.chartio.helm import HelmError, Release, chart_path, template
from sunk.chartio.manifests import RenderedRelease
from sunk.models.words import spec_problems
from sunk.slurmconf import RenderError, render_all, size
from sunk.validate import cel_step
from sunk.validate.findings import RENDER, Finding, Severity

# Renderer warnings that a rule already reports with a position (SUNK012, SUNK049).
_COVERED = ("slurmConfig.", size.PROJECTED)
# Rules that report, at the values line, what makes the renderer refuse: reserved memory over
# a group's limit (SUNK006), a Lua script that would not load (SUNK029, SUNK030).
COVERED_BY_RULES = ("SUNK006", "SUNK024", "SUNK029", "SUNK030")


@dataclass
class Rendered:
    text: str = ""
    objects: list[dict[str, Any]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


# helm's `fail`: "execution error at (slurm/templates/x.yaml:3:20): compute.nodes.cpu: ..."
# (older helm: "template: slurm/templates/x.yaml:3:20: executing ... error calling fail: ...").
_HELM_AT = re.compile(r"(?:execution error at \(|template: )([^\s():]+):(\d+):(\d+)")
# Our charts' `fail` messages start with the values key at fault.
_KEY_FIRST = re.compile(r"(?:\): |error calling fail: )([A-Za-z][\w-]*(?:(?:\.[\w-]+)|\[\d+\])*): ")


def helm_failure(message: str, chart_dir: Path, display: str) -> Finding:
    """A failed `helm template` as a finding placed at the values key its message names
    (``key_path``; the engine finds its line), else at the chart template and line helm gives."""
    text = f"helm template failed: {_first_lines(message)}"
    key = _KEY_FIRST.search(message)
    if key:
        return Finding(RENDER, Severity.ERROR, text, display, key_path=key.group(1))
    at = _HELM_AT.search(message)
    if at:
        # helm names templates from the chart's own name: <chart>/templates/…
        relative = Path(*Path(at.group(1)).parts[1:])
        return Finding(
            RENDER, Severity.ERROR, text, str(chart_dir / relative), int(at.group(2)),
            int(at.group(3)),
        )  # fmt: skip
    return Finding(RENDER, Severity.ERROR, text, display)


def _first_lines(text: str, limit: int = 6) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    out = " / ".join(lines[:limit])
    return out + (" …" if len(lines) > limit else "")


def render(
    release: Release,
    files: list[Path],
    sets: list[str],
    display: str,
    covered: bool = False,
) -> Rendered:
    out = Rendered()
    try:
        out.text = template(release, files, sets)
    except HelmError as exc:
        if exc.missing:  # no helm to run: a ToolError (exit 3), not a finding
            raise
        chart_dir = release.path or chart_path(release.chart)
        out.findings.append(helm_failure(str(exc), chart_dir, display))
        return out
    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        out.objects = [d for d in yaml.load_all(out.text, Loader=loader) if isinstance(d, dict)]
    except yaml.YAMLError as exc:
        out.findings.append(
            Finding(RENDER, Severity.ERROR, f"helm rendered invalid YAML: {exc}", display)
        )
        return out
    # The CRDs' CEL rules (K8S findings): run here, before the Slurm renderer, whose model
    # validation would otherwise repeat a refusal they report with the rule's own words.
    refused = cel_step.check_objects(out.objects, display)
    out.findings.extend(refused)
    if release.chart == "slurm":
        out.findings.extend(_slurm(out.objects, release.namespace, display, covered, bool(refused)))
    return out


def _slurm(
    objects: list[dict[str, Any]],
    namespace: str,
    display: str,
    covered: bool,
    cel_reported: bool = False,
) -> list[Finding]:
    findings = []
    try:
        inputs = RenderedRelease(objects).cluster_inputs(namespace)
        rendered = render_all(inputs)
    except RenderError as exc:
        if covered:  # a rule already reported it at the values line
            return []
        return [Finding(RENDER, Severity.ERROR, f"Slurm renderer: {exc}", display)]
    except ValidationError as exc:
        # The CRDs' CEL rules say the same, at the values line (cel_step, trace): say it once.
        if cel_reported:
            return []
        message = "; ".join(spec_problems(exc)[:3])
        return [
            Finding(
                RENDER, Severity.ERROR, f"rendered custom resources unreadable: {message}", display
            )
        ]
    except (ValueError, KeyError, TypeError) as exc:
        message = str(exc).splitlines()[0]
        return [
            Finding(
                RENDER, Severity.ERROR, f"rendered custom resources unreadable: {message}", display
            )
        ]
    for warning in rendered.warnings:
        if warning.startswith(_COVERED):
            continue
        findings.append(Finding(RENDER, Severity.WARNING, f"Slurm renderer: {warning}", display))
    return findings
