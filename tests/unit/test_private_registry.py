"""sunk.devenv.private_registry's pure parts: the throwaway certificates, the certs.d layout,
archive formats and the socket table parser (the registry itself: tests/e2e)."""

from __future__ import annotations

import io
import ipaddress
import os
import socket
import tarfile
from pathlib import Path

import pytest
from cryptography import x509

from sunk.devenv.node_build import oci_image_archive
from sunk.devenv.private_registry import (
    PrivateRegistry,
    RegistryError,
    archive_transport,
    certificates,
    listening,
    write_certs_d,
)


def test_the_server_certificate_is_for_the_address_and_signed_by_the_ca():
    ca_pem, cert_pem, key_pem = certificates("10.250.0.1")
    ca = x509.load_pem_x509_certificate(ca_pem.encode())
    cert = x509.load_pem_x509_certificate(cert_pem.encode())
    cert.verify_directly_issued_by(ca)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.250.0.1")]
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert "PRIVATE KEY" in key_pem and "PRIVATE KEY" not in cert_pem + ca_pem
    # a fresh CA every time: nothing to trust beyond one registry's life
    assert certificates("10.250.0.1")[0] != ca_pem


def test_certs_d_layout(tmp_path: Path):
    out = write_certs_d(tmp_path / "certs.d", "10.250.0.1:5443", "PEM")
    assert out == tmp_path / "certs.d"
    assert (out / "10.250.0.1:5443" / "ca.crt").read_text() == "PEM"


def _tar(path: Path, names: list[str]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"{}"))
    return path


def test_archive_formats(tmp_path: Path):
    oci = tmp_path / "oci.tar"
    oci.write_bytes(oci_image_archive(b"x", name="x:1", entrypoint=["/x"]))
    assert archive_transport(oci) == "oci-archive"
    assert archive_transport(_tar(tmp_path / "d.tar", ["manifest.json", "a.json"])) == (
        "docker-archive"
    )
    # Docker 25+ writes both layouts; skopeo's docker-archive reads manifest.json
    both = _tar(tmp_path / "b.tar", ["manifest.json", "index.json", "oci-layout"])
    assert archive_transport(both) == "docker-archive"
    with pytest.raises(RegistryError, match="neither"):
        archive_transport(_tar(tmp_path / "n.tar", ["etc/passwd"]))


def test_listening_reads_this_process_sockets():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        assert ("127.0.0.1", port) in listening(os.getpid(), own=True)
        assert ("127.0.0.1", port) in listening(os.getpid())
    assert ("127.0.0.1", port) not in listening(os.getpid(), own=True)


def test_the_client_view_before_start():
    reg = PrivateRegistry("sunk-x-hub", password="pw")
    assert reg.host == "10.250.0.1:5443"
    assert reg.reference("train:v1") == "10.250.0.1:5443/train:v1"
    assert reg.netrc_line() == "machine 10.250.0.1 login sunk password pw"
    assert reg.leftovers() == []
    with pytest.raises(RegistryError, match="not started"):
        _ = reg.ca_path
