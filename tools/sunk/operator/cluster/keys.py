"""Key material made once per cluster and kept in Secrets (made again only on request: see
``keyguard``)."""

from __future__ import annotations

import base64
import secrets
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def munge_key() -> dict[str, str]:
    return {"munge.key": b64(secrets.token_bytes(1024))}


def jwt_key() -> dict[str, str]:
    return {"jwt.key": b64(secrets.token_bytes(64))}


def db_password() -> dict[str, str]:
    return {"password": b64(secrets.token_urlsafe(32).encode())}


def ssh_host_keys() -> dict[str, str]:
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return {"ssh_host_ed25519_key": b64(private), "ssh_host_ed25519_key.pub": b64(public + b"\n")}


def secret(
    name: str, namespace: str, data: dict[str, str], labels: dict[str, str]
) -> dict[str, Any]:
    """An immutable Secret. No owner reference: deleting the SlurmCluster must not lose keys."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "immutable": True,
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": data,
    }
