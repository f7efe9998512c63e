"""Where the project's tools live.

Binaries are built or downloaded once into a per-user cache keyed by tool and version
(``$SUNK_CACHE_DIR``, default ``~/.cache/sunk``) and linked into the repository's git-ignored
``.tools/bin``.  A fresh clone on the same machine therefore reuses them; a fresh machine
rebuilds them.
"""

from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The checkout this package is installed from (editable install), or ``$SUNK_REPO``."""
    env = os.environ.get("SUNK_REPO")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").is_file() and (parent / "charts").is_dir():
            return parent
    return Path.cwd()


def tools_dir() -> Path:
    return Path(os.environ.get("SUNK_TOOLS_DIR", repo_root() / ".tools"))


def bin_dir() -> Path:
    return tools_dir() / "bin"


def cache_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sunk"
    return Path(os.environ.get("SUNK_CACHE_DIR", default))


def tool_path(name: str) -> Path | None:
    """The project's pinned binary ``name`` if installed, else None."""
    candidate = bin_dir() / name
    return candidate if candidate.exists() and os.access(candidate, os.X_OK) else None
