"""An in-memory ``KubeApi`` (``sunk.operator.client``) for unit tests of the reconcilers.

Objects live in a dict keyed by (apiVersion, plural, namespace, name). It does what the
API server does where the reconcilers depend on it: a uid and a new resourceVersion on every
write, 409 on a create of an existing name or a patch with a stale resourceVersion, JSON
merge patches (RFC 7386), the status subresource, label and field selectors. It does not
default, validate or garbage-collect; tests that need those run on the real API server (the
cluster tier). ``test_fake_kube`` checks it keeps the Protocol's methods and parameters.
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

from sunk.models.crds import API_VERSION
from sunk.operator.client import PLURALS, ApiError

Key = tuple[str, str, str | None, str | None]  # apiVersion, plural, namespace, name

_uids = itertools.count(1)


def parse_path(path: str) -> tuple[Key, str | None]:
    """An API path as (key, subresource); the name is None for a collection."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        api, rest = parts[1], parts[2:]
    else:
        api, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    ns = None
    if rest[0] == "namespaces" and len(rest) > 2:
        ns, rest = rest[1], rest[2:]
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    return (api, rest[0], ns, name), sub


def merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge(out.get(key), value)
    return out


def _term_holds(have: str | None, term: str) -> bool:
    """One selector term: ``k``, ``!k``, ``k=v``, ``k==v`` or ``k!=v``."""
    if "!=" in term:
        return have != term.partition("!=")[2]
    if "=" in term:
        return have == term.split("=")[-1]
    if term.startswith("!"):
        return have is None
    return have is not None


def _term_key(term: str) -> str:
    for sep in ("!=", "=="):
        if sep in term:
            return term.partition(sep)[0]
    return term.partition("=")[0].lstrip("!")


def label_selected(obj: dict[str, Any], selector: str | None) -> bool:
    labels = obj["metadata"].get("labels") or {}
    return all(_term_holds(labels.get(_term_key(t)), t) for t in (selector or "").split(",") if t)


def field_selected(obj: dict[str, Any], selector: str | None) -> bool:
    """Dotted paths (``metadata.name``, ``spec.nodeName``); an absent field reads as ""."""

    def read(path: str) -> str:
        value: Any = obj
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return "" if value is None else str(value)

    return all(_term_holds(read(_term_key(t)), t) for t in (selector or "").split(",") if t)


class FakeKube:
    """``KubeApi`` over a dict. ``refuse``: kinds whose apply the "API server" rejects (422)."""

    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        self.refuse: set[str] = set()
        self.writes = 0

    @staticmethod
    def key(obj: dict[str, Any]) -> Key:
        meta = obj["metadata"]
        return (obj["apiVersion"], PLURALS[obj["kind"]], meta.get("namespace"), meta["name"])

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a copy as the API server would after a write (uid kept, new version)."""
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        meta.setdefault("uid", f"uid-{next(_uids)}")
        meta["resourceVersion"] = str(next(_uids))
        self.objects[self.key(obj)] = obj
        return copy.deepcopy(obj)

    def read(self, kind: str, name: str, ns: str | None) -> dict[str, Any]:
        api = API_VERSION if kind in ("NodeSet", "SlurmCluster") else "v1"
        if kind in ("StatefulSet", "Deployment"):
            api = "apps/v1"
        return copy.deepcopy(self.objects[(api, PLURALS[kind], ns, name)])

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [copy.deepcopy(o) for o in self.objects.values() if o["kind"] == kind]

    async def get(self, path: str) -> dict[str, Any] | None:
        key, _ = parse_path(path)
        obj = self.objects.get(key)
        return copy.deepcopy(obj) if obj else None

    async def list(
        self, path: str, label_selector: str | None = None, field_selector: str | None = None
    ) -> list[dict[str, Any]]:
        (api, plural, ns, _), _ = parse_path(path)
        return [
            copy.deepcopy(o)
            for (a, p, n, _), o in self.objects.items()
            if a == api
            and p == plural
            and (ns is None or n == ns)
            and label_selected(o, label_selector)
            and field_selected(o, field_selector)
        ]

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        if self.key(obj) in self.objects:
            raise ApiError("POST", "", 409, "AlreadyExists")
        return self.put(obj)

    async def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply of a whole object: it replaces the spec, keeps the status."""
        self.writes += 1
        if obj["kind"] in self.refuse:
            raise ApiError("PATCH", "", 422, f"{obj['kind']} is invalid: spec: Forbidden")
        live = self.objects.get(self.key(obj))
        merged = copy.deepcopy(obj)
        if live:
            merged["metadata"]["uid"] = live["metadata"]["uid"]
            if "status" in live:
                merged["status"] = live["status"]
        return self.put(merged)

    async def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        key, sub = parse_path(path)
        live = self.objects.get(key)
        if live is None:
            raise ApiError("PATCH", path, 404, "NotFound")
        if sub == "status":
            live["status"] = merge(live.get("status"), patch["status"])
            return copy.deepcopy(live)
        version = (patch.get("metadata") or {}).get("resourceVersion")
        if version and version != live["metadata"]["resourceVersion"]:
            raise ApiError("PATCH", path, 409, "Conflict")
        patch = copy.deepcopy(patch)
        (patch.get("metadata") or {}).pop("resourceVersion", None)
        return self.put(merge(live, patch))

    async def strategic_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        """As a merge patch: lists are replaced, not merged by key (the reconcilers send
        strategic patches of maps only)."""
        return await self.merge_patch(path, patch)

    async def delete(self, path: str, grace_seconds: int | None = None) -> None:
        self.writes += 1
        key, _ = parse_path(path)
        self.objects.pop(key, None)

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
        ok_missing: bool = False,
    ) -> Any:
        """The verbs above by method; anything else is a test's mistake and says so."""
        if method == "GET":
            found = await self.get(path)
            if found is None and not ok_missing:
                raise ApiError(method, path, 404, "NotFound")
            return found
        if method == "POST":
            return await self.create(body)
        if method == "DELETE":
            await self.delete(path)
            return None
        if method == "PATCH" and content_type == "application/merge-patch+json":
            return await self.merge_patch(path, body)
        raise NotImplementedError(f"FakeKube.request: {method} {content_type} {path}")

    async def close(self) -> None:
        return None
