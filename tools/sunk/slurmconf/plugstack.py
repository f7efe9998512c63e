"""plugstack.conf: Pyxis when enabled, plus a drop-in directory for site plugins."""

from __future__ import annotations

from sunk.models.values import Pyxis
from sunk.slurmconf.format import BANNER
from sunk.slurmconf.guard import check_value

PYXIS_SO = "/usr/local/lib/slurm/spank_pyxis.so"


def render_plugstack_conf(pyxis: Pyxis) -> str:
    out = [BANNER.rstrip("\n")]
    if pyxis.enabled:
        # SPANK splits the line on whitespace and knows no quotes: one word per option.
        options = [
            check_value(
                option, "plugstack.conf", f"compute.pyxis.plugstackOptions[{i}]", words=True
            )
            for i, option in enumerate(pyxis.plugstackOptions)
        ]
        out.append(" ".join(["required", PYXIS_SO, *options]))
    else:
        out.append("# no SPANK plugins configured (compute.pyxis.enabled adds Pyxis)")
    return "\n".join(out) + "\n"
