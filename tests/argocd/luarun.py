"""Run the shipped health checks under gopher-lua, the way Argo CD runs them (the
``argocd-lua`` toolchain component; see ``sunk/devenv/argocd_lua/main.go``)."""

from __future__ import annotations

import functools
import shutil
from typing import Any

import pytest

from sunk.argocd import healthchecks
from sunk.devenv import argocd_lua
from sunk.devenv.toolchain import ToolchainError, install

CHECKS = {check.key: check for check in healthchecks.HEALTH_CHECKS}
INSTALL = "python -m sunk.devenv.toolchain install argocd-lua"


@functools.cache
def _ready() -> str:
    """'' when the runner is installed (building it if Go is here), else why not."""
    if argocd_lua.cached_binary().exists():
        install(["argocd-lua"])  # only links it
        return ""
    if shutil.which("go") is None:
        return f"argocd-lua not built and no Go toolchain: run `{INSTALL}`"
    try:
        install(["argocd-lua"])
    except ToolchainError as exc:
        return f"argocd-lua could not be built ({exc}); run `{INSTALL}`"
    return ""


def run_many(key: str, objects: list[dict[str, Any]], open_libs: bool | None = None) -> list:
    reason = _ready()
    if reason:
        pytest.skip(reason)
    check = CHECKS[key]
    libs = check.needs_open_libs if open_libs is None else open_libs
    return argocd_lua.run_health(check.script, objects, libs)


def run_check(key: str, obj: dict[str, Any], open_libs: bool | None = None) -> dict[str, Any]:
    """Argo CD's verdict ``{"status", "message"}``; a Lua error fails the test."""
    (result,) = run_many(key, [obj], open_libs)
    assert "error" not in result, result["error"]
    return {"status": result["status"], "message": result["message"]}
