"""global.volumes through the real chart: the rendered SlurmCluster and NodeSets, built into
the login and slurmd Pods by the operator's own builders; and `sunkctl validate` on what
cannot merge (SUNK028)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from sunk.cli.main import app
from sunk.models.crds import NodeSetSpec, SlurmClusterSpec
from sunk.operator.cluster.base import ClusterContext
from sunk.operator.cluster.objects import desired_objects
from sunk.operator.nodeset.pod import build_pod
from sunk.operator.nodeset.reconcile import pod_context
from sunk.operator.shared_volumes import LOGIN, SLURMD
from sunk.slurmconf import ClusterInputs, Endpoints, NodeSetInput, render_all
from tests.chart.conftest import write_values

VALUES = """
clusterName: shared
global:
  volumes:
    - {name: home, nfs: {server: nfs.example, path: /export/home}}
  volumeMounts:
    - {name: home, mountPath: /home}
login:
  volumes:
    - {name: tools, configMap: {name: site-tools}}
  volumeMounts:
    - {name: tools, mountPath: /opt/tools, readOnly: true}
compute:
  mounts: [{name: /datasets, pvc: datasets}]
  # the operator's own slurmd volumes off (null reaches the SlurmCluster as null)
  pyxis: {enabled: false}
  sharedMemory: null
  nodeDefaults:
    volumes: [{name: scratch, emptyDir: {}}]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  definitions:
    local-home:
      volumes: [{name: home, hostPath: {path: /srv/home, type: Directory}}]
  nodes:
    plain:
      definitions: [cpu-epyc]
    local:
      definitions: [cpu-epyc, local-home]
      volumeMounts: [{name: home, mountPath: /home}]
"""


def _user(items, owned):
    return [i for i in items if i["name"] not in owned and i.get("mountPath") not in owned]


def test_rendered_values_build_pods_with_the_shared_volumes(objects, tmp_path):
    docs = objects("slurm", write_values(tmp_path, VALUES))
    (cluster_doc,) = [d for d in docs if d["kind"] == "SlurmCluster"]
    nodesets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "NodeSet"}
    spec = SlurmClusterSpec.model_validate(cluster_doc["spec"])
    inputs = [NodeSetInput(n, NodeSetSpec.model_validate(d["spec"])) for n, d in nodesets.items()]
    rendered = render_all(
        ClusterInputs(spec, tuple(inputs), Endpoints.for_cluster(spec, "ns"), db_password="pw")
    )
    ctx = ClusterContext("shared", "ns", "u", spec, rendered, "m", "j", None)
    pods = {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]
        for o in desired_objects(ctx)
        if o["kind"] in ("StatefulSet", "Deployment")
    }
    login = pods["shared-login"]
    owned_login = LOGIN.volumes | LOGIN.paths
    assert _user(login["volumes"], owned_login) == [
        {"name": "home", "nfs": {"server": "nfs.example", "path": "/export/home"}},
        {"name": "tools", "configMap": {"name": "site-tools"}},
    ]
    sshd = next(c for c in login["containers"] if c["name"] == "sshd")
    assert _user(sshd["volumeMounts"], owned_login) == [
        {"name": "home", "mountPath": "/home"},
        {"name": "tools", "mountPath": "/opt/tools", "readOnly": True},
    ]
    for name in ("shared-controller", "shared-accounting", "shared-rest"):
        assert "home" not in {v["name"] for v in pods[name]["volumes"]}, name

    def slurmd(group: str) -> tuple[list, list]:
        ns = next(i for i in inputs if i.name == group)
        owner = {"metadata": {"name": group, "uid": "u"}}
        ctx = pod_context("ns", "shared", spec, ns.spec)
        pod = build_pod(ns, owner, ctx, "n", f"{group}-000-001", {})["spec"]
        owned = SLURMD.volumes | SLURMD.paths
        container = next(c for c in pod["containers"] if c["name"] == "slurmd")
        return _user(pod["volumes"], owned), _user(container["volumeMounts"], owned)

    volumes, mounts = slurmd("plain")
    assert volumes == [
        {"name": "home", "nfs": {"server": "nfs.example", "path": "/export/home"}},
        {"name": "mount-0", "persistentVolumeClaim": {"claimName": "datasets"}},
        {"name": "scratch", "emptyDir": {}},  # from nodeDefaults
    ]
    assert mounts == [
        {"name": "home", "mountPath": "/home"},
        {"name": "mount-0", "mountPath": "/datasets"},
        {"name": "scratch", "mountPath": "/scratch"},
    ]
    # `local`: its definition's volumes list replaces nodeDefaults' (lists replace), its home
    # replaces the global one by name, its /home mount the global one by path
    volumes, mounts = slurmd("local")
    assert volumes == [
        {"name": "mount-0", "persistentVolumeClaim": {"claimName": "datasets"}},
        {"name": "home", "hostPath": {"path": "/srv/home", "type": "Directory"}},
    ]
    assert mounts == [
        {"name": "mount-0", "mountPath": "/datasets"},
        {"name": "home", "mountPath": "/home"},
    ]


CONFLICTS = """\
global:
  volumes:
    - {name: home, hostPath: {path: /srv/home}}
  volumeMounts:
    - {name: home, mountPath: /home}
    - {name: cache, mountPath: /cache}
login:
  volumes:
    - {name: host-keys, emptyDir: {}}
compute:
  definitions:
    extra:
      volumeMounts: [{name: home, mountPath: /run/munge}]
  nodes:
    cpu:
      definitions: [cpu-epyc]
      volumes: [{name: cache, emptyDir: {}}]
    gpu:
      definitions: [cpu-epyc, extra]
      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [gpu]}]}]}}}
"""  # noqa: E501


def test_validate_names_the_key_path_of_what_cannot_merge(helm, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "v.yaml").write_text(CONFLICTS)
    result = CliRunner().invoke(app, ["validate", "v.yaml", "-o", "json"])
    assert result.exit_code == 1, result.output
    found = {
        (f["keyPath"], f["line"], f["message"])
        for f in json.loads(result.stdout)["findings"]
        if f["ruleId"] == "SUNK028"
    }
    assert found == {
        (
            "global.volumeMounts[1].name",
            6,
            "mounts volume `cache`, which is not declared in the login Pod and the slurmd "
            "Pods of group `gpu`",
        ),
        (
            "login.volumes[0].name",
            9,
            "volume name `host-keys` is the operator's own in the login Pod",
        ),
        (
            "compute.definitions.extra.volumeMounts[0].mountPath",
            13,
            "mount path `/run/munge` is the operator's own in the slurmd Pods of group `gpu`",
        ),
    }
