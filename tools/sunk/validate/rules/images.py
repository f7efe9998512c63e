"""Image rules: every image of either chart pinned to a tag or digest, and the Slurm releases
the slurm chart's images name in the order Slurm allows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sunk.slurmconf.releases import release_of_tag, skew_problem
from sunk.validate.rules.context import NODES, RuleContext, get
from sunk.validate.rules.registry import Hit, rule


def _images(ctx: RuleContext) -> Iterator[tuple[tuple[Any, ...], Any]]:
    v = ctx.values
    if ctx.chart == "sunk":
        yield ("operator", "image"), get(v, "operator", "image")
        if get(v, "nvidia-device-plugin", "enabled") is True:
            yield ("nvidia-device-plugin", "image"), get(v, "nvidia-device-plugin", "image")
        return
    for part in ("controller", "accounting", "rest", "login"):
        yield (part, "image"), get(v, part, "image")
    if get(v, "accounting", "database", "type") == "mariadb":
        path = ("accounting", "database", "mariadb", "image")
        yield path, get(v, *path)
    yield ("compute", "image"), get(v, "compute", "image")
    for name, group in ctx.groups.items():
        if "image" in group:
            yield (*NODES, name, "image"), group.get("image")


@rule(
    "SUNK016",
    "image-not-pinned",
    "warning",
    "An image without a tag or digest, or tagged `latest`.",
    "pin a version tag (or a digest) so every node runs the same image",
    charts=("slurm", "sunk"),
)
def image_pinned(ctx: RuleContext) -> Iterator[Hit]:
    """An image with neither a tag nor a digest, or tagged `latest`, can be a different build on
    each Node that pulls it, so slurmd, slurmctld and the clients can drift apart between
    restarts. The rule reads these images: in the slurm chart the controller, accounting,
    rest, login and compute images, the mariadb image when the database is mariadb, and each
    group's own image; in the sunk chart the operator's image and the device plugin's when it
    is enabled. A digest pins an image whatever its tag.

    Fails:
        login:
          image: {repository: opensunk/login, tag: latest}

    Passes:
        login:
          image: {repository: opensunk/login, tag: 0.1.0-slurm24.11}
    """
    for path, image in _images(ctx):
        if not isinstance(image, dict) or not image.get("repository"):
            continue
        tag, digest = image.get("tag"), image.get("digest")
        if digest:
            continue
        if not tag:
            yield Hit(path, f"image {image['repository']} has no tag")
        elif str(tag) == "latest":
            yield Hit((*path, "tag"), f"image {image['repository']} uses the `latest` tag")


# which daemon each slurm chart image runs, for the skew rule
_DAEMONS = {"controller": "slurmctld", "accounting": "slurmdbd", "rest": "slurmrestd",
            "login": "the login Pods' commands", "compute": "slurmd"}  # fmt: skip


def _release(image: Any) -> str | None:
    tag = image.get("tag") if isinstance(image, dict) else None
    return release_of_tag(tag) if isinstance(tag, str) else None


def slurm_releases(ctx: RuleContext) -> list[str]:
    """The Slurm series the slurm chart's Slurm images name, in values order (every daemon and
    command among them parses slurm.conf); [] when no tag names one."""
    if ctx.chart == "sunk":
        return []
    found: list[str] = []
    for path, image in _images(ctx):
        if "mariadb" in path or (path[0] == "accounting" and not _accounting_on(ctx)):
            continue
        release = _release(image)
        if release and release not in found:
            found.append(release)
    return found


def _accounting_on(ctx: RuleContext) -> bool:
    return get(ctx.values, "accounting", "enabled") is not False


@rule(
    "SUNK043",
    "slurm-version-skew",
    "error",
    "Images whose Slurm releases break Slurm's upgrade order: slurmdbd older than slurmctld, "
    "or a slurmd, slurmrestd or login image newer than slurmctld or more than three releases "
    "behind it.",
    "upgrade in Slurm's order: accounting first, then the controller, then rest, login and compute",
)
def slurm_version_skew(ctx: RuleContext) -> Iterator[Hit]:
    """Slurm upgrades in one order: slurmdbd, then slurmctld, then slurmrestd, the commands
    and the slurmds, each at most three major releases behind the daemon it talks to and never
    ahead of it. A slurmd newer than slurmctld cannot even fetch its configuration (slurmctld
    logs "Incompatible versions of client and server code"; the slurm tier shows it). The
    rule reads the Slurm series our image tags name (`0.1.0-slurm24.11`) of the controller,
    accounting, rest, login and compute images and each group's own; a tag that names no
    series is not checked.

    Fails:
        controller:
          image: {repository: opensunk/controller, tag: 0.1.0-slurm24.11}
        compute:
          image: {repository: opensunk/slurmd, tag: 0.2.0-slurm26.05}
        slurmConfig: {MpiDefault: pmi2}

    Passes:
        accounting:
          image: {repository: opensunk/controller, tag: 0.2.0-slurm26.05}
        controller:
          image: {repository: opensunk/controller, tag: 0.2.0-slurm26.05}
        compute:
          image: {repository: opensunk/slurmd, tag: 0.1.0-slurm24.11}
        slurmConfig: {MpiDefault: pmi2}
    """
    if ctx.chart == "sunk":
        return
    v = ctx.values
    ctld = _release(get(v, "controller", "image"))
    if ctld is None:
        return
    dbd = _release(get(v, "accounting", "image"))
    if dbd is not None and _accounting_on(ctx):
        problem = skew_problem(ctld, dbd)
        if problem:
            message = f"slurmctld {ctld} with slurmdbd {dbd}: {problem}; slurmdbd goes first"
            yield Hit(("accounting", "image", "tag"), message)
    below = [(part, (part, "image")) for part in ("rest", "login", "compute")]
    below += [
        ("compute", (*NODES, name, "image")) for name, g in ctx.groups.items() if "image" in g
    ]
    for part, path in below:
        release = _release(get(v, *path))
        problem = skew_problem(release, ctld) if release else None
        if problem:
            message = f"{_DAEMONS[part]} {release} with slurmctld {ctld}: {problem}"
            yield Hit((*path, "tag"), message)
