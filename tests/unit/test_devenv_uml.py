"""sunk.devenv.uml without a kernel: an image's layers unpacked with OCI whiteouts, the OCI
spec a Pod's container gets, and the order a node's kernel modules load in."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from sunk.devenv.uml import UmlError, pod_container_spec, unpack_image
from sunk.devenv.uml_kubelet import module_load_order


def _layer(files: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _archive(path: Path, layers: list[dict[str, str]]) -> Path:
    with tarfile.open(path, "w") as tar:
        names = []
        for i, files in enumerate(layers):
            data = _layer(files)
            info = tarfile.TarInfo(f"{i}/layer.tar")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            names.append(info.name)
        manifest = json.dumps([{"Layers": names}]).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
    return path


def test_layers_apply_in_order_with_whiteouts(tmp_path: Path):
    archive = _archive(tmp_path / "image.tar", [
        {"a/x": "1", "a/y": "2", "b/z": "3", "c": "old"},
        {"a/.wh.x": "", "b/.wh..wh..opq": "", "b/w": "4", "c": "new"},
    ])  # fmt: skip
    root = tmp_path / "rootfs"
    unpack_image(archive, root)
    found = {str(p.relative_to(root)): p.read_text() for p in root.rglob("*") if p.is_file()}
    assert found == {"a/y": "2", "b/w": "4", "c": "new"}


def test_a_pod_container_holds_only_its_capabilities_and_its_devices():
    spec = pod_container_spec(
        ["slurmd"], {"A": "1"}, ["SYS_ADMIN", "KILL"], hostname="n", cgroups_path="/kubepods/p/c",
        memory=1 << 28, cpus=2, hosts="/etc/hosts", gpus=1,
    )  # fmt: skip
    caps = spec["process"]["capabilities"]
    assert caps["bounding"] == caps["effective"] == ["CAP_SYS_ADMIN", "CAP_KILL"]
    assert {"type": "cgroup"} in spec["linux"]["namespaces"]
    cgroup = next(m for m in spec["mounts"] if m["destination"] == "/sys/fs/cgroup")
    assert "ro" in cgroup["options"]
    assert [d["path"] for d in spec["linux"]["devices"]] == ["/dev/nvidia0"]
    rules = spec["linux"]["resources"]["devices"]
    assert rules[0] == {"allow": False, "access": "rwm"}
    assert rules[1:] == [{"allow": True, "type": "c", "major": 195, "minor": 0, "access": "rwm"}]
    assert spec["linux"]["resources"]["cpu"]["quota"] == 200000


def test_kernel_modules_load_after_what_they_depend_on(tmp_path: Path):
    (tmp_path / "modules.dep").write_text(
        "kernel/net/bridge/br_netfilter.ko: kernel/net/bridge/bridge.ko kernel/net/llc/stp.ko\n"
        "kernel/net/bridge/bridge.ko: kernel/net/llc/stp.ko kernel/net/llc/llc.ko\n"
        "kernel/net/llc/stp.ko: kernel/net/llc/llc.ko\n"
        "kernel/net/llc/llc.ko:\n"
        "kernel/drivers/net/veth.ko:\n"
    )
    order = module_load_order(tmp_path, ("br_netfilter", "veth", "bridge"))
    assert [p.relative_to(tmp_path).name for p in order] == [
        "llc.ko", "stp.ko", "bridge.ko", "br_netfilter.ko", "veth.ko",
    ]  # fmt: skip
    with pytest.raises(UmlError, match="no module overlay"):
        module_load_order(tmp_path, ("overlay",))
