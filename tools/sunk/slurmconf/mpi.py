"""mpi.conf: the PMIx plugin's settings (`MpiDefault=pmix` in slurm.conf), overridable key by
key through `slurmConfig.mpiConfig`. Configless slurmds fetch it from slurmctld."""

from __future__ import annotations

from sunk.slurmconf.format import BANNER, key_lines
from sunk.slurmconf.guard import find_key

FILE = "mpi.conf"
# PMIx's client directories (one per step) under a directory the container plugin binds into
# every container at the same path, so ranks in containers reach the PMIx server; the slurmd
# entrypoint creates it.
PMIX_CLI_TMPDIR = "/var/spool/slurmd/pmix"
DEFAULTS: dict[str, object] = {
    "PMIxCliTmpDirBase": PMIX_CLI_TMPDIR,
    "PMIxDirectConn": "true",
}


def render_mpi_conf(user: dict[str, object]) -> str:
    settings = dict(DEFAULTS)
    for key, value in user.items():
        settings[find_key(settings, key) or key] = value  # Slurm reads keys in any case
    return BANNER + "\n".join(key_lines(settings, FILE, "slurmConfig.mpiConfig")) + "\n"
