"""cgroup.conf: cgroup v2 inside pods, overridable key by key."""

from __future__ import annotations

from sunk.slurmconf.format import BANNER, key_lines
from sunk.slurmconf.guard import find_key

DEFAULTS: dict[str, object] = {
    "CgroupPlugin": "autodetect",
    "IgnoreSystemd": "yes",
    "ConstrainCores": "yes",
    "ConstrainRAMSpace": "yes",
    "ConstrainDevices": "yes",
}


def render_cgroup_conf(user: dict[str, object]) -> str:
    settings = dict(DEFAULTS)
    for key, value in user.items():
        settings[find_key(settings, key) or key] = value  # Slurm reads keys in any case
    return BANNER + "\n".join(key_lines(settings, "cgroup.conf", "slurmConfig.cgroupConfig")) + "\n"
