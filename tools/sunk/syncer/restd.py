"""slurmrestd's OpenAPI, with JWTs the Syncer mints from the cluster's auth/jwt key for
SlurmUser ``slurm``: Slurm's own interface, no CLI text.

Each Slurm release serves a few data_parser versions (24.11: v0.0.40–v0.0.42; 26.05:
v0.0.42–v0.0.45) and drops old ones, so the client reads slurmrestd's OpenAPI listing and
speaks the newest version of :data:`VERSIONS` it serves; when slurmrestd is replaced by
another release under it (an upgrade), the old paths answer 404 and the client asks again.
The fields we read and write have the same shape in every version listed (checked against
the releases in ``tests/slurm/test_restd_versions.py``)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import logging
import time
from collections.abc import Mapping
from typing import Any, Protocol

import aiohttp

# The data_parser versions we speak, oldest first.
VERSIONS = ("v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")
OPENAPI = "/openapi/v3"
# The start of slurmrestd's 404 text for a path none of its data parsers serves.
NOT_SERVED = "Unable to find requested URL endpoint"
USER = "slurm"  # SlurmUser: an operator of Slurm; slurmrestd refuses tokens for root
TOKEN_SECONDS = 600

log = logging.getLogger(__name__)


def number(value: Any) -> float:
    """A number slurmrestd sends: plain, or v0.0.41+'s ``{"set", "infinite", "number"}`` (0
    when unset or infinite)."""
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite"):
            return 0.0
        value = value.get("number")
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    return 0.0


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


def served_versions(openapi: dict[str, Any]) -> list[str]:
    """The data_parser versions an OpenAPI document lists under ``/slurm/<version>/``, sorted."""
    found = {
        path.split("/")[2]
        for path in openapi.get("paths") or {}
        if path.startswith("/slurm/v") and path.count("/") >= 3
    }
    return sorted(found, key=_version_key)


def _version_key(version: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in version.removeprefix("v").split("."))
    except ValueError:
        return (-1,)


def newest_known(served: list[str]) -> str | None:
    """The newest of :data:`VERSIONS` that ``served`` has, or None."""
    known = [v for v in served if v in VERSIONS]
    return max(known, key=_version_key) if known else None


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
        version: str | None = None,
    ) -> None:
        """``version``: the data_parser version to speak (one of :data:`VERSIONS`); default:
        the newest slurmrestd serves, asked at the first call."""
        if version is not None and version not in VERSIONS:
            raise ValueError(f"data_parser {version}: we speak {', '.join(VERSIONS)}")
        self.url = url.rstrip("/")
        self._pool = {"limit": pool_size, "force_close": not persistent}
        self._socket = url.removeprefix("unix:") if url.startswith("unix:") else None
        self._base = "http://slurmrestd" if self._socket else self.url
        self.key = key
        self.requests = 0
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None
        self._token = ("", 0.0)
        self.version = version
        self._fixed = version is not None
        self._negotiating = asyncio.Lock()

    def _headers(self) -> dict[str, str]:
        token, expires = self._token
        if time.time() > expires - 60:
            token = mint_token(self.key)
            self._token = (token, time.time() + TOKEN_SECONDS)
        return {"X-SLURM-USER-NAME": USER, "X-SLURM-USER-TOKEN": token}

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = (
                aiohttp.UnixConnector(path=self._socket, **self._pool)
                if self._socket
                else aiohttp.TCPConnector(**self._pool)
            )
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self._session

    async def _request(self, method: str, url_path: str, body: Any) -> tuple[int, str]:
        self.requests += 1
        try:
            async with self._open().request(
                method, self._base + url_path, json=body, headers=self._headers()
            ) as response:
                return response.status, await response.text()
        except aiohttp.ClientResponseError as exc:
            # slurmrestd 26.05 writes its "not served" 404 twice on one connection; aiohttp
            # refuses the second response, with the text of the first in its message.
            if NOT_SERVED in str(exc.message):
                return 404, NOT_SERVED
            raise SlurmApiError(f"{method} {url_path}: {type(exc).__name__}: {exc}") from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SlurmApiError(f"{method} {url_path}: {type(exc).__name__}: {exc}") from exc

    async def negotiate(self) -> str:
        """Ask slurmrestd which data_parser versions it serves (its OpenAPI listing) and
        choose the newest we speak; the choice is kept until a path answers 404."""
        async with self._negotiating:  # concurrent first calls ask once
            if self.version is not None:
                return self.version
            status, text = await self._request("GET", OPENAPI, None)
            if status != 200:
                raise SlurmApiError(f"GET {OPENAPI}: HTTP {status}: {text[:300]}")
            try:
                served = served_versions(json.loads(text))
            except (ValueError, AttributeError) as exc:
                raise SlurmApiError(f"GET {OPENAPI}: not an OpenAPI document: {exc}") from exc
            chosen = newest_known(served)
            if chosen is None:
                raise SlurmApiError(
                    f"slurmrestd at {self.url} serves data_parser "
                    f"{', '.join(served) or 'no version'}; we speak {', '.join(VERSIONS)}"
                )
            log.info("slurmrestd at %s serves %s: speaking %s", self.url, ", ".join(served), chosen)
            self.version = chosen
            return chosen

    async def _call(
        self, method: str, path: str, body: Any = None, *, asked: bool = False
    ) -> dict[str, Any]:
        version = self.version or await self.negotiate()
        status, text = await self._request(method, f"/slurm/{version}{path}", body)
        try:
            data = json.loads(text) if text else {}
        except ValueError:
            data = {}
        if status == 404 and not data and not self._fixed and not asked:
            # Not a data parser's answer: this slurmrestd does not serve the version (another
            # release replaced the one we asked). Ask again, once.
            if self.version == version:
                self.version = None
            if await self.negotiate() != version:
                return await self._call(method, path, body, asked=True)
        errors = data.get("errors") or []
        if status >= 400 or errors:
            detail = "; ".join(map(_error_text, errors))
            raise SlurmApiError(f"{method} {path}: HTTP {status}: {detail or text[:300]}")
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
