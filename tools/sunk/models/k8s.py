"""Kubernetes shapes used inside our values and specs.

Only the shapes our rules reason about are modelled strictly (images, resources,
tolerations); affinity, env, volumes and security contexts are raw fragments passed through.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from sunk.models.base import Quantity, Strict, open_object


class Image(Strict):
    repository: str = Field(description="Image repository (registry/name).", min_length=1)
    tag: str | None = Field(
        default=None, description="Image tag; pin a version (`latest` is flagged by validate)."
    )
    digest: str | None = Field(
        default=None,
        description="Image digest (`sha256:…`); wins over the tag when set.",
        pattern=r"^sha256:[a-f0-9]{64}$",
    )
    pullPolicy: Literal["Always", "IfNotPresent", "Never"] | None = Field(
        default=None, description="Image pull policy; the Kubernetes default when unset."
    )


def image_ref(image: Image, registry: str | None) -> str:
    """The reference a Pod pulls: `global.imageRegistry` prefixed, the digest over the tag."""
    repo = f"{registry.rstrip('/')}/{image.repository}" if registry else image.repository
    if image.digest:
        return f"{repo}@{image.digest}"
    return f"{repo}:{image.tag}" if image.tag else repo


class Resources(Strict):
    requests: dict[str, Quantity] | None = Field(
        default=None, description="Resource requests, e.g. `{cpu: 4, memory: 16Gi}`."
    )
    limits: dict[str, Quantity] | None = Field(
        default=None, description="Resource limits, e.g. `{memory: 16Gi, nvidia.com/gpu: 8}`."
    )


class Toleration(Strict):
    key: str | None = Field(default=None, description="Taint key the toleration applies to.")
    operator: Literal["Exists", "Equal"] | None = Field(
        default=None, description="`Exists` or `Equal` (default)."
    )
    value: str | None = Field(default=None, description="Taint value for `Equal`.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""] | None = Field(
        default=None, description="Taint effect; empty matches all effects."
    )
    tolerationSeconds: int | None = Field(
        default=None, description="How long a NoExecute taint is tolerated."
    )


class PersistentStorage(Strict):
    storageClassName: str | None = Field(
        default=None, description="StorageClass of the volume; the cluster default when unset."
    )
    size: Quantity = Field(default="8Gi", description="Requested capacity.")


def raw(description: str, default_factory: Any = None) -> Any:
    """A raw Kubernetes fragment field (defaults to unset)."""
    if default_factory is None:
        return open_object(description, default=None)
    return open_object(description, default_factory=default_factory)


LOCK_TOLERATION = Toleration(key="sunk.coreweave.com/lock", operator="Exists", effect="NoExecute")
