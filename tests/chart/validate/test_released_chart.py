"""`sunkctl validate --chart oci://HOST/REPO/CHART --chart-version V`: the values are checked
against a released chart pulled from a real OCI registry on loopback, not against the
chart this sunkctl carries; and `--chart PATH` against a chart directory."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.oci import Helm

REPO = Path(__file__).resolve().parents[3]
NEXT = "0.2.0-test.1"
# A key the next release adds (schema, default) and an object it renders from it.
NEW_KEY = "releaseNote"
NEW_TEMPLATE = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: release-note}
data: {note: {{ .Values.releaseNote | quote }}}
"""


def sunkctl(helm: Helm, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI as a process (its stderr line and exit code are what CI sees), with the test
    helm's own homes."""
    return subprocess.run(
        [sys.executable, "-m", "sunk.cli.main", "validate", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=helm.env,
        timeout=300,
    )


@pytest.fixture(scope="module")
def next_release(published_charts, oci_helm, tmp_path_factory) -> str:
    """A `slurm` chart NEXT with a new key and template, pushed beside the published 0.1.0."""
    work = tmp_path_factory.mktemp("next-release")
    chart = work / "slurm"
    shutil.copytree(REPO / "charts/slurm", chart)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    meta["version"] = NEXT
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    schema = json.loads((chart / "values.schema.json").read_text())
    schema["properties"][NEW_KEY] = {"type": "string"}
    (chart / "values.schema.json").write_text(json.dumps(schema, indent=2))
    with (chart / "values.yaml").open("a") as fh:
        fh.write(f'{NEW_KEY}: ""\n')
    (chart / "templates" / "release-note.yaml").write_text(NEW_TEMPLATE)
    oci_helm.run("package", str(chart), "-d", str(work))
    oci_helm.run("push", str(work / f"slurm-{NEXT}.tgz"), published_charts.repo, "--plain-http")
    return published_charts.ref("slurm")


@pytest.fixture
def values(tmp_path: Path) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(
        (REPO / "examples/minimal-cpu.yaml").read_text() + f"{NEW_KEY}: upgraded in March\n"
    )
    return path


def report_of(proc: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(proc.stdout)


def test_released_chart_schema_and_templates_are_used(next_release, oci_helm, values):
    proc = sunkctl(
        oci_helm,
        values.parent,
        "--chart",
        next_release,
        "--chart-version",
        NEXT,
        "--plain-http",
        values.name,
        "-o",
        "json",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = report_of(proc)
    assert report["chartSource"] == (
        f"validated against chart slurm {NEXT} from {next_release}:{NEXT}"
    )
    (result,) = report["files"]
    # SlurmCluster, NodeSet and the new release's ConfigMap: its templates rendered.
    assert result["chart"] == "slurm" and result["rendered"] == 3


@pytest.mark.parametrize("chart", ["bundled", "published 0.1.0"])
def test_the_new_key_is_unknown_to_older_charts(
    next_release, published_charts, oci_helm, values, chart
):
    args = ["--chart", "slurm"]
    if chart != "bundled":
        args = ["--chart", next_release, "--chart-version", "0.1.0", "--plain-http"]
    proc = sunkctl(oci_helm, values.parent, *args, values.name, "-o", "json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (finding,) = report_of(proc)["findings"]
    assert finding["ruleId"] == "SCHEMA" and NEW_KEY in finding["message"]


def test_chart_directory(oci_helm, tmp_path):
    site = tmp_path / "site.yaml"
    shutil.copy(REPO / "examples/minimal-cpu.yaml", site)
    proc = sunkctl(oci_helm, tmp_path, "--chart", str(REPO / "charts/slurm"), "site.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"validated against chart slurm 0.1.0 from {REPO / 'charts/slurm'}" in proc.stderr


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _errors(oci_registry):
    ref = f"oci://{oci_registry.host}/charts/slurm"
    gone = f"oci://127.0.0.1:{_closed_port()}/charts/slurm"
    return [
        # (arguments, exit code, the one line's telling part)
        (
            ["--chart", ref, "--chart-version", "9.9.9", "--plain-http"],
            2,
            f"--chart {ref} --chart-version 9.9.9: not in the registry",
        ),
        (["--chart", ref, "--plain-http"], 2, "give the released version with --chart-version"),
        (
            ["--chart", ref, "--chart-version", "0.1.0"],
            3,
            "the registry speaks plain HTTP; add --plain-http",
        ),
        (
            ["--chart", gone, "--chart-version", "0.1.0", "--plain-http"],
            3,
            "helm pull failed: ",
        ),
        (["--chart", "nowhere"], 2, "--chart nowhere: expected slurm, sunk, a chart directory"),
        (
            ["--chart", str(REPO / "charts/slurm"), "--chart-version", "0.2.0"],
            2,
            "its version is 0.1.0, not --chart-version 0.2.0",
        ),
        (["--chart", "slurm", "--chart-version", "0.1.0"], 2, "this installation's own chart"),
        (["--chart", "slurm", "--plain-http"], 2, "--plain-http is for --chart oci://"),
        (["--chart-version", "0.1.0"], 2, "--chart-version needs --chart"),
    ]


def test_errors_are_one_line_with_their_exit_code(published_charts, oci_registry, oci_helm):
    site = REPO / "examples/minimal-cpu.yaml"
    for args, code, words in _errors(oci_registry):
        proc = sunkctl(oci_helm, REPO, *args, str(site))
        assert proc.returncode == code, (args, proc.stderr)
        assert proc.stdout == "", args
        (line,) = proc.stderr.splitlines()
        assert line.startswith("sunkctl validate: error: ") and words in line, (args, line)
