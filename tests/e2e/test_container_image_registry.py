"""The private registry of the container-image tests (``sunk.devenv.private_registry``):
Distribution with TLS and htpasswd auth in a network namespace of this test's own, where
10.250.0.1 (the real-node cluster's hub address) is put on the loopback device. Images are
pushed with skopeo from both archive formats (an OCI archive and ``docker save``'s layout), a
client with the right credentials and the registry's CA pulls them, and everything else is
refused with the registry's own message. Needs root (network namespaces) and the
``private-registry`` toolchain component, not the real nodes."""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sunk.devenv.node_build import oci_image_archive
from sunk.devenv.private_registry import (
    HUB_ADDRESS,
    INSTALL_HINT,
    PrivateRegistry,
    archive_transport,
    listening,
    missing_prerequisites,
)

PAYLOAD = b"#!/bin/sh\necho hello from the private registry\n"


def _ip(*args: str) -> None:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"ip {' '.join(args)}: {proc.stderr}"


@pytest.fixture(scope="module")
def netns() -> Iterator[str]:
    missing = missing_prerequisites()
    if missing:
        pytest.skip(f"the private registry needs {', '.join(missing)}: run `{INSTALL_HINT}`")
    name = f"sunk-reg-{secrets.token_hex(3)}"
    _ip("netns", "add", name)
    try:
        _ip("-n", name, "link", "set", "lo", "up")
        _ip("-n", name, "addr", "add", f"{HUB_ADDRESS}/32", "dev", "lo")
        yield name
    finally:
        _ip("netns", "delete", name)


@pytest.fixture(scope="module")
def registry(netns: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRegistry]:
    log = tmp_path_factory.mktemp("private-registry") / "registry.log"
    reg = PrivateRegistry(netns, log_path=log)
    with reg:
        yield reg
    assert reg.leftovers() == []


def docker_archive(path: Path, repo_tag: str, files: dict[str, bytes]) -> Path:
    """What ``docker save`` writes (its legacy layout): manifest.json, a config, one layer."""
    layer_buf = io.BytesIO()
    with tarfile.open(fileobj=layer_buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
    layer = layer_buf.getvalue()
    layer_id = hashlib.sha256(layer).hexdigest()
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": [f"/{next(iter(files))}"]},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_id}"]},
    }).encode()  # fmt: skip
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    manifest = [
        {"Config": config_name, "RepoTags": [repo_tag], "Layers": [f"{layer_id}/layer.tar"]}
    ]
    with tarfile.open(path, "w") as tar:
        for name, data in ((config_name, config), (f"{layer_id}/layer.tar", layer),
                           ("manifest.json", json.dumps(manifest).encode())):  # fmt: skip
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture(scope="module")
def pushed(registry: PrivateRegistry, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Both archive formats pushed: name:tag → the reference skopeo pushed to."""
    folder = tmp_path_factory.mktemp("archives")
    oci = folder / "hello.oci.tar"
    oci.write_bytes(oci_image_archive(PAYLOAD, name="hello:oci", entrypoint=["/hello"]))
    docker = docker_archive(folder / "hello.docker.tar", "hello:docker", {"hello": PAYLOAD})
    assert archive_transport(oci) == "oci-archive"
    assert archive_transport(docker) == "docker-archive"
    return {"hello:oci": registry.push(oci, "hello:oci"),
            "train-demo:v1": registry.push(docker, "train-demo:v1")}  # fmt: skip


def test_container_image_registry_serves_pushed_images_to_the_right_credentials(
    registry: PrivateRegistry, pushed: dict[str, str], tmp_path: Path
):
    assert pushed == {"hello:oci": f"{HUB_ADDRESS}:5443/hello:oci",
                      "train-demo:v1": f"{HUB_ADDRESS}:5443/train-demo:v1"}  # fmt: skip
    for name_tag in pushed:
        proc = registry.inspect(name_tag, username=registry.username, password=registry.password)
        assert proc.returncode == 0, proc.stderr
        info = json.loads(proc.stdout)
        assert info["Architecture"] == "amd64" and info["Os"] == "linux"
        assert info["Digest"].startswith("sha256:")
    # a whole pull, blobs too, with a client's own certs.d folder: the layer is what we pushed
    certs = registry.certs_d(tmp_path / "certs.d")
    assert (certs / f"{HUB_ADDRESS}:5443" / "ca.crt").read_text() == registry.ca_pem
    assert registry.ca_path.read_text() == registry.ca_pem
    out = tmp_path / "pulled"
    proc = registry.skopeo(
        "copy", "--quiet", "--src-creds", f"{registry.username}:{registry.password}",
        "--src-cert-dir", str(certs / registry.host),
        f"docker://{pushed['train-demo:v1']}", f"dir:{out}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    (layer,) = manifest["layers"]
    blob = (out / layer["digest"].removeprefix("sha256:")).read_bytes()
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        member = tar.extractfile("hello")
        assert member is not None and member.read() == PAYLOAD


def test_container_image_registry_refuses_wrong_or_missing_credentials(
    registry: PrivateRegistry, pushed: dict[str, str]
):
    wrong = registry.inspect("hello:oci", username=registry.username, password="not-it")
    unknown = registry.inspect("hello:oci", username="mallory", password=registry.password)
    anonymous = registry.inspect("hello:oci")
    for proc in (wrong, unknown, anonymous):
        assert proc.returncode != 0
        # Distribution's answer, as skopeo relays it
        assert "unauthorized: authentication required" in proc.stderr, proc.stderr


def test_container_image_registry_refuses_plain_http(registry: PrivateRegistry):
    script = (
        "import http.client, sys\n"
        "c = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=10)\n"
        "c.request('GET', '/v2/')\n"
        "r = c.getresponse()\n"
        "print(r.status, r.read().decode())\n"
    )
    proc = subprocess.run(
        ["ip", "netns", "exec", registry.netns, sys.executable, "-c", script,
         registry.address, str(registry.port)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    status, _, body = proc.stdout.partition(" ")
    assert status == "400"
    assert "Client sent an HTTP request to an HTTPS server" in body


def test_container_image_registry_is_trusted_only_with_its_ca(
    registry: PrivateRegistry, pushed: dict[str, str], tmp_path: Path
):
    empty = tmp_path / "no-ca"
    empty.mkdir()
    proc = registry.inspect("hello:oci", username=registry.username,
                            password=registry.password, cert_dir=empty)  # fmt: skip
    assert proc.returncode != 0
    assert "x509: certificate signed by unknown authority" in proc.stderr, proc.stderr


def test_container_image_registry_listens_in_its_namespace_only(registry: PrivateRegistry):
    assert registry._proc is not None
    assert listening(registry._proc.pid, own=True) == {(HUB_ADDRESS, 5443)}
    host_ports = {port for _, port in listening(os.getpid())}  # this test's: the host's
    assert 5443 not in host_ports
    line = registry.netrc_line()
    assert line == f"machine {HUB_ADDRESS} login {registry.username} password {registry.password}"
    assert registry.netrc_line(with_port=True).startswith(f"machine {HUB_ADDRESS}:5443 login ")


def test_container_image_registry_stop_leaves_nothing(netns: str):
    reg = PrivateRegistry(netns, port=5444).start()
    assert reg._proc is not None and reg.workdir is not None
    pid, workdir = reg._proc.pid, reg.workdir
    assert (workdir / "config.yml").exists()
    reg.stop()
    assert not workdir.exists()
    assert not Path(f"/proc/{pid}").exists()
    assert reg.leftovers() == []
