"""The Slurmrestd client over a unix socket (``unix:/path``), as slurmrestd listens in the
``slurm`` tier and the Syncer benchmark: same paths, same JWT headers as over HTTP; and
slurmrestd 24.11's error bodies (recorded from the real daemon) read as what they mean."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from aiohttp import web

from sunk.syncer.restd import API, SlurmApiError, Slurmrestd

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
