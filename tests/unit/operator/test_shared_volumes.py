"""global.volumes / global.volumeMounts on the login and slurmd Pods, the merge with a
component's own volumes, the slurmd template hash and munge.resources — on real built Pods."""

from __future__ import annotations

import dataclasses

import pytest

from sunk.models.crds import NodeSetSpec, SlurmClusterSpec
from sunk.operator import shared_volumes
from sunk.operator.cluster.base import ClusterContext
from sunk.operator.cluster.login import login
from sunk.operator.cluster.objects import desired_objects
from sunk.operator.common import MUNGE_RESOURCES
from sunk.operator.nodeset.plan import plan
from sunk.operator.nodeset.pod import build_pod, pod_context, template_hash
from sunk.operator.shared_volumes import LOGIN, SLURMD, Layer, VolumeConfigError, merge
from sunk.slurmconf import ClusterInputs, Endpoints, render_all
from sunk.slurmconf.inputs import NodeSetInput

HOME = {"name": "home", "nfs": {"server": "nfs.example", "path": "/export/home"}}
HOME_MOUNT = {"name": "home", "mountPath": "/home"}
SHARED = {"global": {"volumes": [HOME], "volumeMounts": [HOME_MOUNT]}}
OWNER = {"metadata": {"name": "cpu", "uid": "u-1"}}
NODE = {
    "metadata": {"name": "n0", "labels": {}},
    "spec": {},
    "status": {
        "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        "addresses": [{"type": "InternalIP", "address": "10.0.1.2"}],
    },
}


# The compute defaults that add to every slurmd Pod, off: /dev/shm, the container plugin's
# volumes (tests/unit/operator/test_slurmd_pod.py follows them).
NO_POD_DEFAULTS = {"pyxis": {"enabled": False}, "sharedMemory": None}


def cluster(**spec) -> SlurmClusterSpec:
    # Node locking off unless asked: its dispatchers are the cluster's share of the Pod too,
    # and these tests follow the volumes alone; so are the compute defaults (NO_POD_DEFAULTS).
    compute = {**NO_POD_DEFAULTS, **spec.pop("compute", {})}
    return SlurmClusterSpec.model_validate(
        {"clusterName": "c", "syncer": {"nodeLocking": False}, "compute": compute, **spec}
    )


def cluster_context(spec: SlurmClusterSpec) -> ClusterContext:
    rendered = render_all(
        ClusterInputs(spec, (), Endpoints.for_cluster(spec, "ns"), db_password="pw")
    )
    return ClusterContext("c", "ns", "uid-1", spec, rendered, "c-munge", "c-jwt", None)


def workloads(spec: SlurmClusterSpec) -> dict[str, dict]:
    return {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]
        for o in desired_objects(cluster_context(spec))
        if o["kind"] in ("StatefulSet", "Deployment")
    }


def nodeset(volumes=None, mounts=None, **extra) -> NodeSetInput:
    container = {
        "name": "slurmd",
        "image": "slurmd:1",
        "resources": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "8Gi"}},
    }
    if mounts is not None:
        container["volumeMounts"] = mounts
    pod = {"containers": [container]}
    if volumes is not None:
        pod["volumes"] = volumes
    return NodeSetInput("cpu", NodeSetSpec(clusterName="c", template={"spec": pod}, **extra))


def slurmd_pod(spec: SlurmClusterSpec, ns: NodeSetInput, hook_url: str = "") -> dict:
    ctx = pod_context("ns", "c", spec, ns.spec, hook_url)
    return build_pod(ns, OWNER, ctx, "n0", "cpu-001-002", {})


def container(pod_spec: dict, name: str) -> dict:
    return next(c for c in pod_spec["containers"] if c["name"] == name)


def user_volumes(pod_spec: dict, owned: shared_volumes.Owned) -> list[dict]:
    return [v for v in pod_spec.get("volumes", []) if v["name"] not in owned.volumes]


def user_mounts(c: dict, owned: shared_volumes.Owned) -> list[dict]:
    return [m for m in c.get("volumeMounts", []) if m["mountPath"] not in owned.paths]


# --------------------------------------------------------------------------- the merge


def test_own_entries_win_by_name_and_path_and_order_is_weakest_first():
    weak = Layer(
        [HOME, {"name": "scratch", "emptyDir": {}}],
        [HOME_MOUNT, {"name": "scratch", "mountPath": "/scratch/"}],
        ("global", "volumes"),
        ("global", "volumeMounts"),
    )
    local_home = {"name": "home", "hostPath": {"path": "/srv/home"}}
    strong = Layer(
        [local_home, {"name": "data", "emptyDir": {}}],
        [{"name": "data", "mountPath": "/scratch"}],
        ("login", "volumes"),
        ("login", "volumeMounts"),
    )
    merged = merge([weak, strong], LOGIN, "the login Pod")
    assert merged.problems == []
    assert merged.volumes == [{"name": "scratch", "emptyDir": {}}, local_home, strong.volumes[1]]
    # /scratch/ and /scratch are one path: the stronger layer's mount replaces the global one
    assert merged.mounts == [HOME_MOUNT, {"name": "data", "mountPath": "/scratch"}]


def test_what_cannot_merge_names_its_key_path():
    layer = Layer(
        [HOME, {"name": "home", "emptyDir": {}}, {"name": "munge-key", "emptyDir": {}}, {}],
        [
            {"name": "home", "mountPath": "/run/munge"},
            {"name": "nope", "mountPath": "/nope"},
            {"name": "home", "mountPath": "/h"},
            {"name": "home", "mountPath": "/h/"},
        ],
        ("global", "volumes"),
        ("global", "volumeMounts"),
    )
    problems = [str(p) for p in merge([layer], SLURMD, "the slurmd Pods").problems]
    assert problems == [
        "global.volumes[1].name: volume name `home` repeats global.volumes[0] "
        "(one list may not repeat it)",
        "global.volumes[2].name: volume name `munge-key` is the operator's own in the slurmd Pods",
        "global.volumes[3]: a volume needs a name",
        "global.volumeMounts[0].mountPath: mount path `/run/munge` is the operator's own "
        "in the slurmd Pods",
        "global.volumeMounts[3].mountPath: mount path `/h/` repeats global.volumeMounts[2] "
        "(one list may not repeat it)",
        "global.volumeMounts[1].name: mounts volume `nope`, which is not declared "
        "in the slurmd Pods",
    ]


def test_the_owned_sets_are_what_the_builders_add():
    """The reserved names and paths are exactly the ones the builders use (kept in sync)."""
    service = {"boot": {"type": "oneshot", "script": "true"}}
    spec = cluster(
        login={"sshKeyVolume": {"size": "1Gi"}, "s6": service},
        compute={"s6": service},
        scripts={"prolog": "p", "epilog": "e"},
        syncer={"nodeLocking": True},
        healthCheck={"interval": 60, "mounts": ["/data"]},
        directoryService={
            "enabled": True,
            "ldapUri": ["ldaps://ldap"],
            "searchBase": "dc=x",
            "bindDn": "cn=r,dc=x",
            "bindPasswordSecret": {"name": "bind"},
            "caSecret": {"name": "ca"},
        },
    )
    sshd_pod = workloads(spec)["c-login"]
    assert {v["name"] for v in sshd_pod["volumes"]} | {"ssh-keys"} == LOGIN.volumes
    assert {m["mountPath"] for m in container(sshd_pod, "sshd")["volumeMounts"]} == LOGIN.paths
    pod = slurmd_pod(spec, nodeset(), hook_url="http://hook:8082")["spec"]  # node locking on
    assert {v["name"] for v in pod["volumes"]} == SLURMD.volumes
    assert {m["mountPath"] for m in container(pod, "slurmd")["volumeMounts"]} == SLURMD.paths


# --------------------------------------------------------------------------- login Pod


def test_global_volumes_reach_the_login_pod_and_only_the_login_pod_of_the_control_plane():
    pods = workloads(cluster(**SHARED))
    login_pod = pods["c-login"]
    assert user_volumes(login_pod, LOGIN) == [HOME]
    assert user_mounts(container(login_pod, "sshd"), LOGIN) == [HOME_MOUNT]
    assert {m["name"] for m in container(login_pod, "munge")["volumeMounts"]} == {
        "munge-socket",
        "munge-key",
    }  # the sidecar gets none
    # slurmctld, slurmdbd and slurmrestd run no user code: no shared /home there
    for name in ("c-controller", "c-accounting", "c-rest"):
        assert "home" not in {v["name"] for v in pods[name]["volumes"]}, name


def test_login_volumes_replace_global_ones_by_name_and_path():
    local = {"name": "home", "hostPath": {"path": "/srv/home", "type": "Directory"}}
    tools = {"name": "tools", "configMap": {"name": "tools"}}
    spec = cluster(
        **SHARED,
        login={
            "volumes": [local, tools],
            "volumeMounts": [
                {"name": "tools", "mountPath": "/home", "readOnly": True},
                {"name": "home", "mountPath": "/users"},
            ],
        },
    )
    login_pod = workloads(spec)["c-login"]
    assert user_volumes(login_pod, LOGIN) == [local, tools]
    assert user_mounts(container(login_pod, "sshd"), LOGIN) == [
        {"name": "tools", "mountPath": "/home", "readOnly": True},
        {"name": "home", "mountPath": "/users"},
    ]


def test_login_volumes_that_cannot_merge_raise_and_leave_the_login_out():
    spec = cluster(global_={"volumeMounts": [HOME_MOUNT]})
    ctx = cluster_context(spec)
    with pytest.raises(VolumeConfigError) as err:
        login(ctx)
    assert str(err.value) == (
        "SlurmCluster c spec.global.volumeMounts[0].name: mounts volume `home`, which is not "
        "declared in the login Pod"
    )
    names = {o["metadata"]["name"] for o in desired_objects(ctx, with_login=False)}
    assert "c-login" not in names and "c-controller" in names
    # the merge the reconciler checks first says the same
    assert [str(p) for p in shared_volumes.merge_login(spec, "c").problems] == [
        str(p) for p in err.value.problems
    ]


# --------------------------------------------------------------------------- slurmd Pods


def test_global_volumes_and_compute_mounts_reach_the_slurmd_container():
    spec = cluster(**SHARED, compute={"mounts": [{"name": "/data", "pvc": "datasets"}]})
    pod = slurmd_pod(spec, nodeset())["spec"]
    assert user_volumes(pod, SLURMD) == [
        HOME,
        {"name": "mount-0", "persistentVolumeClaim": {"claimName": "datasets"}},
    ]
    assert user_mounts(container(pod, "slurmd"), SLURMD) == [
        HOME_MOUNT,
        {"name": "mount-0", "mountPath": "/data"},
    ]
    assert {m["name"] for m in container(pod, "munge")["volumeMounts"]} == {
        "munge-socket",
        "munge-key",
    }


def test_a_groups_own_volume_and_mount_win():
    spec = cluster(**SHARED)
    local = {"name": "home", "hostPath": {"path": "/srv/home"}}
    scratch = {"name": "scratch", "emptyDir": {}}
    ns = nodeset(
        volumes=[local, scratch],
        mounts=[{"name": "scratch", "mountPath": "/home"}, {"name": "home", "mountPath": "/h"}],
    )
    pod = slurmd_pod(spec, ns)["spec"]
    assert user_volumes(pod, SLURMD) == [local, scratch]
    assert user_mounts(container(pod, "slurmd"), SLURMD) == [
        {"name": "scratch", "mountPath": "/home"},
        {"name": "home", "mountPath": "/h"},
    ]


def test_volumes_that_do_not_merge_build_no_pod_but_scale_downs_go_on():
    ns = nodeset(volumes=[{"name": "munge-socket", "emptyDir": {}}])
    ctx = pod_context("ns", "c", cluster(), ns.spec)
    result = plan(ns, OWNER, ctx, [NODE], [])
    assert result.invalid == (
        "NodeSet cpu spec.template.spec.volumes[0].name: volume name `munge-socket` is the "
        "operator's own in the slurmd Pods of NodeSet cpu"
    )
    assert result.create == [] and result.claim == []
    # a cluster's bad global mount: its running Pods are neither rolled nor lost, and a
    # scale-down (or the NodeSet's deletion) still removes Pods
    good = nodeset()
    pods = plan(good, OWNER, pod_context("ns", "c", cluster(), good.spec), [NODE], []).create
    pods[0]["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    broken = pod_context("ns", "c", cluster(global_={"volumeMounts": [HOME_MOUNT]}), good.spec)
    result = plan(good, OWNER, broken, [NODE], pods)
    assert result.invalid.startswith("SlurmCluster c spec.global.volumeMounts[0].name: ")
    assert (result.delete, result.create, result.rolling) == ([], [], False)
    zero = nodeset(replicas=0)
    result = plan(zero, OWNER, broken, [NODE], pods)
    assert result.delete == [("cpu-001-002", "scaled down")]


def test_changing_global_volumes_rolls_the_slurmd_pods():
    ns = nodeset()
    plain = pod_context("ns", "c", cluster(), ns.spec)
    shared = pod_context("ns", "c", cluster(**SHARED), ns.spec)
    other = pod_context(
        "ns",
        "c",
        cluster(global_={"volumes": [{**HOME, "nfs": {"server": "x", "path": "/"}}],
                         "volumeMounts": [HOME_MOUNT]}),
        ns.spec,
    )  # fmt: skip
    hashes = {template_hash(ns, c) for c in (plain, shared, other)}
    assert len(hashes) == 3
    # nothing from the cluster: the hash is the NodeSet's own, as before this feature
    assert template_hash(ns, plain) == template_hash(ns)
    # the Pods the planner creates carry the hash it compares against, and a change rolls them
    pods = plan(ns, OWNER, plain, [NODE], []).create
    pods[0]["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    assert plan(ns, OWNER, plain, [NODE], pods).delete == []
    assert plan(ns, OWNER, shared, [NODE], pods).delete == [("cpu-001-002", "template changed")]


def test_a_nodeset_rendered_by_the_old_chart_keeps_its_hash():
    """The chart used to write global and compute.mounts entries into the NodeSet template;
    now the operator merges them in. Both give the same Pods and the same hash: an upgrade
    rolls no Pod, whichever of chart and operator is upgraded first."""
    spec = cluster(**SHARED, compute={"mounts": [{"name": "/data", "pvc": "datasets"}]})
    pvc = {"name": "mount-0", "persistentVolumeClaim": {"claimName": "datasets"}}
    own_volume, own_mount = {"name": "x", "emptyDir": {}}, {"name": "x", "mountPath": "/x"}
    old = nodeset(
        volumes=[HOME, pvc, own_volume],
        mounts=[HOME_MOUNT, {"name": "mount-0", "mountPath": "/data"}, own_mount],
    )
    new = nodeset(volumes=[own_volume], mounts=[own_mount])
    old_ctx = pod_context("ns", "c", cluster(), old.spec)  # the old operator added nothing
    before = template_hash(old, old_ctx)
    assert before == template_hash(old)
    new_ctx = pod_context("ns", "c", spec, new.spec)
    assert template_hash(new, new_ctx) == before  # new chart, new operator
    assert template_hash(old, new_ctx) == before  # old chart, new operator
    assert slurmd_pod(spec, new)["spec"] == slurmd_pod(spec, old)["spec"]


# --------------------------------------------------------------------------- munge.resources


def test_munge_resources_size_every_munge_sidecar():
    sized = {"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}}
    spec = cluster(munge={"resources": sized})
    pods = {n: p for n, p in workloads(spec).items() if n != "c-mariadb"}  # no munge there
    assert set(pods) == {"c-controller", "c-accounting", "c-rest", "c-login"}
    for name, pod in pods.items():
        assert container(pod, "munge")["resources"] == sized, name
    assert container(slurmd_pod(spec, nodeset())["spec"], "munge")["resources"] == sized
    # unset: our defaults, and the hash stays the NodeSet's own
    default = cluster()
    assert container(workloads(default)["c-login"], "munge")["resources"] == MUNGE_RESOURCES
    ns = nodeset()
    assert container(slurmd_pod(default, ns)["spec"], "munge")["resources"] == MUNGE_RESOURCES
    assert template_hash(ns, pod_context("ns", "c", default, ns.spec)) == template_hash(ns)
    assert template_hash(ns, pod_context("ns", "c", spec, ns.spec)) != template_hash(ns)


def test_munge_resources_count_in_feasibility():
    ns = nodeset()  # requests 4Gi; the Node has 4Gi + 16Mi: the default sidecar just fits
    small = {**NODE, "status": {**NODE["status"], "allocatable": {
        "cpu": "8", "memory": f"{4 * 1024 + 16}Mi", "pods": "110"}}}  # fmt: skip
    fits = pod_context("ns", "c", cluster(), ns.spec)
    assert plan(ns, OWNER, fits, [small], []).infeasible == {}
    big = pod_context("ns", "c", cluster(munge={"resources": {"requests": {"memory": "1Gi"}}}),
                      ns.spec)  # fmt: skip
    assert "insufficient resources (memory" in plan(ns, OWNER, big, [small], []).infeasible["n0"]


def test_pod_context_is_plain_data():
    ctx = pod_context("ns", "c", cluster(**SHARED), nodeset().spec)
    assert dataclasses.asdict(ctx)["global_volumes"] == (HOME,)
