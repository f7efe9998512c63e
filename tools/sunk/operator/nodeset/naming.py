"""Pod names `<prefix>-OOO-OOO` from the last two octets of the Node's InternalIP (SUNK):
10.174.12.2 → `012-002`, which keeps Slurm's hostlist range syntax short."""

from __future__ import annotations


def pod_name(prefix: str, ip: str) -> str:
    octets = ip.split(".")
    if len(octets) != 4 or not all(o.isdigit() and 0 <= int(o) <= 255 for o in octets):
        raise ValueError(f"{ip!r} is not an IPv4 address")
    return f"{prefix}-{int(octets[2]):03d}-{int(octets[3]):03d}"
