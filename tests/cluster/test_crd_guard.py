"""The real kube-apiserver refuses hostile SlurmCluster and NodeSet objects where the CRD
can carry the guard's patterns (typed string fields); map keys and free scalar values are
refused by the operator's renderer instead (see sunk.schema.convert)."""

from __future__ import annotations

import pytest

from sunk.devenv.controlplane import KubeAPIError
from tests.hostile import LINE_BREAKERS, SPACE

PAYLOADS = {**LINE_BREAKERS, **SPACE}
CLUSTER_FIELDS = {
    "nodeSets": lambda p: {"compute": {"partitions": [{"name": "p", "nodeSets": [p]}]}},
    "external-host": lambda p: {"accounting": {"external": {"host": p}}},
    "external-user": lambda p: {"accounting": {"external": {"user": p}}},
    "database-name": lambda p: {"accounting": {"database": {"name": p}}},
    "plugstack": lambda p: {"compute": {"pyxis": {"plugstackOptions": [p]}}},
}
NODESET_FIELDS = {
    "staticFeatures": lambda p: {"features": {"staticFeatures": [p]}},
    "dynamic-prefix": lambda p: {"features": {"dynamicFeatures": {"l": {"prefix": p}}}},
}


def _create(kube, namespace, plural, kind, spec):
    return kube.create(
        f"/apis/sunk.coreweave.com/v1alpha1/namespaces/{namespace}/{plural}",
        {
            "apiVersion": "sunk.coreweave.com/v1alpha1",
            "kind": kind,
            "metadata": {"generateName": "h-"},
            "spec": spec,
        },
    )


def test_clean_objects_are_accepted(crds, kube, namespace):
    _create(kube, namespace, "slurmclusters", "SlurmCluster", {"clusterName": "c"})
    _create(kube, namespace, "nodesets", "NodeSet", {"clusterName": "c"})


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_hostile_objects_are_refused(crds, kube, namespace, payload):
    text = PAYLOADS[payload]
    for field, build in CLUSTER_FIELDS.items():
        with pytest.raises(KubeAPIError) as caught:
            _create(
                kube,
                namespace,
                "slurmclusters",
                "SlurmCluster",
                {"clusterName": "c", **build(text)},
            )
        assert caught.value.status == 422, field
    for field, build in NODESET_FIELDS.items():
        with pytest.raises(KubeAPIError) as caught:
            _create(kube, namespace, "nodesets", "NodeSet", {"clusterName": "c", **build(text)})
        assert caught.value.status == 422, field
