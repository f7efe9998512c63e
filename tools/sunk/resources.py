"""Where the charts, the custom resource schemas and the user cache are (base layer).

The charts and ``schemas/`` come, in this order, from
  1. an environment variable (``$SUNK_CHARTS_DIR``, ``$SUNK_SCHEMAS_DIR``),
  2. the package data of an installed wheel (``sunk/_data/``, copied from the checkout at build
     time by ``setup.py``: git holds one copy),
  3. the checkout this package runs from (an editable install), or ``$SUNK_REPO``.

Nothing here falls back to the current directory: a missing chart is an error that says so.
"""

from __future__ import annotations

import os
from pathlib import Path

from sunk.errors import ToolError

PACKAGE_DATA = Path(__file__).resolve().parent / "_data"


class ResourceError(ToolError):
    """The charts or schemas cannot be found (an environment problem, exit 3)."""


def checkout_root() -> Path | None:
    """The source checkout (``$SUNK_REPO``, else the one holding this file), or None."""
    env = os.environ.get("SUNK_REPO")
    if env:
        return Path(env).resolve()
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").is_file() and (parent / "charts").is_dir():
            return parent
    return None


def _locate(name: str, env: str) -> Path:
    override = os.environ.get(env)
    if override:
        return Path(override).resolve()
    if (PACKAGE_DATA / name).is_dir():
        return PACKAGE_DATA / name
    root = checkout_root()
    if root is not None and (root / name).is_dir():
        return root / name
    raise ResourceError(
        f"{name}/ not found: not in this installation's package data, and no checkout "
        f"(set ${env} to a {name} directory, or reinstall the sunk wheel)"
    )


def charts_dir() -> Path:
    return _locate("charts", "SUNK_CHARTS_DIR")


def chart_dir(name: str) -> Path:
    return charts_dir() / name


def schemas_dir() -> Path:
    """Custom resource schemas in kubeconform's ``{group}/{kind}_{version}.json`` layout."""
    return _locate("schemas", "SUNK_SCHEMAS_DIR")


def cache_dir() -> Path:
    """The per-user cache (``$SUNK_CACHE_DIR``, default ``$XDG_CACHE_HOME/sunk``)."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sunk"
    return Path(os.environ.get("SUNK_CACHE_DIR", default))
