"""The slurm toolchain component's pure parts: mirror discovery and the cache key."""

from __future__ import annotations

from pathlib import Path

import pytest

from sunk.devenv import slurm_rootfs

pytestmark = pytest.mark.unit


def test_mirror_from_deb822_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sources.list.d").mkdir()
    src = tmp_path / "sources.list.d" / "debian.sources"
    src.write_text(
        "Types: deb\nURIs: http://mirror.invalid/debian-security\nSuites: bookworm-security\n"
        "Components: main\n\n"
        "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\n"
    )
    monkeypatch.delenv("SUNK_DEBIAN_MIRROR", raising=False)
    assert slurm_rootfs.debian_mirror(tmp_path) == "http://mirror.invalid/debian"


def test_mirror_from_one_line_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "sources.list"
    src.write_text(
        "# comment\ndeb https://vendor.invalid/apt stable-vendor main\n"
        "deb [arch=amd64] http://mirror.invalid/debian trixie main contrib\n"
    )
    monkeypatch.delenv("SUNK_DEBIAN_MIRROR", raising=False)
    assert slurm_rootfs.debian_mirror(tmp_path) == "http://mirror.invalid/debian"


def test_mirror_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUNK_DEBIAN_MIRROR", "http://override.invalid/debian")
    assert slurm_rootfs.debian_mirror() == "http://override.invalid/debian"


def test_key_depends_on_suite_and_packages() -> None:
    base = slurm_rootfs.rootfs_key()
    assert base.startswith("trixie-")
    assert slurm_rootfs.rootfs_key(packages=(*slurm_rootfs.PACKAGES, "vim")) != base
    assert slurm_rootfs.rootfs_key(packages=tuple(reversed(slurm_rootfs.PACKAGES))) == base
    assert slurm_rootfs.rootfs_key(suite="sid").startswith("sid-")


def test_version_check() -> None:
    assert slurm_rootfs._check_version("24.11.5-4+deb13u1") == "24.11.5-4+deb13u1"
    with pytest.raises(slurm_rootfs.SlurmRootfsError, match=r"needs 24\.11\.x"):
        slurm_rootfs._check_version("25.05.1-1")
    with pytest.raises(slurm_rootfs.SlurmRootfsError, match="not installed"):
        slurm_rootfs._check_version(None)
