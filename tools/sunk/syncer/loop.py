"""One Syncer loop per SlurmCluster: read the cluster's slurmd Pods, their Nodes and the Slurm
nodes, ``plan``, apply. Level-triggered and idempotent: a restart in the middle of anything
converges at the next pass, and a steady state makes no writes.

The operator's NodeSet reconciler reads the latest Slurm view through ``view()`` (scale-down
order, safe removal, status counts) and is woken through ``on_change`` when that view changes
in a way it cares about; ``forget`` deletes a node record before its name is reused."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from sunk.operator import names
from sunk.operator.client import Kube, path_for
from sunk.syncer import lock
from sunk.syncer.active_checks import CheckJob, Schedule
from sunk.syncer.hook import Locker
from sunk.syncer.plan import (
    DRAIN_ANNOTATION,
    NODE_CONDITION,
    POD_CONDITION,
    Actions,
    ConditionRule,
    SlurmNode,
    jobs_naming_partition,
    plan,
)
from sunk.syncer.restd import SlurmApiError, Slurmrestd, client_for
from sunk.syncer.slurm_metrics import SlurmMetrics

INTERVAL_SECONDS = 5.0
METRICS_SECONDS = 30.0  # jobs, partitions and diag: read less often than the nodes
STALE_PASSES = 3  # a view older than this many intervals is not trusted for removals


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Syncer:
    def __init__(
        self,
        kube: Kube,
        namespace: str,
        cluster: str,
        rest_url: str,
        jwt_secret: str,
        log_level: str = "info",
        interval: float = INTERVAL_SECONDS,
        on_change: Callable[[], None] | None = None,
        metrics: SlurmMetrics | None = None,
        locking: bool = True,
        active: Callable[[], bool] | None = None,
        metrics_interval: float = METRICS_SECONDS,
        rules: tuple[ConditionRule, ...] = (),
        active_checks: tuple[CheckJob, ...] = (),
    ) -> None:
        self.kube, self.namespace, self.cluster = kube, namespace, cluster
        self.rest_url, self.jwt_secret, self.interval = rest_url, jwt_secret, interval
        self.on_change = on_change
        self.metrics, self.metrics_interval = metrics, metrics_interval
        self.locking, self.locker = locking, Locker(kube)
        self.active = active or (lambda: True)  # false: not the leader now; skip passes
        self.rules = rules  # Node conditions that drain (healthCheck.nodeConditions)
        self.schedule = Schedule(active_checks)  # healthCheck.active
        self._metrics_at = 0.0
        self.log = logging.getLogger(f"sunk.syncer.{namespace}.{cluster}")
        self.log.setLevel(log_level.upper())
        self.restd: Slurmrestd | None = None
        self.passes = 0
        self.in_pass = False  # counters read between passes are whole (the benchmark waits)
        self._last_error = ""
        self._view: dict[str, SlurmNode] = {}
        self._wake = asyncio.Event()
        self._view_at = 0.0  # monotonic time the view was read; 0: never
        self._answered_at = 0.0  # … or slurmrestd last answered a read of the nodes

    def wake(self) -> None:
        """A Pod or Node of the cluster changed: sync now rather than at the next tick (the
        tick remains for changes made in Slurm)."""
        self._wake.set()

    async def _sleep(self) -> None:
        try:
            await asyncio.wait_for(self._wake.wait(), self.interval)
            await asyncio.sleep(0.2)  # let a burst of events land in one pass
        except TimeoutError:
            pass
        self._wake.clear()

    def view(self) -> dict[str, SlurmNode] | None:
        """The Slurm nodes as last read, or None when that is too old to act on."""
        if time.monotonic() - self._view_at > STALE_PASSES * self.interval + 10:
            return None
        return self._view

    async def read_now(self) -> dict[str, SlurmNode] | None:
        """The Slurm nodes read right now (None if slurmrestd does not answer): for a
        decision that must not rest on a view a few seconds old (which node to remove)."""
        try:
            restd = await self._client()
            nodes = {n.name: n for n in map(SlurmNode.from_restd, await restd.nodes())}
        except (SlurmApiError, RuntimeError) as exc:
            self.log.warning("could not read the Slurm nodes: %s", exc)
            return None
        self._answered_at = time.monotonic()
        return nodes

    def unanswered_for(self) -> float:
        """Seconds since slurmrestd last answered a read of the nodes (inf: never): a short
        silence is slurmrestd being replaced, a long one an outage."""
        answered = max(self._answered_at, self._view_at)
        return time.monotonic() - answered if answered else math.inf

    async def partition_jobs(self, partition: str) -> list[int]:
        """Ids of the jobs that have not ended and name ``partition``, read now (raises
        SlurmApiError when slurmrestd does not answer)."""
        restd = await self._client()
        return jobs_naming_partition(await restd.jobs(), partition)

    async def forget(self, node: str) -> None:
        """Delete a dynamic node record (its Pod is gone); one already gone is fine."""
        restd = await self._client()
        try:
            await restd.delete_node(node)
        except SlurmApiError as exc:
            if not restd.missing(exc):
                raise
        self._view.pop(node, None)
        self.log.info("deleted Slurm node %s (its Pod is gone)", node)

    async def run(self) -> None:
        self.log.info("syncing Slurm cluster %s/%s through %s", self.namespace, self.cluster,
                      self.rest_url)  # fmt: skip
        try:
            while True:
                try:
                    if self.active():
                        self.in_pass = True
                        try:
                            await self.sync_once()
                        finally:
                            self.in_pass = False
                    self._last_error = ""
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # keep syncing: the next pass retries everything
                    message = f"{type(exc).__name__}: {exc}"
                    if self.metrics is not None:
                        self.metrics.failed(self.namespace, self.cluster)
                    if message != self._last_error:  # once per distinct error, not per pass
                        self.log.warning("sync pass failed: %s", message)
                        self._last_error = message
                await self._sleep()
        finally:
            if self.metrics is not None:
                self.metrics.forget(self.namespace, self.cluster)
            if self.restd is not None:
                await self.restd.close()

    async def _client(self) -> Slurmrestd:
        self.restd = await client_for(
            self.kube, self.namespace, self.jwt_secret, self.rest_url, self.restd
        )
        return self.restd

    async def sync_once(self) -> Actions:
        restd = await self._client()
        # Slurm first: a node registered then has its Pod in the list that follows.
        raw_nodes = await restd.nodes()
        slurm = {n.name: n for n in map(SlurmNode.from_restd, raw_nodes)}
        cluster = f"{names.LABEL_CLUSTER}={self.cluster}"
        pods = await self.kube.list(
            path_for("v1", "pods", self.namespace), f"{cluster},{names.LABEL_NODESET}"
        )
        nodes = {
            n["metadata"]["name"]: n
            for n in await self.kube.list(
                path_for("v1", "nodes"), f"{cluster},{names.LABEL_NAMESPACE}={self.namespace}"
            )
        }
        actions = plan(pods, nodes, slurm, self.rules)
        await self._apply(restd, actions)
        await self._converge_locks(pods, nodes, slurm)
        self._publish(slurm, actions)
        await self._observe(restd, raw_nodes)
        self.passes += 1
        return actions

    async def _converge_locks(
        self,
        pods: list[dict[str, Any]],
        nodes: dict[str, dict[str, Any]],
        slurm: dict[str, SlurmNode],
    ) -> None:
        """Locks the epilog will not release: the node runs no job 30 s after the lock (the
        slurmd or its Pod died mid-job), the Pod is gone, or locking was switched off. A
        pending lock becomes locked once its Node holds no Pod that must leave. The Pods show
        their Node's state. Reads only Nodes and Pods already listed, plus the Pods of a Node
        whose lock is pending."""
        pod_on = {(p.get("spec") or {}).get("nodeName"): p for p in pods}
        for name, node in nodes.items():
            holders, pod = lock.holders_of(node), pod_on.get(name)
            if not holders and not lock.has_taint(node):
                if pod is not None and lock.state_of(pod) != lock.UNLOCKED:
                    await self.locker.mirror(pod, name, node)
                continue
            current = slurm.get(pod["metadata"]["name"]) if pod is not None else None
            busy = current.busy if current is not None else None
            since = (node["metadata"].get("annotations") or {}).get(lock.ANN_SINCE)
            why = (
                "locking is off" if not self.locking
                else "its slurmd Pod is gone" if pod is None
                else "no job runs there" if lock.stale(holders, since, time.time(), busy)
                else ""
            )  # fmt: skip
            if why or not holders:
                self.log.info("releasing the lock of Node %s (%s): %s", name, holders, why)
                node = await self.locker.release(name)
            elif lock.state_of(node) == lock.PENDING and not lock.victims(
                await self.locker.pods_on(name)
            ):
                node = await self.locker.settle(name)
            if pod is not None and lock.state_of(pod) != lock.state_of(node):
                await self.locker.mirror(pod, name, node)

    async def _observe(self, restd: Slurmrestd, nodes: list[dict[str, Any]]) -> None:
        """Every ``metrics_interval``: the Slurm metrics (three more reads, whatever the node
        count) and the active checks' jobs, both from one read of the jobs."""
        if time.monotonic() - self._metrics_at < self.metrics_interval:
            return
        if self.metrics is None and not self.schedule.checks:
            return
        jobs = await restd.jobs()
        self._metrics_at = time.monotonic()
        for check in self.schedule.due(self._metrics_at, jobs):
            job_id = await restd.submit(check.script(), check.job())
            self.schedule.submitted(check, self._metrics_at)
            self.log.info("active health check %s: submitted job %s", check.name, job_id)
        if self.metrics is not None:
            partitions, diag = await restd.partitions(), await restd.diag()
            self.metrics.observe(self.namespace, self.cluster, nodes, jobs, partitions, diag)

    def _publish(self, slurm: dict[str, SlurmNode], actions: Actions) -> None:
        """Keep the view; wake the NodeSets when what they act on changed (activity, drain,
        a node appearing or going), not on every pass."""
        for name in actions.forget:
            slurm.pop(name, None)
        changed = _summary(slurm) != _summary(self._view) or not self._view_at
        self._view, self._view_at = slurm, time.monotonic()
        if changed and self.on_change is not None:
            self.on_change()

    async def _apply(self, restd: Slurmrestd, actions: Actions) -> None:
        for node, reason in actions.drain.items():
            self.log.info("drain %s: %s", node, reason)
            await restd.drain(node, reason)
        for node in actions.resume:
            self.log.info("resume %s (its k8s: cause cleared)", node)
            await restd.resume(node)
        for node, reason in actions.down.items():
            self.log.info("down %s: %s", node, reason)
            await restd.down(node, reason)
        for node in actions.forget:
            try:
                await self.forget(node)
            except SlurmApiError as exc:  # e.g. a job still completing there: next pass
                self.log.warning("could not delete Slurm node %s yet: %s", node, exc)
        for node, reason in actions.node_marks.items():
            await self._mark_node(node, reason)
        for (ns, pod), reason in actions.pod_marks.items():
            await self.kube.strategic_patch(
                path_for("v1", "pods", ns, pod, "status"),
                {"status": {"conditions": [_condition(POD_CONDITION, reason)]}},
            )

    async def _mark_node(self, node: str, reason: str | None) -> None:
        self.log.info("node %s: Slurm drain %s", node, repr(reason) if reason else "cleared")
        await self.kube.merge_patch(
            path_for("v1", "nodes", None, node),
            {"metadata": {"annotations": {DRAIN_ANNOTATION: reason}}},
        )
        await self.kube.strategic_patch(
            path_for("v1", "nodes", None, node, "status"),
            {"status": {"conditions": [_condition(NODE_CONDITION, reason, heartbeat=True)]}},
        )


def _summary(view: dict[str, SlurmNode]) -> dict[str, tuple[str, bool]]:
    return {name: (node.activity, node.drained) for name, node in view.items()}


def _condition(ctype: str, reason: str | None, heartbeat: bool = False) -> dict[str, Any]:
    """True with the Slurm reason as message while Slurm holds the node out of service."""
    now = _now()
    condition = {
        "type": ctype,
        "status": "True" if reason is not None else "False",
        "reason": "SlurmDrain" if reason is not None else "SlurmInService",
        "message": reason or "",
        "lastTransitionTime": now,
    }
    if heartbeat:
        condition["lastHeartbeatTime"] = now
    return condition
