"""Where the project's tools live.

Binaries are built or downloaded once into a per-user cache keyed by tool and version
(``$SUNK_CACHE_DIR``, default ``~/.cache/sunk``) and linked into the repository's git-ignored
``.tools/bin``.  A fresh clone on the same machine therefore reuses them; a fresh machine
rebuilds them.
"""

from __future__ import annotations

import os
from pathlib import Path

from sunk.resources import cache_dir, checkout_root

__all__ = ["bin_dir", "cache_dir", "repo_root", "tool_path", "tools_dir"]


def repo_root() -> Path:
    """The checkout this package is installed from (editable install), or ``$SUNK_REPO``."""
    return checkout_root() or Path.cwd()


def tools_dir() -> Path:
    return Path(os.environ.get("SUNK_TOOLS_DIR", repo_root() / ".tools"))


def bin_dir() -> Path:
    return tools_dir() / "bin"


def tool_path(name: str) -> Path | None:
    """The project's pinned binary ``name`` if installed, else None."""
    candidate = bin_dir() / name
    return candidate if candidate.exists() and os.access(candidate, os.X_OK) else None
