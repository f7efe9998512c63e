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


_PART = re.compile(r'\.?([A-Za-z0-9_\-]+)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]')


def undotted(text: str) -> tuple[str | int, ...]:
    """The inverse of `dotted` (for the forms it writes)."""
    out: list[str | int] = []
    pos = 0
    while pos < len(text):
        match = _PART.match(text, pos)
        if match is None:  # not a path `dotted` wrote: keep the rest as one key
            out.append(text[pos:])
            break
        plain, index, quoted = match.groups()
        out.append(plain if plain is not None else int(index) if index is not None else quoted)
        pos = match.end()
    return tuple(out)
