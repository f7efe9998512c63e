"""The lock hook: the endpoint a job's prolog and epilog call to lock and unlock their Node.

Authentication: the caller sends the projected ServiceAccount token of its slurmd Pod (audience
``sunk.coreweave.com/hook``). A TokenReview proves it; the token's Pod binding names the Pod,
whose UID must match, and the Pod must be a slurmd Pod the operator made. So a Pod can lock only
the Node it runs on, and nothing but a slurmd Pod can lock at all.

Locking (``POST /hook/v1/lock``, body ``{"job": "12", "strict": false}``): the job joins the
Node's holders and the Node gets the lock taint (one guarded merge patch; a concurrent change
is retried). Pods that do not tolerate the taint are evicted through the Eviction API (so
PodDisruptionBudgets hold), and the hook waits for them to go, at most ``wait_seconds``:
- all gone: ``locked`` (``locked_strict`` when a strict job holds it), 200;
- some left, normal lock: ``pending``, 200 (the job starts; the Syncer settles the state);
- some left, strict lock: the job's hold is released and the hook answers 503, so the prolog
  fails and Slurm requeues the job.
Unlocking (``POST /hook/v1/unlock``) removes the job; the last one removes the taint."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from sunk.operator import names
from sunk.operator.client import ApiError, Kube, path_for
from sunk.operator.conditions import now
from sunk.operator.events import as_pod, emit
from sunk.syncer import lock

AUDIENCE = "sunk.coreweave.com/hook"
POD_NAME = "authentication.kubernetes.io/pod-name"
POD_UID = "authentication.kubernetes.io/pod-uid"
WAIT_SECONDS = 120.0
CONFLICT_RETRIES = 20
log = logging.getLogger("sunk.syncer.hook")


class HookError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Locker:
    """``namespaces``: the ones the operator watches (empty: all); a token from a Pod
    elsewhere is refused before any read (the operator may have no right to read there)."""

    def __init__(
        self,
        kube: Kube,
        wait_seconds: float = WAIT_SECONDS,
        poll: float = 1.0,
        namespaces: tuple[str, ...] = (),
    ):
        self.kube, self.wait_seconds, self.poll = kube, wait_seconds, poll
        self.namespaces = namespaces
        self._node_guards: dict[str, asyncio.Lock] = {}

    # --- who is calling -------------------------------------------------------------------

    async def authenticate(self, token: str) -> dict[str, Any]:
        """The slurmd Pod the token was issued to, or HookError 401/403."""
        if not token:
            raise HookError(401, "no bearer token")
        review = await self.kube.request(
            "POST",
            "/apis/authentication.k8s.io/v1/tokenreviews",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token, "audiences": [AUDIENCE]},
            },
        )
        status = review.get("status") or {}
        if not status.get("authenticated") or AUDIENCE not in (status.get("audiences") or []):
            raise HookError(401, "token not accepted for audience " + AUDIENCE)
        user = status.get("user") or {}
        parts = (user.get("username") or "").split(":")
        extra = user.get("extra") or {}
        pod_name, pod_uid = (extra.get(POD_NAME) or [""])[0], (extra.get(POD_UID) or [""])[0]
        if len(parts) != 4 or parts[:2] != ["system", "serviceaccount"] or not pod_name:
            raise HookError(401, "not a ServiceAccount token bound to a Pod")
        if self.namespaces and parts[2] not in self.namespaces:
            raise HookError(403, f"Pod {parts[2]}/{pod_name} is in a namespace not watched")
        pod = await self.kube.get(path_for("v1", "pods", parts[2], pod_name))
        if pod is None or pod["metadata"].get("uid") != pod_uid:
            raise HookError(401, f"Pod {parts[2]}/{pod_name} of this token is gone")
        labels = pod["metadata"].get("labels") or {}
        if labels.get(names.LABEL_MANAGED_BY) != names.MANAGER or names.LABEL_NODESET not in labels:
            raise HookError(403, f"Pod {parts[2]}/{pod_name} is not a slurmd Pod of a NodeSet")
        if not (pod.get("spec") or {}).get("nodeName"):
            raise HookError(409, f"Pod {parts[2]}/{pod_name} has no Node")
        return pod

    # --- lock and unlock ------------------------------------------------------------------

    async def lock(self, pod: dict[str, Any], job: str, strict: bool) -> dict[str, Any]:
        node_name = pod["spec"]["nodeName"]
        await self._update(node_name, lambda h: h.add(job, strict))
        kind = "strict lock" if strict else "lock"
        await emit(
            self.kube, as_pod(pod), "SlurmNodeLocked",
            f"job {job} took a {kind} on Node {node_name}", warning=False,
        )  # fmt: skip
        left = await self._clear(node_name)
        if left and strict:
            node = await self._update(node_name, lambda h: h.remove(job))
            await self.mirror(pod, node_name, node)
            still = ", ".join(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in left)
            raise HookError(503, f"strict lock of Node {node_name}: Pods still there: {still}")
        node = await self._update(node_name, lambda h: h, victims_left=bool(left))
        state = await self.mirror(pod, node_name, node)
        log.info("job %s locked Node %s (%s)", job, node_name, state)
        return {"node": node_name, "state": state}

    async def unlock(self, pod: dict[str, Any], job: str) -> dict[str, Any]:
        node_name = pod["spec"]["nodeName"]
        node = await self._update(node_name, lambda h: h.remove(job))
        state = await self.mirror(pod, node_name, node)
        log.info("job %s unlocked Node %s (%s)", job, node_name, state)
        return {"node": node_name, "state": state}

    async def release(self, node_name: str) -> dict[str, Any]:
        """Drop every hold (a lock whose epilog never came, locking switched off)."""
        return await self._update(node_name, lambda _: lock.Holders())

    async def settle(self, node_name: str) -> dict[str, Any]:
        """A pending lock whose Pods have all left: locked (or locked_strict)."""
        return await self._update(node_name, lambda h: h, victims_left=False)

    async def mirror(
        self, pod: dict[str, Any], node_name: str, node: dict[str, Any] | None = None
    ) -> str:
        """Copy the Node's lock state to the slurmd Pod's annotation, as SUNK's Pod
        Controller does."""
        if node is None:
            node = await self.kube.get(path_for("v1", "nodes", None, node_name)) or {"metadata": {}}
        state = lock.state_of(node)
        if lock.state_of(pod) != state:
            meta = pod["metadata"]
            await self.kube.merge_patch(
                path_for("v1", "pods", meta["namespace"], meta["name"]),
                {"metadata": {"annotations": {lock.ANN_STATE: state}}},
            )
        return state

    async def _update(
        self,
        node_name: str,
        change: Callable[[lock.Holders], lock.Holders],
        victims_left: bool | None = None,
    ) -> dict[str, Any]:
        """Apply ``change`` to the Node's holders with a resourceVersion-guarded patch.
        ``victims_left`` None keeps a settled state settled and makes a new lock pending."""
        guard = self._node_guards.setdefault(node_name, asyncio.Lock())
        async with guard:
            for _ in range(CONFLICT_RETRIES):
                node = await self.kube.get(path_for("v1", "nodes", None, node_name))
                if node is None:
                    raise HookError(409, f"Node {node_name} is gone")
                before = lock.holders_of(node)
                holders = change(before)
                left = victims_left
                if left is None:
                    settled = lock.has_taint(node) and lock.state_of(node) != lock.PENDING
                    left = not (before and settled)
                state = lock.locked_state(holders, left)
                unchanged = str(holders) == str(before) and state == lock.state_of(node)
                if unchanged and bool(holders) == lock.has_taint(node):
                    return node
                try:
                    return await self.kube.merge_patch(
                        path_for("v1", "nodes", None, node_name),
                        lock.node_patch(node, holders, state, now()),
                    )
                except ApiError as exc:
                    if exc.status != 409:
                        raise
            raise HookError(503, f"Node {node_name} kept changing; try again")

    async def _clear(self, node_name: str) -> list[dict[str, Any]]:
        """Evict the Pods that do not tolerate the lock; wait for them to go. The Pods still
        there at the deadline."""
        deadline = time.monotonic() + self.wait_seconds
        evicted: set[str] = set()
        while True:
            left = lock.victims(await self.pods_on(node_name))
            for pod in left:
                meta = pod["metadata"]
                if meta["uid"] in evicted or meta.get("deletionTimestamp"):
                    continue
                if await self._evict(pod):
                    evicted.add(meta["uid"])
            if not left or time.monotonic() >= deadline:
                return left
            await asyncio.sleep(self.poll)

    async def pods_on(self, node_name: str) -> list[dict[str, Any]]:
        result = await self.kube.request(
            "GET", path_for("v1", "pods"), query={"fieldSelector": f"spec.nodeName={node_name}"}
        )
        return result.get("items", [])

    async def _evict(self, pod: dict[str, Any]) -> bool:
        meta = pod["metadata"]
        try:
            await self.kube.request(
                "POST",
                path_for("v1", "pods", meta["namespace"], meta["name"], "eviction"),
                {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                },
            )
        except ApiError as exc:
            if exc.status == 404:
                return True
            if exc.status == 429:  # a PodDisruptionBudget says not now: ask again next poll
                return False
            raise
        log.info("evicted %s/%s: its Node is locked for a job", meta["namespace"], meta["name"])
        return True


def hook_app(locker: Locker) -> web.Application:
    async def handle(request: web.Request, action: str) -> web.Response:
        header = request.headers.get("Authorization", "")
        token = header[len("Bearer ") :].strip() if header.startswith("Bearer ") else ""
        try:
            body = await request.json()
        except ValueError:
            body = None
        try:
            job = str((body or {}).get("job", "")) if isinstance(body, dict) else ""
            if not job.isdigit() or len(job) > 20:
                raise HookError(400, 'body must be {"job": "<numeric job id>", "strict": bool}')
            pod = await locker.authenticate(token)
            if action == "lock":
                result = await locker.lock(pod, job, bool(body.get("strict")))
            else:
                result = await locker.unlock(pod, job)
        except HookError as exc:
            log.warning("%s refused: %s", action, exc)
            return web.json_response({"error": str(exc)}, status=exc.status)
        except ApiError as exc:
            log.warning("%s failed: %s", action, exc)
            return web.json_response({"error": str(exc)}, status=502)
        return web.json_response(result)

    async def do_lock(request: web.Request) -> web.Response:
        return await handle(request, "lock")

    async def do_unlock(request: web.Request) -> web.Response:
        return await handle(request, "unlock")

    app = web.Application(client_max_size=4096)
    app.add_routes([web.post("/hook/v1/lock", do_lock), web.post("/hook/v1/unlock", do_unlock)])
    return app
