"""Pure parts of the real-node runtime: build list, pause image archive, node configs."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tomllib
from pathlib import Path

import pytest

from sunk.devenv import kube_build, node_build, nodes

pytestmark = pytest.mark.unit


def test_builds_pin_every_node_component() -> None:
    tools = {b.tool: b for b in node_build.builds()}
    assert set(tools) >= {
        "kubelet", "kube-proxy", "kubectl", "containerd", "containerd-shim-runc-v2", "ctr",
        "runc", "bridge", "host-local", "loopback", "portmap", "coredns",
    }  # fmt: skip
    assert tools["kubelet"].version == kube_build.KUBERNETES_VERSION
    # runc without cgo and seccomp fails every sandbox with "seccomp not supported"
    assert tools["runc"].cgo and "seccomp" in tools["runc"].tags
    assert not tools["containerd"].cgo


def test_wrapper_gomod_carries_the_builds_go_directive() -> None:
    build = next(b for b in node_build.builds() if b.tool == "bridge")
    text = kube_build.wrapper_gomod(build, [])
    assert f"go {build.go}\n" in text
    assert f"require {node_build.CNI_PLUGINS} {node_build.CNI_PLUGINS_VERSION}" in text


def _archive_members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_oci_archive_is_a_valid_layout_and_deterministic() -> None:
    first = node_build.oci_image_archive(b"\x7fELF-pause", name="x/pause:1", entrypoint=["/pause"])
    again = node_build.oci_image_archive(b"\x7fELF-pause", name="x/pause:1", entrypoint=["/pause"])
    assert first == again
    files = _archive_members(first)
    index = json.loads(files["index.json"])
    [desc] = index["manifests"]
    assert desc["annotations"]["org.opencontainers.image.ref.name"] == "x/pause:1"
    for name, blob in files.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(blob).hexdigest() == name.rsplit("/", 1)[1]
    manifest = json.loads(files[f"blobs/sha256/{desc['digest'].split(':')[1]}"])
    layer = files[f"blobs/sha256/{manifest['layers'][0]['digest'].split(':')[1]}"]
    assert _archive_members(layer) == {"pause": b"\x7fELF-pause"}
    config = json.loads(files[f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"])
    assert config["config"]["Entrypoint"] == ["/pause"]
    assert config["rootfs"]["diff_ids"] == [f"sha256:{hashlib.sha256(layer).hexdigest()}"]


def test_containerd_config_keeps_each_node_apart(tmp_path: Path) -> None:
    text = nodes.containerd_config(
        root=tmp_path / "root",
        state=tmp_path / "state",
        socket=tmp_path / "c.sock",
        cni_bin=tmp_path / "cni",
        cni_conf=tmp_path / "net.d",
        runc=tmp_path / "runc",
        runc_root=tmp_path / "runc-root",
    )
    config = tomllib.loads(text)
    assert config["version"] == 3
    assert config["root"] == str(tmp_path / "root")
    assert config["grpc"]["address"] == str(tmp_path / "c.sock")
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["restrict_oom_score_adj"] is True
    assert runtime["netns_mounts_under_state_dir"] is True
    runc = runtime["containerd"]["runtimes"]["runc"]["options"]
    assert runc == {
        "BinaryName": str(tmp_path / "runc"),
        "Root": str(tmp_path / "runc-root"),
        "SystemdCgroup": False,
    }
    images = config["plugins"]["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"] == node_build.PAUSE_IMAGE
    assert "io.containerd.nri.v1.nri" in config["disabled_plugins"]
