"""The running operator: kopf watches feed a coalescing queue; workers reconcile."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable
from dataclasses import dataclass, field

import kopf
from aiohttp import web

from sunk.models.crds import API_VERSION, GROUP, VERSION
from sunk.operator import names
from sunk.operator.cluster.reconcile import reconcile_cluster
from sunk.operator.kube import Kube, KubeConfig, path_for
from sunk.operator.metrics import Metrics
from sunk.operator.nodeset.reconcile import reconcile_nodeset
from sunk.operator.queue import WorkQueue

log = logging.getLogger("sunk.operator")
RESYNC_SECONDS = 60


@dataclass
class Runtime:
    config: KubeConfig
    kube: Kube
    metrics: Metrics = field(default_factory=Metrics)
    queue: WorkQueue | None = None
    ready: bool = False
    namespaces: tuple[str, ...] = ()  # empty: every namespace

    def watches(self, ns: str) -> bool:
        return not self.namespaces or ns in self.namespaces

    async def reconcile(self, key: Hashable) -> None:
        kind, ns, name = key  # type: ignore[misc]
        plural = "slurmclusters" if kind == "SlurmCluster" else "nodesets"
        body = await self.kube.get(path_for(API_VERSION, plural, ns, name))
        if body is None:
            self.metrics.nodesets.pop((ns, name), None)
            return  # deleted: owned objects go with it (owner references)
        self.metrics.reconciles[kind] += 1
        try:
            if kind == "SlurmCluster":
                await reconcile_cluster(self.kube, body)
            else:
                status = await reconcile_nodeset(self.kube, body)
                self.metrics.nodesets[(ns, name)] = status
        except Exception:
            self.metrics.errors[kind] += 1
            raise

    def enqueue(self, kind: str, ns: str, name: str) -> None:
        if self.queue is not None and self.watches(ns):
            self.queue.add((kind, ns, name))

    async def enqueue_all(self) -> None:
        for kind, plural in (("SlurmCluster", "slurmclusters"), ("NodeSet", "nodesets")):
            for item in await self.kube.list(path_for(API_VERSION, plural)):
                self.enqueue(kind, item["metadata"]["namespace"], item["metadata"]["name"])

    async def resync_forever(self) -> None:
        while True:
            await self.enqueue_all()
            await asyncio.sleep(RESYNC_SECONDS)


RUNTIME: Runtime | None = None


def _rt() -> Runtime:
    assert RUNTIME is not None, "operator runtime not initialised"
    return RUNTIME


@kopf.on.login()
def login(**_: object) -> kopf.ConnectionInfo:
    config = _rt().config
    return kopf.ConnectionInfo(
        server=config.server,
        ca_path=config.ca_path,
        certificate_path=config.cert_path,
        private_key_path=config.key_path,
        token=config.token,
        insecure=config.insecure,
    )


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, **_: object) -> None:
    settings.posting.enabled = False  # our Events are written by the reconcilers, on change
    settings.watching.server_timeout = 300
    rt = _rt()
    rt.queue = WorkQueue(rt.reconcile)
    rt.queue.start()
    asyncio.get_running_loop().create_task(rt.resync_forever())
    rt.ready = True


@kopf.on.event(GROUP, VERSION, "slurmclusters")
def on_cluster(body: kopf.Body, **_: object) -> None:
    _rt().enqueue("SlurmCluster", body.metadata.namespace, body.metadata.name)


@kopf.on.event(GROUP, VERSION, "nodesets")
async def on_nodeset(body: kopf.Body, **_: object) -> None:
    rt = _rt()
    rt.enqueue("NodeSet", body.metadata.namespace, body.metadata.name)
    await _enqueue_cluster(rt, body.metadata.namespace, (body.spec or {}).get("clusterName"))


@kopf.on.event("", "v1", "nodes")
async def on_node(**_: object) -> None:
    # Feasibility and topology depend on every Node: re-check all NodeSets (coalesced).
    await _rt().enqueue_all()


@kopf.on.event("", "v1", "pods", labels={names.LABEL_NODESET: kopf.PRESENT})
def on_pod(body: kopf.Body, **_: object) -> None:
    labels = body.metadata.labels
    rt = _rt()
    rt.enqueue("NodeSet", body.metadata.namespace, labels[names.LABEL_NODESET])


@kopf.on.event("apps", "v1", "statefulsets", labels={names.LABEL_MANAGED_BY: names.MANAGER})
@kopf.on.event("apps", "v1", "deployments", labels={names.LABEL_MANAGED_BY: names.MANAGER})
async def on_workload(body: kopf.Body, **_: object) -> None:
    cluster = body.metadata.labels.get(names.LABEL_CLUSTER)
    await _enqueue_cluster(_rt(), body.metadata.namespace, cluster)


async def _enqueue_cluster(rt: Runtime, ns: str, cluster: str | None) -> None:
    if not cluster:
        return
    for item in await rt.kube.list(path_for(API_VERSION, "slurmclusters", ns)):
        if (item.get("spec") or {}).get("clusterName") == cluster:
            rt.enqueue("SlurmCluster", ns, item["metadata"]["name"])


def health_app(rt: Runtime) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        return web.Response(text="ok")  # standby replicas are healthy too

    async def metrics(_: web.Request) -> web.Response:
        rt.metrics.api_writes = rt.kube.writes
        return web.Response(text=rt.metrics.render(), content_type="text/plain")

    app = web.Application()
    app.add_routes(
        [web.get("/healthz", healthz), web.get("/readyz", readyz), web.get("/metrics", metrics)]
    )
    return app
