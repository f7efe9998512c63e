"""The operator's Kubernetes API client: plain dicts in and out, over kubernetes_asyncio.

kubernetes_asyncio (the generated, maintained asyncio client) does the connection work:
kubeconfig files with inline or file credentials and exec credential plugins, in-cluster
ServiceAccount credentials whose bound token it re-reads every minute, TLS, and aiohttp, which
kopf already runs on. What it leaves to its callers, this module adds once:

- LISTs are paginated (``limit``/``continue``), so a large cluster is read in bounded pages;
- 429 and 5xx answers, and dropped connections, are retried with capped, jittered exponential
  backoff, waiting at least what the server's ``Retry-After`` asks. A create whose answer was
  lost may have landed: repeated, it meets 409 AlreadyExists, which every caller reads as
  "it exists" (and checks whose it is where that matters);
- a token bucket limits the request rate, as client-go's QPS/burst do;
- a 401 re-reads the credentials once (a rotated token, a fresh exec-plugin token);
- every request is counted by verb and status code for the metrics.

Objects stay dicts: the reconcilers build them whole and apply them server-side, and a
round trip through generated model classes would only cost time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Protocol
from urllib.parse import quote

import aiohttp
import yaml
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.config import incluster_config as incluster

log = logging.getLogger(__name__)

FIELD_MANAGER = "sunk-operator"
PAGE_SIZE = 500
REQUEST_TIMEOUT = 60.0
RETRYABLE = frozenset({429, 500, 502, 503, 504})


class NotLeading(RuntimeError):
    """A write refused before it was sent: this replica's leader lease is not fresh."""


class ApiError(RuntimeError):
    """An answer of 400 or more, after any retries, with the server's own message."""

    def __init__(self, method: str, path: str, status: int, body: str):
        self.method, self.path, self.status, self.body = method, path, status, body
        try:
            message = json.loads(body).get("message", body)
        except (ValueError, AttributeError):
            message = body
        super().__init__(f"{method} {path}: {status} {message}")


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
    "NetworkPolicy": "networkpolicies",
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


class KubeApi(Protocol):
    """What the reconcilers, the Syncer and the Pod Scheduler need of a client; unit tests
    pass an in-memory fake with the same methods."""

    writes: int

    async def get(self, path: str) -> dict[str, Any] | None: ...

    async def list(
        self, path: str, label_selector: str | None = None, field_selector: str | None = None
    ) -> list[dict[str, Any]]: ...

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    async def apply(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]: ...

    async def strategic_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]: ...

    async def delete(self, path: str, grace_seconds: int | None = None) -> None: ...

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
        ok_missing: bool = False,
    ) -> Any: ...

    async def close(self) -> None: ...


@dataclass
class RateLimit:
    """A token bucket: ``qps`` requests a second on average, bursts of up to ``burst``."""

    qps: float
    burst: int
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self._tokens = float(self.burst)
        self._stamp = self.clock()
        self._lock = asyncio.Lock()

    def delay(self) -> float:
        """Take a token; how long to wait before the request may go (0: at once)."""
        now = self.clock()
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now
        self._tokens -= 1
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def wait(self) -> None:
        if self.qps <= 0:
            return
        async with self._lock:
            wait = self.delay()
        if wait > 0:
            await asyncio.sleep(wait)


@dataclass(frozen=True)
class Backoff:
    """Retries: the server's Retry-After (if any) plus an exponential wait from ``base`` to
    ``cap`` seconds with full jitter, so refused clients do not come back all at once; at most
    ``attempts`` tries in all (client-go's 10 for 429s)."""

    attempts: int = 10
    base: float = 0.2
    cap: float = 10.0

    def seconds(self, attempt: int, retry_after: float | None) -> float:
        jitter = random.uniform(0, min(self.cap, self.base * 2**attempt))
        return min(retry_after or 0.0, self.cap) + jitter


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


Observer = Callable[[str, int], None]  # (verb, status code; 0 for no answer)


class CredentialsError(RuntimeError):
    """No usable kubeconfig or in-cluster credentials, with the file and the problem."""


def in_cluster() -> bool:
    return incluster.SERVICE_HOST_ENV_NAME in os.environ


class Kube:
    """The client. Counts its write requests (the steady-state test asserts there are none)."""

    def __init__(
        self,
        api: k8s_client.ApiClient,
        *,
        reauthenticate: Callable[[], Any] | None = None,
        rate: RateLimit | None = None,
        backoff: Backoff = Backoff(),
        observe: Observer | None = None,
    ):
        self.api = api
        self.writes = 0
        # Asked before every write; False refuses it (NotLeading). The leader elector sets it,
        # so a replica that was stopped past its lease (SIGSTOP, a long GC pause) and resumes
        # cannot write, even in the middle of a reconcile, while another replica leads.
        self.may_write: Callable[[], bool] | None = None
        self.rate = rate
        self.backoff = backoff
        self.observe = observe
        self._reauthenticate = reauthenticate

    @classmethod
    async def connect(
        cls,
        kubeconfig: str | None = None,
        *,
        qps: float = 0.0,
        burst: int = 0,
        backoff: Backoff = Backoff(),
        observe: Observer | None = None,
        user_agent: str | None = None,
    ) -> Kube:
        """From a kubeconfig file (``kubeconfig``, else $KUBECONFIG), else in-cluster
        credentials, else ~/.kube/config; ``qps`` 0 means no client-side limit."""
        kubeconfig = kubeconfig or os.environ.get("KUBECONFIG") or None
        configuration = k8s_client.Configuration()
        reauthenticate: Callable[[], Any] | None = None
        if kubeconfig is None and in_cluster():
            loader = incluster.InClusterConfigLoader(
                token_filename=incluster.SERVICE_TOKEN_FILENAME,
                cert_filename=incluster.SERVICE_CERT_FILENAME,
            )
            try:
                loader.load_and_set(configuration)
            except (k8s_config.ConfigException, OSError) as exc:
                raise CredentialsError(f"in-cluster credentials: {exc}") from None

            def reread() -> None:  # a 401: the kubelet may have rotated the bound token
                loader.load_and_set(configuration)

            reauthenticate = reread
        else:
            path = kubeconfig or os.path.expanduser(k8s_config.KUBE_CONFIG_DEFAULT_LOCATION)
            missing = [p for p in path.split(os.pathsep) if not os.path.isfile(p)]
            if missing:
                raise CredentialsError(
                    f"{missing[0]}: no such kubeconfig file (and no in-cluster credentials)"
                )
            try:
                # persist_config=False: never write refreshed tokens back into the user's file.
                kube_loader = await k8s_config.load_kube_config(
                    config_file=path, client_configuration=configuration, persist_config=False
                )
            except (k8s_config.ConfigException, yaml.YAMLError, OSError, ValueError) as exc:
                why = " ".join(str(exc).split())
                raise CredentialsError(f"{path}: not a usable kubeconfig: {why}") from None

            async def reload() -> None:
                await kube_loader.load_and_set(configuration)

            reauthenticate = reload
        rate = RateLimit(qps, burst or max(1, int(qps * 2))) if qps > 0 else None
        api = k8s_client.ApiClient(configuration)
        if user_agent:  # names this replica in the API server's audit log
            api.user_agent = user_agent
        return cls(
            api,
            reauthenticate=reauthenticate,
            rate=rate,
            backoff=backoff,
            observe=observe,
        )

    @property
    def configuration(self) -> k8s_client.Configuration:
        return self.api.configuration

    async def token(self) -> str | None:
        """The current bearer token (without its "Bearer " prefix), for kopf's login."""
        key = await self.configuration.get_api_key_with_prefix("BearerToken")
        return key.removeprefix("Bearer ").strip() if key else None

    async def __aenter__(self) -> Kube:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.api.close()

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
        ok_missing: bool = False,
    ) -> Any:
        if method != "GET":
            self.writes += 1
        reauthenticated = False
        attempt = 0
        while True:
            if self.rate is not None:
                await self.rate.wait()
            # Checked right before each send: a retry or a rate-limit wait may have slept long.
            if method != "GET" and self.may_write is not None and not self.may_write():
                raise NotLeading(f"{method} {path}: refused, the leader lease is not fresh")
            try:
                status, headers, text = await self._send(method, path, body, content_type, query)
            except (aiohttp.ClientConnectionError, TimeoutError) as exc:
                self._observed(method, 0)
                if attempt + 1 >= self.backoff.attempts:
                    raise
                await self._pause(method, path, attempt, None, str(exc) or type(exc).__name__)
                attempt += 1
                continue
            self._observed(method, status)
            if status == 401 and not reauthenticated and self._reauthenticate is not None:
                reauthenticated = True
                result = self._reauthenticate()
                if asyncio.iscoroutine(result):
                    await result
                continue
            if status in RETRYABLE and attempt + 1 < self.backoff.attempts:
                await self._pause(
                    method, path, attempt, retry_after(headers.get("Retry-After")), str(status)
                )
                attempt += 1
                continue
            if status == 404 and ok_missing:
                return None
            if status >= 400:
                raise ApiError(method, path, status, text)
            return json.loads(text) if text else None

    async def _send(
        self,
        method: str,
        path: str,
        body: Any,
        content_type: str,
        query: dict[str, str] | None,
    ) -> tuple[int, Any, str]:
        response = await self.api.call_api(
            path,
            method,
            query_params=list((query or {}).items()),
            header_params={"Content-Type": content_type, "Accept": "application/json"},
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT,
        )
        async with response:
            return response.status, response.headers, await response.text()

    def _observed(self, method: str, status: int) -> None:
        if self.observe is not None:
            self.observe(method, status)

    async def _pause(
        self, method: str, path: str, attempt: int, after: float | None, why: str
    ) -> None:
        seconds = self.backoff.seconds(attempt, after)
        log.info("%s %s: %s; retrying in %.1fs", method, path, why, seconds)
        await asyncio.sleep(seconds)

    async def get(self, path: str) -> dict[str, Any] | None:
        return await self.request("GET", path, ok_missing=True)

    async def list(
        self, path: str, label_selector: str | None = None, field_selector: str | None = None
    ) -> list[dict[str, Any]]:
        """Every item, read in pages of ``PAGE_SIZE``."""
        query = {}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        items, _ = await self.list_versioned(path, query)
        return items

    async def list_versioned(
        self, path: str, query: dict[str, str] | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Every item (in pages of ``PAGE_SIZE``, one consistent snapshot) and the list's
        resourceVersion, to watch from."""
        query = {**(query or {}), "limit": str(PAGE_SIZE)}
        items: list[dict[str, Any]] = []
        while True:
            page = await self.request("GET", path, query=query)
            items += page.get("items") or []
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                return items, meta.get("resourceVersion") or ""
            query["continue"] = meta["continue"]

    async def stream(
        self, path: str, query: dict[str, str], timeout: float
    ) -> AsyncIterator[bytes]:
        """The lines of a watch (one JSON event each), until the server ends it."""
        response = await self.api.call_api(
            path,
            "GET",
            query_params=list(query.items()),
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(total=timeout, sock_connect=30),
        )
        async with response:
            self._observed("WATCH", response.status)
            if response.status >= 400:
                raise ApiError("WATCH", path, response.status, await response.text())
            async for line in response.content:
                if line.strip():
                    yield line

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
