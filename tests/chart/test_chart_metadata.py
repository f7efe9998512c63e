"""Chart.yaml says what the charts ship: the Artifact Hub annotations name the CRDs in
charts/sunk/templates/crds and the images the charts deploy by default, and the license is
the repository's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sunk.devenv.images import image_ref

REPO = Path(__file__).resolve().parents[2]


def chart(name: str) -> dict:
    return yaml.safe_load((REPO / "charts" / name / "Chart.yaml").read_text())


@pytest.mark.parametrize("name", ["sunk", "slurm"])
def test_license_and_changes(name):
    meta = chart(name)
    assert meta["annotations"]["artifacthub.io/license"] == "Apache-2.0"
    assert "Apache License" in (REPO / "LICENSE").read_text()
    assert 'license = "Apache-2.0"' in (REPO / "pyproject.toml").read_text()
    changes = yaml.safe_load(meta["annotations"]["artifacthub.io/changes"])
    assert changes and all(c["kind"] in {"added", "changed", "fixed", "removed"} for c in changes)
    assert f"## {meta['version']}" in (REPO / "CHANGELOG.md").read_text()


def test_the_crds_annotation_names_every_crd_the_chart_installs():
    listed = yaml.safe_load(chart("sunk")["annotations"]["artifacthub.io/crds"])
    shipped = {}
    for path in (REPO / "charts/sunk/templates/crds").glob("*.yaml"):
        # the template's Helm lines (labels, the crds.enabled switch) aside, it is the CRD
        text = "\n".join(line for line in path.read_text().splitlines() if "{{" not in line)
        crd = yaml.safe_load(text)
        shipped[crd["metadata"]["name"]] = (
            crd["spec"]["names"]["kind"],
            [v["name"] for v in crd["spec"]["versions"]],
        )
    assert {c["name"]: (c["kind"], [c["version"]]) for c in listed} == shipped


@pytest.mark.parametrize(
    ("name", "images"), [("sunk", ["operator"]), ("slurm", ["controller", "slurmd", "login"])]
)
def test_the_images_annotation_is_the_charts_defaults(name, images):
    listed = yaml.safe_load(chart(name)["annotations"]["artifacthub.io/images"])
    assert [(i["name"], i["image"]) for i in listed] == [(n, image_ref(n)) for n in images]
