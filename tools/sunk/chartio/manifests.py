"""The custom resources in a rendered `slurm` release, as typed models."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from sunk.models.crds import API_VERSION, NodeSetSpec, SlurmClusterSpec
from sunk.slurmconf import ClusterInputs, Endpoints, NodeSetInput


@dataclass(frozen=True)
class RenderedRelease:
    objects: list[dict[str, Any]]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o.get("kind") == kind]

    def cluster_inputs(self, namespace: str) -> ClusterInputs:
        clusters = [o for o in self.of_kind("SlurmCluster") if o.get("apiVersion") == API_VERSION]
        if len(clusters) != 1:
            raise ValueError(f"expected one SlurmCluster in the release, found {len(clusters)}")
        spec = SlurmClusterSpec.model_validate(clusters[0]["spec"])
        nodesets = tuple(
            NodeSetInput(o["metadata"]["name"], NodeSetSpec.model_validate(o["spec"]))
            for o in self.of_kind("NodeSet")
        )
        return ClusterInputs(spec, nodesets, Endpoints.for_cluster(spec, namespace))


def parse_release(text: str) -> RenderedRelease:
    return RenderedRelease([doc for doc in yaml.safe_load_all(text) if doc])
