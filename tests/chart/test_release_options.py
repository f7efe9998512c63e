"""What the renderer writes suits every Slurm release we build: each slurm.conf key, each key
of a partition line and each plugin it names, for every example, is one that each release's
own parser takes (`sunk.slurmconf.release_options`, generated from those parsers and checked
against them by the slurm tier). The same rendered file serves a cluster half-way through its
upgrade, with daemons on both releases."""

from __future__ import annotations

import shlex

import pytest

from sunk.slurmconf import release_options
from tests.chart.conftest import EXAMPLES, operator_view

LINES = ("nodename", "nodeset", "downnodes")  # node lines: their keys are not options
SLURM_IMAGES = ("controller", "accounting", "rest", "login", "compute")


def rendered_options(text: str) -> list[tuple[str, str, str]]:
    """(table, key, value) of every option a rendered slurm.conf sets."""
    found = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        pairs = [token.split("=", 1) for token in shlex.split(line)]
        first = pairs[0][0].lower()
        if first in LINES:
            continue
        table = "partition" if first == "partitionname" else "slurm.conf"
        found += [(table, key, value) for key, value in pairs]
    return found


def _tags(release: str) -> tuple[str, ...]:
    return tuple(f"{part}.image.tag=0.1.0-slurm{release}" for part in SLURM_IMAGES)


@pytest.mark.parametrize("release", sorted(release_options.releases()))
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_rendered_slurm_conf_suits_every_release(objects, example, release):
    """The example with every Slurm image on ``release``: each key and plugin exists there."""
    built = operator_view(objects("slurm", example, sets=_tags(release)), "tenant-slurm")
    options = rendered_options(built.ctx.rendered.files["slurm.conf"])
    assert len(options) > 20, options
    assert not problems(release, options), "\n".join(problems(release, options))


def problems(release: str, options: list[tuple[str, str, str]]) -> list[str]:
    known = release_options.releases()[release]
    found = []
    for table, key, value in options:
        if key.lower() not in known.keys[table]:
            found.append(f"{release}: {table} key {key}")
        for plugin in release_options.plugins_named(key, value):
            if release_options.plugin_file(plugin) not in known.plugins:
                found.append(f"{release}: {key}={value}: no plugin {plugin}")
    return found


def test_mid_upgrade_slurm_conf_suits_both_releases(objects):
    """Controller on 26.05, slurmds still on 24.11 (Slurm's order): the one file both read
    leaves out what either lacks (26.05 as Debian builds it has no mpi/pmix)."""
    sets = (*_tags("26.05")[:-1], "compute.image.tag=0.1.0-slurm24.11")
    built = operator_view(objects("slurm", EXAMPLES[0], sets=sets), "tenant-slurm")
    text = built.ctx.rendered.files["slurm.conf"]
    options = rendered_options(text)
    assert ("slurm.conf", "MpiDefault", "none") in options, text
    for release in ("24.11", "26.05"):
        assert not problems(release, options), problems(release, options)


def test_pmix_is_the_mpi_default_where_every_release_has_it(objects):
    built = operator_view(objects("slurm", EXAMPLES[0], sets=_tags("24.11")), "tenant-slurm")
    assert ("slurm.conf", "MpiDefault", "pmix") in rendered_options(
        built.ctx.rendered.files["slurm.conf"]
    )


def test_release_options_know_both_releases_and_their_differences():
    releases = release_options.releases()
    assert set(releases) >= {"24.11", "26.05"}
    old, new = releases["24.11"], releases["26.05"]
    for known in (old, new):
        assert {"schedulerparameters", "taskplugin", "slurmctldhost"} <= set(
            known.keys["slurm.conf"]
        )
        assert {"maxtime", "defmempercpu", "oversubscribe"} <= set(known.keys["partition"])
        assert "task_cgroup" in known.plugins
        # removed options the parser still reads, then refuses
        assert "accountingstorageloc" not in known.keys["slurm.conf"]
        assert "sallocdefaultcommand" not in known.keys["slurm.conf"]
    # namespace/linux arrived after 24.11; Debian builds 26.05 without PMIx
    assert "namespace_linux" in new.plugins and "namespace_linux" not in old.plugins
    assert "namespacetype" in new.keys["slurm.conf"]
    assert "namespacetype" not in old.keys["slurm.conf"]
    assert "mpi_pmix" in old.plugins and "mpi_pmix" not in new.plugins
