"""cgroup.conf: cgroup v2 inside pods, overridable key by key."""

from __future__ import annotations

from sunk.slurmconf.format import BANNER, key_lines

DEFAULTS: dict[str, object] = {
    "CgroupPlugin": "autodetect",
    "IgnoreSystemd": "yes",
    "ConstrainCores": "yes",
    "ConstrainRAMSpace": "yes",
    "ConstrainDevices": "yes",
}


def render_cgroup_conf(user: dict[str, object]) -> str:
    return BANNER + "\n".join(key_lines({**DEFAULTS, **user})) + "\n"
