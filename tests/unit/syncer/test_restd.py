"""The Slurmrestd client over a unix socket (``unix:/path``), as slurmrestd listens in the
``slurm`` tier and the Syncer benchmark: same paths, same JWT headers as over HTTP;
slurmrestd 24.11's error bodies (recorded from the real daemon) read as what they mean; and
the data_parser version chosen from slurmrestd's OpenAPI listing, asked again when an
upgraded slurmrestd no longer serves it (its 404 text recorded from 26.05)."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from sunk.syncer.restd import (
    OPENAPI,
    VERSIONS,
    SlurmApiError,
    Slurmrestd,
    newest_known,
    served_versions,
)

API = "/slurm/v0.0.42"  # what the fake serves below: 24.11's newest
# slurmrestd's answer (text, not JSON) for a path no data parser of this release serves.
NOT_SERVED = (
    "Unable to find requested URL endpoint. Please query the '/openapi/v3' endpoint or visit "
    "'https://slurm.schedmd.com/rest_api.html' for the OpenAPI specification which includes a "
    "list of all possible slurmrestd endpoints."
)
# ... and the bytes slurmrestd 26.05 writes for it, recorded: the response twice.
NOT_SERVED_RAW = (
    b"HTTP/1.1 404 NOT FOUND\r\nConnection: Close\r\nContent-Length: 219\r\n"
    b"Content-Type: text/plain\r\n\r\n" + NOT_SERVED.encode()
) * 2


def listing(*versions: str) -> dict[str, object]:
    """An OpenAPI document as slurmrestd serves it, reduced to its paths."""
    paths = {f"/slurm/{v}/{p}": {} for v in versions for p in ("ping", "nodes", "node/{node_name}")}
    return {"openapi": "3.0.2", "paths": {**paths, "/slurmdb/v0.0.42/jobs": {}}}


# What slurmrestd 24.11 answers for a node slurmctld does not have.
UNKNOWN_GET = {
    "description": "Failure to query node nope",
    "error_number": 0,
    "error": "No error",
    "source": "_dump_nodes",
}
UNKNOWN_UPDATE = {
    "description": "Failure to update node nope",
    "error_number": 2018,
    "error": "Invalid node name specified",
    "source": "op_handler_node",
}


async def _serve_unix(app: web.Application, sock: Path) -> web.AppRunner:
    runner = web.AppRunner(app)
    await runner.setup()
    await web.UnixSite(runner, str(sock)).start()
    return runner


def test_unix_socket_url_reaches_the_socket():
    seen: list[tuple[str, str, str | None, object]] = []

    async def answer(request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else None
        seen.append((request.method, request.path, request.headers.get("X-SLURM-USER-NAME"), body))
        if request.path.endswith("/nodes"):
            return web.json_response({"nodes": [{"name": "n-0", "state": ["IDLE"]}]})
        if request.match_info["name"] == "nope":
            error = UNKNOWN_GET if request.method == "GET" else UNKNOWN_UPDATE
            return web.json_response(
                {"errors": [error]}, status=200 if error is UNKNOWN_GET else 500
            )
        return web.json_response({"nodes": [{"name": "n-0", "state": ["IDLE", "DRAIN"]}]})

    async def run() -> dict[str, object]:
        app = web.Application()
        app.router.add_get(OPENAPI, FakeRestd("v0.0.40", "v0.0.42").answer)
        app.router.add_get(API + "/nodes", answer)
        app.router.add_route("*", API + "/node/{name}", answer)
        with tempfile.TemporaryDirectory() as tmp:
            sock = Path(tmp) / "restd.sock"
            runner = await _serve_unix(app, sock)
            restd = Slurmrestd(f"unix:{sock}", b"k" * 32)
            out: dict[str, object] = {}
            try:
                out["nodes"] = await restd.nodes()
                out["node"] = await restd.node("n-0")
                await restd.drain("n-0", "k8s: Pod n-0 not ready")
                for call in (restd.node("nope"), restd.delete_node("nope")):
                    with pytest.raises(SlurmApiError) as caught:
                        await call
                    out.setdefault("errors", []).append(caught.value)
                return out
            finally:
                await restd.close()
                await runner.cleanup()

    out = asyncio.run(run())
    assert out["nodes"] == [{"name": "n-0", "state": ["IDLE"]}]
    assert out["node"] == {"name": "n-0", "state": ["IDLE", "DRAIN"]}
    drain = {"state": ["DRAIN"], "reason": "k8s: Pod n-0 not ready"}
    assert seen == [
        ("GET", f"{API}/nodes", "slurm", None),
        ("GET", f"{API}/node/n-0", "slurm", None),
        ("POST", f"{API}/node/n-0", "slurm", drain),
        ("GET", f"{API}/node/nope", "slurm", None),
        ("DELETE", f"{API}/node/nope", "slurm", None),
    ]
    query, delete = out["errors"]
    assert str(query) == "GET /node/nope: HTTP 200: Failure to query node nope"
    assert str(delete) == (
        "DELETE /node/nope: HTTP 500: Failure to update node nope (Invalid node name specified)"
    )
    # Deleting a node record that is already gone is fine (Syncer.forget relies on this).
    assert Slurmrestd.missing(delete)


def test_served_versions_and_the_newest_we_speak():
    doc = listing("v0.0.40", "v0.0.41", "v0.0.42")
    assert served_versions(doc) == ["v0.0.40", "v0.0.41", "v0.0.42"]  # not slurmdb's
    assert newest_known(served_versions(doc)) == "v0.0.42"
    assert newest_known(["v0.0.42", "v0.0.45", "v0.0.46"]) == "v0.0.45"
    assert newest_known(["v0.0.39", "v0.0.40"]) is None
    assert served_versions({"paths": {"/openapi/v3": {}}}) == []
    assert served_versions(listing("v0.0.9", "v0.0.10")) == ["v0.0.9", "v0.0.10"]  # numeric


class FakeRestd:
    """Serves ``versions`` (mutable: an upgrade swaps them), recording each request."""

    def __init__(self, *versions: str) -> None:
        self.versions = list(versions)
        self.seen: list[str] = []

    async def answer(self, request: web.Request) -> web.Response:
        self.seen.append(f"{request.method} {request.path}")
        if request.path == OPENAPI:
            return web.json_response(listing(*self.versions))
        version, what = request.match_info["version"], request.match_info["what"]
        if version not in self.versions:
            return web.Response(status=404, text=NOT_SERVED)
        if what == "job/999":  # a data parser's own 404: JSON, not a missing version
            error = {"description": "Unable to query JobId=999", "error_number": 2017,
                     "error": "Invalid job id specified", "source": "_handle_job_get"}  # fmt: skip
            return web.json_response({"errors": [error]}, status=404)
        return web.json_response({"nodes": [{"name": "n-0", "state": ["IDLE"]}], "jobs": []})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get(OPENAPI, self.answer)
        app.router.add_route("*", "/slurm/{version}/{what:.*}", self.answer)
        return app


def _with_client(fake: FakeRestd, body, **options):
    async def run():
        async with TestServer(fake.app()) as server:
            restd = Slurmrestd(str(server.make_url("")), b"k" * 32, **options)
            try:
                return await body(restd)
            finally:
                await restd.close()

    return asyncio.run(run())


def test_negotiates_the_newest_served_version_once_for_concurrent_calls():
    fake = FakeRestd("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")

    async def body(restd: Slurmrestd):
        await asyncio.gather(restd.nodes(), restd.nodes(), restd.node("n-0"))
        return restd.version

    assert _with_client(fake, body) == "v0.0.45"
    assert fake.seen[0] == f"GET {OPENAPI}" and fake.seen.count(f"GET {OPENAPI}") == 1
    assert sorted(fake.seen[1:]) == [
        "GET /slurm/v0.0.45/node/n-0", "GET /slurm/v0.0.45/nodes", "GET /slurm/v0.0.45/nodes",
    ]  # fmt: skip


def test_an_upgraded_slurmrestd_is_asked_again_and_the_call_retried_slurm_upgrade():
    fake = FakeRestd("v0.0.40", "v0.0.41", "v0.0.42")

    async def body(restd: Slurmrestd):
        await restd.nodes()
        before = restd.version
        fake.versions = ["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"]  # 26.05 replaced 24.11
        restd.version = "v0.0.41"  # as if chosen from a 24.11 that served nothing newer
        nodes = await restd.nodes()
        return before, restd.version, nodes

    before, after, nodes = _with_client(fake, body)
    assert (before, after) == ("v0.0.42", "v0.0.45")
    assert nodes == [{"name": "n-0", "state": ["IDLE"]}]
    assert fake.seen[-3:] == [
        "GET /slurm/v0.0.41/nodes", f"GET {OPENAPI}", "GET /slurm/v0.0.45/nodes",
    ]  # fmt: skip


def test_a_data_parsers_own_404_is_an_answer_not_a_missing_version():
    fake = FakeRestd("v0.0.42")
    assert _with_client(fake, lambda restd: restd.job(999)) is None  # Invalid job id: gone
    assert fake.seen == [f"GET {OPENAPI}", "GET /slurm/v0.0.42/job/999"]


def test_a_slurmrestd_serving_no_version_we_speak_is_a_clear_error():
    fake = FakeRestd("v0.0.38", "v0.0.39")

    async def body(restd: Slurmrestd):
        with pytest.raises(SlurmApiError) as caught:
            await restd.nodes()
        return str(caught.value)

    message = _with_client(fake, body)
    assert message.startswith("slurmrestd at http://") and message.endswith(
        f"serves data_parser v0.0.38, v0.0.39; we speak {', '.join(VERSIONS)}"
    ), message


def test_a_fixed_version_is_not_negotiated():
    fake = FakeRestd("v0.0.41", "v0.0.42")
    _with_client(fake, lambda restd: restd.nodes(), version="v0.0.41")
    assert fake.seen == ["GET /slurm/v0.0.41/nodes"]
    with pytest.raises(ValueError, match=r"data_parser v0\.0\.40: we speak v0\.0\.41, "):
        Slurmrestd("http://x", b"k", version="v0.0.40")


def test_slurmrestd_26_05s_doubled_404_reads_as_not_served_slurm_upgrade():
    """A raw server answers v0.0.41 with the recorded bytes, then the listing and v0.0.45."""
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        line = request.split(b"\r\n", 1)[0]
        seen.append(line)
        if b"/v0.0.41/" in line:
            writer.write(NOT_SERVED_RAW)
        else:
            body = (
                json.dumps(listing("v0.0.42", "v0.0.45"))
                if OPENAPI.encode() in line
                else json.dumps({"nodes": [{"name": "n-0", "state": ["IDLE"]}]})
            ).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
        await writer.drain()
        writer.close()

    async def run() -> tuple[list[dict[str, object]], str | None]:
        with tempfile.TemporaryDirectory() as tmp:
            sock = Path(tmp) / "restd.sock"
            server = await asyncio.start_unix_server(handle, str(sock))
            restd = Slurmrestd(f"unix:{sock}", b"k" * 32)
            restd.version = "v0.0.41"
            try:
                return await restd.nodes(), restd.version
            finally:
                await restd.close()
                server.close()

    nodes, version = asyncio.run(run())
    assert nodes == [{"name": "n-0", "state": ["IDLE"]}] and version == "v0.0.45"
    assert seen == [
        b"GET /slurm/v0.0.41/nodes HTTP/1.1",
        f"GET {OPENAPI} HTTP/1.1".encode(),
        b"GET /slurm/v0.0.45/nodes HTTP/1.1",
    ]
