"""`sunkctl validate`: the CI gate for values files (one report, one exit code)."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path

import typer
from rich.markup import escape

from sunk.chartio.source import OCI_PREFIX, chart_source
from sunk.cli.common import err, helm_option, out, want_traceback
from sunk.errors import UsageError
from sunk.validate import Options
from sunk.validate import validate as run_validate
from sunk.validate.engine import baseline_entries, load_baseline
from sunk.validate.reporters import (
    FORMATS,
    RENDERERS,
    render_rules_json,
    render_rules_text,
    render_text,
)
from sunk.validate.rules import all_rules

# -o/--output: the report formats (sunk.validate.reporters.FORMATS), as a choice Click checks.
Format = StrEnum("Format", [(name, name) for name in FORMATS])

HELP = "\n\n".join(
    [
        "Validate values files the way CI should: YAML (duplicate keys, YAML 1.1 booleans), "
        "the chart's values schema with Helm's coalescing, SUNK rules, helm template, and every "
        "rendered object against the Kubernetes and CRD schemas — one report, one exit code.",
        "Each PATH (a values file, or a directory searched for *.yaml/*.yml) is its own "
        "release: chart defaults ⊕ every -f file ⊕ the PATH file ⊕ --set. Without PATHS the -f "
        "files and --set form one release. Files with top-level `operator:`/`crds:` keys are "
        "the sunk chart's unless --chart says otherwise; Kubernetes manifests (apiVersion + "
        "kind) are skipped.",
        "Suppress a finding with a `# sunkctl: ignore=SUNK008` comment on its line or the line "
        "above, or with --baseline.",
        "Exit codes: 0 clean, 1 findings (errors; warnings too with --strict), 2 usage error, "
        "3 tool or environment failure.",
    ]
)


def _list_rules(output: Format) -> None:
    rules = all_rules()
    render = render_rules_json if output == "json" else render_rules_text
    typer.echo(render(rules), nl=False)


def validate(
    ctx: typer.Context,
    paths: list[Path] | None = typer.Argument(
        None, help="Values files or directories (a GitOps repo).", show_default=False
    ),
    values: list[Path] = typer.Option(
        [], "-f", "--values", help="Values file layered under every PATH (repeatable)."
    ),
    set_values: list[str] = typer.Option([], "--set", help="helm --set overrides (last)."),
    chart: str | None = typer.Option(
        None,
        "--chart",
        help="slurm or sunk (default: detected; slurm unless operator:/crds:), a chart "
        "directory, or a released chart: oci://HOST/REPO/CHART with --chart-version.",
    ),
    chart_version: str | None = typer.Option(
        None, "--chart-version", help="Version of the --chart oci://… chart to pull with helm."
    ),
    plain_http: bool = typer.Option(
        False, "--plain-http", help="Pull the --chart oci://… chart over HTTP, not HTTPS."
    ),
    kube_version: str | None = typer.Option(
        None, "--kube-version", "-k", help="Kubernetes X.Y to validate against (default newest)."
    ),
    output: Format = typer.Option(
        Format.text, "-o", "--output", help="Report format (--list-rules: text or json)."
    ),
    output_file: Path | None = typer.Option(
        None, "--output-file", help="Write the -o report here; text goes to stdout."
    ),
    baseline: Path | None = typer.Option(
        None, "--baseline", help="JSON list of {ruleId, file, keyPath} findings to suppress."
    ),
    generate_baseline: Path | None = typer.Option(
        None, "--generate-baseline", help="Write the current findings as a baseline; exit 0."
    ),
    strict: bool = typer.Option(False, "--strict", help="Warnings fail too (exit 1)."),
    render: bool = typer.Option(
        True, "--render/--no-render", help="Run helm and the object checks (steps 4-5)."
    ),
    crd_schemas: list[Path] = typer.Option(
        [],
        "--crd-schemas",
        help="Extra custom resource schemas: DIR/{group}/{kind}_{version}.json.",
    ),
    ignore_missing_schemas: bool = typer.Option(
        False, "--ignore-missing-schemas", help="Skip rendered kinds that have no schema."
    ),
    namespace: str = typer.Option("tenant-slurm", "-n", "--namespace", help="Release namespace."),
    jobs: int = typer.Option(
        0,
        "-j",
        "--jobs",
        min=0,
        help="Files validated at once, each in a process of its own (default 0: one per CPU).",
    ),
    helm: str | None = helm_option(),
    list_rules: bool = typer.Option(
        False, "--list-rules", help="Print every rule with its explanation and examples, and exit."
    ),
    traceback: bool = typer.Option(False, "--traceback", help="Show tracebacks of crashes."),
) -> None:
    """Validate values files: YAML, schema, SUNK rules, helm template, rendered objects."""
    if traceback:
        want_traceback(ctx)
    if list_rules:
        if output not in ("text", "json"):
            raise UsageError(f"--list-rules prints text or json, not -o {output}")
        if output_file is not None:
            raise UsageError("--list-rules prints the table on stdout; drop --output-file")
        _list_rules(output)
        raise typer.Exit(0)
    if output == "text" and output_file is not None:
        raise UsageError("--output-file needs a machine format (-o json|junit|sarif|github)")
    options = Options(
        paths=[str(p) for p in paths or []],
        values=[str(p) for p in values],
        sets=list(set_values),
        chart=chart,
        kube_version=kube_version,
        namespace=namespace,
        render=render,
        baseline=load_baseline(baseline) if baseline else None,
        crd_schemas=[str(d) for d in crd_schemas],
        ignore_missing_schemas=ignore_missing_schemas,
        helm=helm,
        jobs=jobs,
    )
    if plain_http and not (chart or "").startswith(OCI_PREFIX):
        raise UsageError("--plain-http is for --chart oci://…")
    # UsageError exits 2, ToolError 3, anything else is a crash (sunk.cli.common.SunkCommand).
    with chart_source(chart, chart_version, helm, plain_http) as source:
        if source is not None:
            options.chart = source.name
            options.chart_path = str(source.path) if source.path else None
        report = run_validate(options)
        report.chart_source = source.note() if source else None
    if generate_baseline is not None:
        entries = baseline_entries(report)
        generate_baseline.write_text(json.dumps(entries, indent=2) + "\n")
        err.print(f"wrote {len(entries)} baseline entries to {escape(str(generate_baseline))}")
        raise typer.Exit(0)
    if output == "text":
        render_text(report, out, err)
    else:
        text = RENDERERS[output.value](report)
        if output_file is not None:
            output_file.parent.mkdir(parents=True, exist_ok=True)
            output_file.write_text(text)
            render_text(report, out, err)
        else:
            typer.echo(text, nl=False)
    raise typer.Exit(report.exit_code(strict))


validate.__doc__ = HELP
