"""sunk.slurmconf.releases: the Slurm series an image tag names, and the skew Slurm allows."""

from __future__ import annotations

import pytest

from sunk.slurmconf.releases import release_of_tag, skew_problem


@pytest.mark.parametrize(
    ("tag", "release"),
    [("0.1.0-slurm24.11", "24.11"), ("slurm-26.05.5", "26.05"), ("8.1.0", None), ("latest", None)],
)
def test_skew_reads_the_release_an_image_tag_names(tag: str, release: str | None):
    assert release_of_tag(tag) == release


def test_skew_allows_three_releases_behind_and_none_ahead():
    assert skew_problem("24.11", "24.11") is None
    assert skew_problem("24.11", "26.05") is None  # 25.05, 25.11, 26.05: three
    assert skew_problem("24.05", "26.05") == "24.05 is 4 releases behind 26.05; Slurm allows 3"
    assert skew_problem("26.05", "24.11") == "26.05 is newer than 24.11"
    assert skew_problem("24.11", "99.99") is None  # a release we do not know: no claim
