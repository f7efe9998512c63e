"""slurmrestd's OpenAPI (data_parser v0.0.41, served by Slurm 24.11), with JWTs the Syncer mints
from the cluster's auth/jwt key for SlurmUser ``slurm``: Slurm's own interface, no CLI text."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any, Protocol

import aiohttp

API = "/slurm/v0.0.41"
USER = "slurm"  # SlurmUser: an operator of Slurm; slurmrestd refuses tokens for root
TOKEN_SECONDS = 600


class KeySource(Protocol):
    async def get(self, path: str) -> dict[str, Any] | None: ...


async def client_for(
    kube: KeySource,
    namespace: str,
    secret: str,
    url: str,
    current: Slurmrestd | None,
    **options: Any,
) -> Slurmrestd:
    """``current`` while it holds the key in the cluster's JWT Secret, else a new client for
    the key now there (the old one closed): a rotated key takes effect at the next call."""
    found = await kube.get(f"/api/v1/namespaces/{namespace}/secrets/{secret}")
    if found is None:
        raise SlurmApiError(f"JWT key Secret {namespace}/{secret} not found")
    key = base64.b64decode(found["data"]["jwt.key"])
    if current is not None and current.key == key:
        return current
    if current is not None:
        await current.close()
    return Slurmrestd(url, key, **options)


class SlurmApiError(RuntimeError):
    """slurmrestd refused a request or could not be reached; the message says which."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def mint_token(key: bytes, user: str = USER, lifespan: int = TOKEN_SECONDS) -> str:
    """An HS256 JWT as Slurm's auth/jwt verifies it (claims ``sun`` and ``exp``)."""
    now = int(time.time())
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = _b64(json.dumps({"iat": now, "exp": now + lifespan, "sun": user}).encode())
    signature = hmac.new(key, f"{header}.{claims}".encode(), hashlib.sha256).digest()
    return f"{header}.{claims}.{_b64(signature)}"


def _error_text(error: dict[str, Any]) -> str:
    """slurmrestd 24.11 puts what failed in ``description`` and why in ``error``: ``Failure to
    update node x (Invalid node name specified)``; both, so :meth:`Slurmrestd.missing` sees
    the cause."""
    description, cause = error.get("description") or "", error.get("error") or ""
    if cause in ("", "No error", description):
        return description or cause
    return f"{description} ({cause})" if description else cause


class Slurmrestd:
    """``url``: ``http://host:port`` (the rest Service) or ``unix:/path/to.sock`` (slurmrestd
    listening on a unix socket, as the ``slurm`` test tier and the benchmark run it)."""

    def __init__(
        self,
        url: str,
        key: bytes,
        timeout: float = 10.0,
        pool_size: int = 100,
        persistent: bool = True,
    ) -> None:
        self.url = url.rstrip("/")
        self._pool = {"limit": pool_size, "force_close": not persistent}
        self._socket = url.removeprefix("unix:") if url.startswith("unix:") else None
        self._base = "http://slurmrestd" if self._socket else self.url
        self.key = key
        self.requests = 0
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._token = ("", 0.0)

    def _headers(self) -> dict[str, str]:
        token, expires = self._token
        if time.time() > expires - 60:
            token = mint_token(self.key)
            self._token = (token, time.time() + TOKEN_SECONDS)
        return {"X-SLURM-USER-NAME": USER, "X-SLURM-USER-TOKEN": token}

    async def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        if self._session is None:
            connector = (
                aiohttp.UnixConnector(path=self._socket, **self._pool)
                if self._socket
                else aiohttp.TCPConnector(**self._pool)
            )
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        self.requests += 1
        try:
            async with self._session.request(
                method, self._base + API + path, json=body, headers=self._headers()
            ) as response:
                text = await response.text()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SlurmApiError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            data = {}
        errors = data.get("errors") or []
        if response.status >= 400 or errors:
            detail = "; ".join(map(_error_text, errors))
            raise SlurmApiError(f"{method} {path}: HTTP {response.status}: {detail or text[:300]}")
        return data

    async def nodes(self) -> list[dict[str, Any]]:
        return (await self._call("GET", "/nodes")).get("nodes") or []

    async def node(self, name: str) -> dict[str, Any] | None:
        """``GET /node/{name}``: one node (slurmrestd answers an error for an unknown one)."""
        found = (await self._call("GET", f"/node/{name}")).get("nodes") or []
        return found[0] if found else None

    async def drain(self, node: str, reason: str) -> None:
        await self._call("POST", f"/node/{node}", {"state": ["DRAIN"], "reason": reason})

    async def down(self, node: str, reason: str) -> None:
        await self._call("POST", f"/node/{node}", {"state": ["DOWN"], "reason": reason})

    async def resume(self, node: str) -> None:
        await self._call("POST", f"/node/{node}", {"state": ["RESUME"]})

    async def delete_node(self, node: str) -> None:
        await self._call("DELETE", f"/node/{node}")

    # Jobs (the Pod Scheduler's placeholders).

    async def submit(self, script: str, job: dict[str, Any]) -> int:
        """``POST /job/submit``: the new job's id."""
        answer = await self._call("POST", "/job/submit", {"script": script, "job": job})
        return int(answer["job_id"])

    async def job(self, job_id: int) -> dict[str, Any] | None:
        """``GET /job/{id}``: None once slurmctld has forgotten it (MinJobAge)."""
        try:
            found = (await self._call("GET", f"/job/{job_id}")).get("jobs") or []
        except SlurmApiError as exc:
            if "Invalid job id" in str(exc):
                return None
            raise
        return found[0] if found else None

    async def signal_job(self, job_id: int, signal: str | None = None) -> None:
        """``DELETE /job/{id}``: cancel it (SIGTERM, then SIGKILL after KillWait), or send
        ``signal`` (``KILL``) to every step of it. A job that has ended already is fine."""
        query = f"?signal={signal}" if signal else ""
        try:
            await self._call("DELETE", f"/job/{job_id}{query}")
        except SlurmApiError as exc:
            if not any(s in str(exc) for s in ("already completed", "Invalid job id")):
                raise

    @staticmethod
    def missing(exc: SlurmApiError) -> bool:
        """The request named a node Slurm does not have (deleted already)."""
        return "Invalid node name" in str(exc) or "not found" in str(exc).lower()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # Read-only views for the Slurm metrics (sunk.syncer.slurm_metrics).

    async def jobs(self) -> list[dict[str, Any]]:
        """``GET /jobs``: every job slurmctld holds (finished ones for MinJobAge)."""
        return (await self._call("GET", "/jobs")).get("jobs") or []

    async def partitions(self) -> list[dict[str, Any]]:
        """``GET /partitions``."""
        return (await self._call("GET", "/partitions")).get("partitions") or []

    async def diag(self) -> dict[str, Any]:
        """``GET /diag``: slurmctld's ``statistics`` (sdiag)."""
        return (await self._call("GET", "/diag")).get("statistics") or {}
