"""Slurm hostlist compression: h100-012-001,h100-012-002 → h100-012-[001-002]."""

from __future__ import annotations

import re
from collections import defaultdict

_TAIL = re.compile(r"^(.*?)(\d+)$")


def compress(names: list[str]) -> str:
    """A stable, compact hostlist expression for the given names (unique, sorted)."""
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    plain: list[str] = []
    for name in sorted(set(names)):
        match = _TAIL.match(name)
        if match:
            groups[(match.group(1), len(match.group(2)))].append(int(match.group(2)))
        else:
            plain.append(name)
    parts = list(plain)
    for (prefix, width), numbers in sorted(groups.items()):
        ranges = _ranges(sorted(numbers))
        if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            parts.append(f"{prefix}{ranges[0][0]:0{width}d}")
            continue
        body = ",".join(
            f"{lo:0{width}d}" if lo == hi else f"{lo:0{width}d}-{hi:0{width}d}" for lo, hi in ranges
        )
        parts.append(f"{prefix}[{body}]")
    return ",".join(parts)


def _ranges(numbers: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for number in numbers:
        if out and number == out[-1][1] + 1:
            out[-1] = (out[-1][0], number)
        else:
            out.append((number, number))
    return out
