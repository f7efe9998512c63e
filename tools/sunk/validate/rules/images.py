"""Image rules: every image of either chart pinned to a tag or digest."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

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
