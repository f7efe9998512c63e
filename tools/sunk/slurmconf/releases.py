"""Slurm's major releases and the version skew it allows between its daemons.

Slurm upgrades in one order: slurmdbd, slurmctld, then slurmrestd, the commands (login) and
the slurmds. A daemon may be older than the one it talks to by at most three major releases
(since 24.11; two before), never newer: slurmdbd >= slurmctld >= every slurmd, client and
slurmrestd. Our image tags name their Slurm series (``0.1.0-slurm24.11``), so a release can be
read from them.
"""

from __future__ import annotations

import re

# Major releases in order: a 9-month cycle until 24.05, a 6-month one since (May, November).
MAJOR_RELEASES = (
    "20.02", "20.11", "21.08", "22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11",
    "26.05", "26.11", "27.05", "27.11", "28.05", "28.11",
)  # fmt: skip
WINDOW = 3  # how many releases back a newer daemon still accepts (Slurm >= 24.11)
_TAG = re.compile(r"slurm-?(\d{2}\.\d{2})(?!\d)")


def release_of_tag(tag: str) -> str | None:
    """The Slurm series an image tag names (``0.1.0-slurm24.11`` → ``24.11``), or None."""
    match = _TAG.search(tag)
    return match.group(1) if match else None


def release_of_image(image: object) -> str | None:
    """The Slurm series of an image reference's tag (``repo:0.1.0-slurm24.11``,
    ``repo:tag@sha256:…``), or None (no tag, or a tag naming no series)."""
    if not isinstance(image, str):
        return None
    name = image.split("@", 1)[0].rsplit("/", 1)[-1]
    return release_of_tag(name.split(":", 1)[1]) if ":" in name else None


def newer(release: str, than: str) -> bool:
    """``release`` comes after ``than`` (both known major releases)."""
    if release not in MAJOR_RELEASES or than not in MAJOR_RELEASES:
        return False
    return MAJOR_RELEASES.index(release) > MAJOR_RELEASES.index(than)


def skew_problem(older: str, newer: str) -> str | None:
    """Why a daemon on ``older`` cannot talk to one on ``newer`` that Slurm's order puts
    above it (slurmdbd above slurmctld, slurmctld above the rest), or None."""
    if older not in MAJOR_RELEASES or newer not in MAJOR_RELEASES:
        return None  # a release we do not know: no claim either way
    gap = MAJOR_RELEASES.index(newer) - MAJOR_RELEASES.index(older)
    if gap < 0:
        return f"{older} is newer than {newer}"
    if gap > WINDOW:
        return f"{older} is {gap} releases behind {newer}; Slurm allows {WINDOW}"
    return None
