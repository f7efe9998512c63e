"""A small asyncio Kubernetes API client (aiohttp), enough for the operator.

Why not a generated client: we need a handful of verbs on a few resources, server-side
apply, and the same credentials kopf uses; aiohttp is already kopf's dependency.
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import yaml

SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
FIELD_MANAGER = "sunk-operator"


class ApiError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, body: str):
        self.method, self.path, self.status, self.body = method, path, status, body
        try:
            message = json.loads(body).get("message", body)
        except ValueError:
            message = body
        super().__init__(f"{method} {path}: {status} {message}")


@dataclass(frozen=True)
class KubeConfig:
    server: str
    ca_path: str | None = None
    cert_path: str | None = None
    key_path: str | None = None
    token: str | None = None
    insecure: bool = False

    @classmethod
    def in_cluster(cls) -> KubeConfig:
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        host = f"[{host}]" if ":" in host else host
        return cls(
            server=f"https://{host}:{port}",
            ca_path=str(SA_DIR / "ca.crt"),
            token=(SA_DIR / "token").read_text().strip(),
        )

    @classmethod
    def from_kubeconfig(
        cls, path: str | os.PathLike[str], context: str | None = None
    ) -> KubeConfig:
        doc = yaml.safe_load(Path(path).read_text())
        ctx_name = context or doc.get("current-context")
        ctx = next(c["context"] for c in doc["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in doc["users"] if u["name"] == ctx["user"])
        base = Path(path).parent
        return cls(
            server=cluster["server"],
            ca_path=_file(cluster, "certificate-authority", base),
            cert_path=_file(user, "client-certificate", base),
            key_path=_file(user, "client-key", base),
            token=user.get("token"),
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
        )

    @classmethod
    def load(cls, kubeconfig: str | None = None) -> KubeConfig:
        path = kubeconfig or os.environ.get("KUBECONFIG")
        if path:
            return cls.from_kubeconfig(path)
        if "KUBERNETES_SERVICE_HOST" in os.environ:
            return cls.in_cluster()
        return cls.from_kubeconfig(Path.home() / ".kube" / "config")

    def ssl_context(self) -> ssl.SSLContext | bool:
        if self.insecure:
            return False
        context = ssl.create_default_context(cafile=self.ca_path)
        if self.cert_path and self.key_path:
            context.load_cert_chain(self.cert_path, self.key_path)
        return context


def _file(section: dict[str, Any], key: str, base: Path) -> str | None:
    """A kubeconfig file reference, or its inline `-data` variant written to a temp file."""
    if section.get(key):
        path = Path(section[key])
        return str(path if path.is_absolute() else base / path)
    data = section.get(f"{key}-data")
    if not data:
        return None
    handle = tempfile.NamedTemporaryFile(prefix="sunk-kube-", delete=False)  # noqa: SIM115
    handle.write(base64.b64decode(data))
    handle.close()
    return handle.name


def path_for(
    api_version: str,
    kind_plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    parts = [prefix]
    if namespace:
        parts += ["namespaces", namespace]
    parts.append(kind_plural)
    if name:
        parts.append(quote(name))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


PLURALS = {
    "ConfigMap": "configmaps",
    "Secret": "secrets",
    "Service": "services",
    "ServiceAccount": "serviceaccounts",
    "Pod": "pods",
    "StatefulSet": "statefulsets",
    "Deployment": "deployments",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "Node": "nodes",
    "Event": "events",
    "Lease": "leases",
    "MySQLCluster": "mysqlclusters",
    "NodeSet": "nodesets",
    "SlurmCluster": "slurmclusters",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "CustomResourceDefinition": "customresourcedefinitions",
}


def object_path(obj: dict[str, Any], subresource: str | None = None) -> str:
    meta = obj["metadata"]
    return path_for(
        obj["apiVersion"], PLURALS[obj["kind"]], meta.get("namespace"), meta["name"], subresource
    )


class Kube:
    """Counts its write requests (the steady-state test asserts there are none)."""

    def __init__(self, config: KubeConfig):
        self.config = config
        self.writes = 0
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Kube:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.config.token}"} if self.config.token else {}

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
        ok_missing: bool = False,
    ) -> Any:
        if self._session is None:
            connector = aiohttp.TCPConnector(ssl=self.config.ssl_context(), limit=32)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=60)
            )
        url = self.config.server + path + (f"?{urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body)
        headers = {**self._headers(), "Content-Type": content_type, "Accept": "application/json"}
        if method != "GET":
            self.writes += 1
        async with self._session.request(method, url, data=data, headers=headers) as response:
            text = await response.text()
            if response.status == 404 and ok_missing:
                return None
            if response.status >= 400:
                raise ApiError(method, path, response.status, text)
            return json.loads(text) if text else None

    async def get(self, path: str) -> dict[str, Any] | None:
        return await self.request("GET", path, ok_missing=True)

    async def list(
        self, path: str, label_selector: str | None = None, field_selector: str | None = None
    ) -> list[dict[str, Any]]:
        query = {"labelSelector": label_selector} if label_selector else {}
        if field_selector:
            query["fieldSelector"] = field_selector
        result = await self.request("GET", path, query=query or None)
        return result.get("items", [])

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        path = path_for(obj["apiVersion"], PLURALS[obj["kind"]], meta.get("namespace"))
        return await self.request("POST", path, obj)

    async def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply as the operator's field manager."""
        return await self.request(
            "PATCH",
            object_path(obj),
            obj,
            "application/apply-patch+yaml",
            {"fieldManager": FIELD_MANAGER, "force": "true"},
        )

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        return await self.request("PATCH", path, patch, "application/merge-patch+json")

    async def strategic_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Strategic merge: list items merge by key (conditions by type), others stay."""
        return await self.request("PATCH", path, patch, "application/strategic-merge-patch+json")

    async def delete(self, path: str, grace_seconds: int | None = None) -> None:
        query = {"gracePeriodSeconds": str(grace_seconds)} if grace_seconds is not None else None
        await self.request("DELETE", path, query=query, ok_missing=True)
