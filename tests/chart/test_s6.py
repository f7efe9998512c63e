"""s6 services through the real chart: examples/s6-services.yaml renders each NodeSet with the
cluster's services merged under its group's, the login services into the SlurmCluster, and the
NodeSet's slurmd Pods (the operator's builder) mount them."""

from __future__ import annotations

from pathlib import Path

from sunk.models.crds import NodeSetSpec, SlurmClusterSpec
from sunk.operator import names, s6
from sunk.operator.nodeset.pod import build_pod
from sunk.operator.nodeset.reconcile import pod_context
from sunk.slurmconf.inputs import NodeSetInput
from tests.chart.conftest import write_values

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "s6-services.yaml"


def test_nodesets_carry_the_cluster_services_under_their_own(objects, tmp_path):
    override = write_values(tmp_path, "compute:\n  nodes:\n    gpu: {enabled: true, replicas: 1}\n")
    rendered = objects("slurm", EXAMPLE, override)
    nodesets = {o["metadata"]["name"]: o for o in rendered if o["kind"] == "NodeSet"}
    assert set(nodesets["cpu"]["spec"]["s6"]) == {"packages", "scratch-cleaner"}
    assert set(nodesets["gpu"]["spec"]["s6"]) == {"packages"}
    assert nodesets["cpu"]["spec"]["s6"]["packages"]["timeoutUp"] == 600000
    (cluster,) = [o for o in rendered if o["kind"] == "SlurmCluster"]
    assert set(cluster["spec"]["login"]["s6"]) == {"scratch-notice"}

    spec = SlurmClusterSpec.model_validate(cluster["spec"])
    nodeset = NodeSetInput("cpu", NodeSetSpec.model_validate(nodesets["cpu"]["spec"]))
    ctx = pod_context("ns", "s6", spec, nodeset.spec)
    pod = build_pod(nodeset, {"metadata": {"name": "cpu", "uid": "u"}}, ctx, "n0", "cpu-0", {})
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == s6.VOLUME)
    assert volume["configMap"]["name"] == names.nodeset_s6_map("cpu")
    data = s6.config_map_data(s6.merged(spec.compute.s6, nodeset.spec.s6))
    assert data["services"] == "packages oneshot 600000 0\nscratch-cleaner longrun 0 5000\n"
