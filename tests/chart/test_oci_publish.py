"""Publishing: both charts packaged with ``helm package``, pushed to a real OCI registry on
loopback (go-containerregistry's ``registry``) and pulled back with the real helm."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sunk.devenv.oci_registry import LOOPBACK_V4, listen_addresses
from tests.oci import CHARTS, digest_of, sha256_file

REPO = Path(__file__).resolve().parents[2]


def test_registry_listens_on_loopback_only(oci_registry):
    assert listen_addresses(oci_registry.port) == {LOOPBACK_V4}
    assert oci_registry.host.startswith("127.0.0.1:")


@pytest.mark.parametrize("chart", CHARTS)
def test_pull_gives_back_the_packaged_chart(published_charts, oci_helm, tmp_path, chart):
    pulled = oci_helm.run(
        "pull",
        published_charts.ref(chart),
        "--version",
        published_charts.versions[chart],
        "--plain-http",
        "-d",
        str(tmp_path),
    )
    assert digest_of(pulled) == published_charts.digests[chart]
    package = published_charts.packages[chart]
    assert sha256_file(tmp_path / package.name) == sha256_file(package)


@pytest.mark.parametrize("chart", CHARTS)
def test_show_chart_from_oci_is_the_chart_yaml(published_charts, oci_helm, chart):
    shown = oci_helm.run(
        "show",
        "chart",
        published_charts.ref(chart),
        "--version",
        published_charts.versions[chart],
        "--plain-http",
    )
    expected = yaml.safe_load((REPO / "charts" / chart / "Chart.yaml").read_text())
    assert yaml.safe_load(shown.stdout) == expected


@pytest.mark.parametrize(
    ("chart", "values"),
    [("sunk", None), ("slurm", REPO / "examples/minimal-cpu.yaml")],
)
def test_chart_from_oci_renders_as_the_directory(published_charts, oci_helm, chart, values):
    extra = ["-f", str(values)] if values else []
    from_oci = oci_helm.run(
        "template",
        "rel",
        published_charts.ref(chart),
        "--version",
        published_charts.versions[chart],
        "--plain-http",
        "-n",
        "ns",
        *extra,
    )
    from_dir = oci_helm.run("template", "rel", str(REPO / "charts" / chart), "-n", "ns", *extra)
    assert from_oci.stdout == from_dir.stdout
    kinds = {d["kind"] for d in yaml.safe_load_all(from_oci.stdout) if d}
    assert kinds & {"Deployment", "SlurmCluster"}


def test_unknown_version_is_not_found(published_charts, oci_helm, tmp_path):
    proc = oci_helm.run(
        "pull",
        published_charts.ref("slurm"),
        "--version",
        "9.9.9",
        "--plain-http",
        "-d",
        str(tmp_path),
        check=False,
    )
    assert proc.returncode != 0
    assert "slurm:9.9.9: not found" in proc.stderr
