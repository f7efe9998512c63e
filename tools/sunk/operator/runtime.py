"""The running operator: kopf watches feed a coalescing queue; workers reconcile."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import kopf
from aiohttp import web
from pydantic import ValidationError

from sunk.models import conditions as reasons
from sunk.models.crds import API_VERSION, GROUP, VERSION, SlurmClusterSpec
from sunk.operator import conditions, names
from sunk.operator.cache import Listed, Reader, Watched
from sunk.operator.client import Kube, path_for
from sunk.operator.cluster.reconcile import reconcile_cluster
from sunk.operator.conditions import write_status
from sunk.operator.events import emit_on_change
from sunk.operator.hashing import stable_hash
from sunk.operator.informer import Informer
from sunk.operator.metrics import Metrics
from sunk.operator.nodeset.claims import CLAIM_LABELS, label_nodes
from sunk.operator.nodeset.reconcile import reconcile_nodeset
from sunk.operator.queue import RetryLater, WorkQueue
from sunk.scheduler.loop import PodScheduler, scheduler_options
from sunk.syncer.active_checks import CheckJob
from sunk.syncer.loop import Syncer
from sunk.syncer.plan import ConditionRule
from sunk.syncer.slurm_metrics import SlurmMetrics

log = logging.getLogger("sunk.operator")
RESYNC_SECONDS = 60
# The queue's key kind for writing a NodeSet's Node labels, apart from its reconcile.
NODE_LABELS = "NodeLabels"


@dataclass
class RunningSyncer:
    settings: tuple[object, ...]
    syncer: Syncer
    task: asyncio.Task


@dataclass
class RunningScheduler:
    settings: dict[str, Any]
    scheduler: PodScheduler
    task: asyncio.Task


@dataclass
class Runtime:
    kube: Kube
    metrics: Metrics = field(default_factory=Metrics)
    slurm_metrics: SlurmMetrics = field(default_factory=SlurmMetrics)
    queue: WorkQueue | None = None
    ready: bool = False
    namespaces: tuple[str, ...] = ()  # empty: every namespace
    hook_url: str = ""  # the lock hook as slurmd Pods reach it ("": Pods get no lock hook)
    # Where the operator's own Pods run (POD_NAMESPACE): the clusters' NetworkPolicies let
    # them reach slurmrestd. None outside a Pod.
    operator_namespace: str | None = None
    # What the watches have shown: (kind, namespace, name) → spec.clusterName.
    known: dict[tuple[str, str, str], str] = field(default_factory=dict)
    node_fingerprints: dict[str, str] = field(default_factory=dict)
    # Node → (namespace, NodeSet) of its claim label, as the watch last showed it.
    node_claims: dict[str, tuple[str, str]] = field(default_factory=dict)
    pod_nodes: dict[tuple[str, str], str] = field(default_factory=dict)
    # One Syncer per SlurmCluster (namespace, name).
    syncers: dict[tuple[str, str], RunningSyncer] = field(default_factory=dict)
    # One Pod Scheduler per SlurmCluster with scheduler.enabled.
    schedulers: dict[tuple[str, str], RunningScheduler] = field(default_factory=dict)
    cluster_generations: dict[tuple[str, str], int | None] = field(default_factory=dict)
    # What no watch reports (a deleted key Secret, say) is seen at the next resync.
    resync_seconds: float = RESYNC_SECONDS
    # Whether this replica may act (the leader's lease is fresh); always, without election.
    leading: Callable[[], bool] = field(default=lambda: True)
    # Where reconciles read Nodes, Pods, NodeSets and SlurmClusters: the informers and kopf's
    # indexes once the operator runs (`startup`); LISTs before.
    reader: Reader | None = None
    # Set by the first event handler: kopf calls none before every index has its initial
    # list, so from then on the indexes are complete.
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    informers: list[Informer] = field(default_factory=list)
    tasks: list[asyncio.Task] = field(default_factory=list)

    def watches(self, ns: str) -> bool:
        return not self.namespaces or ns in self.namespaces

    async def reconcile(self, key: Hashable) -> None:
        kind, ns, name = key  # type: ignore[misc]
        if not self.leading():  # stopped past the renew deadline: another replica may lead
            log.error("the leader lease is not fresh; exiting before acting on %s", key)
            os._exit(1)
        await self.caches_synced()
        if kind == NODE_LABELS:
            await self.label_nodes(ns, name)
            return
        plural = "slurmclusters" if kind == "SlurmCluster" else "nodesets"
        body = await self.kube.get(path_for(API_VERSION, plural, ns, name))
        if body is None:
            self.metrics.nodesets.pop((ns, name), None)
            if kind == "SlurmCluster":
                self.stop_syncer(ns, name)
                self.stop_scheduler(ns, name)
                self.cluster_generations.pop((ns, name), None)
            return  # deleted: owned objects go with it (owner references)
        self.metrics.reconciles.labels(kind=kind).inc()
        started, writes = time.monotonic(), self.kube.writes
        degraded: list[str] = []
        try:
            if kind == "SlurmCluster":
                status = await reconcile_cluster(
                    self.kube, body, self.reader, self.operator_namespace
                )
                degraded = conditions.degraded(status)
                self.ensure_syncer(ns, name, body)
                self.ensure_scheduler(ns, name, body)
                self._on_cluster_generation(ns, name, body)
            else:
                status = await reconcile_nodeset(
                    self.kube,
                    body,
                    self.slurm_link,
                    lambda s: self.recheck(key, s),
                    hook_url=self.hook_url,
                    namespaces=self.namespaces,
                    reader=self.reader,
                    label_later=lambda: self.enqueue(NODE_LABELS, ns, name),
                )
                self.metrics.nodesets[(ns, name)] = status
        except Exception as exc:
            self.metrics.errors.labels(kind=kind).inc()
            await self._report_failure(plural, body, exc)
            raise
        finally:
            took = time.monotonic() - started
            self.metrics.duration.labels(kind=kind).observe(took)
            log.info(
                "reconciled %s %s/%s in %.2fs (%d writes)",
                kind,
                ns,
                name,
                took,
                self.kube.writes - writes,
            )
        if degraded:  # recorded on the status; retried with the failing keys' backoff
            raise RetryLater("; ".join(degraded))

    async def label_nodes(self, ns: str, nodeset: str) -> None:
        """Label the Nodes the NodeSet's Pods run on (``sunk.operator.nodeset.claims``); a
        Node another writer labelled first sends the NodeSet back to planning."""
        reader = self.reader or Listed(self.kube)
        pods = await reader.nodeset_pods(ns, nodeset)
        nodes = {n["metadata"]["name"]: n for n in await reader.nodes()}
        by_cluster: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            cluster = (pod["metadata"].get("labels") or {}).get(names.LABEL_CLUSTER) or ""
            by_cluster.setdefault(cluster, []).append(pod)
        for cluster, mine in by_cluster.items():
            lost = await label_nodes(self.kube, mine, nodes, nodeset, ns, cluster)
            if lost:
                log.info("%s/%s: Nodes labelled for another NodeSet first: %s",
                         ns, nodeset, ", ".join(lost))  # fmt: skip
                self.enqueue("NodeSet", ns, nodeset)

    async def _report_failure(self, plural: str, body: dict, exc: Exception) -> None:
        """No silent retry loop: the object shows Ready=False with the error, and an Event
        says it once. Best effort: the API server may be what failed."""
        message = f"{type(exc).__name__}: {exc}"[:1000]
        try:
            await emit_on_change(self.kube, body, reasons.RECONCILE_FAILED.name, message)
            await write_status(
                self.kube,
                body,
                plural,
                {k: v for k, v in (body.get("status") or {}).items() if k != "conditions"},
                [conditions.condition("Ready", False, reasons.RECONCILE_FAILED, message)],
            )
        except Exception as report_error:  # already failing: keep the first error
            log.warning("could not record the failure on %s: %s", plural, report_error)

    def recheck(self, key: Hashable, seconds: float) -> None:
        if self.queue is not None:
            self.queue.add_after(key, seconds)

    def _on_cluster_generation(self, ns: str, name: str, body: dict) -> None:
        """NodeSets act on their cluster's spec (Syncer on or off, grace period): a new
        generation wakes them."""
        generation = body["metadata"].get("generation")
        if self.cluster_generations.get((ns, name)) != generation:
            self.cluster_generations[(ns, name)] = generation
            self.enqueue_nodesets(ns, (body.get("spec") or {}).get("clusterName") or "")

    def ensure_syncer(self, ns: str, name: str, body: dict) -> None:
        """Run the cluster's Syncer while ``syncer.enabled`` (it talks to slurmrestd with a
        JWT, so it needs ``rest.enabled`` and ``jwt.enabled`` too); restart it on a change."""
        try:
            spec = SlurmClusterSpec.model_validate(body.get("spec") or {})
        except ValidationError:
            return  # the reconcile has already written InvalidSpec
        if not spec.syncs():
            if spec.syncer.enabled:
                log.warning("%s/%s: the Syncer needs rest.enabled and jwt.enabled", ns, name)
            self.stop_syncer(ns, name)
            return
        url = f"http://{names.rest(spec.clusterName)}.{ns}.svc:6820"
        secret = names.jwt_secret_of(spec)
        rules = tuple(
            ConditionRule(c.type, c.status, c.verify) for c in spec.healthCheck.nodeConditions
        )
        checks = tuple(
            CheckJob(name, c.every, c.nodes, c.partition, c.qos, c.timeLimit)
            for name, c in sorted(spec.healthCheck.active.items())
        )
        settings = (
            spec.clusterName, url, secret, spec.syncer.logLevel, spec.locks_nodes(), rules, checks,
        )  # fmt: skip
        current = self.syncers.get((ns, name))
        if current and current.settings == settings and not current.task.done():
            return
        self.stop_syncer(ns, name)
        cluster = spec.clusterName
        syncer = Syncer(
            self.kube,
            ns,
            cluster,
            url,
            secret,
            spec.syncer.logLevel,
            on_change=lambda: self.enqueue_nodesets(ns, cluster),
            metrics=self.slurm_metrics,
            locking=spec.locks_nodes(),
            active=self.leading,
            rules=rules,
            active_checks=checks,
        )
        task = asyncio.get_running_loop().create_task(syncer.run())
        self.syncers[(ns, name)] = RunningSyncer(settings, syncer, task)

    def ensure_scheduler(self, ns: str, name: str, body: dict) -> None:
        """Run the cluster's Pod Scheduler while ``scheduler.enabled`` and its Syncer runs;
        restart it when its settings change."""
        try:
            spec = SlurmClusterSpec.model_validate(body.get("spec") or {})
        except ValidationError:
            return
        if not spec.schedules():
            if spec.scheduler.enabled:
                log.warning(
                    "%s/%s: the Pod Scheduler needs the Syncer (syncer, rest and jwt enabled)",
                    ns,
                    name,
                )
            self.stop_scheduler(ns, name)
            return
        options = scheduler_options(spec, ns)
        current = self.schedulers.get((ns, name))
        if current and current.settings == options and not current.task.done():
            return
        self.stop_scheduler(ns, name)
        scheduler = PodScheduler(self.kube, ns, **options, active=self.leading)
        task = asyncio.get_running_loop().create_task(scheduler.run())
        self.schedulers[(ns, name)] = RunningScheduler(options, scheduler, task)

    def stop_scheduler(self, ns: str, name: str) -> None:
        entry = self.schedulers.pop((ns, name), None)
        if entry:
            entry.task.cancel()

    def wake_schedulers(self, scheduler_name: str, namespace: str) -> None:
        for entry in self.schedulers.values():
            sched = entry.scheduler
            if sched.name == scheduler_name and sched.in_scope(namespace):
                sched.wake()

    async def shutdown(self) -> None:
        """Stop reconciling: the workers, every Syncer and every Pod Scheduler (before the
        lease is given up)."""
        if self.queue is not None:
            await self.queue.stop()
        tasks = [entry.task for entry in self.syncers.values()]
        tasks += [entry.task for entry in self.schedulers.values()]
        tasks += self.tasks  # the informers, the resync
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def stop_syncer(self, ns: str, name: str) -> None:
        entry = self.syncers.pop((ns, name), None)
        if entry:
            entry.task.cancel()
            # Their removals now proceed without Slurm state (or wait for a new Syncer).
            self.enqueue_nodesets(ns, entry.syncer.cluster)

    def slurm_link(self, ns: str, cluster: str) -> Syncer | None:
        """The running Syncer of the cluster named ``cluster`` in ``ns``, if any."""
        for (kns, _), entry in self.syncers.items():
            if kns == ns and entry.syncer.cluster == cluster and not entry.task.done():
                return entry.syncer
        return None

    def wake_syncer(self, ns: str, cluster: str) -> None:
        syncer = self.slurm_link(ns, cluster)
        if syncer is not None:
            syncer.wake()

    def enqueue_nodesets(self, ns: str, cluster: str) -> None:
        for (kind, kns, name), cluster_name in list(self.known.items()):
            if kind == "NodeSet" and kns == ns and cluster_name == cluster:
                self.enqueue(kind, ns, name)

    def enqueue(self, kind: str, ns: str, name: str) -> None:
        if self.queue is not None and self.watches(ns):
            self.queue.add((kind, ns, name))

    def enqueue_known(self) -> None:
        for kind, ns, name in list(self.known):
            self.enqueue(kind, ns, name)

    def enqueue_cluster(self, ns: str, cluster: str | None) -> None:
        for (kind, kns, name), cluster_name in list(self.known.items()):
            if kind == "SlurmCluster" and kns == ns and cluster and cluster_name == cluster:
                self.enqueue(kind, ns, name)

    async def caches_synced(self) -> None:
        """Until every watch-fed cache holds its first list."""
        await self.synced.wait()
        for informer in self.informers:
            await informer.synced.wait()

    async def enqueue_all(self) -> None:
        """Every SlurmCluster and NodeSet the watches show."""
        await self.caches_synced()
        reader = self.reader or Listed(self.kube)
        for item in await reader.clusters(None, self.namespaces):
            self.enqueue("SlurmCluster", item["metadata"]["namespace"], item["metadata"]["name"])
        for item in await reader.nodesets(None, self.namespaces):
            self.enqueue("NodeSet", item["metadata"]["namespace"], item["metadata"]["name"])

    async def resync_forever(self) -> None:
        """Every ``resync_seconds``, every object is reconciled again; a failed LIST (API
        server restarting, a timeout) is logged and tried again at the next round."""
        while True:
            try:
                await self.enqueue_all()
            except Exception:
                self.metrics.errors.labels(kind="resync").inc()
                log.exception("resync failed; trying again in %ss", self.resync_seconds)
            await asyncio.sleep(self.resync_seconds)


def memo_for(rt: Runtime) -> kopf.Memo:
    """What ``serve`` hands kopf: every handler finds the operator's state in its ``memo``
    (kopf gives each object a shallow copy, so all share the one Runtime); no module global."""
    return kopf.Memo(runtime=rt)


def _rt(memo: kopf.Memo) -> Runtime:
    rt = memo.get("runtime")
    if not isinstance(rt, Runtime):
        raise RuntimeError("kopf was started without the operator's memo (memo_for)")
    return rt


@kopf.on.login()
async def login(memo: kopf.Memo, **_: object) -> kopf.ConnectionInfo:
    """kopf's watches use the operator client's credentials; kopf calls this again after a
    401, which then hands over the re-read token."""
    kube = _rt(memo).kube
    config = kube.configuration
    return kopf.ConnectionInfo(
        server=config.host,
        ca_path=config.ssl_ca_cert,
        certificate_path=config.cert_file,
        private_key_path=config.key_file,
        token=await kube.token(),
        insecure=not config.verify_ssl,
    )


async def wait_for_crds(kube: Kube, interval: float = 2.0) -> None:
    """Until the API server serves our resources (the chart installs the CRDs with the
    operator; kopf resolves its resources once, at start)."""
    wanted = {"slurmclusters", "nodesets"}
    logged = False
    while True:
        found = await kube.get(f"/apis/{API_VERSION}")  # discovery: no RBAC rule needed
        served = {r.get("name") for r in (found or {}).get("resources") or []}
        if wanted <= served:
            return
        if not logged:
            log.info("waiting for the API server to serve %s", ", ".join(sorted(wanted - served)))
            logged = True
        await asyncio.sleep(interval)


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **kwargs: Any) -> None:
    settings.posting.enabled = False  # our Events are written by the reconcilers, on change
    # No observation of namespaces and CRDs: the namespaces are given by name and our
    # resources are served before kopf starts (`wait_for_crds`), so the operator needs no
    # right to list or watch either (least privilege; the chart grants none).
    settings.scanning.disabled = True
    if not log.isEnabledFor(logging.DEBUG):
        # kopf logs every handler call at INFO: thousands per second with many Nodes.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    settings.watching.server_timeout = 300
    rt = _rt(memo)
    nodes, slurmd, scheduled = informers(rt)
    rt.informers = [nodes, *slurmd, *scheduled]
    loop = asyncio.get_running_loop()
    rt.tasks += [loop.create_task(i.run()) for i in rt.informers]
    # kopf passes its indexes by name; Nodes and slurmd Pods come from the informers.
    rt.reader = Watched(kwargs, nodes, slurmd)
    rt.queue = WorkQueue(rt.reconcile)
    rt.metrics.queue_depth = rt.queue.depth
    rt.metrics.writes = lambda: rt.kube.writes
    rt.queue.start()
    rt.tasks.append(loop.create_task(rt.resync_forever()))
    rt.ready = True


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    # At SIGTERM kopf stops its watchers first and gives every other task (ours: the work
    # queue, the informers, Syncers and Pod Schedulers) seconds to end by itself: reconciles
    # went on writing after the signal, and once the stop outlasted a Pod's 30 s grace period,
    # so the lease was never given up. Stop ours at once.
    log.info("stopping: no reconcile, Syncer or Pod Scheduler runs from here")
    await _rt(memo).shutdown()


# --- event handlers: cheap triggers into the queue, no API calls on the hot path ----------


def _track(rt: Runtime, kind: str, event: kopf.RawEvent, body: kopf.Body) -> None:
    key = (kind, body.metadata.namespace, body.metadata.name)
    if event.get("type") == "DELETED":
        rt.known.pop(key, None)
    else:
        rt.known[key] = (body.spec or {}).get("clusterName") or ""


# The event handlers are coroutines: kopf runs a plain function in a worker thread, and the
# work queue and the `synced` Event belong to the event loop (neither is thread-safe).
@kopf.on.event(GROUP, VERSION, "slurmclusters")
async def on_cluster(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: object) -> None:
    rt = _rt(memo)
    rt.synced.set()
    _track(rt, "SlurmCluster", event, body)
    rt.enqueue("SlurmCluster", body.metadata.namespace, body.metadata.name)


@kopf.on.event(GROUP, VERSION, "nodesets")
async def on_nodeset(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: object) -> None:
    rt = _rt(memo)
    rt.synced.set()
    _track(rt, "NodeSet", event, body)
    rt.enqueue("NodeSet", body.metadata.namespace, body.metadata.name)
    rt.enqueue_cluster(body.metadata.namespace, (body.spec or {}).get("clusterName"))


def _node_fingerprint(node: dict[str, Any]) -> str:
    """What feasibility, naming and topology read from a Node; heartbeats and claim labels do
    not change it (the labels a scale-up writes must not each wake every reconcile)."""
    status, spec = node.get("status") or {}, node.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    return stable_hash(
        [
            {k: v for k, v in labels.items() if k not in CLAIM_LABELS},
            spec.get("taints"),
            spec.get("unschedulable"),
            status.get("allocatable"),
            status.get("addresses"),
        ]
    )


def on_node(rt: Runtime, kind: str, node: dict[str, Any]) -> None:
    name = node["metadata"]["name"]
    labels = node["metadata"].get("labels") or {}
    claim = (labels.get(names.LABEL_NAMESPACE) or "", labels.get(names.LABEL_NODESET) or "")
    claim = claim if claim[1] and kind != "DELETED" else None
    old_claim = rt.node_claims.get(name)
    if claim != old_claim:
        if claim is None:
            rt.node_claims.pop(name, None)
        else:
            rt.node_claims[name] = claim
        # A NodeSet whose label went (removed by hand, overwritten) labels the Node again or
        # lets its Pod go; a new label is its writer's own doing, and a writer that lost
        # the race is told by its label write (Runtime.label_nodes).
        if old_claim is not None:
            rt.enqueue("NodeSet", *old_claim)
        rt.wake_syncer(claim[0] if claim else "", labels.get(names.LABEL_CLUSTER) or "")
    fingerprint = "" if kind == "DELETED" else _node_fingerprint(node)
    if rt.node_fingerprints.get(name) == fingerprint:
        return
    if fingerprint:
        rt.node_fingerprints[name] = fingerprint
    else:
        rt.node_fingerprints.pop(name, None)
    rt.enqueue_known()
    rt.wake_syncer(labels.get(names.LABEL_NAMESPACE) or "", labels.get(names.LABEL_CLUSTER) or "")


def on_pod(rt: Runtime, kind: str, pod: dict[str, Any]) -> None:
    meta = pod["metadata"]
    ns, labels = meta["namespace"], meta.get("labels") or {}
    if names.LABEL_NODESET not in labels:
        return
    rt.enqueue("NodeSet", ns, labels[names.LABEL_NODESET])
    rt.wake_syncer(ns, labels.get(names.LABEL_CLUSTER) or "")
    # Topology follows where pods run: re-render when a pod lands, moves or goes.
    key = (ns, meta["name"])
    node = "" if kind == "DELETED" else (pod.get("spec") or {}).get("nodeName") or ""
    if rt.pod_nodes.get(key) != node:
        rt.pod_nodes[key] = node
        rt.enqueue_cluster(ns, labels.get(names.LABEL_CLUSTER))


def on_scheduler_pod(rt: Runtime, kind: str, pod: dict[str, Any]) -> None:
    """A Pod naming a scheduler other than the default appeared or changed: if it is one of
    our Pod Schedulers', schedule now."""
    wanted = (pod.get("spec") or {}).get("schedulerName") or ""
    if any(e.scheduler.name == wanted for e in rt.schedulers.values()):
        rt.wake_schedulers(wanted, pod["metadata"]["namespace"])


def informers(rt: Runtime) -> tuple[Informer, list[Informer], list[Informer]]:
    """The watches of the kinds that come in thousands, without kopf's per-event cost: every
    Node, the slurmd Pods, and the Pods that name a scheduler other than the default (our
    Pod Schedulers' are among them). Pods are watched in each watched namespace, or in all."""
    kube = rt.kube
    scopes: tuple[str | None, ...] = rt.namespaces or (None,)
    nodes = Informer(kube, path_for("v1", "nodes"), on_event=lambda k, o: on_node(rt, k, o))
    slurmd = [
        Informer(
            kube,
            path_for("v1", "pods", ns),
            label_selector=names.LABEL_NODESET,
            on_event=lambda k, o: on_pod(rt, k, o),
        )
        for ns in scopes
    ]
    scheduled = [
        Informer(
            kube,
            path_for("v1", "pods", ns),
            field_selector="spec.schedulerName!=default-scheduler",
            on_event=lambda k, o: on_scheduler_pod(rt, k, o),
        )
        for ns in scopes
    ]
    return nodes, slurmd, scheduled


@kopf.on.event("apps", "v1", "statefulsets", labels={names.LABEL_MANAGED_BY: names.MANAGER})
@kopf.on.event("apps", "v1", "deployments", labels={names.LABEL_MANAGED_BY: names.MANAGER})
async def on_workload(body: kopf.Body, memo: kopf.Memo, **_: object) -> None:
    rt = _rt(memo)
    rt.synced.set()
    rt.enqueue_cluster(body.metadata.namespace, body.metadata.labels.get(names.LABEL_CLUSTER))


def health_app(rt: Runtime) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        return web.Response(text="ok")  # standby replicas are healthy too

    async def metrics(_: web.Request) -> web.Response:
        text = rt.metrics.render() + rt.slurm_metrics.render()
        return web.Response(body=text, content_type="text/plain", charset="utf-8")

    app = web.Application()
    app.add_routes(
        [web.get("/healthz", healthz), web.get("/readyz", readyz), web.get("/metrics", metrics)]
    )
    return app
