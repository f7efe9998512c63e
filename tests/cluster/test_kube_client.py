"""The operator's Kubernetes client (``sunk.operator.client``) against a real kube-apiserver's
faults: 429s from a low ``--max-requests-inflight``, an API server restart mid-work, LISTs
read page by page, and a rejected token replaced through an exec credential plugin.

The API server here is this test's own, with priority and fairness off so the classic
in-flight limit answers 429 at once (``system:masters`` is exempt, so the test client is a
ServiceAccount, like the operator in a cluster).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from sunk.devenv.controlplane import ControlPlane, missing_binaries
from sunk.operator import client as kube_client
from sunk.operator.client import ApiError, Backoff, Kube, path_for
from sunk.operator.informer import Informer

pytestmark = pytest.mark.skipif(
    bool(missing_binaries()), reason=f"control-plane binaries missing: {missing_binaries()}"
)

NS = "client-test"
ACCOUNT = "tester"


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with ControlPlane(
        tmp_path_factory.mktemp("throttled"),
        apiserver_args=[
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=1",
            "--max-mutating-requests-inflight=1",
        ],
    ) as plane:
        plane.create_namespace(NS)
        plane.client.create(
            f"/api/v1/namespaces/{NS}/serviceaccounts", {"metadata": {"name": ACCOUNT}}
        )
        plane.client.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "metadata": {"name": "client-test"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NS}],
            },
        )
        yield plane


@pytest.fixture(scope="module")
def kubeconfig(cp: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cp.token_kubeconfig(NS, ACCOUNT, tmp_path_factory.mktemp("sa") / "kubeconfig")


def config_map(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "labels": {"batch": name.split("-")[0]}},
        "data": {"k": name},
    }


def stored(cp: ControlPlane, batch: str) -> list[str]:
    items = cp.client.list(f"/api/v1/namespaces/{NS}/configmaps", label_selector=f"batch={batch}")
    return sorted(i["metadata"]["name"] for i in items)


def test_429s_are_retried_until_every_request_is_done(cp: ControlPlane, kubeconfig: Path) -> None:
    codes: Counter[tuple[str, int]] = Counter()

    async def work() -> list[dict]:
        async with await Kube.connect(
            str(kubeconfig), observe=lambda verb, code: codes.update([(verb, code)])
        ) as kube:
            names = [f"burst-{i:03d}" for i in range(60)]
            await asyncio.gather(*(kube.create(config_map(n)) for n in names))
            await asyncio.gather(*(kube.apply(config_map(n)) for n in names))
            return await asyncio.gather(
                *(kube.get(path_for("v1", "configmaps", NS, n)) for n in names)
            )

    got = asyncio.run(work())
    assert [g["data"]["k"] for g in got] == [f"burst-{i:03d}" for i in range(60)]
    assert stored(cp, "burst") == [f"burst-{i:03d}" for i in range(60)]
    refused = sum(n for (_, code), n in codes.items() if code == 429)
    assert refused > 0, f"the API server refused nothing, so nothing was retried: {codes}"
    assert codes[("POST", 201)] == 60, codes  # each create went through exactly once


def test_a_list_is_read_in_pages(
    cp: ControlPlane, kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(23):
        cp.client.create(f"/api/v1/namespaces/{NS}/configmaps", config_map(f"page-{i:02d}"))
    monkeypatch.setattr(kube_client, "PAGE_SIZE", 5)
    codes: Counter[tuple[str, int]] = Counter()

    async def work() -> list[dict]:
        async with await Kube.connect(
            str(kubeconfig), observe=lambda verb, code: codes.update([(verb, code)])
        ) as kube:
            return await kube.list(f"/api/v1/namespaces/{NS}/configmaps", "batch=page")

    items = asyncio.run(work())
    assert sorted(i["metadata"]["name"] for i in items) == [f"page-{i:02d}" for i in range(23)]
    assert codes[("GET", 200)] == 5, codes  # 23 items in pages of 5


async def create(kube: Kube, obj: dict) -> None:
    """As the operator's callers do: a 409 means a create whose answer the restart lost was
    repeated. A starting API server serves requests before its RBAC cache has synced and
    refuses them with 403 for a moment; the operator's work queue retries such a reconcile
    with backoff, and so does this loop (bounded)."""
    for _ in range(60):
        try:
            await kube.create(obj)
            return
        except ApiError as exc:
            if exc.status == 409:
                return
            if exc.status != 403:
                raise
            await asyncio.sleep(0.5)
    raise AssertionError(f"{obj['metadata']['name']}: still forbidden after 30 s")


def test_requests_ride_out_an_api_server_restart(cp: ControlPlane, kubeconfig: Path) -> None:
    """Requests sent while the API server is down are retried (connection refused is safe to
    repeat, a create included) and all land once it is back."""
    codes: Counter[tuple[str, int]] = Counter()

    async def work() -> None:
        async with await Kube.connect(
            str(kubeconfig),
            backoff=Backoff(attempts=30, base=0.2, cap=2.0),
            observe=lambda verb, code: codes.update([(verb, code)]),
        ) as kube:
            for i in range(40):
                await create(kube, config_map(f"restart-{i:02d}"))
                await asyncio.sleep(0.25)

    def outage() -> None:
        time.sleep(2)
        cp.restart("kube-apiserver", down_seconds=3)

    thread = threading.Thread(target=outage)
    thread.start()
    try:
        asyncio.run(work())
    finally:
        thread.join()
    assert stored(cp, "restart") == [f"restart-{i:02d}" for i in range(40)]
    assert codes[("POST", 0)] > 0, f"no request met the outage: {codes}"


def test_a_refused_token_is_replaced_by_the_exec_plugin(
    cp: ControlPlane, kubeconfig: Path, tmp_path: Path
) -> None:
    """kubeconfig ``exec`` credentials: a 401 makes the client run the plugin again."""
    good = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    token_file = tmp_path / "token"
    token_file.write_text("not-a-token")
    plugin = tmp_path / "credential-plugin"
    plugin.write_text(
        "#!/bin/sh\n"
        'printf \'{"apiVersion": "client.authentication.k8s.io/v1", '
        '"kind": "ExecCredential", "status": {"token": "%s"}}\' '
        f'"$(cat {token_file})"\n'
    )
    plugin.chmod(0o755)
    config = yaml.safe_load(kubeconfig.read_text())
    config["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(plugin),
            "interactiveMode": "Never",
        }
    }
    exec_config = tmp_path / "kubeconfig"
    exec_config.write_text(yaml.safe_dump(config))
    codes: Counter[tuple[str, int]] = Counter()

    async def work() -> dict | None:
        async with await Kube.connect(
            str(exec_config), observe=lambda verb, code: codes.update([(verb, code)])
        ) as kube:
            token_file.write_text(good)  # rotated after the client loaded the bad one
            return await kube.get(f"/api/v1/namespaces/{NS}")

    namespace = asyncio.run(work())
    assert namespace is not None and namespace["metadata"]["name"] == NS
    assert codes[("GET", 401)] == 1 and codes[("GET", 200)] == 1, json.dumps(list(codes.items()))


@pytest.fixture(scope="module")
def uncached(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """An API server without a watch cache: a watch resumed from a compacted resourceVersion
    goes to etcd and comes back 410 Gone, as a watch does after a long disconnect."""
    with ControlPlane(
        tmp_path_factory.mktemp("uncached"), apiserver_args=["--watch-cache=false"]
    ) as plane:
        plane.create_namespace(NS)
        yield plane


def test_an_informer_lists_again_after_410_and_misses_nothing(uncached: ControlPlane) -> None:
    cp = uncached
    events: list[tuple[str, str]] = []

    async def work() -> Informer:
        async with await Kube.connect(str(cp.kubeconfig)) as kube:
            informer = Informer(
                kube,
                path_for("v1", "configmaps", NS),
                label_selector="batch=inf",
                on_event=lambda kind, obj: events.append((kind, obj["metadata"]["name"])),
                watch_seconds=2,  # watches end often, and are resumed from their version
            )
            task = asyncio.create_task(informer.run())
            await asyncio.wait_for(informer.synced.wait(), 30)
            await asyncio.to_thread(cp.client.create, f"/api/v1/namespaces/{NS}/configmaps",
                                    config_map("inf-a"))  # fmt: skip
            await wait_until(lambda: ("ADDED", "inf-a") in events)
            # Writes elsewhere move etcd past the informer's version; the compaction then
            # removes that version, so resuming the watch from it gets 410 Gone.
            for i in range(3):
                await asyncio.to_thread(cp.client.create, f"/api/v1/namespaces/{NS}/configmaps",
                                        config_map(f"other-{i}"))  # fmt: skip
            await asyncio.to_thread(cp.compact_etcd)
            # The open watch ends within 2 s; resumed from the compacted version it gets 410.
            await wait_until(lambda: informer.lists >= 2, 30)
            # And the watch that follows the new LIST sees what changes next.
            await asyncio.to_thread(cp.client.create, f"/api/v1/namespaces/{NS}/configmaps",
                                    config_map("inf-b"))  # fmt: skip
            await asyncio.to_thread(cp.client.delete, f"/api/v1/namespaces/{NS}/configmaps/inf-a")
            await wait_until(lambda: sorted(informer.store) == [(NS, "inf-b")], 30)
            task.cancel()
            return informer

    informer = asyncio.run(work())
    assert informer.lists >= 2, "no second LIST: the 410 was not met"
    assert sorted(name for _, name in informer.store) == ["inf-b"]
    assert ("ADDED", "inf-b") in events and ("DELETED", "inf-a") in events, events


async def wait_until(predicate, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.2)
