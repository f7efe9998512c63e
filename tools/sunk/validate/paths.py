"""Key paths: tuples of keys and list indexes, shown as `compute.nodes.gpu.replicas`."""

from __future__ import annotations

import re
from collections.abc import Iterable

_PLAIN = re.compile(r"^[A-Za-z0-9_\-]+$")


def dotted(path: Iterable[str | int]) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]".replace("'", '"')
    return out
