"""The tags `make images` builds are the image references the charts and models default to."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
import yaml

from sunk.devenv import images
from sunk.models import values
from sunk.slurmconf.releases import release_of_image


def image_refs(node: Any) -> set[str]:
    """Every image reference in rendered manifests: `image: repo:tag` strings and
    `{repository, tag}` maps."""
    found: set[str] = set()
    if isinstance(node, dict):
        if isinstance(node.get("repository"), str) and isinstance(node.get("tag"), str):
            found.add(f"{node['repository']}:{node['tag']}")
        for key, value in node.items():
            if key == "image" and isinstance(value, str):
                found.add(value)
            found |= image_refs(value)
    elif isinstance(node, list):
        for item in node:
            found |= image_refs(item)
    return found


def ours(refs: set[str]) -> set[str]:
    return {r for r in refs if r.startswith(values.IMAGE_PREFIX + "/")}


def test_build_tags_are_the_model_defaults():
    built = {s.ref for s in images.images()}
    assert built == {
        f"{values.IMAGE_PREFIX}/{n}:{values.IMAGE_TAG}"
        for n in ("controller", "slurmd", "login", "operator")
    }
    defaults = [
        values.Controller().image,
        values.Accounting().image,
        values.Rest().image,
        values.Login().image,
        values.ClusterCompute().image,
        values.Operator().image,
    ]
    assert {f"{i.repository}:{i.tag}" for i in defaults} == built


def test_build_tags_are_the_chart_defaults(helm, repo):
    rendered: set[str] = set()
    for chart in ("slurm", "sunk"):
        proc = subprocess.run(
            [helm, "template", "rel", str(repo / "charts" / chart), "-n", "ns"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        rendered |= ours(image_refs([d for d in yaml.safe_load_all(proc.stdout) if d]))
    built = {s.ref for s in images.images()}
    # Every image of ours the charts deploy is built, and every built image is deployed.
    assert rendered == built


def test_cuda_variants_are_slurmd_on_another_base(monkeypatch):
    monkeypatch.setenv("SUNK_SLURMD_CUDA", "12.8=example/cuda:12.8-runtime")
    (variant,) = images.variants_from_env()
    assert variant.ref == f"{values.IMAGE_PREFIX}/slurmd:{values.IMAGE_TAG}-cuda12.8"
    assert variant.build_args["BASE_IMAGE"] == "example/cuda:12.8-runtime"
    cmd = images.build_command(variant, images.repo_root())
    assert cmd[:4] == ["docker", "build", "--network", "host"]
    assert cmd[cmd.index("-f") + 1] == "images/slurmd/Dockerfile"
    assert "BASE_IMAGE=example/cuda:12.8-runtime" in cmd


def test_slurm_upgrade_release_images_are_tagged_by_their_release_and_built_from_its_suite():
    specs = images.release_images("26.05")
    assert [s.name for s in specs] == ["controller", "slurmd", "login"]
    for spec in specs:
        # the tag names the release the operator and validate read from it
        assert release_of_image(spec.ref) == "26.05", spec.ref
        assert spec.tag == values.IMAGE_TAG.replace("slurm24.11", "slurm26.05")
        assert spec.build_args["SLURM_VERSION"] == "26.05"
        assert spec.build_args["SLURM_SUITE"] == "forky"
    assert all("SLURM_SUITE" not in s.build_args for s in images.release_images("24.11"))
    with pytest.raises(images.ImageBuildError, match=r"no images for Slurm 25\.05"):
        images.release_images("25.05")


def test_debian_mirror_comes_from_the_apt_sources(monkeypatch):
    monkeypatch.setenv("SUNK_DEBIAN_MIRROR", "http://mirror.invalid/debian")
    assert images.debian_mirror() == "http://mirror.invalid/debian"


def test_debian_mirror_reads_deb822_and_one_line_sources(monkeypatch, tmp_path):
    monkeypatch.delenv("SUNK_DEBIAN_MIRROR", raising=False)
    parts = tmp_path / "sources.list.d"
    parts.mkdir()
    (parts / "other.list").write_text("deb [arch=amd64] http://vendor.invalid/apt stable-x main\n")
    (parts / "debian.sources").write_text(
        "Types: deb\nURIs: http://security.invalid/debian-security\n"
        "Suites: bookworm-security\nComponents: main\n\n"
        "Types: deb-src\nURIs: http://src.invalid/debian\nSuites: bookworm\nComponents: main\n\n"
        "Types: deb\nURIs: http://archive.invalid/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n"
    )
    assert images.debian_mirror(tmp_path) == "http://archive.invalid/debian"
    (parts / "debian.sources").unlink()
    (tmp_path / "sources.list").write_text(
        "# comment\ndeb http://one.invalid/debian trixie main contrib\n"
    )
    assert images.debian_mirror(tmp_path) == "http://one.invalid/debian"
    (tmp_path / "sources.list").write_text("")
    with pytest.raises(images.ImageBuildError, match="SUNK_DEBIAN_MIRROR"):
        images.debian_mirror(tmp_path)
