"""Pure renderers of Slurm configuration: inputs (SlurmCluster spec, NodeSets, Node labels)
→ file contents. The operator and sunkctl call the same functions."""

from sunk.slurmconf.inputs import ClusterInputs, Endpoints, NodeSetInput, Placement
from sunk.slurmconf.render import Rendered, RenderError, render_all

__all__ = [
    "ClusterInputs",
    "Endpoints",
    "NodeSetInput",
    "Placement",
    "RenderError",
    "Rendered",
    "render_all",
]
