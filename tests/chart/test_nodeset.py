"""The NodeSet a node group becomes: merge order, pod template, partitions' failures."""

from __future__ import annotations

import pytest
import yaml

from sunk.models.merge import resolve_groups
from tests.chart.conftest import write_values

MERGE_VALUES = """
clusterName: merge
global:
  volumes: [{name: home, nfs: {server: nfs.example, path: /}}]
  volumeMounts: [{name: home, mountPath: /home}]
compute:
  mounts: [{name: /mnt/data, pvc: data}]
  nodeDefaults:
    enabled: true
    replicas: 1
    env: [{name: FROM, value: defaults}]
    annotations: {a: defaults, b: defaults}
  definitions:
    first:
      replicas: 5
      annotations: {b: first, c: first}
      tolerations: [{key: first, operator: Exists}]
      resources: {requests: {cpu: "4", memory: 8Gi}, limits: {memory: 16Gi}}
    second:
      annotations: {c: second}
      tolerations: [{key: second, operator: Exists}]
      resources: {limits: {memory: 32Gi}}
  nodes:
    grp:
      definitions: [first, second]
      annotations: {d: group}
      nodeSelector: {pool: x}
      gresGpu: "h100:2"
      staticFeatures: [legacy]
      features: {static: [fast]}
    disabled:
      enabled: false
"""


@pytest.fixture
def merged(objects, tmp_path):
    path = write_values(tmp_path, MERGE_VALUES)
    docs = objects("slurm", path)
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "NodeSet"}


def test_merge_order_defaults_then_definitions_in_order_then_group(merged):
    spec = merged["grp"]["spec"]
    pod = spec["template"]
    assert pod["metadata"]["annotations"] == {
        "a": "defaults",
        "b": "first",
        "c": "second",
        "d": "group",
    }
    assert spec["replicas"] == 5  # from the first definition over the defaults
    # Lists replace: the later definition's tolerations win whole.
    assert pod["spec"]["tolerations"] == [{"key": "second", "operator": "Exists"}]
    # Maps deep-merge: requests from `first`, limits.memory from `second`.
    assert pod["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "4", "memory": "8Gi"},
        "limits": {"memory": "32Gi"},
    }
    assert pod["spec"]["containers"][0]["env"] == [{"name": "FROM", "value": "defaults"}]


def test_disabled_group_renders_nothing(merged):
    assert set(merged) == {"grp"}


def test_python_merge_matches_the_chart(merged):
    values = yaml.safe_load(MERGE_VALUES)
    resolved = resolve_groups(values)
    assert set(resolved) == {"grp"}
    group = resolved["grp"]
    pod = merged["grp"]["spec"]["template"]
    assert group["annotations"] == pod["metadata"]["annotations"]
    assert group["tolerations"] == pod["spec"]["tolerations"]
    assert group["resources"] == pod["spec"]["containers"][0]["resources"]
    assert group["replicas"] == merged["grp"]["spec"]["replicas"]


def test_pod_template_fields(merged):
    spec = merged["grp"]["spec"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["name"] == "slurmd"
    assert container["image"].startswith("opensunk/slurmd:")
    # global.volumes and compute.mounts travel in the SlurmCluster: the operator merges them
    # under the group's own (tests/chart/test_shared_volumes.py builds the Pod from both).
    assert "volumeMounts" not in container
    assert "volumes" not in pod
    # nodeSelector does not bind NodeSet pods (as in SUNK): only required affinity does.
    assert "nodeSelector" not in pod
    assert spec["gresGpu"] == "h100:2"
    assert spec["features"]["staticFeatures"] == ["fast", "legacy"]
    labels = spec["template"]["metadata"]["labels"]
    assert labels["sunk.coreweave.com/gres-gpu"] == "h100-2"
    assert labels["sunk.coreweave.com/nodeset"] == "grp"
    assert spec["podNamePrefix"] == "grp"
    assert spec["clusterName"] == "merge"


BROKEN = [
    (
        "compute: {nodes: {a: {}}, partitions: [{name: p, nodeSets: [b]}]}",
        'compute.partitions[0].nodeSets[0]: partition "p" names node group "b"',
    ),
    (
        "compute: {nodes: {a: {enabled: false}, b: {}}, partitions: [{name: p, nodeSets: [a]}]}",
        'names node group "a", which does not exist or is disabled',
    ),
    (
        "compute: {nodes: {a: {}}, partitions: [{name: p, nodeSets: [a], default: true},"
        " {name: q, nodeSets: [a], default: true}]}",
        "compute.partitions: more than one default partition (p, q)",
    ),
    (
        "compute: {nodes: {a: {}}, partitions: [{name: p, nodeSets: [a]},"
        " {name: p, nodeSets: [a]}]}",
        'compute.partitions[1].name: partition "p" is declared twice',
    ),
    (
        "compute: {nodes: {a: {}}, partitions: [{name: a, nodeSets: [a]}]}",
        'compute.partitions[0].name: "a" is already the partition of node group "a"',
    ),
    (
        "compute: {nodes: {a: {definitions: [nope]}}}",
        'compute.nodes.a.definitions[0]: unknown definition "nope"',
    ),
    ("compute: {nodes: {Bad_Name: {}}}", "compute.nodes.Bad_Name: group name must be a DNS label"),
    ("compute: {nodes: {a: {}}, partitions: [{name: p, nodeSets: []}]}", "nodeSets"),
    ("compute: {nodes: {a: {replicas: -1}}}", "replicas"),
    ("compute: {nodes: {a: {replica: 3}}}", "replica"),
]


@pytest.mark.parametrize(("values", "message"), BROKEN)
def test_impossible_input_fails_naming_the_key(render, tmp_path, values, message):
    proc = render("slurm", write_values(tmp_path, values))
    assert proc.returncode != 0
    assert message in proc.stderr
