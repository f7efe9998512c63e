"""Which chart a command checks values against: this installation's own (``slurm``, ``sunk``),
a chart directory, or a released chart pulled from an OCI registry (``oci://HOST/REPO/CHART``
with a version).

A released chart is pulled with the real helm into a temporary directory that lives as long
as the ``with`` block, so its values.yaml, values.schema.json and templates are the ones
checked. Every failure is one line: a version or chart the registry does not have is a usage
error (exit 2), a registry that cannot be reached a tool failure (exit 3).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from sunk.chartio.helm import helm_binary
from sunk.errors import ToolError, UsageError

CHART_NAMES = ("slurm", "sunk")
OCI_PREFIX = "oci://"
PULL_TIMEOUT = 120  # seconds; an address that drops packets must not hang CI
EXPECTED = "slurm, sunk, a chart directory, or oci://HOST/REPO/CHART with --chart-version"


@dataclass(frozen=True)
class ChartSource:
    name: str  # slurm | sunk: which rules, renderer and defaults apply
    path: Path | None  # the chart directory; None: this installation's chart of that name
    version: str | None  # Chart.yaml's version (None for the bundled chart)
    origin: str  # what the user named, for the report

    def note(self) -> str | None:
        if self.path is None:
            return None
        return f"validated against chart {self.name} {self.version} from {self.origin}"


def read_chart(directory: Path, origin: str) -> tuple[str, str]:
    """(name, version) from ``directory/Chart.yaml``; the chart must be slurm or sunk."""
    chart_yaml = directory / "Chart.yaml"
    try:
        meta = yaml.safe_load(chart_yaml.read_text())
    except OSError:
        raise UsageError(f"--chart {origin}: no Chart.yaml in {directory}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"--chart {origin}: {chart_yaml} does not parse: {exc}") from None
    if not isinstance(meta, dict):
        raise UsageError(f"--chart {origin}: {chart_yaml} is not a map")
    name, version = str(meta.get("name", "")), str(meta.get("version", ""))
    if name not in CHART_NAMES:
        raise UsageError(
            f"--chart {origin}: chart {name!r} is neither slurm nor sunk; "
            "only their values can be validated"
        )
    for required in ("values.yaml", "values.schema.json"):
        if not (directory / required).is_file():
            raise UsageError(f"--chart {origin}: chart {name} {version} has no {required}")
    return name, version


def _pull_error(ref: str, version: str, stderr: str) -> Exception:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else "no output"
    last = last.removeprefix("Error: ")
    where = f"--chart {ref} --chart-version {version}"
    if last.endswith(": not found") or "manifest unknown" in last:
        return UsageError(f"{where}: not in the registry (helm pull: {last})")
    if "server gave HTTP response to HTTPS client" in last:
        return ToolError(f"{where}: the registry speaks plain HTTP; add --plain-http")
    return ToolError(f"{where}: helm pull failed: {last}")


def pull(ref: str, version: str, dest: Path, helm: str | None, plain_http: bool) -> Path:
    """``helm pull REF --version VERSION --untar`` into ``dest``; the chart's directory."""
    cmd = [helm_binary(helm), "pull", ref, "--version", version, "--untar", "-d", str(dest)]
    if plain_http:
        cmd.append("--plain-http")
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, check=False, timeout=PULL_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        raise ToolError(
            f"--chart {ref}: helm pull gave no answer within {PULL_TIMEOUT} s"
        ) from None
    if proc.returncode != 0:
        raise _pull_error(ref, version, proc.stderr)
    charts = [p.parent for p in dest.glob("*/Chart.yaml")]
    if len(charts) != 1:
        raise ToolError(f"--chart {ref}: helm pull left {len(charts)} charts in {dest}")
    return charts[0]


@contextmanager
def chart_source(
    spec: str | None,
    version: str | None = None,
    helm: str | None = None,
    plain_http: bool = False,
) -> Iterator[ChartSource | None]:
    """The chart ``--chart SPEC --chart-version VERSION`` names, ready while the block runs.
    None when no chart is named (each values file's chart is detected)."""
    if spec is None:
        if version is not None:
            raise UsageError("--chart-version needs --chart oci://… or --chart PATH")
        yield None
        return
    if spec.startswith(OCI_PREFIX):
        if not version:
            raise UsageError(f"--chart {spec}: give the released version with --chart-version")
        with tempfile.TemporaryDirectory(prefix="sunkctl-chart-") as tmp:
            directory = pull(spec, version, Path(tmp), helm, plain_http)
            name, found = read_chart(directory, f"{spec} {version}")
            yield ChartSource(name, directory, found, f"{spec}:{version}")
        return
    if spec in CHART_NAMES:  # a directory of that name is ./slurm
        if version is not None:
            raise UsageError(
                f"--chart-version {version}: --chart {spec} is this installation's own chart; "
                "name a released one with --chart oci://HOST/REPO/" + spec
            )
        yield ChartSource(spec, None, None, spec)
        return
    directory = Path(spec)
    if not directory.is_dir():
        raise UsageError(f"--chart {spec}: expected {EXPECTED}")
    name, found = read_chart(directory, spec)
    if version is not None and version != found:
        raise UsageError(f"--chart {spec}: its version is {found}, not --chart-version {version}")
    yield ChartSource(name, directory.resolve(), found, spec)
