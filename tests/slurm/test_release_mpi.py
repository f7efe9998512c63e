"""The MPI default on Slurm 26.05 as Debian builds it (forky, no PMIx): the renderer leaves
`MpiDefault=pmix` out when the image tags name 26.05, and a plain `srun` runs there; with
`pmix` (our 24.11 default) the same `srun` fails, which is why (README: Slurm upgrades)."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import pytest
import yaml
from tests.slurm.test_rendered import DATA, inputs_for

from sunk.devenv import slurm_rootfs
from sunk.devenv.slurm_runtime import SlurmRuntime
from sunk.slurmconf import render_all

NEXT = slurm_rootfs.RELEASES[slurm_rootfs.NEXT_SERIES]
NODE = "cpu-000-001"


def test_release_options_pmix_default_left_out_on_26_05(tmp_path: Path, helm):
    found = slurm_rootfs.installed(NEXT.suite)
    if found is None:
        pytest.skip(f"the Slurm {NEXT.series} root is not built: run `make setup` as root")
    values = yaml.safe_load((DATA / "values-two-groups.yaml").read_text())
    values["slurmConfig"].pop("MpiDefault")  # the renderer's default, as users get it
    values["accounting"] = {"enabled": False}
    tag = f"0.1.0-slurm{NEXT.series}"
    for part in ("controller", "login", "rest", "compute"):
        values.setdefault(part, {})["image"] = {"tag": tag}
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    rt = SlurmRuntime(found.root, subnet="10.86.0.0/24")
    try:
        rendered = render_all(inputs_for(path, rt))
        conf = rendered.files["slurm.conf"]
        assert re.search(r"^MpiDefault=none$", conf, re.M), conf
        rt.start(rendered.files, munge_key=secrets.token_bytes(128))
        rt.add_node(NODE, rendered.registrations["cpu"])
        rt.wait_nodes_idle((NODE,), timeout=180)
        plain = rt.run("srun", "-p", "cpu", "-N1", "hostname", timeout=120)
        assert plain.returncode == 0 and NODE in plain.stdout, (plain.stdout, plain.stderr)
        pmix = rt.run("srun", "-p", "cpu", "-N1", "--mpi=pmix", "hostname", timeout=120)
        assert pmix.returncode != 0, pmix.stdout
        assert "mpi/pmix" in pmix.stderr, pmix.stderr
    finally:
        rt.close()
