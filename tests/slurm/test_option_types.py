"""`sunkctl validate`'s value types (``sunk.slurmconf.option_types``, rule SUNK042) against
Slurm 24.11's own parser. Every Slurm command reads slurm.conf before it does anything, and
stops with ``error:``/``fatal:`` on a value it cannot parse, so ``scontrol show hostnames``
with ``SLURM_CONF`` pointing at a file is the parser slurmctld uses, run offline.

Each example value of each typed key is written into a small slurm.conf as the renderer
writes it (``sunk.slurmconf.format.pair``: quoted when it holds a space); the test expects
Slurm to take every value our checker takes and to complain about every value it refuses."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from sunk.slurmconf import option_types
from sunk.slurmconf.format import pair

BASE = (
    "ClusterName=t\nSlurmctldHost=h\n{conf}\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1 {part}\n"
)
# every config at once, in a mount namespace where the root's /tmp is the configs' directory
PARSE_ALL = """
mount --bind "$1" "$2/tmp" || exit 1
for f in "$1"/*.conf; do
  n=$(basename "$f")
  chroot "$2" env SLURM_CONF="/tmp/$n" scontrol show hostnames n1 > "$1/$n.out" 2>&1 || :
done
"""


def _slurm_parses(root: Path, confs: list[str]) -> list[str]:
    """What Slurm's parser printed for each config (``n1`` alone: it took the file)."""
    with tempfile.TemporaryDirectory() as tmp:
        for i, text in enumerate(confs):
            Path(tmp, f"{i:04d}.conf").write_text(text)
        subprocess.run(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", PARSE_ALL, "sh", tmp,
             str(root)],
            check=True, timeout=600, capture_output=True,
        )  # fmt: skip
        return [Path(tmp, f"{i:04d}.conf.out").read_text() for i in range(len(confs))]


def _cases() -> list[tuple[str, str, str, bool]]:
    """(table, key, value, our checker takes it) for every example of every typed key."""
    cases = []
    for table_name, table in (("slurm.conf", option_types.SLURM_CONF),
                              ("partition", option_types.PARTITION)):  # fmt: skip
        for key, option in sorted(table.items()):
            for value in option.good + option.bad:
                taken = option_types.value_problem(table, key, value) is None
                cases.append((table_name, key, value, taken))
    return cases


def test_slurm_option_types_agree_with_slurms_own_parser(slurm_rootfs_path: Path):
    cases = _cases()
    confs = [BASE.format(conf="", part="")]  # the base config alone: Slurm takes it
    for table, key, value, _ in cases:
        line = pair(key, value, "slurm.conf", key)
        confs.append(BASE.format(conf=line if table == "slurm.conf" else "",
                                 part=line if table == "partition" else ""))  # fmt: skip
    outputs = _slurm_parses(slurm_rootfs_path, confs)
    assert outputs[0] == "n1\n", outputs[0]
    disagreements = []
    for (table, key, value, taken), out in zip(cases, outputs[1:], strict=True):
        slurm_took = out == "n1\n"
        if slurm_took != taken or (not slurm_took and "error" not in out):
            verdict = "takes" if taken else "refuses"
            disagreements.append(f"{table} {key}={value!r}: we {verdict} it, Slurm said {out!r}")
    assert not disagreements, "\n".join(disagreements)
    # the examples cover both sides of every type
    assert sum(1 for *_, taken in cases if not taken) > 100, len(cases)
