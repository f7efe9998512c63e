"""A list-then-watch cache of one resource, for the kinds that come in thousands (Nodes,
slurmd Pods), read without kopf's per-event machinery.

Like client-go's informers: one paged LIST, then a WATCH from the list's resourceVersion with
bookmarks; every event updates the store and is handed to ``on_event``. A watch that ends is
resumed from the last resourceVersion seen; a 410 Gone (the version was compacted away) or
any other failure lists again, after a capped, jittered backoff for failures. After each
LIST, objects that vanished meanwhile are reported as DELETED, so a missed deletion is never
kept. ``synced`` is set once the first LIST is in the store.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Callable
from typing import Any

from sunk.operator.client import ApiError, Kube

log = logging.getLogger("sunk.operator.informer")

Key = tuple[str, str]  # (namespace, name); "" for cluster-scoped
OnEvent = Callable[[str, dict[str, Any]], None]  # ("ADDED"|"MODIFIED"|"DELETED", object)
WATCH_SECONDS = 300


class Gone(Exception):
    """The watch's resourceVersion is no longer available: list again."""


def key_of(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


class Informer:
    def __init__(
        self,
        kube: Kube,
        path: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        on_event: OnEvent | None = None,
        watch_seconds: int = WATCH_SECONDS,
    ) -> None:
        self.kube, self.path = kube, path
        self.label_selector, self.field_selector = label_selector, field_selector
        self.on_event = on_event
        self.watch_seconds = watch_seconds
        self.store: dict[Key, dict[str, Any]] = {}
        self.synced = asyncio.Event()
        self.lists = 0  # how many LISTs (the first, then one per 410 or failure)
        self._version = ""

    def objects(self) -> list[dict[str, Any]]:
        return list(self.store.values())

    async def run(self) -> None:
        failures = 0
        while True:
            try:
                if not self._version:
                    await self._list()
                await self._watch()
                failures = 0
            except Gone:
                log.info("%s: resourceVersion %s is gone; listing again", self.path, self._version)
                self._version = ""
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # API server away, a broken stream: list again
                failures += 1
                wait = random.uniform(0.5, 1.0) * min(30.0, 0.5 * 2**failures)
                log.warning("%s: watch failed (%s); listing again in %.1fs", self.path, exc, wait)
                self._version = ""
                await asyncio.sleep(wait)

    def _query(self) -> dict[str, str]:
        query = {}
        if self.label_selector:
            query["labelSelector"] = self.label_selector
        if self.field_selector:
            query["fieldSelector"] = self.field_selector
        return query

    async def _list(self) -> None:
        items, version = await self.kube.list_versioned(self.path, self._query())
        fresh = {key_of(item): item for item in items}
        for key in [k for k in self.store if k not in fresh]:
            self._emit("DELETED", self.store.pop(key))
        for key, item in fresh.items():
            old = self.store.get(key)
            self.store[key] = item
            if old is None:
                self._emit("ADDED", item)
            elif old["metadata"].get("resourceVersion") != item["metadata"].get("resourceVersion"):
                self._emit("MODIFIED", item)
        self._version = version
        self.lists += 1
        self.synced.set()

    async def _watch(self) -> None:
        query = {
            **self._query(),
            "watch": "1",
            "allowWatchBookmarks": "true",
            "resourceVersion": self._version,
            "timeoutSeconds": str(self.watch_seconds),
        }
        try:
            async for line in self.kube.stream(self.path, query, self.watch_seconds + 30):
                self._apply(json.loads(line))
        except ApiError as exc:
            if exc.status == 410:
                raise Gone() from None
            raise

    def _apply(self, event: dict[str, Any]) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone()
            raise ApiError("WATCH", self.path, obj.get("code") or 500, json.dumps(obj))
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self._version = version
        if kind == "BOOKMARK":
            return
        key = key_of(obj)
        if kind == "DELETED":
            self.store.pop(key, None)
        else:
            self.store[key] = obj
        self._emit(kind or "MODIFIED", obj)

    def _emit(self, kind: str, obj: dict[str, Any]) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(kind, obj)
        except Exception:  # a handler's bug must not stop the cache
            log.exception("%s: handling %s %s failed", self.path, kind, key_of(obj))
