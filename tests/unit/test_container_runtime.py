"""The container runtime's pure parts (images/slurmd/container/sunk_container.py, installed as
/usr/local/bin/sunk-container in the slurmd image): image references as Pyxis reads them,
Enroot's credentials file, layer unpacking with OCI whiteouts, the cache's LRU bound."""

from __future__ import annotations

import importlib.util
import io
import os
import sys
import tarfile
import time
from pathlib import Path

import pytest

SOURCE = (
    Path(__file__).resolve().parents[2] / "images" / "slurmd" / "container" / "sunk_container.py"
)


def _load():
    spec = importlib.util.spec_from_file_location("sunk_container", SOURCE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["sunk_container"] = module
    spec.loader.exec_module(module)
    return module


rt = _load()
DIGEST = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "digest", "user"),
    [
        ("ubuntu", "registry-1.docker.io", "library/ubuntu", "latest", "", ""),
        ("ubuntu:24.04", "registry-1.docker.io", "library/ubuntu", "24.04", "", ""),
        ("nvidia/cuda:12.8.0-base", "registry-1.docker.io", "nvidia/cuda", "12.8.0-base", "", ""),
        ("nvcr.io#nvidia/pytorch:25.01-py3", "nvcr.io", "nvidia/pytorch", "25.01-py3", "", ""),
        ("10.250.0.1:5443#train:1", "10.250.0.1:5443", "train", "1", "", ""),
        ("10.250.0.1:5443/team/train:1", "10.250.0.1:5443", "team/train", "1", "", ""),
        ("localhost/train", "localhost", "train", "latest", "", ""),
        ("alice@ghcr.io#org/app:v2", "ghcr.io", "org/app", "v2", "", "alice"),
        ("docker.io#busybox", "registry-1.docker.io", "library/busybox", "latest", "", ""),
        (
            "app@sha256:" + "a" * 64,
            "registry-1.docker.io",
            "library/app",
            "",
            "sha256:" + "a" * 64,
            "",
        ),
    ],
)
def test_container_image_references_read_as_pyxis_reads_them(
    text, registry, repository, tag, digest, user
):
    ref = rt.parse_reference(text)
    assert (ref.registry, ref.repository, ref.tag, ref.digest, ref.user) == (
        registry, repository, tag, digest, user,
    )  # fmt: skip


@pytest.mark.parametrize(
    "text",
    ["", "UPPER/case", "a b", "reg#", "img:bad tag", "x#y#z", "evil$(id)#img", "@img", "a@b@c"],
)
def test_container_image_a_bad_reference_is_refused_with_the_format(text):
    with pytest.raises(rt.Refused, match=r"IMAGE\[:TAG\|@DIGEST\]|registry"):
        rt.parse_reference(text)


def test_container_image_credentials_in_enroot_netrc_format():
    text = """machine 10.250.0.1 login alice password s3cret
    machine ghcr.io
      login bob
      password tok
    """
    assert rt.parse_netrc(text, "f") == {
        "10.250.0.1": ("alice", "s3cret"),
        "ghcr.io": ("bob", "tok"),
    }
    for bad, why in [
        ("host x", "expected 'machine'"),
        ("machine h login u", "needs both"),
        ("machine h login u password $TOKEN", "not supported"),
        ("machine h account a password p", "expected login/password"),
    ]:
        with pytest.raises(rt.Refused, match=why):
            rt.parse_netrc(bad, "f")


def test_container_image_cache_size_units():
    assert rt.parse_size("20G") == 20 * 1024**3
    assert rt.parse_size("512M") == 512 * 1024**2
    assert rt.parse_size("100") == 100
    with pytest.raises(rt.Refused, match="not a size"):
        rt.parse_size("lots")


def _layer(path: Path, entries: list[tuple[str, bytes | None]]) -> Path:
    """A gzip layer: (name, content) files, (name, None) directories."""
    with tarfile.open(path, "w:gz") as tar:
        for name, content in entries:
            info = tarfile.TarInfo(name)
            if content is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                info.size = len(content)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(content))
    return path


def test_container_image_layers_apply_whiteouts_and_skip_device_nodes(tmp_path):
    lower = _layer(tmp_path / "l1.tgz", [
        ("etc", None), ("etc/keep", b"1"), ("etc/gone", b"2"),
        ("opt", None), ("opt/old", b"3"),
    ])  # fmt: skip
    with tarfile.open(tmp_path / "dev.tar", "w") as tar:
        dev = tarfile.TarInfo("dev/null")
        dev.type, dev.devmajor, dev.devminor = tarfile.CHRTYPE, 1, 3
        tar.addfile(dev)
    upper = _layer(tmp_path / "l2.tgz", [
        ("etc/.wh.gone", b""), ("opt/.wh..wh..opq", b""), ("opt/new", b"4"), ("../escape", b"x"),
    ])  # fmt: skip
    root = tmp_path / "rootfs"
    root.mkdir()
    rt.unpack_layer(lower, "application/vnd.oci.image.layer.v1.tar+gzip", root)
    rt.unpack_layer(tmp_path / "dev.tar", "application/vnd.oci.image.layer.v1.tar", root)
    with pytest.raises(tarfile.TarError):
        rt.unpack_layer(upper, "application/vnd.docker.image.rootfs.diff.tar.gzip", root)
    assert not (tmp_path / "escape").exists()
    upper = _layer(tmp_path / "l3.tgz", [
        ("etc/.wh.gone", b""), ("opt/.wh..wh..opq", b""), ("opt/new", b"4"),
    ])  # fmt: skip
    rt.unpack_layer(upper, "application/vnd.docker.image.rootfs.diff.tar.gzip", root)
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == [
        "etc", "etc/keep", "opt", "opt/new",
    ]  # fmt: skip
    with pytest.raises(rt.Refused, match="not supported"):
        rt.unpack_layer(upper, "application/vnd.oci.image.layer.v1.tar+zstd", root)


def test_container_image_cache_evicts_least_recently_used_but_not_in_use(tmp_path):
    cache = rt.Cache(tmp_path, limit=250)
    now = time.time()
    for age, key in enumerate(["new", "mid", "old", "busy"]):
        (tmp_path / key / "rootfs").mkdir(parents=True)
        (tmp_path / key / "complete").write_text("100")
        os.utime(tmp_path / key / "complete", (now - 100 * age, now - 100 * age))
    with rt.locked(cache.lock("busy"), shared=True):
        # 400 bytes, bound 250: "busy" (oldest) is in use, "old" goes, then "mid"
        cache.evict(keep="new")
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "busy", "new",
    ]  # fmt: skip


def test_container_image_identity_lines_are_added_once(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/sh")
    rt.add_line(etc / "passwd", "alice:x:5001:5001::/home/alice:/bin/bash\n", ":5001:", 2)
    rt.add_line(etc / "passwd", "alice:x:5001:5001::/home/alice:/bin/bash\n", ":5001:", 2)
    assert (etc / "passwd").read_text().splitlines() == [
        "root:x:0:0:root:/root:/bin/sh",
        "alice:x:5001:5001::/home/alice:/bin/bash",
    ]
