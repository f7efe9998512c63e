"""The unit tests' in-memory API (``tests.fakes.kube.FakeKube``) keeps ``KubeApi``'s shape and
the API server's answers the reconcilers depend on."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from sunk.operator.client import ApiError, KubeApi, path_for
from tests.fakes.kube import FakeKube

PROTOCOL_METHODS = [
    name
    for name, member in vars(KubeApi).items()
    if inspect.isfunction(member) and not name.startswith("_")
]


def test_protocol_methods_are_found():
    assert {"get", "list", "create", "apply", "merge_patch", "delete"} <= set(PROTOCOL_METHODS)


@pytest.mark.parametrize("name", PROTOCOL_METHODS)
def test_every_protocol_method_has_the_same_parameters(name):
    want = inspect.signature(getattr(KubeApi, name))
    have = inspect.signature(getattr(FakeKube, name))
    assert list(have.parameters) == list(want.parameters), name
    for param in want.parameters.values():
        assert have.parameters[param.name].default == param.default, (name, param.name)
    assert inspect.iscoroutinefunction(getattr(FakeKube, name))


def pod(name: str, labels: dict[str, str], node: str = "") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "spec": {"nodeName": node} if node else {},
    }


def test_writes_conflicts_and_selectors():
    async def scenario() -> None:
        kube = FakeKube()
        made = await kube.create(pod("a", {"set": "x"}, "n1"))
        await kube.create(pod("b", {"set": "y"}))
        with pytest.raises(ApiError) as exc:
            await kube.create(pod("a", {}))
        assert exc.value.status == 409
        pods = path_for("v1", "pods", "ns")
        assert [p["metadata"]["name"] for p in await kube.list(pods, "set=x")] == ["a"]
        assert [p["metadata"]["name"] for p in await kube.list(pods, "set!=x")] == ["b"]
        assert [p["metadata"]["name"] for p in await kube.list(pods, "!other")] == ["a", "b"]
        assert [p["metadata"]["name"] for p in await kube.list(pods, None, "spec.nodeName=")] == [
            "b"
        ]
        path = path_for("v1", "pods", "ns", "a")
        stale = {"metadata": {"resourceVersion": "0", "labels": {"set": "z"}}}
        with pytest.raises(ApiError) as exc:
            await kube.merge_patch(path, stale)
        assert exc.value.status == 409
        fresh = {"metadata": {"resourceVersion": made["metadata"]["resourceVersion"]}}
        fresh["metadata"]["labels"] = {"set": None, "new": "1"}
        patched = await kube.merge_patch(path, fresh)
        assert patched["metadata"]["labels"] == {"new": "1"}
        assert patched["metadata"]["uid"] == made["metadata"]["uid"]
        applied = await kube.apply(pod("a", {"set": "x"}))
        assert applied["metadata"]["uid"] == made["metadata"]["uid"]
        assert kube.writes == 6  # 2 refused (409) among them: they reached the "server"
        await kube.delete(path)
        assert await kube.request("GET", path, ok_missing=True) is None
        with pytest.raises(NotImplementedError):
            await kube.request("PUT", path, {})

    asyncio.run(scenario())
