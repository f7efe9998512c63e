"""The validation pipeline: targets → YAML → coalesce + schema → rules → helm → objects."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sunk import __version__
from sunk.chartio.helm import Release
from sunk.errors import ToolError, UsageError
from sunk.resources import cache_dir, chart_dir
from sunk.validate import k8s_step, render_step, trace
from sunk.validate.coalesce import Coalesced, Layer, SetError, coalesce, set_layer
from sunk.validate.findings import SCHEMA, YAML, FileResult, Finding, Report, Severity
from sunk.validate.paths import dotted
from sunk.validate.rules import RuleContext, all_rules
from sunk.validate.schema_step import check_values
from sunk.validate.yamlload import Document, load_file

CHARTS = ("slurm", "sunk")
SUNK_KEYS = frozenset({"operator", "crds", "nvidia-device-plugin"})
SKIP_NAMES = frozenset({"Chart.yaml", "Chart.lock", "values.schema.json"})


@dataclass
class Options:
    paths: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)  # -f: layered under every PATH
    sets: list[str] = field(default_factory=list)
    chart: str | None = None  # None: slurm, or sunk for files with operator:/crds: keys
    # A directory of the chart named by ``chart`` (a released chart, pulled): its values.yaml,
    # schema and templates are used. None: this installation's chart.
    chart_path: str | None = None
    kube_version: str | None = None
    namespace: str = "tenant-slurm"
    release: str = "slurm"
    render: bool = True
    baseline: list[dict[str, Any]] | None = None
    crd_schemas: list[str] = field(default_factory=list)  # extra {group}/{kind}_{version}.json
    ignore_missing_schemas: bool = False
    helm: str | None = None  # --helm; None: $SUNK_HELM, then PATH
    jobs: int = 0  # files validated at once (-j); 0: one per CPU


def display_name(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _walk(root: Path, notes: list[str]) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        here = Path(dirpath)
        if here.name == "templates" and (here.parent / "Chart.yaml").exists():
            notes.append(f"{display_name(here)}: skipped (chart templates are not values)")
            dirnames[:] = []
            continue
        for name in sorted(filenames):
            if name.endswith((".yaml", ".yml")) and name not in SKIP_NAMES:
                yield here / name


def expand(paths: list[str], notes: list[str]) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out.extend(_walk(path, notes))
        elif path.is_file():
            out.append(path)
        else:
            raise UsageError(f"{raw}: no such file or directory")
    return out


def is_manifest(data: Any) -> bool:
    return isinstance(data, dict) and "apiVersion" in data and "kind" in data


def detect_chart(data: Any) -> str:
    if isinstance(data, dict) and SUNK_KEYS & set(map(str, data)):
        return "sunk"
    return "slurm"


# Parsed chart values.yaml files (they do not change during a run; keyed by mtime).
_DEFAULTS: dict[tuple[str, int, str], Document] = {}


def _chart_values(path: Path, name: str, chart: str) -> Document:
    """A chart's values.yaml with its positions. Parsing it with positions takes longer than
    the rest of a small file's checks, so the result is kept in the user's cache, keyed by the
    file's bytes and this sunkctl's version (JSON: nothing from the cache is executed)."""
    text = path.read_bytes()
    digest = hashlib.sha256(text + __version__.encode()).hexdigest()[:32]
    cached = cache_dir() / "validate" / f"values-{digest}.json"
    try:
        return Document.from_json(name, json.loads(cached.read_bytes()))
    except (OSError, ValueError, KeyError, TypeError):
        pass  # not cached yet, or unreadable: parse it
    doc, findings = load_file(str(path), name)
    if doc is None or findings or not isinstance(doc.data, dict):
        raise ToolError(f"chart {chart}: its values.yaml does not parse")
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(doc.to_json()))
        tmp.replace(cached)
    except OSError:
        pass  # a read-only cache only costs the parse
    return doc


@dataclass
class _Done:
    """One file's findings, waiting for the Kubernetes check of its rendered objects, which
    runs once for every file of a run (one kubeconform process, not one per file)."""

    findings: list[Finding]
    coalesced: Coalesced | None = None
    objects: k8s_step.Batch | None = None


class _Run:
    def __init__(self, options: Options):
        self.options = options
        self.report = Report()
        self.docs: dict[str, Document] = {}
        for directory in options.crd_schemas:
            if not Path(directory).is_dir():
                raise UsageError(f"--crd-schemas {directory}: not a directory")
        if options.chart is not None and options.chart not in CHARTS:
            raise UsageError(f"--chart {options.chart}: expected one of {', '.join(CHARTS)}")
        if options.chart_path is not None and options.chart is None:
            raise UsageError("a chart directory needs its chart's name (slurm or sunk)")
        try:
            self.sets = set_layer(options.sets)
        except SetError as exc:
            raise UsageError(str(exc)) from exc
        self.kube_version: str | None = None
        self.done: list[_Done] = []

    # -- loading -----------------------------------------------------------------------

    def load(self, path: Path) -> tuple[Document | None, list[Finding]]:
        name = display_name(path)
        if name in self.docs:
            return self.docs[name], []
        try:
            doc, findings = load_file(str(path), name)
        except OSError as exc:
            raise ToolError(f"{name}: {exc.strerror or exc}") from exc
        if doc is not None:
            self.docs[name] = doc
            if not isinstance(doc.data, dict):
                findings.append(
                    Finding(
                        YAML,
                        Severity.ERROR,
                        f"a values file must be a map at the top level, not "
                        f"{type(doc.data).__name__}",
                        name,
                        1,
                        1,
                    )
                )
            if doc.documents > 1:
                findings.append(
                    Finding(
                        YAML,
                        Severity.ERROR,
                        f"{doc.documents} YAML documents in a values file; Helm reads one",
                        name,
                        1,
                        1,
                        hint="split the file, or remove the extra `---` separators",
                    )
                )
        return doc, findings

    def chart_dir(self, chart: str) -> Path:
        if self.options.chart_path is not None:
            return Path(self.options.chart_path)
        return chart_dir(chart)  # not found: a ResourceError, a ToolError

    def chart_file(self, chart: str, name: str) -> Path:
        return self.chart_dir(chart) / name

    def defaults(self, chart: str) -> Layer:
        path = self.chart_file(chart, "values.yaml")
        if not path.is_file():
            raise ToolError(f"chart {chart}: {path} is missing")
        name = display_name(path)
        key = (str(path), path.stat().st_mtime_ns, name)
        if key not in _DEFAULTS:
            _DEFAULTS[key] = _chart_values(path, name, chart)
        doc = _DEFAULTS[key]
        self.docs.setdefault(doc.file, doc)
        return Layer(doc.file, doc.data, doc.positions, doc.blocks)

    # -- one release ------------------------------------------------------------------

    def run(self) -> Report:
        opts = self.options
        notes = self.report.notes
        bases = [Path(p) for p in opts.values]
        for base in bases:
            if not base.is_file():
                raise UsageError(f"-f {base}: no such file")
        targets = expand(opts.paths, notes)
        if opts.paths and not targets:
            notes.append("no values files found (*.yaml, *.yml)")
        if not opts.paths:
            if not bases and self.sets is None:
                raise UsageError("nothing to validate: give PATHS, -f files or --set")
            self.release(bases, None)
        jobs = min(opts.jobs if opts.jobs > 0 else os.cpu_count() or 1, len(targets))
        if jobs > 1:
            self.parallel(bases, targets, jobs)
        else:
            for target in targets:
                self.release(bases, target)
        self.finish()
        self.apply_baseline()
        return self.report

    def parallel(self, bases: list[Path], targets: list[Path], jobs: int) -> None:
        """The files in `jobs` worker processes, a run of consecutive files each (helm template
        and the Python steps both take CPU; each worker checks its files' objects in one
        kubeconform run); the results come back in file order, as a sequential run gives them."""
        show = _progress(len(targets))
        size = -(-len(targets) // jobs)
        chunks = [targets[i : i + size] for i in range(0, len(targets), size)]
        # fork: the workers start with every module already imported
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            parts = [pool.submit(_releases, self.options, bases, chunk) for chunk in chunks]
            done = 0
            for chunk, part in zip(chunks, parts, strict=True):
                report = part.result()  # a worker's UsageError/ToolError is raised here
                self.report.files += report.files
                self.report.findings += report.findings
                self.report.notes += report.notes
                self.report.suppressed += report.suppressed
                done += len(chunk)
                show(done)

    def finish(self) -> None:
        """Check every file's rendered objects against the Kubernetes schemas at once, then
        keep each file's findings in file order."""
        batches = [d.objects for d in self.done if d.objects is not None]
        if batches:
            assert self.kube_version is not None
            checked = iter(
                k8s_step.check_batches(
                    batches,
                    self.kube_version,
                    tuple(Path(d) for d in self.options.crd_schemas),
                    self.options.ignore_missing_schemas,
                )
            )
        for item in self.done:
            findings = item.findings
            if item.objects is not None and item.coalesced is not None:
                findings += [trace.place(f, item.coalesced) for f in next(checked)]
            self.keep(findings)
        self.done = []

    def release(self, bases: list[Path], target: Path | None) -> None:
        findings: list[Finding] = []
        layers: list[Layer] = []
        broken = False
        for path in [*bases, *([target] if target else [])]:
            doc, found = self.load(path)
            findings.extend(found)
            if doc is None or not isinstance(doc.data, dict):
                broken = True
                continue
            if path is target and is_manifest(doc.data):
                self.report.notes.append(
                    f"{doc.file}: skipped ({doc.data.get('kind')} manifest, not a values file)"
                )
                return
            layers.append(Layer(doc.file, doc.data, doc.positions, doc.blocks))
        if self.sets is not None:
            layers.append(self.sets)
        display = (
            display_name(target) if target else (display_name(bases[-1]) if bases else "--set")
        )
        chart = self.options.chart or detect_chart(layers[-1].data if layers else {})
        result = FileResult(display, chart, checks=["yaml"])
        self.report.files.append(result)
        if broken:
            self.done.append(_Done(findings))
            return
        coalesced = coalesce(self.defaults(chart), layers)
        schema_file = self.chart_file(chart, "values.schema.json")
        schema_findings = check_values(coalesced, str(schema_file))
        findings.extend(schema_findings)
        result.checks += ["schema", "rules"]
        findings.extend(self.rules(coalesced, chart, clean=not schema_findings))
        early_errors = any(
            f.severity == Severity.ERROR and f.rule_id in (YAML, SCHEMA) for f in findings
        )
        objects = None
        if self.options.render and not early_errors:
            rendered, objects = self.render(chart, bases, target, display, result, findings)
            findings.extend(trace.place(f, coalesced) for f in rendered)
        self.done.append(_Done(findings, coalesced, objects))

    def rules(self, coalesced: Coalesced, chart: str, clean: bool) -> list[Finding]:
        ctx = RuleContext.build(coalesced.values, chart, coalesced)
        out = []
        for rule in all_rules():
            if chart not in rule.charts:
                continue
            try:
                hits = list(rule.check(ctx))
            except Exception:
                if clean:  # schema-valid input must never crash a rule: that is our bug
                    raise
                continue  # malformed input the schema step already reported
            for hit in hits:
                if hit.text_line is not None:
                    file, line, column = coalesced.locate_text_line(hit.path, hit.text_line)
                else:
                    file, line, column = coalesced.locate(hit.path)
                out.append(
                    Finding(
                        rule.id,
                        rule.severity,
                        hit.message,
                        file,
                        line,
                        column,
                        dotted(hit.path),
                        None,
                        hit.hint or rule.hint,
                    )
                )
        return out

    def render(
        self,
        chart: str,
        bases: list[Path],
        target: Path | None,
        display: str,
        result: FileResult,
        findings: list[Finding],
    ) -> tuple[list[Finding], k8s_step.Batch | None]:
        """The render step's findings, and the objects for the Kubernetes check (`finish`)."""
        if self.kube_version is None:
            self.kube_version = k8s_step.normalize_version(self.options.kube_version)
        release = Release(
            chart=chart,
            name=self.options.release,
            namespace=self.options.namespace,
            kube_version=f"{self.kube_version}.0",
            helm=self.options.helm,
            path=self.chart_dir(chart),
        )
        files = [*bases, *([target] if target else [])]
        covered = any(f.rule_id in render_step.COVERED_BY_RULES for f in findings)
        rendered = render_step.render(release, files, self.options.sets, display, covered)
        result.checks.append("render")
        result.rendered = len(rendered.objects)
        if not rendered.objects:
            return list(rendered.findings), None
        result.checks.append("kubernetes")
        return list(rendered.findings), k8s_step.Batch(rendered.objects, display, rendered.text)

    # -- suppression ------------------------------------------------------------------

    def keep(self, findings: list[Finding]) -> None:
        for finding in findings:
            doc = self.docs.get(finding.file or "")
            if doc is not None and doc.ignored(finding.rule_id, finding.line):
                self.report.suppressed += 1
                continue
            self.report.findings.append(finding)

    def apply_baseline(self) -> None:
        if not self.options.baseline:
            return
        known = {
            (str(e.get("ruleId")), str(e.get("file")), str(e.get("keyPath")))
            for e in self.options.baseline
            if isinstance(e, dict)
        }
        kept = []
        for finding in self.report.findings:
            if (finding.rule_id, str(finding.file), str(finding.key_path)) in known:
                self.report.suppressed += 1
            else:
                kept.append(finding)
        self.report.findings = kept


def _releases(options: Options, bases: list[Path], targets: list[Path]) -> Report:
    run = _Run(options)
    for target in targets:
        run.release(bases, target)
    run.finish()
    return run.report


def _progress(total: int) -> Callable[[int], None]:
    """`validated 3/40` on stderr, rewritten in place, when stderr is a terminal."""
    if not sys.stderr.isatty():
        return lambda _done: None

    def show(done: int) -> None:
        end = "\n" if done == total else ""
        sys.stderr.write(f"\rvalidated {done}/{total}{end}")
        sys.stderr.flush()

    return show


def validate(options: Options) -> Report:
    """Run every step over the targets; raises UsageError / ToolError for exit codes 2 / 3."""
    return _Run(options).run()


def load_baseline(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"--baseline {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"--baseline {path}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(data, list) or not all(isinstance(e, dict) for e in data):
        raise UsageError(f"--baseline {path}: expected a JSON list of {{ruleId, file, keyPath}}")
    return data


def baseline_entries(report: Report) -> list[dict[str, Any]]:
    entries = {
        (f.rule_id, f.file, f.key_path): {
            "ruleId": f.rule_id,
            "file": f.file,
            "keyPath": f.key_path,
        }
        for f in report.findings
    }
    return [entries[k] for k in sorted(entries, key=lambda k: tuple(map(str, k)))]
