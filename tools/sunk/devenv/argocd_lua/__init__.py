"""Build and run ``argocd-lua``: Argo CD's health-script runner on gopher-lua (see main.go)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

from sunk.devenv.paths import cache_dir, tool_path

GOPHER_LUA_MODULE = "github.com/yuin/gopher-lua"
# The version github.com/argoproj/argo-cd/v3 v3.3.9 requires in its go.mod.
GOPHER_LUA_VERSION = "v1.1.1"
BINARY = "argocd-lua"


def source() -> str:
    return resources.files("sunk.devenv.argocd_lua").joinpath("main.go").read_text("utf-8")


def version() -> str:
    """The gopher-lua version plus a digest of main.go: editing the runner rebuilds it."""
    digest = hashlib.sha256(source().encode()).hexdigest()[:12]
    return f"{GOPHER_LUA_VERSION}-{digest}"


def cached_binary() -> Path:
    return cache_dir() / BINARY / version() / BINARY


def gomod() -> str:
    return (
        f"module sunk.local/{BINARY}\n\ngo 1.22\n\nrequire {GOPHER_LUA_MODULE} "
        f"{GOPHER_LUA_VERSION}\n"
    )


def install() -> None:
    """The ``argocd-lua`` toolchain component: go build against the pinned gopher-lua (from the
    Go module proxy, verified by the checksum database), cached, linked into ``.tools/bin``."""
    from sunk.devenv import kube_build
    from sunk.devenv.toolchain import ToolchainError, link_into_bin, log

    target = cached_binary()
    if not target.exists():
        if shutil.which("go") is None:
            raise ToolchainError(f"{BINARY}: the Go toolchain is needed to build it")
        work = cache_dir() / "gobuild" / BINARY / version()
        work.mkdir(parents=True, exist_ok=True)
        (work / "go.mod").write_text(gomod())
        (work / "main.go").write_text(source())
        log(f"{BINARY}: go build against {GOPHER_LUA_MODULE}@{GOPHER_LUA_VERSION}")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{BINARY}.{os.getpid()}.partial")
        kube_build.go(["build", "-trimpath", "-ldflags", "-s -w", "-o", str(tmp), "."], work)
        tmp.replace(target)
    link_into_bin(target, BINARY)


def description() -> str:
    return f"{BINARY}: Argo CD health-script runner on gopher-lua {GOPHER_LUA_VERSION} (go build)"


def run_health(script: str, objects: list[dict[str, Any]], open_libs: bool) -> list[dict]:
    """Each object's ``{"status", "message"}`` (or ``{"error"}``) from the installed runner."""
    binary = tool_path(BINARY)
    if binary is None or binary.resolve() != cached_binary().resolve():
        raise FileNotFoundError(f"{BINARY} {version()} is not installed")
    request = json.dumps({"script": script, "openLibs": open_libs, "objects": objects})
    proc = subprocess.run(
        [str(binary)], input=request, capture_output=True, text=True, check=True, timeout=60
    )
    return json.loads(proc.stdout)
