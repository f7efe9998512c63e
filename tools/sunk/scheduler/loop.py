"""One Pod Scheduler per SlurmCluster whose ``scheduler.enabled``: read the Pods that name it,
Slurm's placeholder jobs and where the slurmd Pods run, ``plan``, apply. Runs in the operator
beside the cluster's Syncer (strict node locks need its hook), over the same Slurm client.

Pod events wake it at once; Slurm is read every ``pollInterval``, and every second or two
while a placeholder is on its way to start (so a Pod binds soon after its job runs)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from sunk.models.crds import SlurmClusterSpec
from sunk.models.values import duration_seconds
from sunk.operator import names
from sunk.operator.client import ApiError, Kube, path_for
from sunk.operator.conditions import now
from sunk.operator.events import as_pod, emit
from sunk.scheduler.plan import Actions, Job, plan
from sunk.scheduler.podjob import ANN_JOB, ANN_NODE, Settings
from sunk.syncer import lock
from sunk.syncer.restd import Slurmrestd, client_for

CONDITION = "PodScheduled"
FAST_POLL = 1.0  # seconds between reads while a placeholder is starting
FAST_FOR = 60.0  # ... for at most this long after the last submission
KILL_AGAIN = 15.0  # seconds before a job still listed as holding its node is killed again
WRITES_AT_ONCE = 32  # concurrent binds or conditions: API server writes, no Slurm call


def scheduler_options(spec: SlurmClusterSpec, namespace: str) -> dict[str, Any]:
    """What the operator runs a cluster's Pod Scheduler with (``PodScheduler`` keywords): one
    place turns ``scheduler.*`` into its settings, so a changed key restarts it."""
    config = spec.scheduler.config
    return {
        "cluster": spec.clusterName,
        "name": spec.scheduler_name(namespace),
        "rest_url": f"http://{names.rest(spec.clusterName)}.{namespace}.svc:6820",
        "jwt_secret": names.jwt_secret_of(spec),
        "settings": Settings(
            kill_wait=spec.scheduler.killWait,
            termination_offset=duration_seconds(config.scheduler.terminationOffset),
            gpu_types=dict(config.scheduler.gpuTypes),
        ),
        "namespaces": spec.scheduler_namespaces(namespace),
        "poll": max(0.5, duration_seconds(config.scheduler.pollInterval)),
        "pool_size": config.slurm.poolSize,
        "persistent": config.slurm.usePersistentConnection,
        "log_level": spec.syncer.logLevel,
    }


class PodScheduler:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        cluster: str,
        name: str,
        rest_url: str,
        jwt_secret: str,
        settings: Settings,
        namespaces: tuple[str, ...] | None,
        poll: float = 10.0,
        pool_size: int = 5,
        persistent: bool = True,
        log_level: str = "info",
        active: Callable[[], bool] | None = None,
    ) -> None:
        """``namespaces``: where its Pods may be; None for every namespace. ``active``: false
        while this replica may not act (not the leader now): passes are skipped."""
        self.kube, self.namespace, self.cluster, self.name = kube, namespace, cluster, name
        self.rest_url, self.jwt_secret, self.settings = rest_url, jwt_secret, settings
        self.namespaces, self.poll = namespaces, poll
        self._options = {"pool_size": pool_size, "persistent": persistent}
        self.active = active or (lambda: True)
        self.log = logging.getLogger(f"sunk.scheduler.{namespace}.{cluster}")
        self.log.setLevel(log_level.upper())
        self.restd: Slurmrestd | None = None
        self.passes = 0
        self._wake = asyncio.Event()
        self._fast_until = 0.0
        self._last_error = ""
        self._killed: dict[int, float] = {}  # job id → when SIGKILL was sent
        # Submissions run beside the passes: slurmctld takes them one at a time (about 20 ms
        # each), and a burst of 200 would otherwise hold the pass for seconds while the first
        # placeholders already run and wait to be bound.
        self._submitting: asyncio.Task[None] | None = None
        self._in_flight: set[str] = set()  # Pod UIDs whose submission is under way

    def wake(self) -> None:
        self._wake.set()

    def in_scope(self, namespace: str) -> bool:
        return self.namespaces is None or namespace in self.namespaces

    async def run(self) -> None:
        scope = "every namespace" if self.namespaces is None else ", ".join(self.namespaces)
        self.log.info("scheduling Pods with schedulerName %s in %s", self.name, scope)
        try:
            while True:
                starting = False
                try:
                    if self.active():
                        starting = await self.schedule_once(background=True)
                    else:
                        self._stop_submitting()
                    self._last_error = ""
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # keep going: the next pass retries everything
                    message = f"{type(exc).__name__}: {exc}"
                    if message != self._last_error:
                        self.log.warning("scheduling pass failed: %s", message)
                        self._last_error = message
                fast = starting or time.monotonic() < self._fast_until
                await self._sleep(min(FAST_POLL, self.poll) if fast else self.poll)
        finally:
            self._stop_submitting()
            if self.restd is not None:
                await self.restd.close()

    def _stop_submitting(self) -> None:
        if self._submitting is not None:
            self._submitting.cancel()
            self._submitting = None

    async def _sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
            await asyncio.sleep(0.2)  # a burst of Pod events in one pass
        except TimeoutError:
            pass
        self._wake.clear()

    async def schedule_once(self, background: bool = False) -> bool:
        """One pass; True while a placeholder is past submission but not yet started.
        ``background``: its submissions go on after it returns (``run``); otherwise the pass
        ends with them."""
        self.restd = await client_for(
            self.kube, self.namespace, self.jwt_secret, self.rest_url, self.restd, **self._options
        )
        # Slurm first: a job listed here has its Pod in the list that follows (or it is gone).
        jobs = [j for j in map(Job.from_restd, await self.restd.jobs()) if j is not None]
        pods = await self._pods()
        hosts = await self._hosts() if any(j.started for j in jobs) else {}
        actions = plan(pods, jobs, hosts, self.settings)
        self._start_submitting(self.restd, actions.submit)
        await self._apply(self.restd, actions)
        if not background and self._submitting is not None:
            await self._submitting
        self.passes += 1
        return bool(self._in_flight) or any(
            j.alive and not j.started and not j.pending for j in jobs
        )

    def _start_submitting(self, restd: Slurmrestd, submit: list[Any]) -> None:
        """Submit the placeholders of Pods not already under way, in a task of their own, one
        batch at a time; a Pod whose submission is in flight is not submitted again."""
        if self._submitting is not None and not self._submitting.done():
            return  # the next pass after it submits what is still missing
        todo = [a for a in submit if a[0]["metadata"]["uid"] not in self._in_flight]
        if not todo:
            return
        self._in_flight = {a[0]["metadata"]["uid"] for a in todo}

        async def submit_all() -> None:
            try:
                await _each(todo, lambda a: self._submit(restd, *a), self._options["pool_size"])
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the next pass submits what has no job yet
                self.log.warning("submitting placeholders failed: %s: %s", type(exc).__name__, exc)
            finally:
                self._in_flight = set()
                self.wake()  # a pass at once binds what started meanwhile

        self._submitting = asyncio.get_running_loop().create_task(submit_all())

    async def _pods(self) -> list[dict[str, Any]]:
        selector = f"spec.schedulerName={self.name}"
        if self.namespaces is None:
            return await self.kube.list(path_for("v1", "pods"), field_selector=selector)
        pods: list[dict[str, Any]] = []
        for ns in self.namespaces:
            pods += await self.kube.list(path_for("v1", "pods", ns), field_selector=selector)
        return pods

    async def _hosts(self) -> dict[str, str]:
        """Slurm node (slurmd Pod name) → Kubernetes Node, for the cluster's slurmd Pods."""
        selector = f"{names.LABEL_CLUSTER}={self.cluster},{names.LABEL_NODESET}"
        pods = await self.kube.list(path_for("v1", "pods", self.namespace), selector)
        return {
            p["metadata"]["name"]: p["spec"]["nodeName"]
            for p in pods
            if (p.get("spec") or {}).get("nodeName") and not p["metadata"].get("deletionTimestamp")
        }

    # --- applying ---------------------------------------------------------------------------

    async def _apply(self, restd: Slurmrestd, actions: Actions) -> None:
        for job_id in actions.cancel:
            self.log.info("cancelling placeholder job %s (its Pod is gone or done)", job_id)
            await restd.signal_job(job_id)
        now_ = time.monotonic()
        self._killed = {j: t for j, t in self._killed.items() if now_ - t < KILL_AGAIN}
        for job_id in actions.kill:
            if job_id in self._killed:
                continue  # its processes are being killed; Slurm lists it until they are gone
            self.log.info("killing placeholder job %s (its Pod is gone or done)", job_id)
            await restd.signal_job(job_id, "KILL")
            self._killed[job_id] = now_
        for pod, why in actions.delete_pod:
            await self._delete(pod, why)
        for pod, rejected in actions.reject:
            await self._condition(pod, rejected.args[0], "SlurmRejected", warning=True)
        # Binds first: a Pod whose placeholder runs is waiting; conditions and Events can wait.
        bound: list[tuple[dict[str, Any], str]] = []
        await _each(actions.bind, lambda a: self._bind(*a, bound), WRITES_AT_ONCE)
        await _each(actions.adopt, lambda a: self._annotate(a[0], {ANN_JOB: str(a[1])}))
        await _each(
            actions.wait,
            lambda a: self._condition(*a, "SlurmPending", warning=False),
            WRITES_AT_ONCE,
        )
        await _each(
            bound,
            lambda b: emit(self.kube, as_pod(b[0]), "Scheduled", b[1], warning=False),
            WRITES_AT_ONCE,
        )

    async def _submit(self, restd: Slurmrestd, pod: dict[str, Any], placeholder: Any) -> None:
        job_id = await restd.submit(placeholder.script(), placeholder.job())
        self._fast_until = time.monotonic() + FAST_FOR
        self.log.info("Pod %s: submitted placeholder job %s", placeholder.pod.key, job_id)
        # The lock toleration now, in the same write: the bind is then one request.
        await self._annotate(pod, {ANN_JOB: str(job_id)}, tolerate=True)

    async def _annotate(
        self, pod: dict[str, Any], annotations: dict[str, str], tolerate: bool = False
    ) -> None:
        """``tolerate``: also add the lock toleration (the placeholder's strict lock must not
        evict its own Pod; a Pod placed through Slurm is never evicted by a job's lock)."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        patch: dict[str, Any] = {"metadata": {"annotations": annotations}}
        if tolerate and not lock.tolerates(pod):
            patch["spec"] = {
                "tolerations": [*(spec.get("tolerations") or []), names.LOCK_TOLERATION]
            }
        try:
            await self.kube.merge_patch(
                path_for("v1", "pods", meta["namespace"], meta["name"]), patch
            )
        except ApiError as exc:
            if exc.status != 404:  # deleted meanwhile: its job is ended at the next pass
                raise

    async def _condition(
        self, pod: dict[str, Any], message: str, reason: str, warning: bool
    ) -> None:
        """PodScheduled=False with why, and an Event, only when that changed (a restart or
        the next pass does not repeat it)."""
        current = next(
            (
                c
                for c in (pod.get("status") or {}).get("conditions") or []
                if c.get("type") == CONDITION
            ),
            {},
        )
        if (current.get("reason"), current.get("message")) == (reason, message):
            return
        meta = pod["metadata"]
        condition = {
            "type": CONDITION,
            "status": "False",
            "reason": reason,
            "message": message,
            "lastTransitionTime": now(),
        }
        try:
            await self.kube.strategic_patch(
                path_for("v1", "pods", meta["namespace"], meta["name"], "status"),
                {"status": {"conditions": [condition]}},
            )
        except ApiError as exc:
            if exc.status == 404:
                return
            raise
        await emit(self.kube, as_pod(pod), reason, message, warning=warning)

    async def _bind(
        self, pod: dict[str, Any], job: Job, node: str, bound: list[tuple[dict[str, Any], str]]
    ) -> None:
        """Bind, with the job's annotations in the Binding (the API server copies them onto
        the Pod in the same write). The lock toleration came with the submission; a Pod
        adopted without it gets it first. ``bound``: the Pods bound, for their Events."""
        meta = pod["metadata"]
        path = path_for("v1", "pods", meta["namespace"], meta["name"])
        try:
            if not lock.tolerates(pod):
                await self._annotate(pod, {}, tolerate=True)
            await self.kube.request(
                "POST",
                f"{path}/binding",
                {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {
                        "name": meta["name"],
                        "namespace": meta["namespace"],
                        "annotations": {ANN_JOB: str(job.id), ANN_NODE: job.nodes},
                    },
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node},
                },
            )
        except ApiError as exc:
            if exc.status in (404, 409):  # deleted, or bound already: the next pass sees it
                self.log.info("Pod %s/%s not bound: %s", meta["namespace"], meta["name"], exc)
                return
            raise
        message = f"Bound to Node {node} (Slurm node {job.nodes}, placeholder job {job.id})"
        self.log.info("Pod %s/%s: %s", meta["namespace"], meta["name"], message)
        bound.append((pod, message))

    async def _delete(self, pod: dict[str, Any], why: str) -> None:
        meta = pod["metadata"]
        self.log.info("deleting Pod %s/%s: %s", meta["namespace"], meta["name"], why)
        await emit(self.kube, as_pod(pod), "SlurmJobEnded", why)
        try:
            await self.kube.delete(path_for("v1", "pods", meta["namespace"], meta["name"]))
        except ApiError as exc:
            if exc.status != 404:
                raise


async def _each(items: list[Any], work: Callable[[Any], Awaitable[None]], limit: int = 8) -> None:
    """``work`` on every item, at most ``limit`` at a time; every item is tried, then the
    first failure is raised (the next pass retries what failed)."""
    guard = asyncio.Semaphore(max(1, limit))

    async def one(item: Any) -> None:
        async with guard:
            await work(item)

    results = await asyncio.gather(*(one(i) for i in items), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
