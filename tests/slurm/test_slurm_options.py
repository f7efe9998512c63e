"""`sunk/slurmconf/slurm_options.json` (what `sunkctl validate` knows of each release's
slurm.conf keys, partition keys and plugins) is exactly what each release's own parser takes:
regenerated from the debootstrapped 24.11 and 26.05 roots, it must equal the committed file
(`python -m sunk.devenv.slurm_options` rewrites it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sunk.devenv import slurm_options, slurm_rootfs
from sunk.slurmconf import release_options


def test_slurm_options_file_is_what_each_release_parser_takes(slurm_rootfs_path: Path):
    for release in slurm_rootfs.RELEASES.values():
        if slurm_rootfs.installed(release.suite) is None:
            pytest.skip(f"the Slurm {release.series} root is not built: run `make setup` as root")
    generated = slurm_options.render(slurm_options.generate())
    committed = release_options.DATA.read_text()
    assert generated == committed, (
        "slurm_options.json differs from the releases' parsers; regenerate it with "
        "`python -m sunk.devenv.slurm_options`"
    )


def test_slurm_options_probe_sees_a_key_the_release_lacks(slurm_rootfs_path: Path):
    """The probe itself: on 24.11, a 26.05 key is reported unknown and a 24.11 key is not."""
    table = slurm_options.read_release(slurm_rootfs_path)
    known = {key.lower() for key in table["slurm.conf"]}
    assert "schedulerparameters" in known
    assert "namespacetype" not in known
    assert slurm_options.SENTINEL.lower() not in known
